"""Batched inference against one-at-a-time and against a direct transformers computation."""

import numpy as np
import pytest
import torch

from shiftwork.inference.formatting import model_input
from shiftwork.inference.generation import generate_all, length_sorted_batches
from shiftwork.inference.probe import layer_cosines, probe_batches
from shiftwork.models.loading import load_prepared

PROMPTS = [
    "What is the capital of Italy?",
    "Please, kindly explain in one sentence why ice floats on water. Thank you!",
    "Name a prime number.",
    "LIST  three colours of the rainbow;",
    "How many legs does a spider have?",
]
RESPONSES = ["Rome is the capital.", "Ice is less dense than liquid water, so it floats.", "Seven.", "", "A spider has eight legs."]


def test_length_sorted_batches():
    batches = length_sorted_batches([3, 9, 1, 7, 5], 2)
    assert [b.tolist() for b in batches] == [[1, 3], [4, 0], [2]]


def test_layer_cosines_by_hand():
    a = np.array([[1.0, 0.0], [1.0, 1.0]])
    b = np.array([[0.0, 2.0], [2.0, 2.0]])
    assert layer_cosines(a, b).tolist() == pytest.approx([0.0, 1.0])


@pytest.fixture(scope="module")
def lm(prepared_smollm):
    return load_prepared(prepared_smollm, device="cpu")


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
