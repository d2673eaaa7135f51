"""Score a checkpoint on labelled NLI examples through the verbaliser tokens."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from ..device import pick_device, pick_dtype
from ..inference.generation import length_sorted_batches
from .tasks import render, verbaliser_ids


class CheckpointError(ValueError):
    """A checkpoint cannot be found or loaded."""


def load_checkpoint(base_dir: str, checkpoint: Mapping[str, Any], dtype: str = "auto"):
    """``checkpoint`` is {path: DIR} (a LoRA adapter or a full model directory) or
    {hub: ID, revision: REV}. Returns (model, tokenizer, device)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = pick_device()
    torch_dtype = pick_dtype(dtype, device)
    if "path" in checkpoint:
        path = Path(checkpoint["path"])
        if not path.is_dir():
            raise CheckpointError(f"checkpoint directory {path} does not exist")
        if (path / "adapter_config.json").exists():
            from peft import PeftModel

            base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch_dtype)
            model = PeftModel.from_pretrained(base, str(path)).merge_and_unload()
        elif (path / "config.json").exists():
            model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype)
        else:
            raise CheckpointError(f"checkpoint directory {path} holds neither adapter_config.json nor config.json")
        tok_dir = path if (path / "tokenizer_config.json").exists() else Path(base_dir)
    elif "hub" in checkpoint:
        try:
            model = AutoModelForCausalLM.from_pretrained(
                checkpoint["hub"], revision=checkpoint.get("revision"), dtype=torch_dtype
            )
        except OSError as err:
            raise CheckpointError(
                f"checkpoint {checkpoint['hub']}@{checkpoint.get('revision')} could not be loaded ({err}); "
                "offline, download it and list it as {path: DIR}"
            ) from err
        tok_dir = checkpoint["hub"]
    else:
        raise CheckpointError(f"checkpoint {dict(checkpoint)} needs 'path' or 'hub'")
    tok = AutoTokenizer.from_pretrained(tok_dir)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    model.to(device).eval()
    return model, tok, device


def predict(model, tok, device, examples: pd.DataFrame, batch_size: int = 32) -> pd.DataFrame:
    """Per-example prediction: the label whose verbaliser has the larger next-token logit."""
    ids = verbaliser_ids(tok)
    labels = list(ids)
    vocab = torch.tensor([ids[label] for label in labels])
    prompts = [render(p, h) for p, h in zip(examples["premise"], examples["hypothesis"])]
    lengths = [len(tok(p).input_ids) for p in prompts]
    scores = np.zeros((len(prompts), len(labels)))
    for batch in length_sorted_batches(lengths, batch_size):
        enc = tok([prompts[i] for i in batch], return_tensors="pt", padding=True).to(device)
        with torch.inference_mode():
            logits = model(**enc).logits[:, -1, :]
        scores[batch] = logits[:, vocab.to(logits.device)].float().cpu().numpy()
    pred = [labels[k] for k in scores.argmax(1)]
    out = examples[["example_id", "set", "label"]].copy()
    out["pred"] = pred
    out["correct"] = out["pred"] == out["label"]
    out["margin"] = scores[:, 0] - scores[:, 1]
    return out


def accuracy_table(predictions: pd.DataFrame) -> pd.DataFrame:
    g = predictions.groupby("set", sort=True)
    return pd.DataFrame(
        {"testset": list(g.groups), "accuracy": g["correct"].mean().to_numpy(), "n": g.size().to_numpy()}
    )
