"""Which code and settings made a table, and the stop when they differ from the run's own."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from shiftwork import codebase, staleness
from shiftwork.provenance import make_provenance, params_digest
from shiftwork.tables import read_provenance, write_table

REPO = Path(__file__).resolve().parent.parent


def test_source_digest_ignores_comments_docstrings_and_layout_but_not_code(tmp_path):
    a, b, c = tmp_path / "a.py", tmp_path / "b.py", tmp_path / "c.py"
    a.write_text('"""One thing."""\n\ndef f(x):\n    """Double."""\n    return 2 * x\n')
    b.write_text("# a comment\ndef f( x ):\n\n    return 2*x  # twice\n")
    c.write_text('"""One thing."""\n\ndef f(x):\n    """Double."""\n    return 3 * x\n')
    assert codebase.source_digest(a) == codebase.source_digest(b) != codebase.source_digest(c)
    assert codebase.source_digest(tmp_path / "gone.py") is None


def test_a_table_records_the_files_its_process_imported_and_the_commit(tmp_path):
    prov = make_provenance("x", {"a": 1})
    files = prov["code"]["files"]
    assert files["shiftwork/provenance.py"] == codebase.source_digest(REPO / "shiftwork" / "provenance.py")
    assert "shiftwork/tables.py" in files and all(name.startswith("shiftwork/") for name in files)
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:  # a git checkout
        assert prov["code"]["commit"] == head.stdout.strip()
        assert isinstance(prov["code"]["dirty"], bool)
    assert "job" not in prov  # not a Snakemake job


JOB = """
import json, sys
from dataclasses import dataclass
class Params(dict):
    pass
@dataclass
class Spec:
    n: int
class Job:
    rule = "score_axes"
    params = Params(settings={"eps": 0.1, "names": {"b", "a", "c"}}, spec=Spec(3), fn=lambda: 0)
