"""Batched inference against one-at-a-time and against a direct transformers computation."""

import numpy as np
import pytest
import torch

from shiftwork.inference import generation, respond
from shiftwork.inference.batching import budget_groups, generation_row_bytes, kv_token_bytes, plan_batch_size
from shiftwork.inference.formatting import model_input
from shiftwork.inference.generation import generate_all, length_sorted_batches
from shiftwork.inference.prefix import common_prefix_length
from shiftwork.inference.probe import (
    last_position_states,
    layer_cosines,
    log_softmax_entropy,
    probe_batches,
    response_ids,
)
from shiftwork.models.loading import load_prepared

PROMPTS = [
    "What is the capital of Italy?",
    "Please, kindly explain in one sentence why ice floats on water. Thank you!",
    "Name a prime number.",
    "LIST  three colours of the rainbow;",
    "How many legs does a spider have?",
]
RESPONSES = [
    "Rome is the capital.",
    "Ice is less dense than liquid water, so it floats.",
    "Seven.",
    "",
    "A spider has eight legs.",
]


def test_length_sorted_batches():
    batches = length_sorted_batches([3, 9, 1, 7, 5], 2)
    assert [b.tolist() for b in batches] == [[1, 3], [4, 0], [2]]


def test_budget_groups_take_fewer_rows_when_they_are_long():
    # 30 positions, each row its group's longest length plus 1: lengths 9+1 -> 3 rows,
    # then 5+1 -> 5 rows but at most 4, then the one left; a row longer than the budget runs alone
    groups = budget_groups([3, 9, 1, 7, 5, 5, 2, 9], max_rows=4, tokens=30, extra=1)
    assert [g.tolist() for g in groups] == [[1, 7, 3], [4, 5, 0, 6], [2]]
    assert [g.tolist() for g in budget_groups([40, 3], max_rows=4, tokens=30)] == [[0], [1]]


def test_layer_cosines_by_hand():
    a = np.array([[1.0, 0.0], [1.0, 1.0]])
    b = np.array([[0.0, 2.0], [2.0, 2.0]])
    assert layer_cosines(a, b).tolist() == pytest.approx([0.0, 1.0])


def test_log_softmax_entropy_by_hand():
    # row 0: uniform over 4 tokens, entropy ln 4; row 1: probabilities 1/2, 1/4, 1/8, 1/8
    logits = torch.tensor([[0.0, 0.0, 0.0, 0.0], [3.0, 2.0, 1.0, 1.0]]) * torch.tensor([[1.0], [np.log(2)]])
    logp, entropy = log_softmax_entropy(logits)
    assert logp[1].exp().tolist() == pytest.approx([0.5, 0.25, 0.125, 0.125])
    assert entropy.tolist() == pytest.approx([np.log(4), 0.5 * np.log(2) + 0.25 * np.log(4) + 2 * 0.125 * np.log(8)])


def test_common_prefix_length_leaves_the_last_token_out():
    assert common_prefix_length([[1, 2, 3, 4], [1, 2, 3, 5, 6], [1, 2, 9]]) == 2
    assert common_prefix_length([[1, 2, 3], [1, 2, 3, 4]]) == 2  # the shortest keeps one token of its own
    assert common_prefix_length([[7, 1], [8, 1]]) == 0
    assert common_prefix_length([]) == 0


def test_batch_size_grows_only_on_a_gpu(monkeypatch):
    assert plan_batch_size(torch.device("cpu"), 16, row_bytes=1) == 16
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (8 * 2**30, 16 * 2**30))
    cuda = torch.device("cuda")
    assert plan_batch_size(cuda, 16, row_bytes=2**20) == 16 * 16  # 4 GiB fit 4096 rows: capped at 16x
    assert plan_batch_size(cuda, 16, row_bytes=2**26) == 64  # 4 GiB / 64 MiB
    assert plan_batch_size(cuda, 16, row_bytes=2**33) == 16  # never below the configured size
    with pytest.raises(ValueError, match="batch_size"):
        plan_batch_size(cuda, 0, row_bytes=1)


def test_generation_row_bytes_counts_the_key_value_cache():
    class Config:  # 2 layers, 1 kv head of 4 dims, hidden 8, vocab 10
        num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim = 2, 2, 1, 4
        hidden_size, intermediate_size, vocab_size = 8, 16, 10

    kv = 2 * 2 * 1 * 4 * 5 * 4  # layers x (k, v) x heads x dims x 5 tokens x 4 bytes
    activations = 5 * (4 * 8 + 2 * 16) * 4 + 2 * 5 * 5 * 4
    assert generation_row_bytes(Config(), torch.float32, 5) == kv + activations + 10 * 4


