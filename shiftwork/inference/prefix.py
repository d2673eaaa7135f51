"""A token prefix shared by every input of a job (a chat model's system turn, a plain
template's "Question:"), run through the model once and reused by every batch.

Each batch then runs only its rows' own tokens, after a copy of the prefix's key/value cache
and with explicit position ids, so every token keeps the position it has when its input runs
alone. Only models whose cache is plain attention (every layer a full or long-enough sliding
window key/value store) and whose forward takes ``position_ids`` share a prefix; any other
model runs its inputs whole (:func:`shared_prefix` returns ``None``).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from shiftwork.inference.kvcache import cache_holding, plain_attention


def common_prefix_length(seqs: Sequence[Sequence[int]], keep: int = 1) -> int:
    """Length of the longest token prefix all ``seqs`` share, leaving at least ``keep`` tokens
    of the shortest one outside it."""
    if not seqs:
        return 0
    first = seqs[0]
    limit = min(len(s) for s in seqs) - keep
    n = 0
    while n < limit and all(s[n] == first[n] for s in seqs):
        n += 1
    return max(n, 0)


def cache_argument(model: Any) -> str:
    """The name under which ``model.forward`` takes a key/value cache (``cache`` from transformers
    5.x on, ``past_key_values`` before)."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def takes_position_ids(model: Any) -> bool:
    return "position_ids" in inspect.signature(model.forward).parameters


@dataclass
class Prefix:
    tokens: list[int]
    states: list[tuple[torch.Tensor, torch.Tensor]]  # per layer: keys, values of shape (1, heads, len, dim)
    config: Any

    @property
    def length(self) -> int:
        return len(self.tokens)

    def cache(self, batch: int, room: int = 0):
        """A fresh cache holding the prefix for ``batch`` rows, with room for ``room`` more tokens."""
        return cache_holding(
            [(k.expand(batch, -1, -1, -1), v.expand(batch, -1, -1, -1)) for k, v in self.states], self.config, room
        )


def shared_prefix(
    backbone: Any, seqs: Sequence[Sequence[int]], max_total_length: int, min_length: int = 4
) -> Prefix | None:
    """The prefix all ``seqs`` share, run once through ``backbone`` (the model without its output
    head); ``None`` where there is none worth sharing or the model cannot continue from one.
    ``max_total_length`` bounds the longest sequence a batch will reach (prompt plus new tokens)."""
    n = common_prefix_length(seqs)
    if n < min_length or not takes_position_ids(backbone):
        return None
    from transformers import DynamicCache

    config = backbone.config
    device = next(backbone.parameters()).device
    cache = DynamicCache(config=config)
    ids = torch.tensor([list(seqs[0][:n])], device=device)
    with torch.inference_mode():
        backbone(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            position_ids=torch.arange(n, device=device)[None],
            use_cache=True,
            **{cache_argument(backbone): cache},
        )
    if not plain_attention(cache, max_total_length):
        return None
    states = [(layer.keys, layer.values) for layer in cache.layers]
    if any(k is None or k.shape[-2] != n for k, _ in states):
        return None
    return Prefix(list(seqs[0][:n]), states, config)
