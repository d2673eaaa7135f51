"""The cross-study's config checks (composed by :mod:`shiftwork.config`): the runs it reads are runs
of this config's trajectory and organisms studies, and the stability section it takes its
variants, gate and axes from is there."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shiftwork.organisms.config import organism_runs
from shiftwork.schema import suggest
from shiftwork.trajectory.config import expand_runs


def crossstudy_errors(config: Mapping[str, Any]) -> list[str]:
    """The cross-study's runs must be runs of this config's trajectory or organisms study (expanded
    names: a seeded organisms run is ``<run>-s<seed>``), and it needs the stability section (its
    variants, gate and axes)."""
    cross = config.get("crossstudy")
    if not cross:
        return []
    errors = (
        []
        if config.get("stability")
        else ["config key 'crossstudy': needs the 'stability' section (variants, gate, axes)"]
    )
    for study, names in study_runs(config).items():
        for i, run in enumerate((cross.get(study) or {}).get("runs") or []):
            errors += run_name_errors(f"crossstudy.{study}.runs.{i}", run, study, names)
    return errors


def study_runs(config: Mapping[str, Any]) -> dict[str, set[str]]:
    """The expanded run names of the config's trajectory and organisms studies (none for a study
    the config has no section for)."""
    return {
        "trajectory": set(expand_runs(config.get("trajectory") or {})[0]) if config.get("trajectory") else set(),
        "organisms": set(organism_runs(config.get("organisms") or {})) if config.get("organisms") else set(),
    }


def run_name_errors(key: str, run: Any, study: str, names: set[str]) -> list[str]:
    """The error of config key ``key`` naming ``run``, which is not a run of ``study``, or none."""
    if run in names:
        return []
    return [
        f"config key '{key}': '{run}' is not a run of the {study} study; its runs are {sorted(names)}"
        + suggest(str(run), names)
    ]
