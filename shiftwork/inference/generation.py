"""Batched greedy generation: length-sorted, left-padded, under ``torch.inference_mode``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import torch

from ..models.loading import LoadedModel
from .formatting import adds_special_tokens, trim_response


@dataclass
class Generation:
    index: int
    response: str
    n_tokens: int
    stopped: bool


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[np.ndarray]:
    """Indices grouped into batches of similar length, longest first (so memory peaks early)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    order = np.argsort(-np.asarray(lengths), kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def _n_generated(row: torch.Tensor, eos_ids: set[int], pad_id: int) -> tuple[int, bool]:
    """Tokens up to and excluding the first end-of-sequence token; whether one was reached."""
    ids = row.tolist()
    for k, tok in enumerate(ids):
        if tok in eos_ids:
            return k, True
    while ids and ids[-1] == pad_id and pad_id not in eos_ids:
        ids.pop()
    return len(ids), False


def eos_token_ids(lm: LoadedModel) -> set[int]:
    ids = lm.model.generation_config.eos_token_id
    if ids is None:
        ids = lm.tokenizer.eos_token_id
    ids = ids if isinstance(ids, (list, tuple)) else [ids]
    return {int(i) for i in ids if i is not None}


def generate_batches(
    lm: LoadedModel,
    inputs: Sequence[str],
    max_new_tokens: int,
    batch_size: int,
) -> Iterator[list[Generation]]:
    """Yield the greedy continuations of ``inputs`` batch by batch (indices refer to ``inputs``)."""
    tok = lm.tokenizer
    special = adds_special_tokens(lm.chat)
    lengths = [len(tok(t, add_special_tokens=special).input_ids) for t in inputs]
    eos = eos_token_ids(lm)
    pad_id = tok.pad_token_id
    for batch in length_sorted_batches(lengths, batch_size):
        enc = tok([inputs[i] for i in batch], return_tensors="pt", padding=True, add_special_tokens=special)
        enc = {k: v.to(lm.device) for k, v in enc.items()}
        with torch.inference_mode():
            out = lm.model.generate(
                **enc,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                num_beams=1,
                pad_token_id=pad_id,
                eos_token_id=sorted(eos),
                temperature=None,
                top_p=None,
                top_k=None,
            )
        new = out[:, enc["input_ids"].shape[1] :].cpu()
        results = []
        for row, idx in zip(new, batch):
            n, stopped = _n_generated(row, eos, pad_id)
            text = tok.decode(row[:n], skip_special_tokens=True)
            trimmed = trim_response(text, lm.chat)
            if trimmed != text.strip():
                n = len(tok(trimmed, add_special_tokens=False).input_ids)
            results.append(Generation(int(idx), trimmed, n, stopped))
        yield results


def generate_all(lm: LoadedModel, inputs: Sequence[str], max_new_tokens: int, batch_size: int) -> list[Generation]:
    """All generations, in the order of ``inputs``."""
    out: list[Generation | None] = [None] * len(inputs)
    for batch in generate_batches(lm, inputs, max_new_tokens, batch_size):
        for g in batch:
            out[g.index] = g
    return out  # type: ignore[return-value]
