"""The commands that rebuild a table name the run's config files, and a missing intermediate table
whose downstream tables are there is named with the command that builds it again."""

from pathlib import Path

import pandas as pd
import pytest
from snakemake.persistence import MetadataRecord
from snakemake.persistence.file import FilePersistence

from shiftwork.integrity import DamagedOutputError, check_outputs, missing_intermediate_warnings
from shiftwork.tables import (
    CONFIGFILES_ENV,
    TableError,
    hand_configfiles_to_jobs,
    read_table,
    rebuild_commands,
    write_table,
)

HEAD = (
    "Delete them and name them as targets, so that Snakemake builds them again (a plain run does not "
    "rebuild an intermediate table whose results are up to date); then run as before, which reruns "
    "whatever they changed:\n"
)


@pytest.fixture(autouse=True)
def no_run_configfiles(monkeypatch):
    """No config files handed down by a run around the test; whatever a test sets is undone."""
    monkeypatch.setenv(CONFIGFILES_ENV, "[]")


def test_targets_come_before_the_config_files():
    assert rebuild_commands(["results/paper/a.parquet"], ["results/paper/a.parquet"], ["config/paper.yaml"]) == (
        HEAD + "  rm -r 'results/paper/a.parquet'\n"
        "  snakemake --cores N 'results/paper/a.parquet' --configfile 'config/paper.yaml'"
    )
    # several config files follow one --configfile (a second one would replace the first)
    assert rebuild_commands(["d"], ["d/info.json", "t.parquet"], ["base.yaml", Path("mine.yaml")]).endswith(
        "\n  snakemake --cores N 'd/info.json' 't.parquet' --configfile 'base.yaml' 'mine.yaml'"
    )
    # the default config needs none
    assert rebuild_commands(["t.parquet"], ["t.parquet"], []).endswith("\n  snakemake --cores N 't.parquet'")


def truncated_table(path: Path) -> Path:
    write_table(pd.DataFrame({"i": range(50)}), path, {"step": "unit"})
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def test_the_damage_check_names_the_run_config_files(tmp_path):
    path = truncated_table(tmp_path / "results" / "paper" / "t.parquet")
    with pytest.raises(DamagedOutputError) as info:
        check_outputs(
            tmp_path / "results", lambda p: "score_axes", tables=path.parent, configfiles=["config/paper.yaml"]
        )
    assert str(info.value).endswith(
        f"\n  rm -r '{path}'\n  snakemake --cores N '{path}' --configfile 'config/paper.yaml'"
    )


def test_a_job_names_the_config_files_its_run_handed_down(tmp_path):
    path = truncated_table(tmp_path / "t.parquet")
    hand_configfiles_to_jobs([Path("config/paper.yaml")])
    with pytest.raises(TableError) as info:
        read_table(path)
    assert str(info.value).endswith(
        f"\n  rm -r '{path}'\n  snakemake --cores N '{path}' --configfile 'config/paper.yaml'"
    )


@pytest.mark.parametrize("value", ["", "not json", '"config/paper.yaml"'])
def test_a_variable_that_is_no_list_names_no_config_file(monkeypatch, value):
    monkeypatch.setenv(CONFIGFILES_ENV, value)
    assert rebuild_commands(["t.parquet"], ["t.parquet"]).endswith("\n  snakemake --cores N 't.parquet'")


def record(workdir: Path, output: str, inputs: list[str]) -> None:
    """Snakemake's own record of the job that wrote ``output`` (its file persistence)."""
    FilePersistence(path=workdir / ".snakemake")._write_record(output, MetadataRecord(rule="r", input=inputs))


def test_a_missing_intermediate_is_named_with_the_command_that_builds_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = "results/paper"
    stats = f"{out}/stability/stats/per_prompt.parquet"
    write_table(pd.DataFrame({"i": [1]}), stats, {"step": "unit"})
    write_table(pd.DataFrame({"i": [1]}), f"{out}/stability/kept.parquet", {"step": "unit"})
    deltas = f"{out}/stability/deltas/m/tiny.parquet"
    # the record lists inputs of every kind: only a missing table of this config that a rule writes counts
    record(
        tmp_path,
        stats,
        [
            deltas,
            f"{out}/stability/kept.parquet",
            f"{out}/stability/other.parquet",
            "results/models/m/x/shiftwork.json",
        ],
    )
    producers = {deltas: "score_axes", f"{out}/stability/kept.parquet": "keep"}
    assert missing_intermediate_warnings(out, producers.get, ["config/paper.yaml"]) == [
        f"intermediate table {deltas} is missing, but {stats}, built from it, is there; Snakemake does not "
        "rebuild a missing intermediate table while the tables built from it are up to date, so a plain run "
        "leaves it missing. To build it again, name it as a target, then run as before: "
        f"snakemake --cores N '{deltas}' --configfile 'config/paper.yaml'"
    ]
    # a second table built from it is counted
    record(tmp_path, f"{out}/stability/kept.parquet", [deltas])
    (warning,) = missing_intermediate_warnings(out, producers.get, [])
    assert warning.startswith(f"intermediate table {deltas} is missing, but {out}/stability/kept.parquet (and 1 more),")
    # no "Nothing to be done" in it: `make publish` reads that phrase in a dry run's output
    assert all("Nothing to be done" not in w for w in missing_intermediate_warnings(out, producers.get, []))
    # nothing missing once it is back
    write_table(pd.DataFrame({"i": [1]}), deltas, {"step": "unit"})
    assert missing_intermediate_warnings(out, producers.get, []) == []


def test_a_long_path_is_found_in_its_split_record(tmp_path, monkeypatch):
    # a path whose base64 is longer than a file name may be: Snakemake splits it into folders
    monkeypatch.chdir(tmp_path)
    out = "results/default"
    table = f"{out}/{'a' * 120}/{'b' * 120}/{'c' * 60}.parquet"
    gone = f"{out}/{'d' * 200}.parquet"
    write_table(pd.DataFrame({"i": [1]}), table, {"step": "unit"})
    record(tmp_path, table, [gone])
    assert any(p.name.startswith("@") for p in (tmp_path / ".snakemake" / "metadata").iterdir())
    (warning,) = missing_intermediate_warnings(out, lambda p: "r", None)
    assert warning.startswith(f"intermediate table {gone} is missing, but {table}, built from it, is there;")
    assert warning.endswith(f"then run as before: snakemake --cores N '{gone}'")


def test_no_record_no_warning(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_table(pd.DataFrame({"i": [1]}), "results/x/t.parquet", {"step": "unit"})
    assert missing_intermediate_warnings("results/x", lambda p: "r", []) == []
    assert missing_intermediate_warnings("results/none", lambda p: "r", []) == []
