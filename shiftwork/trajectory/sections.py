"""The trajectory study's typed settings: one frozen object per config section (:mod:`shiftwork.settings`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shiftwork.settings import Section


@dataclass(frozen=True)
class BootstrapSettings(Section, section=("trajectory", "analysis", "bootstrap")):
    """The item bootstrap of the primary partial correlations: ``resamples`` resamples (0: none)
    from generator seed ``seed``; the test sets of each ``together`` group share their draws."""

    resamples: int
    seed: int
    together: Sequence[Sequence[str]]


@dataclass(frozen=True)
class CalibrationSettings(Section, section=("trajectory", "analysis", "calibration")):
    """The calibration of the pair analysis (:mod:`shiftwork.trajectory.calibration`): ``replicates``
    null runs per run, and as many per planted coupling size ``planted_sd`` (log odds), from
    generator seed ``seed``."""

    replicates: int
    seed: int
    planted_sd: Sequence[float]


@dataclass(frozen=True)
class AnalysisSettings(Section, section=("trajectory", "analysis"), exclude=("windows", "calibration")):
    """The pair analysis of rule analyse_trajectory: significance level ``alpha``, the spline
    control's ``spline_df``, the primary ``method``, the GAM's ``gam_df``, the ``score`` it reads
    (:data:`~shiftwork.trajectory.scores.SCORES`) and how it counts serially dependent checkpoints
    (``dependence``, :data:`~shiftwork.trajectory.dependence.DEPENDENCE`), the share of one label in
    a checkpoint's predictions at which it is left out (``pinned``; None: none is); ``bootstrap`` is its
    subsection as given (:attr:`boot` reads it). ``windows`` is left to the rules, which add the
    early/late window table of rule plot_trajectory when it is on, and ``calibration`` to
    :class:`CalibrationSettings` (rule calibrate_trajectory)."""

    alpha: float
    spline_df: int
    method: str
    gam_df: int
    score: str
    dependence: str
    pinned: float | None
    bootstrap: Mapping[str, Any]

    @property
    def boot(self) -> BootstrapSettings:
        """The ``bootstrap`` subsection as its settings."""
        return BootstrapSettings.from_config(self.bootstrap)
