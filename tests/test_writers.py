"""One writer per job: a job's lock lives as long as its process, a second copy stops, and a run
refuses to start beside a job a killed run left alive."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from shiftwork import integrity, writers
from shiftwork.logs import log_to

REPO = Path(__file__).resolve().parent.parent
HOLD = (
    "import sys, time; sys.path.insert(0, sys.argv[1]); "
    "from shiftwork.logs import log_to\n"
    "with log_to(sys.argv[2]):\n"
    "    print('held', flush=True); time.sleep(60)"
)


@pytest.fixture()
def running_job(tmp_path):
    """A process that holds the job lock of tmp_path/logs/default/generate/m.log, as a job does."""
    log = tmp_path / "logs" / "default" / "generate" / "m.log"
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(REPO), str(log)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    yield proc, log
    proc.kill()
    proc.wait()


def test_the_lock_sits_beside_the_log():
    assert writers.job_lock_path("logs/default/gate/x.log") == Path("logs/default/gate/.x.log.lock")


def test_a_second_copy_of_a_live_job_stops_and_leaves_its_log_alone(running_job):
    proc, log = running_job
    log.write_text("the first copy's messages\n")
    with pytest.raises(writers.JobRunningError) as err, log_to(log):
        pass
    host = os.uname().nodename
    assert str(err.value) == (
        f"this job (log {log}) is already running as PID {proc.pid} on {host}; "
        "a second copy would write the same outputs, so this one stops"
    )
    assert log.read_text() == "the first copy's messages\n"


def test_live_jobs_lists_the_holder_until_it_dies(running_job, tmp_path):
    proc, log = running_job
    assert list(writers.live_jobs(tmp_path / "logs")) == [writers.LiveJob(proc.pid, os.uname().nodename, str(log))]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert list(writers.live_jobs(tmp_path / "logs")) == []
    writers.hold_job(log)  # the lock of a dead job is free: its next copy takes it


def test_a_run_refuses_to_start_beside_an_orphaned_job(running_job, tmp_path):
    proc, log = running_job
    with pytest.raises(writers.JobRunningError) as err:
        integrity.refuse_orphaned_jobs("logs", tmp_path)
    host = os.uname().nodename
    assert str(err.value) == (
        "1 job(s) of an earlier run are still running, although no Snakemake run of this workflow is "
        "alive here (its main process was killed); a new run would start a second copy of each, writing "
        "the same outputs, so nothing was run:\n"
        f"  - PID {proc.pid} on {host}, log {log}\n"
        f"Wait for them to finish, or stop them with `kill {proc.pid}`; then run the same command again, "
        "which reruns the jobs that run left unfinished."
    )


def test_the_jobs_of_a_live_run_are_its_own(running_job, tmp_path):
    """While another process holds the run guard (a live run), its jobs are not orphans."""
    guard = (
        "import sys, time; sys.path.insert(0, sys.argv[1]); "
        "from shiftwork.integrity import take_run_guard; assert take_run_guard(sys.argv[2]); "
        "print('held', flush=True); time.sleep(60)"
    )
    run = subprocess.Popen([sys.executable, "-c", guard, str(REPO), str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert run.stdout.readline().strip() == "held"
        integrity.refuse_orphaned_jobs("logs", tmp_path)  # no error
        assert not integrity.take_run_guard(tmp_path)
    finally:
        run.kill()
        run.wait()
    assert integrity.take_run_guard(tmp_path)


def test_a_process_may_log_to_its_own_job_twice(tmp_path):
    log = tmp_path / "logs" / "x.log"
    with log_to(log):
        pass
    with log_to(log):  # the lock is this process's already
        pass
    assert writers.job_lock_path(log).exists()
