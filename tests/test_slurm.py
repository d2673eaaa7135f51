"""The workflow on a real SLURM cluster, through profiles/slurm.

.ci/slurm/up.sh brings up a one-node cluster on this machine (munged, MariaDB, slurmdbd,
slurmctld, slurmd; two fake GPUs) and installs Debian's SLURM packages first if they are
missing; .ci/slurm/down.sh takes it down by the daemons' pid files. The tests are skipped,
with a warning in pytest's summary, only where SLURM cannot be installed (not root, no
apt-get); any other failure to bring the cluster up fails them.

A tiny stability config (SmolLM2, three prompts, generate in two shards) runs
twice: first with the model's config.json broken, so the generate jobs fail after the
upstream jobs have succeeded, then repaired, so the rerun completes the workflow. Meanwhile
the same config runs locally, and the results must agree.
"""

import os
import re
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest
from test_sharding import MODEL, by_variant, job_counts, make_workdir, tiny_config

from shiftwork.models.prepare import prepared_dir
from shiftwork.tables import read_provenance

ROOT = Path(__file__).resolve().parent.parent
UP, DOWN = ROOT / ".ci/slurm/up.sh", ROOT / ".ci/slurm/down.sh"
# a directory and ports of their own, apart from a cluster brought up by hand (.ci/slurm/up.sh)
CLUSTER_DIR = Path(os.environ.get("SHIFTWORK_SLURM_TEST_DIR", "/tmp/shiftwork-slurm-test"))
CLUSTER_ENV = {"SHIFTWORK_SLURM_DIR": str(CLUSTER_DIR), "SHIFTWORK_SLURM_PORT": "16917"}
DAEMONS = {
    "munged": "run/munged.pid",
    "mariadbd": "db/mariadbd.pid",
    "slurmdbd": "run/slurmdbd.pid",
    "slurmctld": "run/slurmctld.pid",
    "slurmd": "run/slurmd.pid",
}
GPU_RULES = {
    "rewrite_prompts",
    "estimate_gate_baseline",
    "filter_variants",
    "generate_responses",
    "generate_shard_responses",
    "score_axes",
    "check_judge",  # where the judge is a local model (the tiny config has none)
}
SUBMITTED = re.compile(r"Job \d+ has been submitted with SLURM jobid (\d+) \(log: .*?/rule_(\w+)/")

pytestmark = [pytest.mark.slurm, pytest.mark.workflow]


