"""Checkpoints of a training run (LoRA adapters or full models, local or on the hub), loaded for
evaluation; the trajectory and organisms studies both write and read them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from shiftwork.device import pick_device, pick_dtype
from shiftwork.models.loading import load_tokenizer

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


# written beside each checkpoint by the training jobs: its step and base model
CHECKPOINT_INFO = "shiftwork_checkpoint.json"


class CheckpointError(ValueError):
    """A checkpoint cannot be found or loaded."""


def load_checkpoint(
    base_dir: str, checkpoint: Mapping[str, Any], dtype: str = "auto", device: str | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, torch.device]:
    """``checkpoint`` is {path: DIR} (a LoRA adapter or a full model directory) or
    {hub: ID, revision: REV}. ``dtype`` is a :func:`pick_dtype` name, or ``stored`` for the
    type the weights are stored in; ``device`` a :func:`pick_device` preference. Returns
    (model, tokenizer, device)."""
    from transformers import AutoModelForCausalLM

    device = pick_device(device)
    torch_dtype = "auto" if dtype == "stored" else pick_dtype(dtype, device)
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
    tok = load_tokenizer(tok_dir, "left")
    model.to(device).eval()
    return model, tok, device
