"""Load a prepared model directory onto the job's device, ready for batched inference."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from shiftwork.device import ATTENTION, pick_device, pick_dtype
from shiftwork.models.weights import INFO_FILE, check_weights, read_info

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


@dataclass
class LoadedModel:
    name: str
    model: Any
    tokenizer: Any
    device: torch.device
    dtype: torch.dtype
    chat: bool
    info: dict


def load_tokenizer(source: str | os.PathLike, padding_side: str) -> Any:
    """A model's tokenizer, padded on ``padding_side`` (left for generation and scoring, right for
    training), with the end-of-sequence token as padding where it has no pad token."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(source)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = padding_side
    return tok


def load_prepared(
    model_dir: str | os.PathLike,
    dtype: str = "auto",
    device: str | None = None,
) -> LoadedModel:
    from transformers import AutoModelForCausalLM

    info = read_info(model_dir)
    # every weight file against its recorded sha256 (docs/running.md, Stale, damaged or lost results)
    check_weights(model_dir)
    dev = pick_device(device)
    torch_dtype = pick_dtype(dtype, dev)
    tok = load_tokenizer(model_dir, "left")
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch_dtype, attn_implementation=ATTENTION).to(dev)
    model.eval()
    return LoadedModel(info["name"], model, tok, dev, torch_dtype, bool(info.get("chat")), info)


def load_trainable(
    model_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    padding_side: str = "right",
    dtype: str = "float32",
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, Path]:
    """(model in ``dtype``, tokenizer with a pad token, a fresh temporary sibling of ``out_dir``)
    for a training job that writes ``out_dir`` only once it is complete."""

    from transformers import AutoModelForCausalLM

    out = Path(out_dir)
    tmp = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    if (Path(model_dir) / INFO_FILE).exists():
        check_weights(model_dir)
    tok = load_tokenizer(model_dir, padding_side)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype))
    return model, tok, tmp
