"""A run stopped with SIGTERM, told truthfully.

On SIGTERM, Snakemake's scheduler starts no further job, lets the running ones finish, and
then ends the run as a failure ("At least one job did not complete successfully."), although
no job failed. The workflow notes the signal (:meth:`SigtermNote.wrap_handler`, called at the
run's start, after the scheduler set its handler) and, when the run ends, says what happened
(:func:`stop_message`) and which exit status the run ends with (:func:`stop_status`)."""

import os
import signal
from collections.abc import Sequence

# a shell's status for a process ended by SIGTERM (128 + 15)
STOPPED_STATUS = 128 + signal.SIGTERM


class SigtermNote:
    """Whether this process got SIGTERM since :meth:`wrap_handler`; ``pid`` is its PID then."""

    def __init__(self) -> None:
        self.pid: int | None = None

    def wrap_handler(self) -> bool:
        """Put a handler in front of the process's SIGTERM handler that notes the signal and
        then calls it. Only a Python handler is wrapped (Snakemake's scheduler sets one); the
        default action or an ignored signal is left alone. Whether a handler was wrapped."""
        previous = signal.getsignal(signal.SIGTERM)
        if not callable(previous):
            return False

        def note_then_pass_on(signum, frame):
            self.pid = os.getpid()
            previous(signum, frame)

        signal.signal(signal.SIGTERM, note_then_pass_on)
        return True


def job_label(job) -> str:
    """A Snakemake job as its rule and outputs, e.g. ``make (a.txt, b.txt)``."""
    return f"{job.rule.name} ({', '.join(map(str, job.output))})"


def unfinished_labels(failed, running, ready) -> list[str]:
    """The jobs of a stopped run that did not finish, as :func:`job_label`: those that failed,
    those still running, and those waiting to be tried again after a failed attempt (a job with
    retries left goes back to the ready jobs, with its attempt counted up, not to the failed)."""
    retrying = [job for job in ready if job.attempt > 1]
    return [job_label(job) for job in (*failed, *running, *retrying)]


def stop_message(pid: int | None, unfinished: Sequence[str]) -> str | None:
    """What a run stopped by SIGTERM in process ``pid`` (None: no SIGTERM came) says at its end;
    ``unfinished`` names the jobs that did not finish (:func:`unfinished_labels`)."""
    if pid is None:
        return None
    head = f"shiftwork: the run was stopped by SIGTERM (sent to the main Snakemake process, PID {pid})"
    rest = "the jobs still waiting were not started. Run the same command again to continue"
    if not unfinished:
        return f"{head}; no job failed. The jobs that were running were let finish and their outputs kept; {rest}."
    jobs = "1 job" if len(unfinished) == 1 else f"{len(unfinished)} jobs"
    return (
        f"{head}, and {jobs} did not finish: {'; '.join(unfinished)}. A job fails like this "
        "when the signal reached it too (a kill of the whole process group, a scheduler's time "
        "limit) or for a reason of its own; Snakemake's error above and the job's log say "
        "which. The other jobs that were running were let finish and their outputs kept; "
        f"{rest}: it runs the jobs that did not finish again."
    )


def stop_status(pid: int | None, unfinished: Sequence[str]) -> int | None:
    """The exit status a run stopped by SIGTERM ends with when every job it started finished
    (:data:`STOPPED_STATUS`); None when it got no SIGTERM or a job did not finish, and
    Snakemake's own ending (status 1) is true."""
    if pid is None or unfinished:
        return None
    return STOPPED_STATUS
