"""Results pages from a run's own reports (shiftwork.docs.publish), on a hand-made results tree."""

import json
import subprocess

import pytest

from shiftwork.docs import publish as pub

RECORD = {
    "commit": "abc123def456",
    "config": "config/config.yaml",
    "config_sha256": "0123456789abcdef",
    "name": "default",
    "date": "2026-12-03",
    "elapsed_s": 2000.0,
    "runs": 2,
    "job_s": 3725.0,
    "jobs": 7,
    "cpu": "AVX2, bf16 emulated",
    "cores": 2,
}


@pytest.fixture()
def work(tmp_path):
    res = tmp_path / "results" / "default"
    (res / "trajectory" / "figures").mkdir(parents=True)
    (res / "trajectory" / "report.md").write_text("# Trajectory study\n\n## Accuracy\n\n| a |\n| --- |\n| 1 |\n")
    (res / "trajectory" / "figures.md").write_text("# Figures\n\n- one\n")
    (res / "trajectory" / "figures" / "scatter.png").write_bytes(b"\x89PNG fake")
    (res / "trajectory" / ".hidden.png").write_bytes(b"no")
    (res / "organisms").mkdir()
    bench = tmp_path / "benchmarks" / "default" / "rule"
    bench.mkdir(parents=True)
    header = "s\th:m:s\tmax_rss\n"
    (bench / "a.tsv").write_text(header + "20.5\t0:00:20\t1\n")
    (bench / "b.tsv").write_text(header + "100.25\t0:01:40\t1\n")
    (bench / "c.tsv").write_text("not a benchmark\n")
    logs = tmp_path / ".snakemake" / "log"
    logs.mkdir(parents=True)
    ran = "rule x:\n    output: results/default/trajectory/report.md\n1 of 1 steps (100%) done\n"
    (logs / "a.snakemake.log").write_text(ran + "Elapsed time: 0:59:00.500000\n")
    (logs / "b.snakemake.log").write_text(ran + "Elapsed time: 0:03:03\n")
    (logs / "c.snakemake.log").write_text(ran.replace("default", "smoke") + "Elapsed time: 0:10:00\n")
    (logs / "d.snakemake.log").write_text("Nothing to be done.\nresults/default/\nElapsed time: 0:00:09\n")
    (logs / "e.snakemake.log").write_text(ran)  # stopped before it finished: no elapsed time
    return tmp_path


def test_job_time_sums_the_benchmark_files(work):
    assert pub.job_time(work / "benchmarks" / "default") == (120.75, 2)


def test_run_time_sums_the_runs_that_wrote_into_the_configs_folder(work):
    # a and b: 59 min 0.5 s + 3 min 3 s; c wrote elsewhere, d ran nothing, e has no elapsed time
    assert pub.run_time(work, "default") == (3723.5, 2)


def test_one_run_and_one_core_are_said_in_the_singular():
    text = pub.head("trajectory", {**RECORD, "runs": 1, "cores": 1})
    assert "elapsed over the Snakemake run that wrote into `results/default/`" in text
    assert "| CPU | AVX2, bf16 emulated, 1 core |" in text


def test_headings_go_one_level_down():
    assert pub.shift_headings("# A\ntext # not\n## B\n###### F") == "## A\ntext # not\n### B\n###### F"


def test_the_page_has_the_head_the_reports_and_the_figures(work):
    text = pub.study_page("trajectory", work / "results" / "default" / "trajectory", RECORD)
    lines = text.splitlines()
    assert lines[0] == "# Trajectory results"
    assert "| commit | `abc123def456` |" in lines
    assert (
        "| time | 33 min 20 s elapsed over the 2 Snakemake runs that wrote into `results/default/` (reruns"
        " included); 1 h 2 min of job time summed over the 7 jobs with a benchmark file |"
    ) in lines
    assert "| CPU | AVX2, bf16 emulated, 2 cores |" in lines
    # the reports in their order, a level down
    assert lines.index("## Trajectory study") < lines.index("### Accuracy") < lines.index("## Figures", 0)
    assert "![figures/scatter.png](trajectory/figures/scatter.png)" in lines
    assert ".hidden" not in text


