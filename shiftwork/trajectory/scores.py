"""Scores of a checkpoint on a test set: raw accuracy, accuracy per gold label, balanced accuracy
and lean-free accuracy.

A test set whose gold labels are unbalanced (at the extreme, one label only) has a raw accuracy
that moves with the checkpoint's lean towards one label, whatever else the checkpoint learns. The
*balanced accuracy*, the mean over the labels the set holds of the accuracy among that label's
items, does not: a checkpoint that answers one label everywhere scores 1/k on every set with k
labels. On a set with as many items of each label the two are the same number.

The balanced accuracy still moves with the *size* of a lean: a lean that adds ``L`` to the log odds
of a correct answer on one label's items and takes ``L`` from the other's leaves
``(expit(a + L) + expit(b - L)) / 2``, which changes with ``L`` unless ``a == b``, and changes the
same way on every set whose labels are learned unevenly, so such sets co-move with the lean. The
*lean-free accuracy* is ``expit`` of the mean over labels of each label's log odds (the empirical
logit, ``log((hits + 1/2) / (misses + 1/2))``): the lean cancels in the mean, and what is left is
the accuracy the checkpoint would have without it (signal detection's sensitivity, on the logit
scale and mapped back to [0, 1]). On a one-label set it is ``(hits + 1/2) / (n + 1)``, that label's
accuracy shrunk a little towards 1/2, lean included.

:func:`label_scores` computes the columns; :func:`analysis_scores` picks the one the pair
analysis reads (config ``trajectory.analysis.score``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy.special import expit

from shiftwork.trajectory.suite import LABELS

SCORES: tuple[str, ...] = ("lean_free_accuracy", "balanced_accuracy", "accuracy")
"""Scores the analysis can read (config ``trajectory.analysis.score``): the first is the default."""

LABEL_COLUMNS: tuple[str, ...] = tuple(f"accuracy_{label}" for label in LABELS)
"""Per-label accuracy columns of :func:`label_scores`, one per label of :data:`LABELS`."""

MIN_UNPINNED = 8
"""Fewest checkpoints a run keeps when pinned ones are left out (the early/late windows need 4 each)."""

SCORE_COLUMNS: tuple[str, ...] = ("accuracy", "n", *LABEL_COLUMNS, "balanced_accuracy", "lean_free_accuracy")
"""The score columns of :func:`label_scores`, after the keys."""


def _checked(correct: np.ndarray, labels: Sequence[str], name: str) -> tuple[np.ndarray, np.ndarray]:
    values = np.asarray(correct, dtype=float)
    labels = np.asarray(labels, dtype=object)
    if values.shape[0] != labels.shape[0] or values.shape[0] == 0:
        raise ValueError(f"{name}: {values.shape[0]} rows but {labels.shape[0]} labels")
    return values, labels


def balanced_accuracy(correct: np.ndarray, labels: Sequence[str]) -> np.ndarray:
    """The balanced accuracy of every column of ``correct`` (items x checkpoints, 0/1 or scores in
    [0, 1]) whose rows have gold labels ``labels``: the mean over the distinct labels of the mean
    of that label's rows."""
    values, labels = _checked(correct, labels, "balanced_accuracy")
    per_label = [values[labels == label].mean(axis=0) for label in sorted(set(labels.tolist()), key=str)]
    return np.mean(per_label, axis=0)


