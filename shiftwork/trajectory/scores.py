"""Scores of a checkpoint on a test set: raw accuracy, accuracy per gold label and balanced accuracy.

A test set whose gold labels are unbalanced (at the extreme, one label only) has a raw accuracy
that moves with the checkpoint's lean towards one label, whatever else the checkpoint learns. The
*balanced accuracy*, the mean over the labels the set holds of the accuracy among that label's
items, does not: a checkpoint that answers one label everywhere scores 1/k on every set with k
labels. On a set with as many items of each label the two are the same number.

:func:`label_scores` computes the columns; :func:`analysis_scores` picks the one the pair
analysis reads (config ``trajectory.analysis.score``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from shiftwork.trajectory.suite import LABELS

SCORES: tuple[str, ...] = ("balanced_accuracy", "accuracy")
"""Scores the analysis can read (config ``trajectory.analysis.score``): the first is the default."""

LABEL_COLUMNS: tuple[str, ...] = tuple(f"accuracy_{label}" for label in LABELS)
"""Per-label accuracy columns of :func:`label_scores`, one per label of :data:`LABELS`."""

SCORE_COLUMNS: tuple[str, ...] = ("accuracy", "n", *LABEL_COLUMNS, "balanced_accuracy")
"""The score columns of :func:`label_scores`, after the keys."""


def balanced_accuracy(correct: np.ndarray, labels: Sequence[str]) -> np.ndarray:
    """The balanced accuracy of every column of ``correct`` (items x checkpoints, 0/1 or scores in
    [0, 1]) whose rows have gold labels ``labels``: the mean over the distinct labels of the mean
    of that label's rows."""
    values = np.asarray(correct, dtype=float)
    labels = np.asarray(labels, dtype=object)
    if values.shape[0] != labels.shape[0] or values.shape[0] == 0:
        raise ValueError(f"balanced_accuracy: {values.shape[0]} rows but {labels.shape[0]} labels")
    per_label = [values[labels == label].mean(axis=0) for label in sorted(set(labels.tolist()), key=str)]
    return np.mean(per_label, axis=0)


def label_scores(predictions: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """One row per group of ``keys``, sorted: the keys, then :data:`SCORE_COLUMNS`.

    ``accuracy`` is the mean of ``correct`` and ``n`` the number of rows; ``accuracy_<label>`` the
    mean of ``correct`` among the rows whose gold ``label`` is that label (NaN where the group has
    none); ``balanced_accuracy`` the mean of the per-label accuracies over the labels the group
    holds (any label, not only :data:`LABELS`)."""
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
    out = out.reset_index()
    out["n"] = out["n"].astype(np.int64)
    return out[[*keys, *SCORE_COLUMNS]]


def analysis_scores(scores: pd.DataFrame, score: str) -> pd.DataFrame:
    """``scores`` with its ``accuracy`` column replaced by the column ``score`` (one of
    :data:`SCORES`) and the raw accuracy kept as ``raw_accuracy``: the table the pair analysis,
    the windows and the figures read. Raises :class:`ValueError` for an unknown ``score`` or a
    table without its column (a scores table written before the column existed)."""
    if score not in SCORES:
        raise ValueError(f"score must be one of {list(SCORES)}, got {score!r}")
    for column in {"accuracy", score}:
        if column not in scores.columns:
            raise ValueError(f"scores table lacks column '{column}' (score {score!r}); rerun collect_scores")
    out = scores.copy()
    out["raw_accuracy"] = scores["accuracy"]
    out["accuracy"] = scores[score]
    out.attrs["score"] = score
    return out