def test_a_second_publish_with_nothing_to_run_writes_the_same_bytes(work, monkeypatch):
    (work / "config").mkdir()
    (work / "config" / "config.yaml").write_text("name: default\n")
    calls = []

    def fake(workdir, configfile, cores, *extra, studies=pub.STUDIES):
        calls.append(extra)
        return subprocess.CompletedProcess(
            [], 0, "Building DAG of jobs...\nNothing to be done (all requested files are present and up to date).\n", ""
        )

    monkeypatch.setattr(pub, "snakemake", fake)
    out = work / "docs" / "results"
    first = pub.publish(work, pub.Path("config/config.yaml"), "default", out, 2)
    assert [p.name for p in first] == ["stability.md", "trajectory.md", "organisms.md", "crossstudy.md"]
    snapshot = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    records = json.loads((work / "results" / "default" / "publish.json").read_text())
    assert sorted(records) == sorted(pub.STUDIES) and all(r == records["stability"] for r in records.values())
    record = records["stability"]
    assert record["jobs"] == 2 and record["job_s"] == 120.8  # rounded to tenths
    assert (record["runs"], record["elapsed_s"]) == (2, 3723.5)
    assert (out / "trajectory" / "figures" / "scatter.png").read_bytes() == b"\x89PNG fake"
    pub.publish(work, pub.Path("config/config.yaml"), "default", out, 2)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == snapshot
    assert calls == [("-n",), ("-n",)]  # dry runs only: nothing was run
    assert "wrote no report" in (out / "organisms.md").read_text()
    assert "wrote no report" in (out / "stability.md").read_text()  # no folder at all


def test_publishing_one_study_leaves_the_others_pages_and_records(work, monkeypatch):
    """--studies stability: Snakemake is asked for that study alone, its page and record are new,
    and the other pages and records stay byte for byte; an old single record counts for all."""
    (work / "config").mkdir()
    (work / "config" / "config.yaml").write_text("name: default\n")
    asked = []

    def fake(workdir, configfile, cores, *extra, studies=pub.STUDIES):
        asked.append((extra, tuple(studies)))
        done = "Nothing to be done" if asked[-1] == (("-n",), tuple(pub.STUDIES)) else "Job stats:"
        return subprocess.CompletedProcess([], 0, f"Building DAG of jobs...\n{done}\n", "")

    monkeypatch.setattr(pub, "snakemake", fake)
    old = {**RECORD, "commit": "0ld0ld0ld0ld"}
    (work / "results" / "default" / "publish.json").write_text(json.dumps(old))  # the single-record form
    out = work / "docs" / "results"
    pub.publish(work, pub.Path("config/config.yaml"), "default", out, 2)
    assert asked == [(("-n",), pub.STUDIES)]  # nothing to run: the old record heads every page
    assert all("`0ld0ld0ld0ld`" in (out / f"{s}.md").read_text() for s in pub.STUDIES)
    kept = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and not p.name.startswith("stability")}
    monkeypatch.setattr(pub, "make_record", lambda *a: {**RECORD, "commit": "n3wn3wn3wn3w"})
    written = pub.publish(work, pub.Path("config/config.yaml"), "default", out, 2, ["stability"])
    assert [p.name for p in written] == ["stability.md"]
    assert asked[1:] == [(("-n",), ("stability",)), ((), ("stability",))]
    assert "`n3wn3wn3wn3w`" in (out / "stability.md").read_text()
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and not p.name.startswith("stability")} == kept
    records = json.loads((work / "results" / "default" / "publish.json").read_text())
    assert records["stability"]["commit"] == "n3wn3wn3wn3w" and records["trajectory"]["commit"] == "0ld0ld0ld0ld"
    with pytest.raises(ValueError, match="choose among"):
        pub.publish(work, pub.Path("config/config.yaml"), "default", out, 2, ["stabilty"])


def test_a_written_results_page_is_not_a_code_change(tmp_path):
    """The pages under docs/results are the commands' own output: a checkout whose only change
    is one of them counts as clean; a change to any other tracked file does not."""
    from shiftwork.codebase import CHANGED_FILES

    def git(*args):
        return subprocess.run(["git", "-C", str(tmp_path), *args], capture_output=True, text=True, check=True).stdout

    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "stability.md").write_text("old\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    (tmp_path / "docs" / "results" / "stability.md").write_text("new\n")
    (tmp_path / "untracked.txt").write_text("?\n")
    assert git(*CHANGED_FILES) == ""
    (tmp_path / "code.py").write_text("x = 2\n")
    assert git(*CHANGED_FILES).split() == ["M", "code.py"]
