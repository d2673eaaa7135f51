import pandas as pd
import pytest

from shiftwork.provenance import digest, make_provenance
from shiftwork.tables import (
    TableError,
    TableWriter,
    read_cache,
    read_provenance,
    read_table,
    table_problem,
    write_table,
)


def test_write_read_with_provenance(tmp_path):
    df = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    prov = make_provenance("unit", {"eps": 0.05}, model="m", seed=3)
    path = write_table(df, tmp_path / "sub" / "t.parquet", prov)
    assert read_table(path).equals(df)
    got = read_provenance(path)
    assert got["step"] == "unit" and got["seed"] == 3 and got["model"] == "m"
    assert got["config_digest"] == digest({"eps": 0.05})
    assert "torch" in got["packages"]
    # the table and its sha256 sidecar; no temporary left behind
    assert sorted(p.name for p in path.parent.iterdir()) == [".t.parquet.sha256", "t.parquet"]


def test_digest_ignores_key_order():
    assert digest({"a": 1, "b": [1, 2]}) == digest({"b": [1, 2], "a": 1})
    assert digest({"a": 1}) != digest({"a": 2})


def test_read_table_names_missing_columns(tmp_path):
    path = write_table(pd.DataFrame({"a": [1]}), tmp_path / "t.parquet")
    with pytest.raises(TableError, match=r"lacks columns \['b'\]"):
        read_table(path, ["a", "b"])
    with pytest.raises(TableError, match="does not exist"):
        read_table(tmp_path / "nope.parquet")


def test_streaming_writer_commits_or_leaves_nothing(tmp_path):
    target = tmp_path / "s.parquet"
    with TableWriter(target, {"step": "s"}) as w:
        w.write(pd.DataFrame({"i": [1, 2]}))
        w.write(pd.DataFrame({"i": [3]}))
    assert read_table(target)["i"].tolist() == [1, 2, 3]
    failed = tmp_path / "f.parquet"
    with pytest.raises(RuntimeError), TableWriter(failed) as w:
        w.write(pd.DataFrame({"i": [1]}))
        raise RuntimeError("killed mid-way")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".s.parquet.sha256", "s.parquet"]


def _table(tmp_path, name="t.parquet", n=2000):
    df = pd.DataFrame({"i": range(n), "s": [f"row {i}" for i in range(n)]})
    return write_table(df, tmp_path / name, {"step": "unit"}), df


def test_truncated_table_is_named_with_how_to_rebuild_it(tmp_path):
    path, _ = _table(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    assert "not a complete Parquet file" in table_problem(path)
    with pytest.raises(TableError) as info:
        read_table(path)
    msg = str(info.value)
    assert msg.startswith(f"table {path} is unreadable: not a complete Parquet file")
    # the commands that rebuild it: deleting it alone would not (a plain run leaves a missing
    # intermediate alone while the results after it are up to date)
    assert msg.endswith(f"\n  rm -r '{path}'\n  snakemake --cores N '{path}'")


def test_damaged_page_is_caught_by_its_checksum(tmp_path):
    path, df = _table(tmp_path)
    # a table without the sha256 sidecar (written before there were any), which would catch
    # the flip first (tests/test_checksums.py)
    path.with_name(".t.parquet.sha256").unlink()
    data = bytearray(path.read_bytes())
    # flip one byte inside the first data page (after the 4-byte magic and the page header);
    # the footer stays intact, so only the page checksum can tell
    data[64] ^= 0xFF
    path.write_bytes(bytes(data))
    assert table_problem(path) is None
    with pytest.raises(TableError, match="its data is damaged .*CRC"):
        read_table(path)


def test_a_parquet_file_without_provenance_is_not_a_shiftwork_table(tmp_path):
    pd.DataFrame({"a": [1]}).to_parquet(tmp_path / "foreign.parquet")
    assert "no shiftwork provenance" in table_problem(tmp_path / "foreign.parquet")


def test_a_damaged_cache_is_a_miss(tmp_path, caplog):
    path, df = _table(tmp_path, "cache.parquet")
    assert read_cache(path, ["i", "s"]).equals(df)
    assert read_cache(tmp_path / "none.parquet") is None
    assert read_cache(path, ["i", "missing"]) is None
    path.write_bytes(path.read_bytes()[:100])
    assert read_cache(path, ["i"]) is None
    assert "ignoring cache" in caplog.text and str(path) in caplog.text


def test_damage_check_reads_only_this_configs_tables(tmp_path):
    """A config's run checks its own results folder: a damaged table of another config is not
    its business (nor is a damaged cache entry), a damaged one of its own is named."""
    from shiftwork.integrity import damaged_outputs

    results = tmp_path / "results"
    for name in ("default", "paper"):
        write_table(pd.DataFrame({"a": [1]}), results / name / "stability" / "t.parquet", {"step": "unit"})
    (results / "paper" / "stability" / "t.parquet").write_bytes(b"not parquet")
    (results / "cache").mkdir()
    (results / "cache" / "c.parquet").write_bytes(b"not parquet")
    assert damaged_outputs(results, results / "default") == []
    found = damaged_outputs(results, results / "paper")
    assert [d.path for d in found] == [results / "paper" / "stability" / "t.parquet"]
    assert [d.path for d in damaged_outputs(results)] == [results / "paper" / "stability" / "t.parquet"]
