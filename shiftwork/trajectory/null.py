"""Null runs shaped like a real run: test sets that share nothing beyond the ID trajectory and
the label lean.

A run's checkpoints are scored on one ID set and several OOD sets. What would the pair analysis
report if the OOD sets were not coupled at all, only carried along by what every set of the run
shares? :class:`NullModel` describes such a run, and :func:`simulate_runs` draws its scores.

The model
---------
Every test set is a list of *cells*, one per gold label it holds (a label-split set has one,
a balanced set two). At checkpoint ``t`` an item of cell ``c`` (set ``s``, label sign
``g = +1`` for entailment and ``-1`` otherwise) is answered correctly with probability

``p_c(t) = expit(level_c + slope_c * zid(t) + g * lean(t) + u_s(t))``

and each cell's ``n_c`` items are drawn binomially. ``zid`` is the run's ID accuracy,
standardised, and kept as the real run had it; ``lean(t)`` is the checkpoints' shared lean
towards "entailment" on the logit scale (a lean raises one label's accuracy and lowers the
other's); ``u_s`` is the set's own component, a stationary AR(1) series (coefficient ``phi``,
standard deviation ``sigma_s``), independent between sets. Sets are therefore coupled only
through ID and the lean: a pair analysis that finds a Holm-significant pair here has found
something the design built in. A planted coupling (:class:`Coupling`) replaces the own
component of two sets adds one shared AR(1) series to both.

:func:`fit_null` fits the model to a real run's items: per cell the level and ID slope (OLS of
the cell's empirical logit accuracy on ``[1, zid]``, after the lean), the lean (the label-signed
mean of all cells' residuals, ID cells included: a balanced ID set shows the lean plainly),
``phi`` (the mean lag-1 autocorrelation of the sets' residual series) and ``sigma_s`` (the
residual variance left after the binomial variance the cells' sizes explain).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.special import expit

from shiftwork.tables import read_table
from shiftwork.trajectory.scores import empirical_logit, lean_free_from_means

__all__ = [
    "Coupling",
    "NullModel",
    "fit_null",
    "model_from_record",
    "model_record",
    "scores_frame",
    "set_scores",
    "simulate_runs",
    "with_design",
]

ENTAILMENT = "entailment"
SCORES = ("balanced_accuracy", "accuracy", "lean_free_accuracy")
"""What a simulated set's score is: the mean of its labels' accuracies, its raw accuracy, or the
accuracy at the mean of its labels' log odds (:func:`~shiftwork.trajectory.scores.lean_free_from_means`)."""
MAX_PHI = 0.95
"""Largest AR(1) coefficient :func:`fit_null` keeps (a series that never forgets has no stationary null)."""


@dataclass(frozen=True)
class Coupling:
    """A planted coupling: sets ``a`` and ``b`` share one more component, a stationary AR(1)
    series (the model's ``phi``) of standard deviation ``sd`` on the log-odds scale, added to
    both with the same sign (a skill both sets draw on)."""

    a: str
    b: str
    sd: float


@dataclass(frozen=True)
class NullModel:
    """A run's null (see the module notes). ``sets`` names the test sets, ID first; cell ``k`` is
    label sign ``cell_sign[k]`` of set ``sets[cell_set[k]]`` with ``cell_n[k]`` items."""

    id_skill: np.ndarray
    id_hits: np.ndarray
    lean: np.ndarray
    sets: tuple[str, ...]
    cell_set: np.ndarray
    cell_sign: np.ndarray
    cell_n: np.ndarray
    level: np.ndarray
    slope: np.ndarray
    phi: float
    sigma: np.ndarray
    steps: np.ndarray = field(default_factory=lambda: np.array([], dtype=int))

    def __post_init__(self) -> None:
        t = len(self.id_skill)
        if len(self.lean) != t:
            raise ValueError(f"NullModel: lean has {len(self.lean)} checkpoints, id_skill {t}")
        cells = len(self.cell_set)
        for name in ("cell_sign", "cell_n", "level", "slope"):
            if len(getattr(self, name)) != cells:
                raise ValueError(f"NullModel: {name} has {len(getattr(self, name))} cells, cell_set {cells}")
        if len(self.sigma) != len(self.sets):
            raise ValueError(f"NullModel: sigma has {len(self.sigma)} sets, sets {len(self.sets)}")
        if not 0.0 <= self.phi < 1.0:
            raise ValueError(f"NullModel: phi must be in [0, 1), got {self.phi!r}")
        if len(self.steps) not in (0, t):
            raise ValueError(f"NullModel: steps has {len(self.steps)} values, id_skill {t}")


