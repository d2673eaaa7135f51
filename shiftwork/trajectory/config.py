"""The trajectory study's run naming and config checks (composed by :mod:`shiftwork.config`): the
runs a ``trajectory`` section stands for (explicit and from the grid), their fine-tuning
schedules and checkpoint steps, and the problems the schema cannot see."""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Mapping
from typing import Any

from shiftwork.schema import ConfigError, unknown_name
from shiftwork.trajectory.schedule import checkpoint_steps
from shiftwork.trajectory.tasks import pattern_problem

RUN_NAME = "{model}-{suite}-k{shots}-s{seed}"


def grid_runs(name: str, grid: Mapping[str, Any]) -> dict[str, dict]:
    """The runs that the entry ``trajectory.grid.NAME`` stands for: one per (model, suite, shots,
    seed), named :data:`RUN_NAME`, fine-tuned with the entry's ``finetune`` settings on ``shots``
    ID training examples (``finetune.n_train``). Each run records its model, suite, shots, seed
    and grid, so that results can be grouped by any of them."""
    runs = {}
    for model, suite, shots, seed in itertools.product(grid["models"], grid["suites"], grid["shots"], grid["seeds"]):
        run = RUN_NAME.format(model=model, suite=suite, shots=shots, seed=seed)
        finetune = copy.deepcopy(dict(grid["finetune"]))
        finetune["n_train"] = int(shots)
        runs[run] = {
            "model": model,
            "suite": suite,
            "shots": int(shots),
            "seed": int(seed),
            "grid": name,
            "finetune": finetune,
        }
    return runs


def finetune_schedule(settings: Mapping[str, Any]) -> dict:
    """Fine-tuning ``settings`` with its length (``steps``) and checkpoint cadence
    (``checkpoint_every``) in optimiser steps. Either may be given in epochs (``epochs``,
    ``checkpoint_every_epochs``): an epoch is ceil(n_train / batch_size) steps, as the Trainer
    walks n_train examples in batches of batch_size. Raises ValueError naming what is missing."""
    out = copy.deepcopy(dict(settings))
    for steps_key, epochs_key in (("steps", "epochs"), ("checkpoint_every", "checkpoint_every_epochs")):
        if (steps_key in out) == (epochs_key in out):
            raise ValueError(f"give exactly one of '{steps_key}' or '{epochs_key}'")
    if "epochs" in out or "checkpoint_every_epochs" in out:
        if "n_train" not in out:
            raise ValueError(
                "'epochs' and 'checkpoint_every_epochs' count passes over n_train examples; set 'n_train' "
                "(a grid's shots set it)"
            )
        per_epoch = math.ceil(int(out["n_train"]) / int(out["batch_size"]))
        if "epochs" in out:
            out["steps"] = int(out["epochs"]) * per_epoch
        if "checkpoint_every_epochs" in out:
            out["checkpoint_every"] = int(out["checkpoint_every_epochs"]) * per_epoch
    return out


def run_key(run: str, key: str) -> str:
    """Where to point at ``run`` made by config key ``key``: an explicit run is its own key, a
    grid run is named after its grid entry's key."""
    return key if key.startswith("trajectory.runs.") else f"{key} (run '{run}')"


def expand_runs(traj: Mapping[str, Any]) -> tuple[dict[str, dict], dict[str, str], list[str]]:
    """Every run of a ``trajectory`` section (defaults filled in): the explicit ``runs`` and the
    runs of every ``grid`` entry (:func:`grid_runs`), each with its fine-tuning schedule in steps
    (:func:`finetune_schedule`) and its ``shots`` (``finetune.n_train``, None when it is not
    set). Returns the runs, the config key each one comes from, and the problems found: a run
    name made twice, a grid that sets ``n_train`` itself, a schedule that cannot be resolved."""
    runs: dict[str, dict] = {}
    keys: dict[str, str] = {}
    for name, spec in (traj.get("runs") or {}).items():
        run = copy.deepcopy(dict(spec))
        run["shots"] = (spec.get("finetune") or {}).get("n_train")
        runs[name], keys[name] = run, f"trajectory.runs.{name}"
    errors = _add_grid_runs(traj.get("grid") or {}, runs, keys)
    errors += _resolve_schedules(runs, keys)
    return runs, keys, errors


def _add_grid_runs(grid: Mapping[str, Any], runs: dict[str, dict], keys: dict[str, str]) -> list[str]:
    """Add the runs of every grid entry to ``runs`` and ``keys``, skipping a name made before;
    return the problems (that name, a grid setting ``n_train``)."""
    errors = []
    for grid_name, entry in grid.items():
        key = f"trajectory.grid.{grid_name}"
        if "n_train" in entry["finetune"]:
            errors.append(f"config key '{key}.finetune.n_train': a grid's shots set n_train; remove it")
        for name, run in grid_runs(grid_name, entry).items():
            if name in runs:
                errors.append(
                    f"config key '{key}': run '{name}' is also made by '{keys[name]}'; run names must be unique"
                )
                continue
            runs[name], keys[name] = run, key
    return errors