@pytest.fixture(scope="module")
def lm(prepared_smollm):
    return load_prepared(prepared_smollm, device="cpu")


@pytest.mark.model
def test_last_position_states_are_the_hidden_states_at_the_last_token(lm):
    ids = lm.tokenizer(["The sky is blue and the grass is"], return_tensors="pt").input_ids
    body = generation.backbone(lm.model)
    with torch.inference_mode():
        full = body(input_ids=ids, output_hidden_states=True)
        before = len(body.layers[0]._forward_hooks)  # transformers keeps hooks of its own
        with last_position_states(body) as taps:
            out = body(input_ids=ids)
        after = len(body.layers[0]._forward_hooks)
    want = torch.stack([h[:, -1] for h in full.hidden_states[1:]], dim=1)
    got = torch.stack(taps + [out.last_hidden_state[:, -1]], dim=1)
    assert got.shape == (1, lm.model.config.num_hidden_layers, lm.model.config.hidden_size)
    assert torch.allclose(got, want, atol=1e-5)
    assert after == before  # ours go with the context


@pytest.mark.model
def test_probe_batched_equals_one_at_a_time(lm):
    inputs = [model_input(lm.tokenizer, p, lm.chat) for p in PROMPTS]
    batched = {r.index: r for batch in probe_batches(lm, inputs, RESPONSES, batch_size=5) for r in batch}
    for i in range(len(inputs)):
        (single,) = next(probe_batches(lm, [inputs[i]], [RESPONSES[i]], batch_size=1))
        b = batched[i]
        assert b.n_response_tokens == single.n_response_tokens
        assert b.logprob == pytest.approx(single.logprob, abs=1e-4)
        assert b.entropy == pytest.approx(single.entropy, abs=1e-4)
        assert np.allclose(b.last_hidden, single.last_hidden, atol=1e-4)
    assert batched[3].n_response_tokens == 0 and batched[3].logprob == 0.0


@pytest.mark.model
def test_probe_matches_a_direct_computation(lm):
    x = model_input(lm.tokenizer, PROMPTS[1], lm.chat)
    r = RESPONSES[1]
    (res,) = next(probe_batches(lm, [x], [r], batch_size=1))
    x_ids = lm.tokenizer(x, add_special_tokens=False, return_tensors="pt").input_ids
    r_ids = lm.tokenizer(r, add_special_tokens=False, return_tensors="pt").input_ids
    ids = torch.cat([x_ids, r_ids], dim=1)
    with torch.inference_mode():
        out = lm.model(ids, output_hidden_states=True)
    logp = torch.log_softmax(out.logits[0].double(), -1)
    n = x_ids.shape[1]
    positions = range(n - 1, ids.shape[1] - 1)
    want_lp = sum(logp[t, ids[0, t + 1]].item() for t in positions)
    want_h = np.mean([-(logp[t].exp() * logp[t]).sum().item() for t in positions])
    assert res.n_response_tokens == r_ids.shape[1]
    assert res.logprob == pytest.approx(want_lp, abs=1e-3)
    assert res.entropy == pytest.approx(want_h, abs=1e-4)
    want_hidden = torch.stack([h[0, n - 1] for h in out.hidden_states[1:]]).numpy()
    assert np.allclose(res.last_hidden, want_hidden, atol=1e-4)


@pytest.mark.model
def test_generation_batched_equals_one_at_a_time(lm):
    inputs = [model_input(lm.tokenizer, p, lm.chat) for p in PROMPTS[:3]]
    batched = generate_all(lm, inputs, max_new_tokens=16, batch_size=3)
    for i, x in enumerate(inputs):
        (single,) = generate_all(lm, [x], max_new_tokens=16, batch_size=1)
        assert batched[i].response == single.response
        assert batched[i].n_tokens == single.n_tokens


@pytest.mark.model
def test_greedy_loop_equals_transformers_generate(lm, monkeypatch):
    """The loop with a shared prefix and early-leaving rows against ``model.generate`` on the same batches."""
    inputs = [model_input(lm.tokenizer, p, lm.chat) for p in PROMPTS]
    ours = generate_all(lm, inputs, max_new_tokens=20, batch_size=5)
    monkeypatch.setattr(generation, "fast_path", lambda model: False)
    theirs = generate_all(lm, inputs, max_new_tokens=20, batch_size=5)
    assert [(g.response, g.n_tokens, g.stopped) for g in ours] == [(g.response, g.n_tokens, g.stopped) for g in theirs]
    assert any(g.stopped for g in ours) and not all(g.stopped for g in ours)