def _z(values: np.ndarray) -> np.ndarray:
    sd = float(np.std(values))
    return (values - values.mean()) / sd if sd > 0.0 else np.zeros_like(values, dtype=float)


def _ar1(rng: np.random.Generator, shape: tuple[int, ...], phi: float) -> np.ndarray:
    """Stationary unit-variance AR(1) series along the last axis of ``shape``."""
    eps = rng.standard_normal(shape)
    out = np.empty(shape)
    out[..., 0] = eps[..., 0]
    scale = math.sqrt(1.0 - phi * phi)
    for t in range(1, shape[-1]):
        out[..., t] = phi * out[..., t - 1] + scale * eps[..., t]
    return out


def _own_components(
    model: NullModel, rng: np.random.Generator, replicates: int, coupling: Coupling | None
) -> np.ndarray:
    """``(replicates, sets, checkpoints)`` own components; set 0 (ID) carries none."""
    t = len(model.id_skill)
    own = _ar1(rng, (replicates, len(model.sets), t), model.phi) * model.sigma[None, :, None]
    if coupling is not None:
        if not (math.isfinite(coupling.sd) and coupling.sd >= 0.0):
            raise ValueError(f"Coupling: sd must be a number >= 0, got {coupling.sd!r}")
        shared = _ar1(rng, (replicates, t), model.phi) * float(coupling.sd)
        for name in (coupling.a, coupling.b):
            own[:, model.sets.index(name)] += shared
    own[:, 0] = 0.0
    return own


def simulate_runs(
    model: NullModel,
    rng: np.random.Generator,
    replicates: int,
    score: str = "balanced_accuracy",
    coupling: Coupling | None = None,
) -> np.ndarray:
    """``(replicates, checkpoints, sets)`` simulated scores, sets in ``model.sets`` order. The ID
    column is the run's own ID accuracy in every replicate (the analysis controls for it as
    observed); each OOD set's column is its ``score`` (:data:`SCORES`) over its cells' draws."""
    if score not in SCORES:
        raise ValueError(f"simulate_runs: score must be one of {list(SCORES)}, got {score!r}")
    if coupling is not None:
        for name in (coupling.a, coupling.b):
            if name not in model.sets[1:]:
                raise ValueError(
                    f"simulate_runs: the coupling names {name!r}, not an OOD set of {list(model.sets[1:])}"
                )
    zid = _z(np.asarray(model.id_skill, dtype=float))
    own = _own_components(model, rng, int(replicates), coupling)  # (R, S, T)
    eta = (
        model.level[None, :, None]
        + model.slope[None, :, None] * zid[None, None, :]
        + model.cell_sign[None, :, None] * model.lean[None, None, :]
        + own[:, model.cell_set, :]
    )  # (R, C, T)
    n = model.cell_n[None, :, None]
    hits = rng.binomial(np.broadcast_to(n, eta.shape), expit(eta))
    id_cells = np.flatnonzero(model.cell_set == 0)
    hits[:, id_cells] = model.id_hits[None]
    return np.stack(
        [set_scores(hits, model.cell_n, model.cell_set == s, score) for s in range(len(model.sets))], axis=-1
    )


def set_scores(hits: np.ndarray, n: np.ndarray, cells: np.ndarray, score: str) -> np.ndarray:
    """The ``score`` of the set made of the ``cells`` (a mask over axis -2 of ``hits``, whose
    last axis is the checkpoints; ``n`` the cells' item counts)."""
    part, size = hits[..., cells, :], n[cells][:, None]
    if score == "accuracy":
        return part.sum(axis=-2) / size.sum()
    if score == "balanced_accuracy":
        return (part / size).mean(axis=-2)
    return lean_free_from_means(part / size, size)


