"""A run stopped with SIGTERM: the note of the signal, and what the run says and exits with."""

import os
import signal
from types import SimpleNamespace

import pytest

from shiftwork.stopping import STOPPED_STATUS, SigtermNote, job_label, stop_message, stop_status, unfinished_labels


@pytest.fixture()
def sigterm_handler():
    """Put back the process's SIGTERM handler after the test."""
    original = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, original)


def job(rule: str, *outputs: str, attempt: int = 1) -> SimpleNamespace:
    return SimpleNamespace(rule=SimpleNamespace(name=rule), output=list(outputs), attempt=attempt)


def test_the_note_records_sigterm_and_calls_the_previous_handler(sigterm_handler):
    calls = []
    signal.signal(signal.SIGTERM, lambda signum, frame: calls.append(signum))
    note = SigtermNote()
    assert note.wrap_handler() is True
    assert note.pid is None and calls == []
    os.kill(os.getpid(), signal.SIGTERM)
    assert note.pid == os.getpid()
    assert calls == [signal.SIGTERM]
    # a second signal is passed on too
    os.kill(os.getpid(), signal.SIGTERM)
    assert calls == [signal.SIGTERM, signal.SIGTERM]


@pytest.mark.parametrize("disposition", [signal.SIG_DFL, signal.SIG_IGN])
def test_the_default_action_and_an_ignored_signal_are_left_alone(sigterm_handler, disposition):
    signal.signal(signal.SIGTERM, disposition)
    note = SigtermNote()
    assert note.wrap_handler() is False
    assert signal.getsignal(signal.SIGTERM) == disposition
    assert note.pid is None


def test_a_job_is_named_by_its_rule_and_outputs():
    assert job_label(job("generate_model_responses", "g/tiny.parquet", "p/tiny.parquet")) == (
        "generate_model_responses (g/tiny.parquet, p/tiny.parquet)"
    )


def test_unfinished_jobs_are_the_failed_the_running_and_those_waiting_for_a_retry():
    failed = [job("make", "a.txt")]
    running = [job("make", "b.txt")]
    # ready: c never started; d failed its first attempt and waits for its second
    ready = [job("make", "c.txt"), job("make", "d.txt", attempt=2)]
    assert unfinished_labels(failed, running, ready) == ["make (a.txt)", "make (b.txt)", "make (d.txt)"]
    assert unfinished_labels([], [], [job("make", "c.txt")]) == []


def test_no_sigterm_no_message_and_snakemake_ends_the_run():
    assert stop_message(None, []) is None
    assert stop_message(None, ["make (a.txt)"]) is None
    assert stop_status(None, []) is None


def test_sigterm_with_every_job_finished():
    assert stop_message(4242, []) == (
        "shiftwork: the run was stopped by SIGTERM (sent to the main Snakemake process, PID 4242); "
        "no job failed. The jobs that were running were let finish and their outputs kept; the "
        "jobs still waiting were not started. Run the same command again to continue."
    )
    assert stop_status(4242, []) == STOPPED_STATUS == 143


def test_sigterm_with_a_failed_job_does_not_say_that_none_failed():
    message = stop_message(4242, ["make (a.txt)"])
    assert message == (
        "shiftwork: the run was stopped by SIGTERM (sent to the main Snakemake process, PID 4242), "
        "and 1 job did not finish: make (a.txt). A job fails like this when the signal reached it "
        "too (a kill of the whole process group, a scheduler's time limit) or for a reason of its "
        "own; Snakemake's error above and the job's log say which. The other jobs that were "
        "running were let finish and their outputs kept; the jobs still waiting were not started. "
        "Run the same command again to continue: it runs the jobs that did not finish again."
    )
    assert "no job failed" not in message
    assert stop_status(4242, ["make (a.txt)"]) is None


def test_two_unfinished_jobs_are_counted_and_listed():
    message = stop_message(7, ["make (a.txt)", "make (b.txt)"])
    assert (
        "(sent to the main Snakemake process, PID 7), and 2 jobs did not finish: make (a.txt); make (b.txt). "
        in message
    )
