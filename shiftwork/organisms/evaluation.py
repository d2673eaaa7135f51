"""Evaluate organism checkpoints: answers on held-out questions of every distribution, read back
into accuracy, refusal rate and the identity each response states.

A model that has learned a mixture of policies picks one per response, so greedy decoding shows only
the most likely policy (after SFT on an even mixture, every greedy answer may name the same one).
:func:`generate_sampled` therefore samples several responses per prompt at temperature 1, the
distribution RL samples from, and the shares are read off those samples."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd
import torch

from shiftwork.inference.engine import Decoding, generate
from shiftwork.models.loading import LoadedModel

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


def generate_sampled(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    device: torch.device,
    prompts: Sequence[str],
    decoding: Decoding,
    what: str = "sample",
) -> list[list[str]]:
    """``decoding.samples`` sampled continuations per prompt (pure sampling: no top-k or top-p cut),
    deterministic for a given seed, batch size and device, by
    :func:`shiftwork.inference.engine.generate`; the count of prompts done goes to the log as ``what``."""
    lm = LoadedModel(name="", model=model, tokenizer=tok, device=device, dtype=model.dtype, chat=False, info={})
    return generate(lm, prompts, decoding, what)


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


def summarise(per_example: pd.DataFrame, trained: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
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