def empirical_logit(hits: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``log((hits + 1/2) / (n - hits + 1/2))``: the log odds of a correct answer, finite at 0 and ``n``."""
    hits = np.asarray(hits, dtype=float)
    return np.log((hits + 0.5) / (np.asarray(n, dtype=float) - hits + 0.5))


def lean_free_from_means(means: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The lean-free accuracy of per-label mean scores ``means`` (labels on axis -2, e.g. labels x
    checkpoints) over ``sizes`` items each (shaped to broadcast, e.g. labels x 1)."""
    sizes = np.asarray(sizes, dtype=float)
    return expit(empirical_logit(np.asarray(means, dtype=float) * sizes, sizes).mean(axis=-2))


def lean_free_accuracy(correct: np.ndarray, labels: Sequence[str]) -> np.ndarray:
    """The lean-free accuracy (module notes) of every column of ``correct`` (items x checkpoints)
    whose rows have gold labels ``labels``."""
    values, labels = _checked(correct, labels, "lean_free_accuracy")
    groups = sorted(set(labels.tolist()), key=str)
    means = np.array([values[labels == label].mean(axis=0) for label in groups])
    sizes = np.array([[np.sum(labels == label)] for label in groups])
    return lean_free_from_means(means, sizes)


def score_of(correct: np.ndarray, labels: Sequence[str] | None, score: str) -> np.ndarray:
    """The ``score`` (:data:`SCORES`) of every column of ``correct``; ``labels`` may be None for raw accuracy."""
    if score == "accuracy" or labels is None:
        return np.asarray(correct, dtype=float).mean(axis=0)
    if score == "balanced_accuracy":
        return balanced_accuracy(correct, labels)
    return lean_free_accuracy(correct, labels)


def label_scores(predictions: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """One row per group of ``keys``, sorted: the keys, then :data:`SCORE_COLUMNS`.

    ``accuracy`` is the mean of ``correct`` and ``n`` the number of rows; ``accuracy_<label>`` the
    mean of ``correct`` among the rows whose gold ``label`` is that label (NaN where the group has
    none); ``balanced_accuracy`` the mean of the per-label accuracies over the labels the group
    holds (any label, not only :data:`LABELS`); ``lean_free_accuracy`` the lean-free accuracy of
    those labels (module notes)."""
    missing = [c for c in (*keys, "label", "correct") if c not in predictions.columns]
    if missing:
        raise ValueError(f"label_scores: predictions lack columns {missing}")
    data = predictions[[*keys, "label", "correct"]].copy()
    data["correct"] = data["correct"].astype(float)
    keys = list(keys)
    out = data.groupby(keys, sort=True)["correct"].agg(accuracy="mean", n="size")
    per_label = data.groupby([*keys, "label"], sort=True)["correct"].mean().unstack("label")
    for label, column in zip(LABELS, LABEL_COLUMNS):
        out[column] = per_label[label] if label in per_label.columns else np.nan
    out["balanced_accuracy"] = per_label.mean(axis=1, skipna=True)
    counts = data.groupby([*keys, "label"], sort=True)["correct"].size().unstack("label")
    logits = pd.DataFrame(empirical_logit(per_label * counts, counts), index=per_label.index)
    out["lean_free_accuracy"] = expit(logits.mean(axis=1, skipna=True))
    out = out.reset_index()
    out["n"] = out["n"].astype(np.int64)
    return out[[*keys, *SCORE_COLUMNS]]


def prediction_shares(predictions: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Per group of ``keys`` (a checkpoint, say): ``entailment_share``, the share of its
    predictions (``pred``) that are the first label of :data:`LABELS`, pooled over its test sets."""
    shares = (predictions["pred"] == LABELS[0]).astype(float).groupby([predictions[k] for k in keys]).mean()
    return shares.rename("entailment_share").reset_index()


def pinned_steps(scores: pd.DataFrame, pinned: float | None) -> dict:
    """Per run, the steps whose predictions are at least ``pinned`` one label (``entailment_share``
    of the scores table, the same on every row of a checkpoint); none when ``pinned`` is None."""
    if pinned is None:
        return {}
    if "entailment_share" not in scores.columns:
        raise ValueError("scores table lacks column 'entailment_share' (option pinned); rerun collect_scores")
    rows = scores.drop_duplicates(["run", "step"])
    share = rows["entailment_share"].to_numpy(dtype=float)
    hit = rows[np.maximum(share, 1.0 - share) >= float(pinned)]
    return {run: sorted(int(s) for s in part["step"]) for run, part in hit.groupby("run", sort=True)}


def analysis_scores(scores: pd.DataFrame, score: str, pinned: float | None = None) -> pd.DataFrame:
    """``scores`` with its ``accuracy`` column replaced by the column ``score`` (one of
    :data:`SCORES`) and the raw accuracy kept as ``raw_accuracy``: the table the pair analysis,
    the windows and the figures read. With ``pinned`` (config ``trajectory.analysis.pinned``),
    checkpoints whose predictions are at least that share one label are left out (the label lean
    pins the answers there, so every set's score measures the lean, not the set); the steps left
    out are ``attrs["pinned"]`` (run -> steps). A run that would keep fewer than
    :data:`MIN_UNPINNED` checkpoints keeps them all (the pinned ones are ``attrs["pinned_kept"]``),
    so that it is still analysed and says so. Raises :class:`ValueError` for an unknown
    ``score`` or a table without its column (a scores table written before the column existed)."""
    if score not in SCORES:
        raise ValueError(f"score must be one of {list(SCORES)}, got {score!r}")
    for column in {"accuracy", score}:
        if column not in scores.columns:
            raise ValueError(f"scores table lacks column '{column}' (score {score!r}); rerun collect_scores")
    left_out, kept = {}, {}
    for run, steps in pinned_steps(scores, pinned).items():
        total = scores.loc[scores["run"] == run, "step"].nunique()
        (left_out if total - len(steps) >= MIN_UNPINNED else kept)[run] = steps
    keep = np.ones(len(scores), dtype=bool)
    for run, steps in left_out.items():
        keep &= ~((scores["run"] == run) & scores["step"].isin(steps)).to_numpy()
    out = scores[keep].copy()
    out["raw_accuracy"] = out["accuracy"]
    out["accuracy"] = out[score]
    out.attrs["score"] = score
    out.attrs["pinned"] = left_out
    out.attrs["pinned_kept"] = kept
    return out
