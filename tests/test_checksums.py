"""The sha256 sidecar of every table: written with it, checked when it is read or a run starts.

The Parquet footer has no checksum of its own, so a flipped bit there can rename a column or
change a type and the file still reads; these tests flip such bits and check that the sidecar
catches them. The sidecar's name is worked out here by hand (``.<name>.sha256``)."""

import hashlib
import os

import pandas as pd
import pytest

from shiftwork.integrity import damage_report, damaged_outputs
from shiftwork.tables import (
    TableError,
    TableWriter,
    atomic_path,
    read_cache,
    read_table,
    table_problem,
    write_table,
)


def sidecar(path):
    return path.with_name(f".{path.name}.sha256")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def footer_start(data: bytes) -> int:
    """Where the Thrift footer begins: it ends with its 4-byte length and the magic ``PAR1``."""
    return len(data) - 8 - int.from_bytes(data[-8:-4], "little")


def flip(path, offset: int, bit: int) -> tuple[bytes, bytes]:
    """Flip one bit of ``path``; the bytes before and after."""
    before = path.read_bytes()
    after = bytearray(before)
    after[offset] ^= 1 << bit
    path.write_bytes(bytes(after))
    return before, bytes(after)


def mismatch(before: bytes, after: bytes, name: str) -> str:
    return (
        f"its bytes differ from the sha256 recorded in .{name}.sha256 when it was written "
        f"({sha256(before)[:12]} recorded, {sha256(after)[:12]} now): changed or damaged since"
    )


def rename_score_column(path) -> tuple[bytes, bytes]:
    """Flip the lowest bit of the last letter of 'score' where the footer's schema names the
    column: 'e' (0x65) becomes 'd' (0x64)."""
    data = path.read_bytes()
    at = data.index(b"score", footer_start(data))
    return flip(path, at + 4, 0)


def test_a_footer_bit_that_renames_a_column_is_caught_by_the_sha256(tmp_path):
    results = tmp_path / "results"
    path = results / "default" / "stability" / "t.parquet"
    df = pd.DataFrame({"item": [1, 2, 3], "score": [0.5, 0.25, 1.0]})
    write_table(df, path, {"step": "unit"})
    before, after = rename_score_column(path)
    # the danger: Parquet reads the damaged file without complaint, with the column renamed
    assert list(pd.read_parquet(path).columns) == ["item", "scord"]
    problem = mismatch(before, after, "t.parquet")
    assert table_problem(path) == problem
    with pytest.raises(TableError) as info:
        read_table(path)
    assert str(info.value).startswith(f"table {path} is unreadable: {problem}. Delete them and name them")
    assert str(info.value).endswith(f"\n  rm -r '{path}'\n  snakemake --cores N '{path}'")
    found = damaged_outputs(results)
    assert [(d.path, d.problem) for d in found] == [(path, problem)]
    report = damage_report(found, lambda p: "score_axes", configfiles=[])
    assert f"  - {path} (written by rule 'score_axes'): {problem}\n" in report


def test_a_footer_bit_that_changes_a_time_unit_is_caught(tmp_path):
    """Timestamps stored in nanoseconds: one bit turns the unit into microseconds, and the
    dates move 1000 times as far from 1970 (2024-01-01, 19723 days after it, becomes 19723000
    days after it: about 54000 years, in 55969)."""
    path = tmp_path / "t.parquet"
    write_table(pd.DataFrame({"t": pd.to_datetime(["2024-01-01"])}), path, {"step": "unit"})
    data = path.read_bytes()
    # the logical type TIMESTAMP (0x8c), not adjusted to UTC (0x12), unit (0x1c) NANOS (0x3c)
    at = data.index(bytes([0x8C, 0x12, 0x1C, 0x3C]), footer_start(data)) + 3
    before, after = flip(path, at, 4)  # 0x3c -> 0x2c: the unit's field 2, MICROS
    got = pd.read_parquet(path)["t"]
    assert str(got.dtype) == "datetime64[us]" and got.iloc[0].year == 55969
    assert table_problem(path) == mismatch(before, after, "t.parquet")


