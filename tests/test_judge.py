import pandas as pd

from shiftwork.stability.axes import score_axes
from shiftwork.stability.judge import parse_tone
from shiftwork.stability.mirroring import judged_register_mirrors


def test_parse_tone():
    assert parse_tone("Polite.") == 1
    assert parse_tone(" rude") == -1
    assert parse_tone("Neutral, mostly") == 0
    assert parse_tone("I cannot tell") == 0
    assert parse_tone("The tone is hostile") == -1


def test_judged_register_mirrors():
    assert judged_register_mirrors(1, 6) == 1
    assert judged_register_mirrors(1, -6) == 0
    assert judged_register_mirrors(-1, -2) == 1
    assert judged_register_mirrors(0, 10) == 0


def test_score_axes_uses_the_judge_for_register_only():
    keys = dict(model="m", dataset="d", prompt_id="p")
    gens = pd.DataFrame(
        [
            {
                **keys,
                "variant_id": "b",
                "family": "baseline",
                "kind": "none",
                "position": "none",
                "strength": 0.0,
                "text": "Q?",
                "model_input": "Q?",
                "response": "Fine answer.",
                "n_tokens": 2,
            },
            {
                **keys,
                "variant_id": "r",
                "family": "register",
                "kind": "tone",
                "position": "global",
                "strength": -10.0,
                "text": "Ugh. Q?",
                "model_input": "Ugh. Q?",
                "response": "Whatever, here it is.",
                "n_tokens": 4,
            },
            {
                **keys,
                "variant_id": "s",
                "family": "register",
                "kind": "tone",
                "position": "global",
                "strength": 10.0,
                "text": "Please Q?",
                "model_input": "Please Q?",
                "response": "Whatever, here it is.",
                "n_tokens": 4,
            },
        ]
    )
    probes = pd.DataFrame([{**keys, "variant_id": v, "logprob": -1.0, "entropy": 1.0, "act_cos": 1.0} for v in "brs"])
    calls = []

    def judge(texts):
        calls.append(list(texts))
        return {"Fine answer.": 0, "Whatever, here it is.": -1}

    out = score_axes(gens, probes, lambda c, r: [0.5] * len(c), judge).set_index("variant_id")
    # rude variant, rude response, neutral baseline response: 1 - 0
    assert out.loc["r", "MR"] == 1.0
    # polite variant, rude response: 0 - 0
    assert out.loc["s", "MR"] == 0.0
    assert len(calls) == 1 and set(calls[0]) == {"Fine answer.", "Whatever, here it is."}
