"""Progress of a long job in its log: how many of how many units are done, how fast, and an
estimate of the time left (from the rate so far), so that a slow job can be told from a stuck one.

A :class:`Progress` logs a line when it starts, then at most once every ``interval`` seconds or
when another ``fraction`` of the work is done, whichever comes first, and a last line when the
count reaches the total; counting is a few arithmetic operations, so it may be updated per item.
:func:`report_training` does the same for a Hugging Face (or TRL) trainer and writes its metrics
to the job log instead of printing them to the console.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from typing import Any

from shiftwork.logs import LOGGER

INTERVAL_S = 30.0
"""Seconds between two progress lines at most (unless a fraction mark comes first)."""
FRACTION = 0.1
"""A line whenever another tenth of the work is done."""


def duration(seconds: float) -> str:
    """``seconds`` as ``42s``, ``5m02s`` or ``1h02m03s``, rounded to the second."""
    s = int(round(max(seconds, 0.0)))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    if h:
        return f"{h}h{m:02d}m{s:02d}s"
    if m:
        return f"{m}m{s:02d}s"
    return f"{s}s"


def pace(per_second: float) -> str:
    """A rate as units per second, or as seconds per unit when under one per second."""
    if per_second >= 1:
        return f"{per_second:.3g}/s"
    return f"{1 / per_second:.3g} s each"


class Progress:
    """Counts ``total`` units of ``what`` (``unit`` names them in the lines) and logs how far it got.

    ``start`` is the count already done before this job (a resumed training run): the rate and the
    time left count only the units done here. ``clock`` returns seconds (a test passes its own)."""

    def __init__(
        self,
        what: str,
        total: int,
        unit: str = "",
        logger: logging.Logger = LOGGER,
        interval: float = INTERVAL_S,
        fraction: float = FRACTION,
        start: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ):
        if interval <= 0 or not 0 < fraction <= 1:
            raise ValueError(f"interval must be > 0 and fraction in (0, 1], got {interval} and {fraction}")
        self.what, self.total, self.unit = what, int(total), f" {unit}" if unit else ""
        self.logger, self.interval, self.fraction, self.clock = logger, float(interval), float(fraction), clock
        self.first = self.done = int(start)
        self.started = self.last_time = clock()
        self.last_mark = self._mark()
        self.last_count: int | None = None
        if self.total > 0:
            self._emit(self.started)

    def _mark(self) -> int:
        """How many whole ``fraction`` steps of the total are done."""
        return math.floor(self.done / self.total / self.fraction + 1e-9) if self.total > 0 else 0

    def line(self, now: float | None = None) -> str:
        """The progress line for the count so far, at time ``now`` (the clock's if None)."""
        now = self.clock() if now is None else now
        elapsed = now - self.started
        share = 100 * self.done / self.total if self.total > 0 else 100.0
        head = f"{self.what}: {self.done}/{self.total}{self.unit} ({share:.1f}%)"
        rate = (self.done - self.first) / elapsed if elapsed > 0 else 0.0
        if self.done >= self.total:
            return f"{head} done in {duration(elapsed)}" + (f", {pace(rate)}" if rate > 0 else "")
        if rate <= 0:
            return f"{head}, {duration(elapsed)} elapsed, ETA unknown"
        eta = (self.total - self.done) / rate
        return f"{head}, {duration(elapsed)} elapsed, {pace(rate)}, ETA {duration(eta)}"

    def _emit(self, now: float, extra: str = "") -> None:
        self.logger.info("%s%s", self.line(now), f" | {extra}" if extra else "")
        self.last_time, self.last_mark, self.last_count = now, self._mark(), self.done

    def _due(self, now: float) -> bool:
        if self.done == self.last_count:
            return False
        return self.done >= self.total or now - self.last_time >= self.interval or self._mark() > self.last_mark

    def set(self, count: int) -> None:
        """The count is now ``count``; logs a line if one is due."""
        self.done = int(count)
        if self.total > 0:
            now = self.clock()
            if self._due(now):
                self._emit(now)

    def update(self, n: int = 1) -> None:
        """``n`` more units are done; logs a line if one is due."""
        self.set(self.done + n)

    def report(self, extra: str = "") -> None:
        """Logs the line now, whether due or not, followed by ``extra`` (e.g. training metrics)."""
        self._emit(self.clock(), extra)

    def close(self) -> None:
        """Logs the last count unless its line is out already (e.g. a run that stopped early)."""
        if self.total > 0 and self.done != self.last_count:
            self._emit(self.clock())


def tracked(items: Iterable[Any], progress: Progress, size: Callable[[Any], int] = len) -> Iterable[Any]:
    """Yields ``items``, counting ``size(item)`` units of ``progress`` once each item's work is done."""
    for item in items:
        yield item
        progress.update(size(item))
    progress.close()


def metrics_text(logs: Mapping[str, Any]) -> str:
    """A trainer's logged metrics as ``name value`` pairs, numbers to 4 significant digits."""
    shown = []
    for key, value in logs.items():
        if key == "total_flos" or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        shown.append(f"{key} {value:.4g}" if isinstance(value, float) else f"{key} {value}")
    return ", ".join(shown)


@cache
def _callback_class() -> type:
    from transformers import TrainerCallback

    class TrainingProgress(TrainerCallback):
        """Steps done of ``max_steps``, the time left, and the metrics at each logging step, in the job log."""

        def __init__(self, what: str, logger: logging.Logger, interval: float, clock: Callable[[], float]):
            self.what, self.logger, self.interval, self.clock = what, logger, interval, clock
            self.progress: Progress | None = None

        def on_train_begin(self, args, state, control, **kwargs):
            self.progress = Progress(
                self.what,
                state.max_steps,
                "steps",
                self.logger,
                self.interval,
                start=state.global_step,
                clock=self.clock,
            )

        def on_step_begin(self, args, state, control, **kwargs):
            # the steps finished so far; a step that logs metrics reports in on_log instead
            if self.progress is not None:
                self.progress.set(state.global_step)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if self.progress is not None:
                self.progress.done = state.global_step
                self.progress.report(metrics_text(logs or {}))

        def on_train_end(self, args, state, control, **kwargs):
            if self.progress is not None:
                self.progress.done = state.global_step
                self.progress.close()

    return TrainingProgress


def training_callback(
    what: str,
    logger: logging.Logger = LOGGER,
    interval: float = INTERVAL_S,
    clock: Callable[[], float] = time.monotonic,
):
    """A ``transformers.TrainerCallback`` that logs the steps done of ``max_steps`` with the time
    left (throttled as :class:`Progress`), and every logging step's metrics with them."""
    return _callback_class()(what, logger, interval, clock)


def report_training(trainer, what: str, logger: logging.Logger = LOGGER, interval: float = INTERVAL_S) -> None:
    """Makes ``trainer`` report its progress and metrics to ``logger`` (:func:`training_callback`)
    rather than print them: the console printer and progress bar a Trainer adds are removed."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for console in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(console)
    trainer.add_callback(training_callback(what, logger, interval))
