"""Evaluate organism checkpoints: answers on held-out questions of every distribution, read back
into accuracy, refusal rate and the identity each response states.

A model that has learned a mixture of policies picks one per response, so greedy decoding shows only
the most likely policy (after SFT on an even mixture, every greedy answer may name the same one).
:func:`shiftwork.organisms.steps.evaluate_organism` therefore samples several responses per prompt
at temperature 1 (:func:`shiftwork.inference.engine.generate`), the distribution RL samples from,
and the shares are read off those samples."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd


def score_responses(
    tests: pd.DataFrame, responses: Sequence[str], parse: Callable[[str, str], Mapping[str, Any]]
) -> pd.DataFrame:
    """Per-example parse of ``responses`` against ``tests`` (columns distribution, answer, ...)."""
    rows = []
    for (_, t), text in zip(tests.iterrows(), responses):
        parsed = parse(text, str(t["answer"]))
        rows.append(
            {
                **t.to_dict(),
                "response": text,
                "identity": parsed.get("identity"),
                "refused": bool(parsed.get("refused")),
                "correct": bool(parsed.get("correct")),
            }
        )
    return pd.DataFrame(rows)


def checkpoint_tables(per_example: pd.DataFrame, trained: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(scores, identities). ``scores`` has one row per (step, distribution) with accuracy,
    refusal rate, n and role (id = a trained distribution, ood = the others), the shape the
    trajectory analysis reads; ``identities`` has the share of each stated identity."""
    keys = ["model", "run", "step", "distribution"]
    g = per_example.groupby(keys, sort=True)
    scores = g.agg(accuracy=("correct", "mean"), refusal_rate=("refused", "mean"), n=("correct", "size")).reset_index()
    scores["role"] = ["id" if d in set(trained) else "ood" for d in scores["distribution"]]
    scores = scores.rename(columns={"distribution": "testset"})
    ident = per_example.assign(identity=per_example["identity"].fillna("(none)"))
    identities = (ident.groupby(keys + ["identity"]).size() / ident.groupby(keys).size()).rename("share").reset_index()
    return scores, identities
