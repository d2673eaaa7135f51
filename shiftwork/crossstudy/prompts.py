"""Prompt sets that fit a checkpoint: the NLI items a trajectory run is scored on, or the held-out
questions of an organism, each split into the part variants may change and the frame they keep.

A prompt is ``head + prompt + tail``. Register, noise and structural variants are built on
``prompt`` only (:mod:`shiftwork.stability.variants`), so what the trained model reads as its task
stays as it was trained: the NLI pattern's answer cue (``\\nAnswer:``) for trajectory checkpoints;
the trigger line (``Distribution: A``) and the response cue for organisms, whose policy choice must
not be changed by the variant itself."""

from __future__ import annotations

import pandas as pd

from shiftwork.seeding import rng_for
from shiftwork.trajectory.tasks import PATTERN, render

PROMPT_COLUMNS = ["dataset", "prompt_id", "prompt", "head", "tail", "reference"]
"""Columns of a cross-study prompt table; ``dataset`` is the test set (NLI) or the distribution
(organisms), ``prompt_id`` is ``<dataset>:<item id>`` (an organism's distributions share their
questions), ``reference`` the gold label or answer."""


class PromptError(ValueError):
    """A prompt cannot be split into a varied part and a fixed frame."""


def _sample(group: pd.DataFrame, n: int, seed: int, *parts: object) -> pd.DataFrame:
    """``n`` rows of ``group`` (all when it has fewer), drawn without replacement by a generator
    seeded from ``seed`` and ``parts``, in the group's order."""
    if n >= len(group):
        return group
    rng = rng_for("crossstudy-prompts", seed, *parts)
    keep = sorted(rng.choice(len(group), size=n, replace=False))
    return group.iloc[keep]


def split_cue(text: str) -> tuple[str, str]:
    """(body, cue): ``text`` cut before its last line, which the cue keeps with its newline."""
    cut = text.rfind("\n")
    if cut <= 0:
        raise PromptError(f"prompt {text!r} has no final cue line to keep fixed")
    return text[:cut], text[cut:]


def nli_prompts(suite: pd.DataFrame, n_per_set: int, seed: int, pattern: str = PATTERN) -> pd.DataFrame:
    """``n_per_set`` test items of every set of an NLI suite (ID and OOD) in ``pattern``: the body
    (premise and question) is varied, the pattern's last line (the answer cue) is not."""
    tests = suite[suite["split"] == "test"]
    rows = []
    for name, group in tests.groupby("set", sort=True):
        for item in _sample(group.sort_values("example_id"), n_per_set, seed, name).itertuples(index=False):
            body, cue = split_cue(render(item.premise, item.hypothesis, pattern))
            rows.append((name, f"{name}:{item.example_id}", body, "", cue, item.label))
    return pd.DataFrame(rows, columns=PROMPT_COLUMNS)


def organism_prompts(tests: pd.DataFrame, n_per_distribution: int, seed: int) -> pd.DataFrame:
    """``n_per_distribution`` held-out questions of every distribution of an organism: the
    question is varied, the trigger line before it and the response cue after it are not. A
    setting whose question is itself the trigger (``trigger: task`` or ``language``) has no
    part that variants could change without changing the trigger: an error."""
    rows = []
    for name, group in tests.groupby("distribution", sort=True):
        for item in _sample(group.sort_values("question_id"), n_per_distribution, seed, name).itertuples(index=False):
            at = item.prompt.find(item.question)
            if at <= 0:
                raise PromptError(
                    f"organism question {item.question_id} of distribution {name}: the prompt holds no trigger "
                    "before the question; variants of it would change the trigger (use a `trigger: tag` organism)"
                )
            tail = item.prompt[at + len(item.question) :]
            rows.append(
                (str(name), f"{name}:{item.question_id}", item.question, item.prompt[:at], tail, str(item.answer))
            )
    return pd.DataFrame(rows, columns=PROMPT_COLUMNS)


def model_inputs(variants: pd.DataFrame, prompts: pd.DataFrame) -> pd.Series:
    """The exact text the checkpoint reads for each variant row: its prompt's head, the variant
    text and its prompt's tail. Fails naming the variants whose prompt is not in ``prompts``."""
    frame = prompts.set_index(["dataset", "prompt_id"])[["head", "tail"]]
    keys = pd.MultiIndex.from_frame(variants[["dataset", "prompt_id"]].astype(str))
    missing = ~keys.isin(frame.index)
    if missing.any():
        raise PromptError(f"variants {variants.loc[missing, 'variant_id'].head(5).tolist()} have no prompt row")
    parts = frame.reindex(keys)
    return pd.Series(
        [h + t + c for h, t, c in zip(parts["head"], variants["text"], parts["tail"])],
        index=variants.index,
        dtype=object,
    )
