"""Key/value caches for the greedy loop and the probe: built from given states, stacked, and
grown in place.

transformers' ``DynamicLayer`` appends each step's keys and values by concatenation, which
copies the whole cache at every new token: on a CPU that copy took a fifth of a decoding step
(SmolLM2-135M, 64 rows). :class:`GrowingLayer` keeps them in a buffer with room for the tokens
still to come and writes each step's states into it; the layer's ``keys`` and ``values`` are
views of the filled part, so everything else about the cache (lengths, masks, selecting rows)
works as for a ``DynamicLayer``. Sliding-window and other layer kinds are left as they are.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer


class GrowingLayer(DynamicLayer):
    """A ``DynamicLayer`` whose states live in a buffer with room for ``room`` more tokens than
    it was first given; when full, the buffer doubles."""

    def __init__(self, room: int = 0):
        super().__init__()
        self.room = max(int(room), 0)
        self._k: torch.Tensor | None = None
        self._v: torch.Tensor | None = None
        self._n = 0

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device = key_states.device
        self._n = 0
        self.is_initialized = True

    def _ensure(self, key_states: torch.Tensor, value_states: torch.Tensor, needed: int) -> None:
        if self._k is not None and self._k.shape[0] == key_states.shape[0] and needed <= self._k.shape[-2]:
            return
        capacity = max(needed + self.room if self._k is None else 2 * self._k.shape[-2], needed)
        b, h, _, d = key_states.shape
        k = key_states.new_empty((b, h, capacity, d))
        v = value_states.new_empty((b, h, capacity, value_states.shape[-1]))
        if self._n:
            k[..., : self._n, :] = self._k[..., : self._n, :]
            v[..., : self._n, :] = self._v[..., : self._n, :]
        self._k, self._v = k, v

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        needed = self._n + key_states.shape[-2]
        self._ensure(key_states, value_states, needed)
        self._k[..., self._n : needed, :] = key_states
        self._v[..., self._n : needed, :] = value_states
        self._n = needed
        self.keys, self.values = self._k[..., :needed, :], self._v[..., :needed, :]
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self._k is not None:
            self._k, self._v = self._k[indices], self._v[indices]
            self.keys, self.values = self._k[..., : self._n, :], self._v[..., : self._n, :]

    def crop(self, tokens_to_remove: int) -> None:
        super().crop(tokens_to_remove)
        if self.keys is not None:
            self._n = self.keys.shape[-2]

    def reset(self) -> None:
        self._k = self._v = None
        self._n = 0
        super().reset()

    def batch_repeat_interleave(self, repeats: int) -> None:
        raise NotImplementedError("GrowingLayer does not repeat rows")


def new_cache(config: Any, room: int = 0) -> DynamicCache:
    """An empty cache for a model with ``config`` whose plain attention layers grow in place,
    with room for ``room`` tokens after the first states each layer receives."""
    cache = DynamicCache(config=config)
    cache.layers = [GrowingLayer(room) if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache


def cache_holding(states: Sequence[tuple[torch.Tensor, torch.Tensor]], config: Any, room: int = 0) -> DynamicCache:
    """A new cache whose layers hold copies of ``states`` (per layer: keys, values) and have room
    for ``room`` more tokens. Later updates of either cache never change the other."""
    cache = new_cache(config, room)
    for layer, (k, v) in zip(cache.layers, states):
        layer.update(k, v)
    return cache


def plain_attention(cache: DynamicCache, total_length: int) -> bool:
    """Whether every layer of ``cache`` keeps all of a sequence of ``total_length`` tokens: a
    plain key/value store, or a sliding window longer than that. Only such caches are shared or
    stacked here."""
    for layer in getattr(cache, "layers", []):
        if type(layer) is DynamicSlidingWindowLayer:
            if getattr(layer, "sliding_window", 0) <= total_length:  # it keeps window - 1 tokens
                return False
        elif type(layer) not in (DynamicLayer, GrowingLayer):
            return False
    return bool(getattr(cache, "layers", None))


def stack_caches(caches: Sequence[DynamicCache], lengths: Sequence[int], prefix_len: int, config: Any,
                 room: int = 0) -> DynamicCache:
    """One cache holding the rows of ``caches``, whose first ``lengths[i]`` positions are a shared
    prefix of ``prefix_len`` tokens followed by left-padded inputs: each is padded further, after
    the prefix, to the longest, as :func:`~shiftwork.inference.generation.left_pad` would have done
    for all rows at once. Positions beyond ``lengths[i]`` (e.g. a teacher-forced continuation) are
    left out."""
    width = max(lengths)
    states = []
    for i in range(len(caches[0].layers)):
        keys, values = [], []
        for cache, n in zip(caches, lengths):
            layer = cache.layers[i]
            for out, t in ((keys, layer.keys), (values, layer.values)):
                t = t[..., :n, :]
                if n < width:
                    pad = t.new_zeros(t.shape[0], t.shape[1], width - n, t.shape[3])
                    t = torch.cat([t[..., :prefix_len, :], pad, t[..., prefix_len:, :]], dim=-2)
                out.append(t)
        states.append((torch.cat(keys), torch.cat(values)))
    return cache_holding(states, config, room)