def _resolve_schedules(runs: dict[str, dict], keys: Mapping[str, str]) -> list[str]:
    """Turn every fine-tuned run's schedule into steps in place; return the schedules that cannot be."""
    errors = []
    for name, run in runs.items():
        if "finetune" in run:
            try:
                run["finetune"] = finetune_schedule(run["finetune"])
            except ValueError as err:
                errors.append(f"config key '{run_key(name, keys[name])}.finetune': {err}")
    return errors


def trajectory_runs(traj: Mapping[str, Any]) -> dict[str, dict]:
    """The runs of a ``trajectory`` section (defaults filled in), explicit and from the grid
    (:func:`expand_runs`); raise :class:`ConfigError` if they cannot be made."""
    runs, _, errors = expand_runs(traj)
    if errors:
        raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(errors))
    return runs


def run_steps(run: Mapping[str, Any]) -> list[int]:
    """Checkpoint steps of a trajectory run: from its fine-tuning schedule or its checkpoint list."""
    if "finetune" in run:
        return checkpoint_steps(int(run["finetune"]["steps"]), int(run["finetune"]["checkpoint_every"]))
    return sorted(int(c["step"]) for c in run.get("checkpoints") or [])


def trajectory_errors(config: Mapping[str, Any], models: set[str]) -> list[str]:
    """Problems of the ``trajectory`` section that the schema cannot see: unknown models and
    suites, grid expansions that clash, too few checkpoints, prompt patterns that cannot be filled."""
    if "trajectory" not in config:
        return []
    traj = config["trajectory"] or {}
    suites = set(traj.get("suites") or {})
    # check_config fills the schema's defaults in first (windows: true)
    windows = bool(traj["analysis"]["windows"]) if "analysis" in traj else True
    errors = pattern_errors(traj)
    errors += grid_name_errors(traj, models, suites)
    runs, keys, expansion = expand_runs(traj)
    errors += expansion
    for run, spec in (traj.get("runs") or {}).items():
        errors += explicit_run_errors(run, spec, models, suites)
    for run, spec in runs.items():
        errors += checkpoint_count_errors(run, keys[run], spec, windows)
    if not runs:
        errors.append("config key 'trajectory': no runs; list them under 'trajectory.runs' or 'trajectory.grid'")
    return errors


def pattern_errors(traj: Mapping[str, Any]) -> list[str]:
    """Suite prompt patterns that cannot be filled."""
    errors = []
    for name, suite in (traj.get("suites") or {}).items():
        problem = pattern_problem(suite["pattern"])
        if problem:
            errors.append(f"config key 'trajectory.suites.{name}.pattern': {problem}")
    return errors


def grid_name_errors(traj: Mapping[str, Any], models: set[str], suites: set[str]) -> list[str]:
    """Grid entries naming models or suites that are not defined."""
    errors = []
    for name, grid in (traj.get("grid") or {}).items():
        for i, model in enumerate(grid["models"]):
            errors += unknown_name(f"trajectory.grid.{name}.models.{i}", model, models, "model")
        for i, suite in enumerate(grid["suites"]):
            errors += unknown_name(f"trajectory.grid.{name}.suites.{i}", suite, suites, "suite")
    return errors


def explicit_run_errors(run: str, spec: Mapping[str, Any], models: set[str], suites: set[str]) -> list[str]:
    """An explicit run's model and suite are defined, and it gives either a fine-tuning or a
    checkpoint list whose entries each give either a path or a hub id."""
    key = f"trajectory.runs.{run}"
    errors = unknown_name(f"{key}.model", spec.get("model"), models, "model")
    errors += unknown_name(f"{key}.suite", spec.get("suite"), suites, "suite")
    if ("finetune" in spec) == ("checkpoints" in spec):
        errors.append(f"config key '{key}': give exactly one of 'finetune' or 'checkpoints'")
    for i, ck in enumerate(spec.get("checkpoints") or []):
        if ("path" in ck) == ("hub" in ck):
            errors.append(f"config key '{key}.checkpoints.{i}': give exactly one of 'path' or 'hub'")
    return errors


def checkpoint_count_errors(run: str, key: str, spec: Mapping[str, Any], windows: bool) -> list[str]:
    """A run has the checkpoints its analysis needs: 4 for partial correlations, 8 with the
    early/late windows. A run whose checkpoints are not given right is reported elsewhere."""
    if ("finetune" in spec) == ("checkpoints" in spec):
        return []
    if "finetune" in spec and not {"steps", "checkpoint_every"} <= set(spec["finetune"]):
        return []  # the schedule could not be resolved: reported by expand_runs
    n = len(run_steps(spec))
    where = run_key(run, key)
    if n < 4:
        return [f"config key '{where}': {n} checkpoints; partial correlations need at least 4"]
    if windows and n < 8:
        return [
            f"config key '{where}': {n} checkpoints; the early/late window analysis needs at least 8 "
            "(4 in each half); give the run more checkpoints or set trajectory.analysis.windows: false"
        ]
    return []
