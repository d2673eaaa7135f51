"""Key/value caches for the greedy loop and the probe: built from given states, grown in place,
and kept in one store that every group of rows of a job reuses.

transformers' ``DynamicLayer`` appends each step's keys and values by concatenation, which
copies the whole cache at every new token: on a CPU that copy took a fifth of a decoding step
(SmolLM2-135M, 64 rows). :class:`GrowingLayer` keeps them in a buffer with room for the tokens
still to come and writes each step's states into it; the layer's ``keys`` and ``values`` are
views of the filled part, so everything else about the cache (lengths, masks, selecting rows)
works as for a ``DynamicLayer``. Sliding-window and other layer kinds are left as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer

from shiftwork.inference.batching import model_dims


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


class StoredLayer(GrowingLayer):
    """A :class:`GrowingLayer` over rows ``[start, stop)`` of a :class:`RowStore`'s buffers, its
    first ``filled`` positions taken as already held: new states are written after them, into
    the store itself, until rows are selected (which copies them out)."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, filled: int):
        super().__init__()
        self._k, self._v, self._n = keys, values, int(filled)
        self.device = keys.device
        self.is_initialized = True
        self.keys, self.values = keys[..., : self._n, :], values[..., : self._n, :]

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        pass

    def _ensure(self, key_states: torch.Tensor, value_states: torch.Tensor, needed: int) -> None:
        if key_states.shape[0] != self._k.shape[0] or key_states.shape[1] != self._k.shape[1]:
            raise ValueError(
                f"states of shape {tuple(key_states.shape)} do not fit a store of rows and heads "
                f"{tuple(self._k.shape[:2])}"
            )
        if needed > self._k.shape[-2]:
            raise ValueError(f"{needed} positions do not fit a store of {self._k.shape[-2]}")

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep rows ``indices`` (in ascending order), moved up within the store's buffers: a copy
        of the selected rows would double a group's memory for as long as it decodes."""
        rows = indices.tolist()
        if rows != sorted(rows):
            return super().batch_select_indices(indices)
        for dst, src in enumerate(rows):
            if dst != src:
                self._k[dst, :, : self._n] = self._k[src, :, : self._n]
                self._v[dst, :, : self._n] = self._v[src, :, : self._n]
        self._k, self._v = self._k[: len(rows)], self._v[: len(rows)]
        self.keys, self.values = self._k[..., : self._n, :], self._v[..., : self._n, :]


class RowStore:
    """Key/value buffers of ``tokens`` positions in every layer, allocated once and reused by each
    group of rows a job runs: a group of ``rows`` rows of ``columns`` positions (their product at
    most ``tokens``) is laid out at the front of the block by :meth:`layout`, with ``prefix``'s
    states (per layer: keys and values of one row) in the first columns of every row.

    A group's chunks each run in a :meth:`cache` over their own rows, so their states land where
    the group's decoding then reads them, and the group decodes in a :meth:`cache` over all its
    rows: nothing is copied or stacked, and a job's memory is the block's whatever its size and
    however long its inputs. What a chunk writes after the group's inputs (e.g. a teacher-forced
    continuation) is scratch that decoding overwrites; positions no row attends to keep what an
    earlier group left there, finite values that the mask takes out."""

    def __init__(
        self,
        config: Any,
        tokens: int,
        dtype: torch.dtype,
        device: torch.device,
        prefix: Sequence[tuple[torch.Tensor, torch.Tensor]] | None = None,
    ):
        dims = model_dims(config)
        self.heads, self.dim = dims["kv_heads"], dims["head_dim"]
        self.config, self.tokens, self.prefix = config, int(tokens), prefix
        self.layers = len(new_cache(config).layers)
        self.prefix_len = prefix[0][0].shape[-2] if prefix else 0
        # one block: large enough that the allocator maps it apart from the heap and hands it back
        # whole when the store goes, where per-layer buffers would stay behind in the heap as free
        # but resident pages. Zeros: a position no row attends to still enters the attention product.
        self.data = torch.zeros((self.layers, 2, self.tokens * self.heads * self.dim), dtype=dtype, device=device)
        self.buffers: list[tuple[torch.Tensor, torch.Tensor]] = []

    def layout(self, rows: int, columns: int) -> None:
        """Take the front of the block as ``rows`` rows of ``columns`` positions, the shared
        prefix in the first columns of each, for the next group."""
        if rows * columns > self.tokens or columns < self.prefix_len:
            raise ValueError(f"{rows} rows of {columns} positions do not fit a store of {self.tokens}")
        size = rows * self.heads * columns * self.dim
        block = self.data[:, :, :size].view(self.layers, 2, rows, self.heads, columns, self.dim)
        self.buffers = [(block[i, 0], block[i, 1]) for i in range(self.layers)]
        if self.prefix:
            for (k, v), (pk, pv) in zip(self.buffers, self.prefix):
                k[:, :, : self.prefix_len] = pk
                v[:, :, : self.prefix_len] = pv

    def cache(self, start: int, stop: int, filled: int) -> DynamicCache:
        """A cache over rows ``[start, stop)`` of the current layout that holds their first
        ``filled`` positions."""
        if not self.buffers:
            raise RuntimeError("RowStore.cache before RowStore.layout")
        cache = DynamicCache(config=self.config)
        cache.layers = [StoredLayer(k[start:stop], v[start:stop], filled) for k, v in self.buffers]
        return cache
