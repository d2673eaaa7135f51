"""Batched inference against one-at-a-time, against transformers and against a direct computation."""

import numpy as np
import pytest
import torch

from shiftwork.inference.batching import kv_token_bytes, length_sorted_batches, plan_batch_size
from shiftwork.inference.formatting import model_input
from shiftwork.inference.generation import (
    EngineSize,
    VllmEngine,
    cpu_binding,
    cpu_kv_cache_gib,
    eos_token_ids,
    generate_all,
    to_generation,
)
from shiftwork.inference.probe import layer_cosines, log_softmax_entropy, probe_batches, shared_prefix_length
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


def test_batch_size_grows_only_on_a_gpu(monkeypatch):
    assert plan_batch_size(torch.device("cpu"), 16, row_bytes=1) == 16
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (8 * 2**30, 16 * 2**30))
    cuda = torch.device("cuda")
    assert plan_batch_size(cuda, 16, row_bytes=2**20) == 16 * 16  # 4 GiB fit 4096 rows: capped at 16x
    assert plan_batch_size(cuda, 16, row_bytes=2**26) == 64  # 4 GiB / 64 MiB
    assert plan_batch_size(cuda, 16, row_bytes=2**33) == 16  # never below the configured size
    with pytest.raises(ValueError, match="batch_size"):
        plan_batch_size(cuda, 0, row_bytes=1)


def test_shared_prefix_ends_before_the_last_input_token():
    rows = [[1, 2, 3, 4, 9], [1, 2, 3, 5], [1, 2, 3, 4, 8, 8]]
    assert shared_prefix_length(rows, [4, 3, 5]) == 2  # row 1's input is 1 2 3: its token 3 runs with it
    assert shared_prefix_length(rows, [5, 4, 5]) == 3
    assert shared_prefix_length([[7, 1], [8, 1]], [2, 2]) == 0
    assert shared_prefix_length([], []) == 0


def test_kv_token_bytes_by_hand():
    class Config:  # 2 layers, 1 kv head of 4 dims
        num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim, hidden_size = 2, 2, 1, 4, 8

    assert kv_token_bytes(Config(), torch.float32) == 2 * 2 * 1 * 4 * 4  # layers x (k, v) x heads x dims x bytes
    assert kv_token_bytes(Config(), torch.bfloat16) == 2 * 2 * 1 * 4 * 2


def test_cpu_kv_cache_holds_every_row_within_a_quarter_of_memory():
    # 46 KiB per token x 200 rows x 160 tokens = 1.40 GiB -> 2 GiB; with 4 GiB free at most 1
    assert cpu_kv_cache_gib(46 * 2**10, 200, 160, 64 * 2**30) == 2
    assert cpu_kv_cache_gib(46 * 2**10, 200, 160, 4 * 2**30) == 1
    assert cpu_kv_cache_gib(46 * 2**10, 2000, 160, 64 * 2**30) == 15  # 14.04 GiB
    assert cpu_kv_cache_gib(1, 1, 1, 2**30) == 1  # never below 1 GiB


def test_cpu_binding_pins_only_a_job_that_has_its_cpus_alone():
    assert cpu_binding(2, [0, 1]) == ("0,1", 2)
    assert cpu_binding(None, [3, 1]) == ("1,3", 2)
    assert cpu_binding(8, [4, 5]) == ("4,5", 2)  # more threads than CPUs: the CPUs there are
    assert cpu_binding(2, range(16)) == ("nobind", 2)  # a share of a machine other jobs run on too


class _Tok:
    """A tokenizer whose tokens are characters: id = ord(char), 0 is an end-of-sequence token."""

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids if i)

    def __call__(self, text, add_special_tokens=False):
        class Enc:
            input_ids = [ord(c) for c in text]

        return Enc()


def test_to_generation_cuts_at_the_first_end_of_sequence_and_trims_the_next_turn():
    ids = [ord(c) for c in " Rome.\nQuestion: and"]
    chat = to_generation(_Tok(), True, 3, [*ids[:6], 0, 65, 0], {0})
    assert (chat.index, chat.response, chat.n_tokens, chat.stopped) == (3, "Rome.", 6, True)
    plain = to_generation(_Tok(), False, 0, ids, {0})  # a base model runs on into a next question
    assert (plain.response, plain.n_tokens, plain.stopped) == ("Rome.", 5, False)


