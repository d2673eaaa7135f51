"""Send a job's messages to its Snakemake log file."""

from __future__ import annotations

import contextlib
import logging
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path

from shiftwork.writers import hold_job

LOGGER = logging.getLogger("shiftwork")


@contextlib.contextmanager
def log_to(path: str | Path | None) -> Iterator[logging.Logger]:
    """Route stderr and the ``shiftwork`` logger to ``path``; a failure's traceback lands there too.
    The job first takes its lock (:func:`shiftwork.writers.hold_job`), so that a second copy of it
    stops before it truncates the first one's log."""
    if path is None:
        yield LOGGER
        return
    hold_job(path)
    with open(path, "w", buffering=1) as fh:
        old_stderr = sys.stderr
        sys.stderr = fh
        handler = logging.StreamHandler(fh)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        LOGGER.addHandler(handler)
        LOGGER.setLevel(logging.INFO)
        try:
            yield LOGGER
        except SystemExit:
            raise  # a deliberate exit (short_errors) has logged its message already
        except BaseException:
            traceback.print_exc(file=fh)
            raise
        finally:
            LOGGER.removeHandler(handler)
            sys.stderr = old_stderr


@contextlib.contextmanager
def short_errors(*kinds: type[BaseException]) -> Iterator[None]:
    """Turn an error of ``kinds`` (one whose message already says what to do) into an exit with
    status 1 that prints just that message, in the log and on stderr, without a traceback."""
    try:
        yield
    except kinds as err:
        LOGGER.error("%s", err)
        raise SystemExit(str(err)) from None
