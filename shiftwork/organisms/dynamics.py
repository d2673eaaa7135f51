"""Weight dynamics of a mixture of fixed policies trained by RL on one distribution.

The model is a mixture of ``K`` fixed policies, ``pi_w = sum_i w_i pi_i``, with ``w`` on the
probability simplex. On the training distribution policy ``i`` earns expected reward ``r_i``, so
the mixture earns ``J(w) = sum_i w_i r_i = w . r``. RL that only moves the mixture weights is
gradient ascent on this linear ``J`` over the simplex. Three flows are implemented:

``"replicator"`` (canonical)
    ``dw_i/dt = w_i (r_i - J(w))``; :func:`replicator_step` is one Euler step of it. Summing the
    right-hand side gives ``J - J = 0``, so an exact step stays on the simplex (it is renormalised
    anyway, to remove rounding drift). For two components ``i, j`` with ``r_i = r_j`` the step
    multiplies both by the same factor ``1 + lr (r_i - J)``: their ratio is preserved *exactly*,
    in discrete time as well as in the flow. With ``r_i > r_j``, ``d/dt log(w_i / w_j) = r_i - r_j``,
    so every suboptimal component dies at an exponential rate set by its reward gap and the weight
    collects on the optimal set, split among its members in their *initial* ratio.

``"natural"``
    Softmax logits moved by the reward advantage, ``dtheta_i/dt = r_i - J`` (the natural
    gradient / exponentiated-gradient or Hedge update, :func:`softmax_natural_step`). Since
    ``d log w_i/dt = dtheta_i/dt - sum_j w_j dtheta_j/dt = r_i - J``, this *is* the replicator
    flow in continuous time; the discrete steps differ only at ``O(lr)``.

``"softmax"``
    Plain gradient ascent on the logits, ``w = softmax(theta)``, ``dtheta_i/dt = dJ/dtheta_i =
    w_i (r_i - J)`` (:func:`softmax_ascent_step`). This is **not** the replicator flow: it gives
    ``dw_i/dt = w_i (w_i (r_i - J) - sum_j w_j^2 (r_j - J))``, i.e. each logit is slowed by its
    own weight. Same fixed points and the same winner set (suboptimal weights still go to zero,
    but only like ``1/t``, not exponentially), yet different trajectories at matched time
    ``steps * lr``. Among tied optimal components ``d/dt log(w_i / w_j) = (w_i - w_j)(r* - J)``,
    which is positive whenever ``w_i > w_j`` while any suboptimal weight remains: the initially
    larger tied component *gains* share (rich get richer) instead of keeping its ratio.

What the tie behaviour shows (the claim of Proposition 2.1, checked in
``tests/test_organisms_dynamics.py``): under the replicator flow the suboptimal components vanish
and the optimal ones keep their initial ratio exactly, so each tied optimal component ends with
``w_i(0) / sum_{j optimal} w_j(0)`` of the weight -- its share is amplified relative to the
suboptimal components (whose share goes to zero) but not relative to its tied partners. The tie is
fragile: with a small gap ``r = [1, 1 - delta]`` the initially *larger* component is not the
eventual winner -- the higher-reward one always wins, after a time of about
``log(w_big(0) / w_small(0)) / delta``; before that the larger one leads. The plain softmax
gradient breaks exact ties in favour of the initially larger component.

:func:`held_out_accuracy` reads a trajectory on a second, held-out distribution: if policy ``i``
answers there (``a_i = 1``) or not (``a_i = 0``) the mixture answers with probability
``sum_i w_i(t) a_i``. Training on a distribution where a capable policy earns less drives its
weight, and so the held-out accuracy, to zero although that policy is still in the mixture.

:func:`plot_dynamics` draws the weights over steps (and a held-out accuracy on a second axis),
writing PNG (dpi 150) and SVG atomically: a temporary sibling with the same extension in the
same directory, then :func:`os.replace`. The figure is closed also on error.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np

from shiftwork.reports.figures import save_figure

__all__ = [
    "METHODS",
    "SIMPLEX_TOL",
    "held_out_accuracy",
    "plot_dynamics",
    "replicator_step",
    "simulate",
    "softmax",
    "softmax_ascent_step",
    "softmax_natural_step",
]

SIMPLEX_TOL = 1e-9
"""A weight vector is on the simplex when every entry is >= -tol and the sum is within tol of 1."""

METHODS = ("replicator", "softmax", "natural")
"""The flows :func:`simulate` knows; see the module docstring."""

Method = Literal["replicator", "softmax", "natural"]


# --------------------------------------------------------------------------- validation


def _vector(x: object, what: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{what}: expected a non-empty 1-D vector, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what}: entries must be finite, got {arr.tolist()}")
    return arr


def _simplex(w: object, what: str = "w") -> np.ndarray:
    arr = _vector(w, what)
    if np.any(arr < -SIMPLEX_TOL):
        raise ValueError(f"{what}: weights must be non-negative, got {arr.tolist()}")
    total = float(arr.sum())
    if abs(total - 1.0) > SIMPLEX_TOL:
        raise ValueError(f"{what}: weights must sum to 1 within {SIMPLEX_TOL}, sum is {total!r}")
    return np.clip(arr, 0.0, None)


def _rewards(r: object, k: int) -> np.ndarray:
    arr = _vector(r, "r")
    if arr.size != k:
        raise ValueError(f"r: expected {k} rewards (one per policy), got {arr.size}")
    return arr


def _rate(lr: object) -> float:
    try:
        value = float(lr)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"lr: expected a positive number, got {lr!r}") from exc
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"lr: expected a positive finite number, got {lr!r}")
    return value


def softmax(theta: object) -> np.ndarray:
    """The simplex point ``exp(theta) / sum exp(theta)``, computed stably.

    Entries of ``theta`` may be ``-inf`` (weight exactly 0) but not all of them.
    """
    arr = np.asarray(theta, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"theta: expected a non-empty 1-D vector, got shape {arr.shape}")
    if np.any(np.isnan(arr)) or np.any(arr == np.inf) or np.all(arr == -np.inf):
        raise ValueError(f"theta: entries must be finite or -inf (not all), got {arr.tolist()}")
    z = np.exp(arr - arr.max())
    return z / z.sum()


def _logits(theta: object) -> tuple[np.ndarray, np.ndarray]:
    """The logits as a float array and their softmax weights (validated by :func:`softmax`)."""
    arr = np.asarray(theta, dtype=float)
    return arr, softmax(arr)


# --------------------------------------------------------------------------- steps


def replicator_step(w: Sequence[float] | np.ndarray, r: Sequence[float] | np.ndarray, lr: float) -> np.ndarray:
    """One Euler step of the replicator flow: ``w_i += lr * w_i * (r_i - w . r)``, renormalised.

    ``w`` must lie on the simplex (within :data:`SIMPLEX_TOL`), ``r`` must have the same length and
    ``lr`` must be positive. The exact step already sums to 1; the renormalisation only removes
    rounding drift. Raises :class:`ValueError` when ``lr`` is so large that a weight would turn
    negative (``1 + lr (r_i - J) < 0``); ``lr * (max r - min r) < 1`` always avoids it.
    """
    w = _simplex(w)
    r = _rewards(r, w.size)
    lr = _rate(lr)
    factor = 1.0 + lr * (r - float(w @ r))
    if np.any((factor < 0) & (w > 0)):
        raise ValueError(f"lr={lr} too large: a weight would become negative; keep lr * (max r - min r) < 1")
    new = w * factor
    return new / new.sum()


def softmax_ascent_step(theta: Sequence[float] | np.ndarray, r: Sequence[float] | np.ndarray, lr: float) -> np.ndarray:
    """One step of plain gradient ascent on the logits: ``theta += lr * w * (r - J)``.

    ``w = softmax(theta)`` and ``J = w . r``; ``w_i (r_i - J)`` is ``dJ/dtheta_i``. Returns the new
    logits (not the weights). This is *not* the replicator flow; see the module docstring.
    """
    theta_arr, w = _logits(theta)
    r = _rewards(r, theta_arr.size)
    lr = _rate(lr)
    return theta_arr + lr * w * (r - float(w @ r))


def softmax_natural_step(theta: Sequence[float] | np.ndarray, r: Sequence[float] | np.ndarray, lr: float) -> np.ndarray:
    """One natural-gradient (exponentiated-gradient) step on the logits: ``theta += lr * (r - J)``.

    In weights this is ``w_i <- w_i exp(lr (r_i - J)) / Z``, whose continuous-time limit is the
    replicator flow. Returns the new logits.
    """
    theta_arr, w = _logits(theta)
    r = _rewards(r, theta_arr.size)
    lr = _rate(lr)
    return theta_arr + lr * (r - float(w @ r))


def simulate(
    w0: Sequence[float] | np.ndarray,
    r: Sequence[float] | np.ndarray,
    steps: int,
    lr: float,
    method: Method = "replicator",
) -> np.ndarray:
    """The weight trajectory, shape ``(steps + 1, K)``; row 0 is ``w0``, row ``t`` is after ``t`` steps.

    ``method`` is ``"replicator"`` (:func:`replicator_step`), ``"softmax"`` (:func:`softmax_ascent_step`
    from ``theta0 = log w0``) or ``"natural"`` (:func:`softmax_natural_step` from ``theta0 = log w0``).
    Zero initial weights stay exactly zero under every method. Row ``t`` corresponds to flow time
    ``t * lr``.
    """
    w = _simplex(w0, "w0")
    r = _rewards(r, w.size)
    lr = _rate(lr)
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"steps: expected a non-negative integer, got {steps!r}")
    if method not in METHODS:
        raise ValueError(f"method: expected one of {METHODS}, got {method!r}")

    out = np.empty((int(steps) + 1, w.size))
    out[0] = w
    if method == "replicator":
        for t in range(1, steps + 1):
            w = replicator_step(w, r, lr)
            out[t] = w
        return out

    step = softmax_ascent_step if method == "softmax" else softmax_natural_step
    with np.errstate(divide="ignore"):
        theta = np.log(w)
    for t in range(1, steps + 1):
        theta = step(theta, r, lr)
        theta = theta - theta.max()  # softmax is shift-invariant; keep the logits bounded
        out[t] = softmax(theta)
    return out


# --------------------------------------------------------------------------- held-out read-out


def held_out_accuracy(trajectory: np.ndarray, answers_held_out: Sequence[float] | np.ndarray) -> np.ndarray:
    """Accuracy of the mixture on a held-out distribution over time: ``trajectory @ a``.

    ``trajectory`` has shape ``(T, K)`` (as from :func:`simulate`); ``answers_held_out`` has ``K``
    entries in {0, 1}: whether policy ``i`` answers on the held-out distribution. Returns shape ``(T,)``.
    """
    traj = np.asarray(trajectory, dtype=float)
    if traj.ndim != 2 or traj.shape[0] == 0 or traj.shape[1] == 0:
        raise ValueError(f"trajectory: expected a non-empty (T, K) array, got shape {traj.shape}")
    a = _vector(answers_held_out, "answers_held_out")
    if a.size != traj.shape[1]:
        raise ValueError(f"answers_held_out: expected {traj.shape[1]} entries (one per policy), got {a.size}")
    if not np.all((a == 0) | (a == 1)):
        raise ValueError(f"answers_held_out: entries must be 0 or 1, got {a.tolist()}")
    return traj @ a


# --------------------------------------------------------------------------- figure


def plot_dynamics(
    trajectory: np.ndarray,
    names: Sequence[str],
    out_png: str | os.PathLike[str],
    out_svg: str | os.PathLike[str],
    held_out: Sequence[float] | np.ndarray | None = None,
) -> tuple[Path, Path]:
    """Plot the mixture weights over steps, one line per policy, and write PNG and SVG.

    ``trajectory`` is ``(T, K)``, ``names`` has ``K`` labels. When ``held_out`` (length ``T``) is
    given it is drawn dashed on a second y axis as the held-out accuracy: the mixture's expected
    accuracy, computed, not sampled, so it has no sampling interval. The legend sits below the
    axes. PNG at dpi 150; each file written atomically. Returns the two target paths.
    """
    traj = np.asarray(trajectory, dtype=float)
    if traj.ndim != 2 or traj.shape[0] == 0 or traj.shape[1] == 0:
        raise ValueError(f"trajectory: expected a non-empty (T, K) array, got shape {traj.shape}")
    names = list(names)
    if len(names) != traj.shape[1]:
        raise ValueError(f"names: expected {traj.shape[1]} names, got {len(names)}")
    acc = None
    if held_out is not None:
        acc = np.asarray(held_out, dtype=float)
        if acc.shape != (traj.shape[0],):
            raise ValueError(f"held_out: expected shape ({traj.shape[0]},), got {acc.shape}")
    png, svg = Path(out_png), Path(out_svg)
    if png.suffix.lower() != ".png" or svg.suffix.lower() != ".svg":
        raise ValueError(f"expected a .png and a .svg target, got {png.name!r} and {svg.name!r}")

    steps = np.arange(traj.shape[0])
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    try:
        for k, name in enumerate(names):
            ax.plot(steps, traj[:, k], label=f"w[{name}]", linewidth=1.8)
        ax.set_xlabel("RL step")
        ax.set_ylabel("mixture weight")
        ax.set_ylim(-0.02, 1.02)
        handles, labels = ax.get_legend_handles_labels()
        if acc is not None:
            ax2 = ax.twinx()
            (line,) = ax2.plot(steps, acc, color="black", linestyle="--", linewidth=1.4, label="held-out accuracy")
            ax2.set_ylabel("held-out accuracy")
            ax2.set_ylim(-0.02, 1.02)
            handles.append(line)
            labels.append(line.get_label())
        # below the axes: inside, the legend covered the curves wherever they crossed its corner
        ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=len(labels), frameon=False)
        ax.set_title("Mixture weights under RL on the training distribution")
        fig.tight_layout()
        save_figure(fig, png, svg)
    finally:
        plt.close(fig)
    return png, svg
