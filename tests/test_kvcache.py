"""Key/value caches that grow in place, and stacking the caches of several chunks."""

import torch
from transformers import LlamaConfig

from shiftwork.inference.kvcache import GrowingLayer, cache_holding, plain_attention, stack_caches

CONFIG = LlamaConfig(num_hidden_layers=1, num_attention_heads=1, num_key_value_heads=1, hidden_size=2, head_dim=2,
                     intermediate_size=4, vocab_size=8)


def _states(batch, length, start):
    """(batch, 1 head, length, 2 dims) with entries numbering the positions from ``start``."""
    pos = torch.arange(start, start + length, dtype=torch.float32)
    rows = torch.arange(batch, dtype=torch.float32)[:, None, None, None] * 100
    return (rows + pos[None, None, :, None]).expand(batch, 1, length, 2).clone()


def test_growing_layer_holds_what_concatenation_would():
    layer = GrowingLayer(room=2)
    parts = [_states(3, 4, 0), _states(3, 1, 4), _states(3, 1, 5), _states(3, 3, 6)]  # the last outgrows the room
    for p in parts:
        keys, values = layer.update(p, -p)
    want = torch.cat(parts, dim=-2)
    assert torch.equal(keys, want) and torch.equal(values, -want)
    assert layer.get_seq_length() == 9
    layer.batch_select_indices(torch.tensor([2, 0]))
    assert torch.equal(layer.keys, want[[2, 0]])
    keys, _ = layer.update(_states(2, 1, 9), _states(2, 1, 9))
    assert keys.shape == (2, 1, 10, 2) and torch.equal(keys[:, :, :9], want[[2, 0]])


def test_cache_holding_copies_its_states():
    k = _states(1, 3, 0)
    cache = cache_holding([(k, k)], CONFIG, room=1)
    cache.layers[0].update(_states(1, 1, 3), _states(1, 1, 3))
    assert torch.equal(k, _states(1, 3, 0)) and cache.layers[0].keys.shape[-2] == 4
    assert plain_attention(cache, 100)


def test_stack_caches_pads_each_chunk_after_the_prefix():
    # chunk a: 1 row, prefix (1 position) + 2 input positions + 1 teacher-forced position left out;
    # chunk b: 2 rows, prefix + 1 input position
    a = cache_holding([(_states(1, 4, 0), _states(1, 4, 0))], CONFIG)
    b = cache_holding([(_states(2, 2, 0), _states(2, 2, 0))], CONFIG)
    stacked = stack_caches([a, b], [3, 2], prefix_len=1, config=CONFIG)
    keys = stacked.layers[0].keys[:, 0, :, 0]
    assert keys.tolist() == [[0.0, 1.0, 2.0], [0.0, 0.0, 1.0], [100.0, 0.0, 101.0]]
