"""What every cross-study scoring job shares, whichever prompts its checkpoints answer: the BERT
axis's encoder, loaded at most once per job, and the axis deltas checked to lie in their ranges."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd


class LazyBertF1:
    """BERTScore F1 of candidate against reference texts by the named encoder, which loads on the
    first call only: a job whose checkpoints never give the BERT axis a pair to score (label
    replies) never loads it, and a job scoring several checkpoints loads it once."""

    def __init__(self, name: str, spec: Mapping[str, Any]):
        self.name = name
        self.spec = spec
        self.encoder = None

    def __call__(self, candidates: Sequence[str], references: Sequence[str]) -> np.ndarray:
        if self.encoder is None:
            from shiftwork.encoders import Encoder

            self.encoder = Encoder(self.name, self.spec)
        return self.encoder.f1(candidates, references)


def checked_deltas(
    gens: pd.DataFrame, probes: pd.DataFrame, rules: Any, bert_f1: LazyBertF1, bert_scale: str, where: str
) -> pd.DataFrame:
    """The six axis deltas of ``gens`` and ``probes`` by the stability study's ``rules``
    (:class:`shiftwork.stability.axes.AxisRules`, no judge: mirroring by the rule-based
    detectors), or an error naming ``where`` (the run and step) and the values out of range."""
    from shiftwork.stability.axes import check_ranges, variant_deltas

    deltas = variant_deltas(gens, probes, bert_f1, None, rules)
    problems = check_ranges(
        deltas, bleu=rules.bleu, bert_scale=bert_scale, structural_baseline=rules.structural_baseline
    )
    if problems:
        raise ValueError(f"{where}: axis values out of range:\n  " + "\n  ".join(problems[:20]))
    return deltas