def _separately(lm, inputs, max_new_tokens, references=None):
    """Each input alone: its greedy response, then the probe of its reference (or of that response)."""
    out = []
    for i, x in enumerate(inputs):
        (g,) = generate_all(lm, [x], max_new_tokens=max_new_tokens, batch_size=1)
        r = g.response if references is None else references[i]
        (p,) = next(probe_batches(lm, [x], [r], batch_size=1))
        out.append((g, p))
    return out


def _assert_answers_match(answers, expected):
    assert sorted(answers) == list(range(len(expected)))
    for i, (g, p) in enumerate(expected):
        a = answers[i]
        assert (a.generation.response, a.generation.n_tokens, a.generation.stopped) == (
            g.response,
            g.n_tokens,
            g.stopped,
        )
        assert a.probe.n_response_tokens == p.n_response_tokens
        assert a.probe.logprob == pytest.approx(p.logprob, abs=1e-3)
        assert a.probe.entropy == pytest.approx(p.entropy, abs=1e-4)
        assert np.allclose(a.probe.last_hidden, p.last_hidden, atol=1e-4)


@pytest.mark.model
@pytest.mark.parametrize("path", ["fast", "small_store", "plain"])
def test_answers_equal_generating_and_probing_each_input_alone(lm, monkeypatch, path):
    """Chunks of 2 rows stacked into decoding groups of 3 (or, with a store that holds fewer
    positions, groups laid out anew in it, the longest of 1 row; and the transformers fallback)
    against one input at a time; references include an empty one."""
    monkeypatch.setattr(respond, "MIN_DECODE_ROWS", 3)
    inputs = [model_input(lm.tokenizer, p, lm.chat) for p in PROMPTS]
    if path == "plain":
        monkeypatch.setattr(respond, "fast_path", lambda model: False)
    if path == "small_store":  # room for 1.9 of the longest rows (its input, and 12 new tokens or its reference)
        refs = response_ids(lm, RESPONSES)
        longest = max(len(e) for e in generation.encode_inputs(lm, inputs)[0]) + max(12, max(len(r) for r in refs))
        monkeypatch.setattr(respond, "CPU_STORE_BYTES", int(1.9 * longest * kv_token_bytes(lm.model.config, lm.dtype)))
    batches = list(respond.answer_batches(lm, inputs, 12, 2, RESPONSES))
    answers = {a.generation.index: a for batch in batches for a in batch}
    _assert_answers_match(answers, _separately(lm, inputs, 12, RESPONSES))
    if path == "small_store":
        assert len(batches[0]) == 1 and max(len(b) for b in batches) > 1
    assert answers[3].probe.n_response_tokens == 0 and answers[3].probe.logprob == 0.0
    # rows left the decoding group early, and others ran to the limit
    assert any(a.generation.stopped for a in answers.values()) and not all(
        a.generation.stopped for a in answers.values()
    )


@pytest.mark.model
@pytest.mark.parametrize("from_steps", [True, False])
def test_answers_without_references_probe_their_own_response(lm, monkeypatch, from_steps):
    """Scored from the decoding steps, and (as for a response whose text tokenizes differently)
    teacher-forced afterwards."""
    monkeypatch.setattr(respond, "MIN_DECODE_ROWS", 4)
    if not from_steps:
        monkeypatch.setattr(respond._StepScores, "reuse", lambda self, row, new, ref: None)
    inputs = [model_input(lm.tokenizer, p, lm.chat) for p in PROMPTS[:4]]
    answers = {a.generation.index: a for batch in respond.answer_batches(lm, inputs, 10, 3) for a in batch}
    _assert_answers_match(answers, _separately(lm, inputs, 10))
    assert all(a.probe.n_response_tokens > 0 for a in answers.values())


@pytest.mark.model
def test_models_load_with_masked_attention_and_other_kernels_leave_the_loop(lm, monkeypatch):
    """The loop's padding masks are checked with sdpa and eager only; another kernel takes the
    transformers path."""
    assert lm.model.config._attn_implementation == "sdpa"
    assert generation.fast_path(lm.model)
    monkeypatch.setattr(lm.model.config, "_attn_implementation", "flash_attention_2", raising=False)
    assert not generation.fast_path(lm.model)
