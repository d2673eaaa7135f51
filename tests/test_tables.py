import pandas as pd
import pytest

from shiftwork.provenance import digest, make_provenance
from shiftwork.tables import TableError, TableWriter, read_provenance, read_table, write_table


def test_write_read_with_provenance(tmp_path):
    df = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    prov = make_provenance("unit", {"eps": 0.05}, model="m", seed=3)
    path = write_table(df, tmp_path / "sub" / "t.parquet", prov)
    assert read_table(path).equals(df)
    got = read_provenance(path)
    assert got["step"] == "unit" and got["seed"] == 3 and got["model"] == "m"
    assert got["config_digest"] == digest({"eps": 0.05})
    assert "torch" in got["packages"]
    assert [p.name for p in path.parent.iterdir()] == ["t.parquet"]  # no temporary left behind


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
    with pytest.raises(RuntimeError):
        with TableWriter(failed) as w:
            w.write(pd.DataFrame({"i": [1]}))
            raise RuntimeError("killed mid-way")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.parquet"]