def base_env() -> dict:
    """This environment without anything a GPU claim or SLURM client would pick up."""
    drop = ("CUDA_", "SLURM_", "SHIFTWORK_GPU")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    return {**env, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def snakemake_cmd(work: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(ROOT / "Snakefile"),
        "--directory",
        str(work),
        "--configfile",
        str(work / "config" / "config.yaml"),
        *args,
    ]


@dataclass
class Run:
    proc: subprocess.CompletedProcess
    seconds: float

    @property
    def output(self) -> str:
        return self.proc.stdout + self.proc.stderr

    def submitted(self) -> dict[str, str]:
        """SLURM job id -> rule, for every job this run submitted."""
        return {jobid: rule for jobid, rule in SUBMITTED.findall(self.output)}


def sacct(env: dict) -> dict[str, dict[str, str]]:
    """Every job the accounting database knows: id -> State, AllocTRES, Start, End."""
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-a", "--starttime", "now-1day", "-o", "JobIDRaw,State,AllocTRES,Start,End"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    rows = [line.split("|") for line in out.splitlines() if line.strip()]
    return {r[0]: {"State": r[1], "AllocTRES": r[2], "Start": r[3], "End": r[4]} for r in rows}


def daemon_pids() -> dict[str, int]:
    pids = {}
    for name, rel in DAEMONS.items():
        path = CLUSTER_DIR / rel
        if path.exists():
            pids[name] = int(path.read_text().split()[0])
    return pids


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def slurmstepd_pids() -> list[int]:
    """Job step daemons still running (read from /proc; nothing is stopped by name)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if Path(os.readlink(proc / "exe")).name.startswith("slurmstepd"):
                    found.append(int(proc.name))
            except OSError:
                pass
    return found


def take_down() -> subprocess.CompletedProcess:
    return subprocess.run([str(DOWN)], env={**os.environ, **CLUSTER_ENV}, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def cluster():
    """A running test cluster: the environment for its client commands."""
    start = time.monotonic()
    up = subprocess.run([str(UP)], env={**os.environ, **CLUSTER_ENV}, capture_output=True, text=True, timeout=900)
    if up.returncode == 3:
        msg = "SLURM CANNOT BE INSTALLED ON THIS MACHINE: the SLURM cluster tests are SKIPPED.\n" + up.stderr.strip()
        print(msg, file=sys.stderr)
        warnings.warn(msg, stacklevel=2)
        pytest.skip(msg)
    assert up.returncode == 0, f"the test cluster did not come up:\n{up.stderr[-4000:]}"
    print(f"test cluster up in {time.monotonic() - start:.0f} s", file=sys.stderr)
    env = {**base_env(), "SLURM_CONF": str(CLUSTER_DIR / "etc" / "slurm.conf")}
    try:
        yield env
    finally:
        take_down()


@pytest.fixture(scope="module")
def local_run(cluster, tmp_path_factory, prepared_smollm):
    """The tiny config on this machine (CPU, no GPU claimed), started as soon as the cluster
    is up and running while the cluster works; ``wait()`` gives its workdir and Run."""
    work = make_workdir(tmp_path_factory.mktemp("local"), tiny_config(3, shard_size=2), prepared_smollm)
    env = {**base_env(), "SHIFTWORK_GPU_IDS": ""}
    start = time.monotonic()
    proc = subprocess.Popen(
        snakemake_cmd(work, "--cores", "2"), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )

    def wait() -> tuple[Path, Run]:
        out, err = proc.communicate(timeout=1800)
        return work, Run(subprocess.CompletedProcess(proc.args, proc.returncode, out, err), time.monotonic() - start)

    yield wait
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def slurm_runs(cluster, local_run, tmp_path_factory, prepared_smollm):
    """Run 1 with a broken model (the generate jobs fail), run 2 repaired (completes)."""
    work = make_workdir(tmp_path_factory.mktemp("slurm"), tiny_config(3, shard_size=2), prepared_smollm)
    model_config = prepared_dir(MODEL, tiny_config(3)["models"][MODEL], work / "results") / "config.json"
    model_config.unlink()  # a hard link to the session's model: replace it, never write through it
    model_config.write_text("{ this is not json")
    args = [
        "--profile",
        str(ROOT / "profiles" / "slurm"),
        # the first status check after 5 s, not 20 (a job here takes 10-30 s; the plugin
        # adds 10 s to the gap after every check that finds no job finished)
        "--slurm-init-seconds-before-status-checks",
        "5",
        # run 1 fails on purpose: once, not 1 + the profile's retries times
        "--retries",
        "0",
        # one torch thread per job: this machine has 2 cores for the two GPU jobs at once
        "--set-threads",
        *[f"{rule}=1" for rule in sorted(GPU_RULES)],
    ]
    runs = []
    for _ in range(2):
        start = time.monotonic()
        proc = subprocess.run(snakemake_cmd(work, *args), env=cluster, capture_output=True, text=True, timeout=1800)
        runs.append(Run(proc, time.monotonic() - start))
        if len(runs) == 1:
            model_config.unlink()
            os.link(prepared_smollm / "config.json", model_config)
    return work, runs[0], runs[1]


def test_failed_job_is_reported_and_rerun_completes(slurm_runs, cluster):
    work, failed, rerun = slurm_runs
    print(f"SLURM run 1 (fails): {failed.seconds:.0f} s, run 2: {rerun.seconds:.0f} s", file=sys.stderr)
    assert failed.proc.returncode != 0
    assert "Error in rule generate_shard_responses" in failed.output
    failed_ids = [j for j, rule in failed.submitted().items() if rule == "generate_shard_responses"]
    assert len(failed_ids) >= 1
    for jobid in failed_ids:
        assert f"SLURM-job '{jobid}' failed, SLURM status is: 'FAILED'" in failed.output
    states = sacct(cluster)
    assert {states[j]["State"] for j in failed_ids} == {"FAILED"}
    # the upstream jobs succeeded in run 1 and are not run again
    upstream = {"sample_prompts", "make_variants", "estimate_gate_baseline", "filter_variants"}
    assert upstream <= set(failed.submitted().values())
    assert rerun.proc.returncode == 0, rerun.output[-4000:]
    assert not upstream & set(rerun.submitted().values())
    assert "generate_shard_responses" in rerun.submitted().values()
    assert (work / "results/default/stability/tables/main_table.md").exists()
    dry = subprocess.run(snakemake_cmd(work, "-n"), env=cluster, capture_output=True, text=True, timeout=300)
    assert "Nothing to be done" in dry.stdout + dry.stderr


def test_every_job_went_through_sbatch(slurm_runs, cluster):
    _, failed, rerun = slurm_runs
    states = sacct(cluster)
    for run in (failed, rerun):
        # no job ran on this machine but the input-only `all`, and sacct knows every submitted one
        # (the logs of failed jobs, which the workflow profile prints, show the job's own
        # "localrule" line as Snakemake ran it inside the SLURM job: they are left out)
        own = re.sub(r"^Logfile [^\n]*:\n={80}\n.*?\n={80}$", "", run.output, flags=re.S | re.M)
        assert set(re.findall(r"^localrule (\w+):", own, re.M)) <= {"all"}
        assert set(run.submitted()) <= set(states), "a submitted job is missing from sacct"
    # the rerun submitted every job it planned, except `all`, and each completed
    planned = job_counts(rerun.output)
    assert sorted(rerun.submitted().values()) == sorted(r for r, n in planned.items() if r != "all" for _ in range(n))
    assert {states[j]["State"] for j in rerun.submitted()} == {"COMPLETED"}


def test_gpu_jobs_get_one_gpu_each_and_distinct_devices(slurm_runs, cluster):
    work, failed, rerun = slurm_runs
    states = sacct(cluster)
    for run in (failed, rerun):
        for jobid, rule in run.submitted().items():
            has_gpu = "gres/gpu=1" in states[jobid]["AllocTRES"]
            assert has_gpu == (rule in GPU_RULES), (jobid, rule, states[jobid]["AllocTRES"])
    # where each GPU job of the rerun ran, as its output's provenance records it
    res = work / "results/default/stability"
    outputs = [res / f"generations/{MODEL}/tiny/shard-{k}.parquet" for k in range(2)]
    outputs += [res / f"probes/{MODEL}/tiny/shard-{k}.parquet" for k in range(2)]
    outputs += [res / f"deltas/{MODEL}/tiny.parquet"]
    claims = [read_provenance(p)["gpu"] for p in outputs]
    assert all(c["source"] == "slurm" and c["device"] in ("0", "1") for c in claims), claims
    assert {c["slurm_job_id"] for c in claims} <= set(rerun.submitted())
    # a shard's generations and probes come from one job
    assert [c["slurm_job_id"] for c in claims[:2]] == [c["slurm_job_id"] for c in claims[2:4]]
    claims = list({c["slurm_job_id"]: c for c in claims}.values())

    def span(jobid):
        return tuple(datetime.fromisoformat(states[jobid][k]) for k in ("Start", "End"))

    overlapping = 0
    for i, a in enumerate(claims):
        for b in claims[i + 1 :]:
            (s1, e1), (s2, e2) = span(a["slurm_job_id"]), span(b["slurm_job_id"])
            if s1 < e2 and s2 < e1:
                overlapping += 1
                assert a["device"] != b["device"], (a, b)
    assert overlapping >= 1, "no two GPU jobs ran at the same time"
    log = (work / f"logs/default/generate_responses/{MODEL}/tiny/shard-0.log").read_text()
    assert f"via slurm (pool {claims[0]['device']}), SLURM job {claims[0]['slurm_job_id']}" in log


def test_results_equal_a_local_run(slurm_runs, local_run):
    work, _, _ = slurm_runs
    local, run = local_run()
    print(f"local run: {run.seconds:.0f} s", file=sys.stderr)
    assert run.proc.returncode == 0, run.output[-4000:]
    res = "results/default/stability/"
    for table in [f"generations/{MODEL}/tiny", f"probes/{MODEL}/tiny", f"deltas/{MODEL}/tiny"]:
        a = by_variant(pd.read_parquet(local / res / f"{table}.parquet"))
        b = by_variant(pd.read_parquet(work / res / f"{table}.parquet"))
        assert len(a) == len(b) > 0
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-4, atol=1e-5)
    for table in ["stats/per_prompt", "stats/total_sgs", "gate/report"]:
        a = pd.read_parquet(local / res / f"{table}.parquet")
        b = pd.read_parquet(work / res / f"{table}.parquet")
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-4, atol=1e-5)
    assert (local / res / "tables/main_table.md").read_text() == (work / res / "tables/main_table.md").read_text()


def test_teardown_leaves_no_daemon_running(cluster):
    pids = daemon_pids()
    assert set(pids) == set(DAEMONS)
    down = take_down()
    assert down.returncode == 0, down.stderr
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(alive(p) for p in pids.values()):
        time.sleep(0.2)
    assert [n for n, p in pids.items() if alive(p)] == []
    assert slurmstepd_pids() == []
    assert not os.path.lexists("/etc/slurm/slurm.conf") or os.readlink("/etc/slurm/slurm.conf") != str(
        CLUSTER_DIR / "etc" / "slurm.conf"
    )