def test_a_damaged_data_page_is_caught_before_it_is_read(tmp_path):
    path = write_table(pd.DataFrame({"i": range(2000)}), tmp_path / "t.parquet", {"step": "unit"})
    before, after = flip(path, 64, 0)
    assert table_problem(path) == mismatch(before, after, "t.parquet")


def test_the_sidecar_holds_the_sha256_of_the_table(tmp_path):
    path = write_table(pd.DataFrame({"a": [1]}), tmp_path / "x" / "a.parquet", {"step": "unit"})
    # the format of sha256sum, so that `sha256sum -c .a.parquet.sha256` checks it by hand
    assert sidecar(path).read_text() == f"{sha256(path.read_bytes())}  a.parquet\n"
    assert sorted(p.name for p in path.parent.iterdir()) == [".a.parquet.sha256", "a.parquet"]


def test_a_damaged_sidecar_is_named_with_both_whole_digests(tmp_path):
    """A bit lost in the sidecar's last hex digit: the first 12 digits agree, so the message
    shows all 64 of both."""
    path = write_table(pd.DataFrame({"a": [1]}), tmp_path / "a.parquet", {"step": "unit"})
    digest = sha256(path.read_bytes())
    flip(sidecar(path), 63, 0)  # a hex digit: 0x30-0x39 or 0x61-0x66, its lowest bit flipped
    recorded = sidecar(path).read_text().split()[0]
    assert recorded[:63] == digest[:63] and recorded[63] != digest[63]
    assert table_problem(path) == (
        "its bytes differ from the sha256 recorded in .a.parquet.sha256 when it was written "
        f"({recorded} recorded, {digest} now): changed or damaged since"
    )


def test_a_table_without_a_sidecar_is_read_as_before(tmp_path):
    """A table written by an older shiftwork, or copied without its hidden files."""
    df = pd.DataFrame({"item": [1, 2, 3], "score": [0.5, 0.25, 1.0]})
    path = write_table(df, tmp_path / "results" / "t.parquet", {"step": "unit"})
    sidecar(path).unlink()
    assert table_problem(path) is None
    assert read_table(path).equals(df)
    assert damaged_outputs(tmp_path / "results") == []
    # unchecked: a renamed column goes unnoticed, as it did before the sidecars
    rename_score_column(path)
    assert table_problem(path) is None


def test_the_streaming_writer_records_the_sha256(tmp_path):
    streamed = tmp_path / "s.parquet"
    with TableWriter(streamed, {"step": "s"}) as w:
        w.write(pd.DataFrame({"i": [1, 2]}))
        w.write(pd.DataFrame({"i": [3]}))
    assert sidecar(streamed).read_text() == f"{sha256(streamed.read_bytes())}  s.parquet\n"
    empty = tmp_path / "e.parquet"
    TableWriter(empty, {"step": "s"}).close(pd.DataFrame({"i": pd.Series([], dtype="int64")}))
    assert sidecar(empty).read_text() == f"{sha256(empty.read_bytes())}  e.parquet\n"
    with TableWriter(tmp_path / "n.parquet"):
        pass  # no batch and no empty frame: a table with no columns
    assert read_table(tmp_path / "n.parquet").shape == (0, 0)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".e.parquet.sha256",
        ".n.parquet.sha256",
        ".s.parquet.sha256",
        "e.parquet",
        "n.parquet",
        "s.parquet",
    ]
    assert table_problem(streamed) is table_problem(empty) is None
    flip(streamed, footer_start(streamed.read_bytes()) + 3, 0)
    assert table_problem(streamed).startswith("its bytes differ from the sha256 recorded in .s.parquet.sha256")


