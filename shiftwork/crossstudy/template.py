"""Which of an organism's variants keep the template it was trained on.

An organism reads ``<trigger line>\\n<question>\\nResponse:`` and was trained on one question
template ("What comes after 479?"). The cross-study keeps the trigger line and the cue, so
every variant changes the question only (:mod:`shiftwork.crossstudy.prompts`), but it can do so
in two ways:

``kept``
    every character stays in its place and only letter case differs (the casing noise): the
    question is still the trained template, with the same length and the number where the
    organism learned to find it. A change here is the organism answering the same question
    differently: policy stability.
``changed``
    register framing around the question, inserted spaces or punctuation: the question line is
    no longer the trained template, and an organism trained from scratch may not read it as a
    question at all; a change here mixes the policy with template breakdown.

The two sets are scored as one (one pass per checkpoint) and reported apart; a prompt's
baseline row belongs to both."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import pandas as pd

from shiftwork.checks import require_columns

SETS = ("changed", "kept")
KEY = ["model", "dataset", "prompt_id", "variant_id"]


def keeps_template(text: str, original: str) -> bool:
    """Whether ``text`` is ``original`` with at most the case of some letters changed: the same
    length, and equal once both are lower-cased (so digits, spaces and punctuation are as they
    were). The original itself keeps it."""
    return len(text) == len(original) and text.lower() == original.lower()


def kept_variants(generations: pd.DataFrame, runs: Collection[str]) -> pd.DataFrame:
    """The :data:`KEY` of the variants of ``runs`` (organisms runs) that keep their prompt's
    template (:func:`keeps_template` against the prompt's baseline text), one row per variant.
    ``generations``: rows with KEY, ``family`` and ``text`` (any number of steps)."""
    require_columns(generations, [*KEY, "family", "text"], "cross-study generations")
    rows = generations[generations["model"].isin(list(runs))].drop_duplicates(KEY)
    base = rows[rows["family"] == "baseline"].set_index(["model", "dataset", "prompt_id"])["text"]
    original = pd.MultiIndex.from_frame(rows[["model", "dataset", "prompt_id"]]).map(base.get)
    keep = [
        family != "baseline" and isinstance(o, str) and keeps_template(t, o)
        for family, t, o in zip(rows["family"], rows["text"], original)
    ]
    return rows.loc[keep, KEY].reset_index(drop=True)


def split(frame: pd.DataFrame, kept: pd.DataFrame, runs: Collection[str]) -> dict[str, pd.DataFrame]:
    """``frame`` (rows with :data:`KEY` and ``family``: deltas or generations) cut into the
    variant sets of :data:`SETS`: ``changed`` holds every row except the variants in ``kept``
    (other runs' rows whole), ``kept`` the rows of ``runs`` that are baselines or in ``kept``."""
    require_columns(frame, [*KEY, "family"], "cross-study table")
    index = pd.MultiIndex.from_frame(frame[KEY].astype(str))
    in_kept = index.isin(pd.MultiIndex.from_frame(kept[KEY].astype(str))) if len(kept) else [False] * len(frame)
    in_kept = pd.Series(in_kept, index=frame.index, dtype=bool)
    ours = frame["model"].isin(list(runs)) & ((frame["family"] == "baseline") | in_kept)
    return {
        "changed": frame[~in_kept].reset_index(drop=True),
        "kept": frame[ours].reset_index(drop=True),
    }


def variant_sets(
    deltas: pd.DataFrame, generations: pd.DataFrame, runs: Mapping[str, Mapping[str, Any]]
) -> tuple[dict[str, tuple[pd.DataFrame, pd.DataFrame]], pd.DataFrame]:
    """(each set of :data:`SETS` as its (deltas, generations), the :data:`KEY` of the kept
    variants): the cross-study's deltas and generations split by :func:`split`, the kept variants
    found among the ``runs`` whose ``study`` is organisms (:func:`kept_variants`)."""
    organisms = sorted(run for run, spec in runs.items() if spec["study"] == "organisms")
    kept = kept_variants(generations, organisms)
    d_sets, g_sets = split(deltas, kept, organisms), split(generations, kept, organisms)
    return {name: (d_sets[name], g_sets[name]) for name in SETS}, kept
