"""The pairwise mirroring judge: its prompt contract, verdict parsing, and its use in score_axes."""

import numpy as np
import pandas as pd
import pytest

from shiftwork.stability.axes import axis_deltas
from shiftwork.stability.judge import judge_pairs, judge_prompt, parse_verdict, validation_sample


def test_parse_verdict():
    assert parse_verdict("YES") == 1
    assert parse_verdict(" no.") == 0
    assert parse_verdict("Yes, clearly") == 1
    assert parse_verdict("No, it is not; yes would be wrong") == 0  # the first word decides
    assert parse_verdict("yesterday nothing") is None  # whole words only
    assert parse_verdict("") is None


def test_judge_prompt_names_the_direction_and_shows_both_pairs():
    rude = judge_prompt("tone", -6, "Q?", "A1", "Ugh. Q?", "A2")
    polite = judge_prompt("tone", 6, "Q?", "A1", "Please, Q?", "A2")
    command = judge_prompt("form", 1, "Q?", "A1", "Tell me Q.", "A2")
    question = judge_prompt("form", -1, "Tell me Q.", "A1", "Q?", "A2")
    assert "more rudely" in rude and "blunter" in rude
    assert "more politely" in polite and "more polite" in polite
    assert "as a command" in command and "as a question" in question
    for text in (rude, polite, command, question):
        assert "PROMPT A:\n" in text and "REPLY B:\nA2" in text
        assert text.endswith("Answer with one word, YES or NO.\nAnswer:")
    with pytest.raises(ValueError, match="strength"):
        judge_prompt("tone", 0, "Q", "A", "Q", "A")
    long = judge_prompt("tone", 2, "Q", "x" * 5000, "Q", "A")
    assert "x" * 1500 + " [...]" in long and "x" * 1501 not in long


def _pairs(n_same: int = 2) -> pd.DataFrame:
    rows = [("register", "tone", -10.0, "Q?", "Fine.", "Ugh. Q?", "Whatever.")] * n_same
    rows.append(("structural", "form", 1.0, "Q?", "Fine.", "Say Q.", "Do this."))
    return pd.DataFrame(rows, columns=["family", "kind", "strength", "original_prompt", "original_reply",
                                       "variant_prompt", "variant_reply"])  # fmt: skip


def test_judge_pairs_asks_each_distinct_prompt_once_and_counts_unparsed_as_no():
    calls = []

    def complete(prompts):
        calls.append(list(prompts))
        return ["YES" if "blunter" in p else "I am not sure" for p in prompts]

    unchanged = pd.DataFrame(
        [("register", "tone", 4.0, "Q?", "Fine.", "Please, Q?", " Fine.\n")], columns=_pairs().columns
    )
    out = judge_pairs(pd.concat([_pairs(), unchanged], ignore_index=True), complete)
    assert len(calls) == 1 and len(calls[0]) == 2  # two identical register pairs, one form pair
    assert out["verdict"].tolist() == [1, 1, 0, 0]
    assert out["parsed"].tolist() == [True, True, False, True]
    # the unchanged reply is NO without asking
    assert out["asked"].tolist() == [True, True, True, False] and out["answer"].iloc[3] == ""
    with pytest.raises(ValueError, match="answers"):
        judge_pairs(_pairs(), lambda prompts: ["YES"])


def test_validation_sample_draws_per_verdict_and_is_seeded():
    j = pd.DataFrame({"model": "m", "family": "register", "kind": "tone", "verdict": [1] * 5 + [0] * 3,
                      "variant_id": [f"v{i}" for i in range(8)]})  # fmt: skip
    a = validation_sample(j, per_cell=2, seed=0)
    assert sorted(a["verdict"].tolist()) == [0, 0, 1, 1]
    assert a.equals(validation_sample(j, per_cell=2, seed=0))
    assert len(validation_sample(j, per_cell=10, seed=0)) == 8


def _tables():
    keys = dict(model="m", dataset="d", prompt_id="p")
    rows = [
        ("b", "baseline", "none", 0.0, "Q?", "Fine answer."),
        ("r", "register", "tone", -10.0, "Ugh. Q?", "Whatever, here it is."),
        ("s", "register", "tone", 10.0, "Please Q?", "Whatever, here it is."),
        ("n", "noise", "spacing", 2.0, "Q  ?", "Fine answer!!!"),
        ("f", "structural", "form", 1.0, "Tell me Q.", "Do this."),
    ]
    gens = pd.DataFrame(
        [
            {**keys, "variant_id": v, "family": f, "kind": k, "position": "global", "strength": s, "text": t,
             "model_input": t, "response": r, "n_tokens": 2}
            for v, f, k, s, t, r in rows
        ]
    )  # fmt: skip
    probes = pd.DataFrame([{**keys, "variant_id": r[0], "logprob": -1.0, "entropy": 1.0, "act_cos": 1.0} for r in rows])
    return gens, probes


def test_score_axes_takes_register_and_form_mirroring_from_the_judge():
    gens, probes = _tables()
    seen = []

    def judge(pairs):
        seen.append(pairs)
        return np.array([1, 0, 1])

    out = axis_deltas(gens, probes, lambda c, r: np.full(len(c), 0.5), judge).set_index("variant_id")
    pairs = seen[0]
    assert pairs["variant_id"].tolist() == ["r", "s", "f"]  # noise keeps its detector
    assert pairs["original_prompt"].tolist() == ["Q?"] * 3
    assert pairs["original_reply"].tolist() == ["Fine answer."] * 3
    assert pairs["variant_prompt"].tolist() == ["Ugh. Q?", "Please Q?", "Tell me Q."]
    assert out.loc["r", "MR"] == 1.0 and out.loc["s", "MR"] == 0.0 and out.loc["f", "MR"] == 1.0
    assert out.loc["b", "MR"] == 0.0
    # without a judge, the rule-based detectors decide: the form rule wants a command reply
    plain = axis_deltas(gens, probes, lambda c, r: np.full(len(c), 0.5)).set_index("variant_id")
    assert plain.loc["f", "MR"] == 1.0  # "Do this." opens with an imperative verb
    with pytest.raises(ValueError, match="shape"):
        axis_deltas(gens, probes, lambda c, r: np.full(len(c), 0.5), lambda pairs: [1])