def scores_frame(
    sims: np.ndarray, sets: Sequence[str], steps: Sequence[int] | None = None, model: Hashable = "null"
) -> pd.DataFrame:
    """The simulated replicates as a ``scores`` table of the pair analysis: replicate ``k`` is run
    ``"null-<k>"`` of ``model``, set 0 its ID set."""
    reps, t, s = sims.shape
    step = np.arange(t) if steps is None or len(steps) == 0 else np.asarray(steps)
    return pd.DataFrame(
        {
            "model": model,
            "run": np.repeat([f"null-{k:04d}" for k in range(reps)], t * s),
            "step": np.tile(np.repeat(step, s), reps),
            "testset": np.tile(np.asarray(sets, dtype=object), reps * t),
            "accuracy": sims.reshape(-1),
            "role": np.tile(np.where(np.arange(s) == 0, "id", "ood"), reps * t),
        }
    )


# --------------------------------------------------------------------------- fitting a run


def _cells(items: pd.DataFrame, id_set: str, steps: Sequence[int]) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Per cell (set, label): its items at each step, as (cells frame, hits (C, T), n (C,))."""
    grouped = items.groupby(["set", "label", "step"], sort=True)["correct"].agg(["sum", "size"]).reset_index()
    hits = grouped.pivot(index=["set", "label"], columns="step", values="sum").reindex(columns=list(steps))
    sizes = grouped.pivot(index=["set", "label"], columns="step", values="size").reindex(columns=list(steps))
    if hits.isna().any().any() or (sizes.nunique(axis=1) > 1).any():
        raise ValueError("fit_null: every checkpoint must be scored on the same items")
    cells = hits.index.to_frame(index=False)
    order = sorted(
        range(len(cells)), key=lambda k: (cells["set"][k] != id_set, str(cells["set"][k]), str(cells["label"][k]))
    )
    cells = cells.iloc[order].reset_index(drop=True)
    return cells, hits.to_numpy(dtype=float)[order], sizes.to_numpy(dtype=float)[order, 0]


def _ols_residuals(y: np.ndarray, design: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    beta, *_ = np.linalg.lstsq(design, y.T, rcond=None)
    return beta.T, y - (design @ beta).T


def _lag1(series: np.ndarray) -> float:
    centred = series - series.mean()
    den = float(centred @ centred)
    return float(centred[1:] @ centred[:-1]) / den if den > 0.0 else 0.0


def fit_null(items: pd.DataFrame, run: Hashable, id_set: str) -> NullModel:
    """The :class:`NullModel` of run ``run`` fitted to its ``items`` (columns ``run``, ``step``,
    ``set``, ``label``, ``correct``; every checkpoint scored on the same items), ``id_set`` its
    ID set. See the module notes for the fit."""
    rows = items[items["run"] == run]
    if rows.empty:
        raise ValueError(f"fit_null: the items table has no rows of run {run!r}")
    steps = sorted(rows["step"].unique())
    cells, hits, n = _cells(rows, id_set, steps)
    if not (cells["set"] == id_set).any():
        raise ValueError(f"fit_null: run {run!r} has no items of its ID set {id_set!r}")
    sets = tuple(dict.fromkeys(cells["set"]))
    cell_set = np.array([sets.index(s) for s in cells["set"]])
    sign = np.where(cells["label"].to_numpy() == ENTAILMENT, 1.0, -1.0)
    id_cells = cell_set == 0
    y = empirical_logit(hits, n[:, None])
    id_skill = y[id_cells].mean(axis=0)
    design = np.column_stack([np.ones(len(steps)), _z(id_skill)])
    _, resid = _ols_residuals(y, design)
    lean = (sign[:, None] * resid).mean(axis=0)
    beta, resid = _ols_residuals(y - sign[:, None] * lean[None, :], design)
    own = np.array([resid[cell_set == s].mean(axis=0) for s in range(len(sets))])
    phi = float(np.clip(np.mean([_lag1(own[s]) for s in range(1, len(sets))]), 0.0, MAX_PHI))
    p = expit(y)
    binomial = np.array(
        [
            np.mean(1.0 / (n[cell_set == s, None] * p[cell_set == s] * (1 - p[cell_set == s]))) / np.sum(cell_set == s)
            for s in range(len(sets))
        ]
    )
    sigma = np.sqrt(np.maximum(own.var(axis=1, ddof=2) - binomial, 0.0))
    sigma[0] = 0.0
    return NullModel(
        id_skill=id_skill,
        id_hits=hits[id_cells],
        lean=lean,
        sets=sets,
        cell_set=cell_set,
        cell_sign=sign,
        cell_n=n.astype(int),
        level=beta[:, 0],
        slope=beta[:, 1],
        phi=phi,
        sigma=sigma,
        steps=np.asarray(steps),
    )


def with_design(model: NullModel, design: Mapping[str, Sequence[str]], n_items: int) -> NullModel:
    """``model`` with its OOD sets replaced by ``design`` (set name -> the gold labels it holds,
    ``n_items // len(labels)`` items each): the same run (ID trajectory, lean, ``phi``) asked of
    another suite. A cell takes the mean level and ID slope of ``model``'s OOD cells of its label
    and its set the own-component ``sigma`` of ``model``'s set of that name, else their mean."""
    ood = model.cell_set > 0
    sets = (model.sets[0], *design)
    cell_set, sign, n, level, slope = [], [], [], [], []
    for k in np.flatnonzero(~ood):
        cell_set.append(0), sign.append(model.cell_sign[k]), n.append(model.cell_n[k])
        level.append(model.level[k]), slope.append(model.slope[k])
    for s, labels in enumerate(design.values(), start=1):
        if not labels:
            raise ValueError(f"with_design: set {sets[s]!r} holds no label")
        for label in labels:
            g = 1.0 if label == ENTAILMENT else -1.0
            like = ood & (model.cell_sign == g)
            if not like.any():
                raise ValueError(f"with_design: the model has no OOD cell of label {label!r} to take a level from")
            cell_set.append(s), sign.append(g), n.append(n_items // len(labels))
            level.append(float(model.level[like].mean())), slope.append(float(model.slope[like].mean()))
    mean_sigma = float(model.sigma[1:].mean()) if len(model.sets) > 1 else 0.0
    sigma = [0.0] + [float(model.sigma[model.sets.index(s)]) if s in model.sets[1:] else mean_sigma for s in design]
    return NullModel(
        id_skill=model.id_skill,
        id_hits=model.id_hits,
        lean=model.lean,
        sets=sets,
        cell_set=np.array(cell_set),
        cell_sign=np.array(sign),
        cell_n=np.array(n, dtype=int),
        level=np.array(level),
        slope=np.array(slope),
        phi=model.phi,
        sigma=np.array(sigma),
        steps=model.steps,
    )


def model_record(model: NullModel) -> dict:
    """``model`` as plain lists and numbers (JSON), :func:`model_from_record`'s inverse."""
    out = {}
    for f in dataclasses.fields(model):
        value = getattr(model, f.name)
        out[f.name] = value.tolist() if isinstance(value, np.ndarray) else list(value) if f.name == "sets" else value
    return out


def model_from_record(record: Mapping) -> NullModel:
    """The :class:`NullModel` of a :func:`model_record`."""
    values = {f.name: record[f.name] for f in dataclasses.fields(NullModel)}
    arrays = {k: np.asarray(v) for k, v in values.items() if k not in ("sets", "phi")}
    return NullModel(**arrays, sets=tuple(values["sets"]), phi=float(values["phi"]))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m shiftwork.trajectory.null ITEMS RUN ID_SET OUT``: the null fitted to run RUN of
    an items table, written to OUT as JSON (a fixture of the tests, say)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    for name in ("items", "run", "id_set", "out"):
        parser.add_argument(name)
    args = parser.parse_args(argv)
    model = fit_null(read_table(args.items), args.run, args.id_set)
    with open(args.out, "w") as handle:
        json.dump(model_record(model), handle, indent=1)
        handle.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