def test_eos_ids_come_from_the_generation_config_else_the_tokenizer():
    class Conf:
        eos_token_id = [2, 7]

    class Tok:
        eos_token_id = 9

    assert eos_token_ids(Conf(), Tok()) == {2, 7}
    assert eos_token_ids(None, Tok()) == {9}


@pytest.fixture(scope="module")
def lm(prepared_smollm):
    return load_prepared(prepared_smollm, dtype="float32", device="cpu")


@pytest.mark.model
def test_probe_without_the_shared_prefix_gives_the_same_values(lm, monkeypatch):
    from shiftwork.inference import probe

    inputs = [model_input(lm.tokenizer, p, lm.chat) for p in PROMPTS]
    shared = [r for batch in probe_batches(lm, inputs, RESPONSES, batch_size=2) for r in batch]
    monkeypatch.setattr(probe, "shared_prefix_length", lambda rows, lengths: 0)
    whole = {r.index: r for batch in probe_batches(lm, inputs, RESPONSES, batch_size=2) for r in batch}
    for r in shared:
        assert r.logprob == pytest.approx(whole[r.index].logprob, abs=1e-3)
        assert r.entropy == pytest.approx(whole[r.index].entropy, abs=1e-4)
        assert np.allclose(r.last_hidden, whole[r.index].last_hidden, atol=1e-4)


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
def test_vllm_responses_equal_transformers_generate(lm, prepared_smollm):
    """vLLM and transformers' generate (float32, greedy) on the same token ids: the same responses,
    token counts and stops; some rows stop early and others run to the limit."""
    inputs = [model_input(lm.tokenizer, p, lm.chat) for p in PROMPTS]
    theirs = generate_all(lm, inputs, max_new_tokens=20, batch_size=5)
    size = EngineSize(max_len=128, rows=5, threads=2)
    with VllmEngine(str(prepared_smollm), lm.tokenizer, lm.chat, torch.float32, lm.device, size) as v:
        ours = v.generate_all(inputs, max_new_tokens=20)
    assert [(g.response, g.n_tokens, g.stopped) for g in ours] == [(g.response, g.n_tokens, g.stopped) for g in theirs]
    assert any(g.stopped for g in ours) and not all(g.stopped for g in ours)


@pytest.mark.model  # builds random models of two real architectures: slow on a CPU
@pytest.mark.parametrize("hub_id", ["Qwen/Qwen3.5-9B", "meta-llama/Llama-3.2-1B"])
def test_probe_scores_equal_a_full_forward_pass_with_or_without_a_shared_prefix(tmp_path, hub_id):
    """Qwen3.5's hybrid cache cannot be copied per row (its linear-attention layers have no
    batch_repeat_interleave): its batches run from the first token; Llama's continue from the
    shared prefix. Either way a response's log-probability is the full pass's."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from shiftwork.inference.probe import encode_pairs, probe_batches
    from shiftwork.models.loading import LoadedModel
    from shiftwork.rehearsal.models import write_model

    write_model(tmp_path / "hub", hub_id, chat=False)
    tok = AutoTokenizer.from_pretrained(hub_id, cache_dir=tmp_path / "hub")
    tok.pad_token = tok.pad_token or tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(hub_id, cache_dir=tmp_path / "hub", dtype=torch.float32).eval()
    lm = LoadedModel("m", model, tok, torch.device("cpu"), torch.float32, False, {})
    inputs = ["Question: why is the sky blue?\nAnswer:", "Question: why is the sea blue?\nAnswer:"]
    responses = [" Because of light.", " Salt."]
    got = [r for batch in probe_batches(lm, inputs, responses, batch_size=2) for r in batch]
    for (ids, n_in), result in zip(encode_pairs(lm, inputs, responses), sorted(got, key=lambda r: r.index)):
        with torch.inference_mode():
            logits = model(input_ids=torch.tensor([ids])).logits[0].double()
        lp = torch.log_softmax(logits, -1)
        expected = sum(float(lp[t, ids[t + 1]]) for t in range(n_in - 1, len(ids) - 1))
        assert result.n_response_tokens == len(ids) - n_in
        assert result.logprob == pytest.approx(expected, abs=1e-3)
