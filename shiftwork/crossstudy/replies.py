"""Which measure of stability fits a checkpoint's replies.

A checkpoint that answers with a label (the trajectory runs: one verbaliser word per input) gives
replies whose text axes say nothing beyond whether the label changed: BLEU and BERTScore of a
one-word reply are both affine in the share of variants whose answer flips, and a one-word reply
has no register or form to mirror. For such a checkpoint stability is label consistency, axis
:data:`LABEL_AXIS`: per prompt, the share of its meaning-preserving variants whose answer differs
from the original prompt's (the stability study's flip rate, which for a label is exactly that),
aggregated over prompts like every other axis. BLEU, BERT and MR are then not applicable. A
checkpoint that answers free-form keeps the six axes, and :data:`LABEL_AXIS` is not applicable.

A checkpoint's replies are labels when at least :data:`LABEL_SHARE` of them (the prompts' and the
variants') are one of its run's answer words; a run without answer words answers free-form."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from shiftwork.checks import require_columns
from shiftwork.stability.stats import AXES

LABEL_AXIS = "Label"
LABEL_SHARE = 0.95
"""The least share of a checkpoint's replies that must be answer words for them to be labels."""
TEXT_AXES = ("BLEU", "BERT", "MR")
"""The axes that read a reply's text and form: not applicable to labels."""
CROSS_AXES = (*AXES, LABEL_AXIS)
"""The cross-study's axes: the stability study's six and label consistency."""
KIND_COLUMNS = ["run", "step", "n_replies", "label_share", "labels", "dtype"]


def reply_kinds(generations: pd.DataFrame, answers: Mapping[str, Iterable[str]]) -> pd.DataFrame:
    """Per (run, step) of ``generations`` (one row per reply; the run in ``model``): how many
    replies there are, the share that are one of ``answers[run]`` (compared stripped; NaN for a
    run without answer words), whether they are ``labels`` (that share at least
    :data:`LABEL_SHARE`) and the precision the checkpoint answered in (``dtype``, from the
    generations' column of that name; empty when they have none). Columns :data:`KIND_COLUMNS`."""
    require_columns(generations, ["model", "step", "response"], "crossstudy generations")
    rows = []
    for (run, step), part in generations.groupby(["model", "step"], sort=True):
        words = {str(w).strip() for w in answers.get(run, ())}
        share = float(part["response"].astype(str).str.strip().isin(words).mean()) if words else float("nan")
        dtype = ",".join(sorted(part["dtype"].astype(str).unique())) if "dtype" in part.columns else ""
        rows.append((run, int(step), len(part), share, bool(np.isfinite(share) and share >= LABEL_SHARE), dtype))
    return pd.DataFrame(rows, columns=KIND_COLUMNS)


def by_kind(per_prompt: pd.DataFrame, kinds: pd.DataFrame) -> pd.DataFrame:
    """``per_prompt`` (per run, step and prompt, with ``flip_rate``) with each checkpoint's
    ``label_share`` and the axes that fit its replies: on a label checkpoint :data:`LABEL_AXIS` is
    the prompt's flip rate and :data:`TEXT_AXES` are NaN; on a free-form one :data:`LABEL_AXIS` is
    NaN. A checkpoint missing from ``kinds`` is an error."""
    require_columns(per_prompt, ["run", "step", "flip_rate", *TEXT_AXES], "per-prompt table")
    keyed = kinds.set_index(["run", "step"])
    index = pd.MultiIndex.from_frame(per_prompt[["run", "step"]].astype({"step": int}))
    missing = index.difference(keyed.index)
    if len(missing):
        raise ValueError(f"no replies recorded for checkpoint(s) {list(missing)[:5]} (run, step)")
    labels = keyed["labels"].reindex(index).to_numpy(bool)
    out = per_prompt.copy()
    out["label_share"] = keyed["label_share"].reindex(index).to_numpy(float)
    out[LABEL_AXIS] = np.where(labels, out["flip_rate"].to_numpy(float), np.nan)
    for axis in TEXT_AXES:
        out[axis] = np.where(labels, np.nan, out[axis].to_numpy(float))
    return out


def not_applicable(series: pd.DataFrame, axes: Sequence[str]) -> dict[str, str]:
    """{axis: why it is not applicable} for each of ``axes`` that no checkpoint of one run's
    ``series`` (one row per checkpoint with ``label_share`` and the axes) measures because of the
    kind of its replies."""
    if "label_share" not in series.columns:
        return {}
    share = series["label_share"].astype(float)
    out: dict[str, str] = {}
    for axis in axes:
        values = series[axis].astype(float) if axis in series.columns else pd.Series(np.nan, index=series.index)
        if values.notna().any():
            continue
        if axis in TEXT_AXES and (share >= LABEL_SHARE).all():
            out[axis] = f"not applicable: replies are labels (answer words: {_range(share)} of replies)"
        elif axis == LABEL_AXIS and not (share >= LABEL_SHARE).any():
            known = share.dropna()
            words = f"answer words: {_range(known)} of replies" if len(known) else "the run has no answer words"
            out[axis] = f"not applicable: replies are free-form ({words})"
    return out


def _range(share: pd.Series) -> str:
    low, high = float(share.min()), float(share.max())
    return f"{low:.3f}" if low == high else f"{low:.3f}-{high:.3f}"
