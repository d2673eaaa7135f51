"""Key/value caches that grow in place, and the store that groups of rows share."""

import pytest
import torch
from transformers import LlamaConfig

from shiftwork.inference.kvcache import GrowingLayer, RowStore, cache_holding, plain_attention

CONFIG = LlamaConfig(
    num_hidden_layers=1,
    num_attention_heads=1,
    num_key_value_heads=1,
    hidden_size=2,
    head_dim=2,
    intermediate_size=4,
    vocab_size=8,
)


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


def test_row_store_chunks_write_where_the_group_reads():
    """Two chunks of a group, each after the shared prefix and its own left padding, then the
    group's cache over both, which drops a row in place."""
    prefix = _states(1, 1, 0)
    store = RowStore(CONFIG, tokens=18, dtype=torch.float32, device=torch.device("cpu"), prefix=[(prefix, -prefix)])
    with pytest.raises(RuntimeError, match="layout"):
        store.cache(0, 1, filled=1)
    store.layout(rows=3, columns=6)
    a = store.cache(0, 1, filled=1 + 1)  # row 0: its 1 input token after one padding position
    assert a.get_seq_length() == 2
    a.layers[0].update(_states(1, 1, 7), -_states(1, 1, 7))
    a.layers[0].update(_states(1, 2, 40), -_states(1, 2, 40))  # a teacher-forced continuation: scratch
    b = store.cache(1, 3, filled=1)  # rows 1-2: 2 input tokens each
    keys, values = b.layers[0].update(_states(2, 2, 5), -_states(2, 2, 5))
    assert keys[:, 0, :, 0].tolist() == [[0.0, 5.0, 6.0], [0.0, 105.0, 106.0]] and torch.equal(values, -keys)
    group = store.cache(0, 3, filled=3)
    keys, _ = group.layers[0].update(_states(3, 1, 9), _states(3, 1, 9))
    assert keys[:, 0, :, 0].tolist() == [[0.0, 0.0, 7.0, 9.0], [0.0, 5.0, 6.0, 109.0], [0.0, 105.0, 106.0, 209.0]]
    group.layers[0].batch_select_indices(torch.tensor([0, 2]))  # row 1 stopped: row 2 moves up in place
    keys, _ = group.layers[0].update(_states(2, 1, 10), _states(2, 1, 10))
    assert keys[:, 0, :, 0].tolist() == [[0.0, 0.0, 7.0, 9.0, 10.0], [0.0, 105.0, 106.0, 209.0, 110.0]]
    assert keys.data_ptr() == store.buffers[0][0].data_ptr()
    with pytest.raises(ValueError, match="positions do not fit"):
        group.layers[0].update(_states(2, 2, 0), _states(2, 2, 0))


def test_row_store_lays_each_group_out_anew_in_the_same_block():
    prefix = _states(1, 1, 7)
    store = RowStore(CONFIG, tokens=18, dtype=torch.float32, device=torch.device("cpu"), prefix=[(prefix, -prefix)])
    store.layout(rows=3, columns=6)
    store.cache(0, 3, filled=1).layers[0].update(_states(3, 2, 50), _states(3, 2, 50))
    store.layout(rows=2, columns=9)  # a group of longer rows: fewer of them
    keys, values = store.cache(0, 2, filled=1).layers[0].update(_states(2, 3, 20), -_states(2, 3, 20))
    # row 1 now starts where row 0 of the last layout had its fourth position: the prefix is copied again
    assert keys[:, 0, :, 0].tolist() == [[7.0, 20.0, 21.0, 22.0], [7.0, 120.0, 121.0, 122.0]]
    assert values[:, 0, 0, 0].tolist() == [-7.0, -7.0]
    assert keys.data_ptr() == store.data.data_ptr()
    with pytest.raises(ValueError, match="do not fit"):
        store.layout(rows=2, columns=10)
