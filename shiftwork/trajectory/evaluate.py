"""Score a checkpoint on labelled NLI examples through the verbaliser tokens."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch

from shiftwork.inference.generation import length_sorted_batches
from shiftwork.progress import Progress
from shiftwork.trajectory.scores import label_scores
from shiftwork.trajectory.suite import LABELS
from shiftwork.trajectory.tasks import PATTERN, VERBALISERS, next_token_logits, render, verbaliser_ids

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


def predict(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    device: torch.device,
    examples: pd.DataFrame,
    batch_size: int = 32,
    pattern: str = PATTERN,
    verbalisers: Mapping[str, str] = VERBALISERS,
    what: str = "evaluate",
) -> pd.DataFrame:
    """Per-example prediction: the label whose verbaliser has the larger next-token logit after
    the example in ``pattern``; ``margin`` is the entailment logit minus the other. The count done
    goes to the log as ``what``."""
    ids = verbaliser_ids(tok, verbalisers)
    labels = list(LABELS)
    vocab = torch.tensor([ids[label] for label in labels])
    prompts = [render(p, h, pattern) for p, h in zip(examples["premise"], examples["hypothesis"])]
    lengths = [len(tok(p).input_ids) for p in prompts]
    scores = np.zeros((len(prompts), len(labels)))
    progress = Progress(what, len(prompts), "examples")
    for batch in length_sorted_batches(lengths, batch_size):
        enc = tok([prompts[i] for i in batch], return_tensors="pt", padding=True).to(device)
        with torch.inference_mode():
            logits = next_token_logits(model, enc["input_ids"], enc["attention_mask"])
        scores[batch] = logits[:, vocab.to(logits.device)].float().cpu().numpy()
        progress.update(len(batch))
    pred = [labels[k] for k in scores.argmax(1)]
    out = examples[["example_id", "set", "label"]].copy()
    out["pred"] = pred
    out["correct"] = out["pred"] == out["label"]
    out["margin"] = scores[:, 0] - scores[:, 1]
    return out


def accuracy_table(predictions: pd.DataFrame) -> pd.DataFrame:
    """Per test set (``testset``, sorted): accuracy, n, the accuracy per gold label and the balanced
    accuracy (:func:`~shiftwork.trajectory.scores.label_scores`)."""
    return label_scores(predictions, ["set"]).rename(columns={"set": "testset"})