import __main__
__main__.snakemake = Job()
from shiftwork.provenance import make_provenance
print(json.dumps(make_provenance("score_axes", {})["job"]))
"""


def test_a_job_records_its_rule_and_a_params_digest_that_every_process_agrees_on():
    """Run as a Snakemake job script (a ``snakemake`` object in ``__main__``), under two hash
    seeds: the set's order and the function's address must not reach the digest."""
    import os

    records = []
    for seed in ("1", "2"):
        done = subprocess.run(
            [sys.executable, "-c", JOB],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)},
            check=True,
        )
        records.append(json.loads(done.stdout))
    expected = params_digest({"settings": {"eps": 0.1, "names": ["a", "b", "c"]}, "spec": {"n": 3}, "fn": "function"})
    assert records[0] == records[1] == {"rule": "score_axes", "params": expected}


def _table(tmp_path, name, code_files=None, job=None):
    prov = {"step": "generate"}
    if code_files is not None:
        prov["code"] = {"commit": "abc", "dirty": False, "files": code_files}
    if job is not None:
        prov["job"] = job
    path = tmp_path / f"{name}.parquet"
    write_table(pd.DataFrame({"x": [1]}), path, prov)
    return path


def test_stale_tables_by_code_and_by_settings_where_snakemake_has_no_record(tmp_path):
    now = codebase.source_digest(REPO / "shiftwork" / "tables.py")
    same = _table(tmp_path, "same", {"shiftwork/tables.py": now}, {"rule": "generate", "params": "p1"})
    code = _table(tmp_path, "code", {"shiftwork/tables.py": "0" * 16}, {"rule": "generate", "params": "p1"})
    settings = _table(tmp_path, "settings", {"shiftwork/tables.py": now}, {"rule": "generate", "params": "p0"})
    old = _table(tmp_path, "old")  # an older shiftwork's table records neither
    tables = [same, code, settings, old]

    def params_now(path, rule):
        assert rule in ("generate",)
        return "p1"

    found = staleness.stale_tables(tables, params_now, snakemake_knows=lambda p: False)
    assert found == [
        staleness.Stale(code, "generate", "the code that made it changed since (shiftwork/tables.py)", code=True),
        staleness.Stale(
            settings,
            "generate",
            "its rule's settings (params) in this config differ from those it was made with",
            code=False,
        ),
    ]
    # where Snakemake has a record of the job, it reruns on params itself: only the code counts
    assert [s.path for s in staleness.stale_tables(tables, params_now, snakemake_knows=lambda p: True)] == [code]


def test_the_stop_names_the_tables_the_difference_and_the_command(tmp_path):
    found = [
        staleness.Stale(
            Path("results/default/a.parquet"), "generate", "the code that made it changed since (x.py)", True
        ),
        staleness.Stale(Path("results/default/b.parquet"), "score_axes", "its settings differ", False),
    ]
    with pytest.raises(staleness.StaleOutputError) as err:
        staleness.check_staleness(found, ["config/paper.yaml"], accept_code=False)
    assert str(err.value) == (
        "2 table(s) were made by other code or settings than this run's, so nothing was run:\n"
        "  - results/default/a.parquet (rule 'generate'): the code that made it changed since (x.py)\n"
        "  - results/default/b.parquet (rule 'score_axes'): its settings differ\n"
        "Rebuild them, and what is built from them, by rerunning their rules with your targets:\n"
        "  snakemake --cores N [TARGETS] --forcerun generate score_axes --configfile 'config/paper.yaml'\n"
        "A table this config no longer makes can simply be deleted.\n"
        "To keep tables made by older code instead (they still name the code that made them), run with "
        "SHIFTWORK_ACCEPT_CODE=1."
    )
    # accepting older code keeps the first with a warning; the settings still stop the run
    with pytest.raises(staleness.StaleOutputError, match="1 table"):
        staleness.check_staleness(found, accept_code=True)
    assert staleness.check_staleness(found[:1], accept_code=True) == [
        "kept 1 table(s) made by older code, as SHIFTWORK_ACCEPT_CODE is set: results/default/a.parquet "
        "(rule 'generate'): the code that made it changed since (x.py)"
    ]
    many = [staleness.Stale(Path(f"t{i}.parquet"), "r", "code", True) for i in range(5)]
    assert staleness.check_staleness(many, accept_code=True) == [
        "kept 5 table(s) made by older code, as SHIFTWORK_ACCEPT_CODE is set: t0.parquet (rule 'r'): code; "
        "t1.parquet (rule 'r'): code; t2.parquet (rule 'r'): code; and 2 more"
    ]
    assert staleness.check_staleness([], accept_code=False) == []


def test_a_merged_table_records_the_merge_job_not_the_shards(tmp_path):
    from shiftwork.stability.steps import merge_shards

    shard = tmp_path / "s0.parquet"
    write_table(
        pd.DataFrame({"model": ["m"], "dataset": ["d"], "prompt_id": ["p"], "variant_id": ["v"]}),
        shard,
        {"step": "generate", "job": {"rule": "generate", "params": "shard"}, "code": {"files": {"x.py": "0"}}},
    )
    merge_shards([str(shard)], str(tmp_path / "all.parquet"))
    prov = read_provenance(tmp_path / "all.parquet")
    assert "job" not in prov  # this process runs no Snakemake job
    assert "x.py" not in prov["code"]["files"] and "shiftwork/stability/steps.py" in prov["code"]["files"]


def test_what_the_run_is_forced_to_rebuild_does_not_stop_it():
    found = [
        staleness.Stale(Path("results/default/a.parquet"), "generate", "code", True),
        staleness.Stale(Path("results/default/b.parquet"), "score_axes", "code", True),
        staleness.Stale(Path("results/default/c.parquet"), "aggregate", "code", True),
    ]
    assert staleness.not_forced(found, ["generate", "results/default/b.parquet"]) == found[2:]
    assert staleness.not_forced(found, forceall=True) == []
    assert staleness.not_forced(found) == found


def test_the_job_script_is_the_one_snakemake_copied(monkeypatch):
    """Snakemake runs a copy of the script named tmpXXXXXXXX.NAME.py; a rule made with `use rule
    ... as` keeps its parent's script."""
    import __main__
    from shiftwork.provenance import job_script

    monkeypatch.setattr(__main__, "__file__", ".snakemake/scripts/tmpab12_cd3.generate_responses.py", raising=False)
    assert job_script("generate_model_responses") == REPO / "scripts" / "generate_responses.py"
    monkeypatch.setattr(__main__, "__file__", "/usr/bin/python", raising=False)
    assert job_script("score_axes") == REPO / "scripts" / "score_axes.py"
    assert job_script("no_such_rule") is None


def test_the_forced_rules_and_files_are_read_from_snakemakes_command_line():
    read = staleness.forced_by_command_line
    assert read(["--cores", "2", "all", "--forcerun", "generate", "results/a.parquet", "--configfile", "c.yaml"]) == (
        ["generate", "results/a.parquet"],
        False,
    )
    assert read(["-R", "score_axes", "-n"]) == (["score_axes"], False)
    assert read(["--cores", "2", "-F"]) == ([], True)
    assert read(["--cores", "2"]) == ([], False)