def test_a_cache_that_changed_is_a_miss(tmp_path, caplog):
    path = write_table(pd.DataFrame({"item": [1], "score": [0.5]}), tmp_path / "c.parquet", {"step": "unit"})
    before, after = rename_score_column(path)
    assert read_cache(path, ["item"]) is None
    assert "ignoring cache" in caplog.text and mismatch(before, after, "c.parquet") in caplog.text


def test_the_cleanup_of_stale_temporaries_keeps_the_sidecar(tmp_path):
    path = write_table(pd.DataFrame({"a": [1]}), tmp_path / "a.parquet", {"step": "unit"})
    recorded = sidecar(path).read_text()
    # what killed writers of the table and of its sidecar left behind
    (tmp_path / ".a.parquet.k1.tmp").write_text("killed")
    (tmp_path / "..a.parquet.sha256.k2.tmp").write_text("killed")
    _, tmp = atomic_path(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [".a.parquet.sha256", "..a.parquet.sha256.k2.tmp", "a.parquet", tmp.name]
    )
    tmp.unlink()
    write_table(pd.DataFrame({"a": [2]}), path, {"step": "unit"})
    assert sorted(p.name for p in tmp_path.iterdir()) == [".a.parquet.sha256", "a.parquet"]
    assert sidecar(path).read_text() != recorded and table_problem(path) is None


def fail_call(monkeypatch, n: int) -> None:
    """Make the ``n``-th os.replace from now fail, as a crash at that rename would."""
    real, calls = os.replace, []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == n:
            raise OSError(f"crash before renaming onto {dst}")
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)


def test_a_crash_between_the_two_renames_is_a_mismatch(tmp_path, monkeypatch):
    """The sidecar is renamed first: a crash before the table's rename leaves the new sha256
    beside the old table, which is reported, never read as if it were the new one."""
    old = pd.DataFrame({"a": [1]})
    path = write_table(old, tmp_path / "t.parquet", {"step": "unit"})
    old_bytes = path.read_bytes()
    fail_call(monkeypatch, 2)
    with pytest.raises(OSError, match="crash before renaming onto .*t.parquet"):
        write_table(pd.DataFrame({"a": [2]}), path, {"step": "unit"})
    monkeypatch.undo()
    assert path.read_bytes() == old_bytes
    recorded = sidecar(path).read_text().split()[0]
    assert recorded != sha256(old_bytes)
    assert table_problem(path) == (
        "its bytes differ from the sha256 recorded in .t.parquet.sha256 when it was written "
        f"({recorded[:12]} recorded, {sha256(old_bytes)[:12]} now): changed or damaged since"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == [".t.parquet.sha256", "t.parquet"]


def test_a_crash_before_the_first_rename_keeps_the_old_table_and_sidecar(tmp_path, monkeypatch):
    old = pd.DataFrame({"a": [1]})
    path = write_table(old, tmp_path / "t.parquet", {"step": "unit"})
    recorded = sidecar(path).read_text()
    fail_call(monkeypatch, 1)
    with pytest.raises(OSError, match="crash before renaming onto .*t.parquet.sha256"):
        write_table(pd.DataFrame({"a": [2]}), path, {"step": "unit"})
    monkeypatch.undo()
    assert sidecar(path).read_text() == recorded
    assert table_problem(path) is None and read_table(path).equals(old)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".t.parquet.sha256", "t.parquet"]


def test_a_crash_in_the_streaming_writer_leaves_no_table(tmp_path, monkeypatch):
    """A first write that crashes between the renames leaves a sidecar and no table: a missing
    output, which Snakemake builds; the damage check has no table to report."""
    path = tmp_path / "results" / "s.parquet"
    fail_call(monkeypatch, 2)
    with pytest.raises(OSError, match="crash before renaming onto .*s.parquet"), TableWriter(path) as w:
        w.write(pd.DataFrame({"i": [1]}))
    monkeypatch.undo()
    assert sorted(p.name for p in path.parent.iterdir()) == [".s.parquet.sha256"]
    assert damaged_outputs(tmp_path / "results") == []
