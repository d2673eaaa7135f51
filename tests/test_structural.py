import pandas as pd

from shiftwork.stability.variants.structural import (
    clean_rewrite,
    form_messages,
    is_anchor,
    length_messages,
    merge_cache,
    messages_as_plain,
    rewrite_requests,
    run_rewrites,
)


def test_instructions_carry_targets():
    text = "Explain how vaccines train the immune system to recognise a virus."  # 11 words
    assert length_messages(text, 2)[-1]["content"] == f"Rewrite in about 22 words, with the same meaning: {text}"
    assert "about 3 words" in length_messages(text, 0.25)[-1]["content"]
    assert form_messages(text)[-1]["content"].startswith("Rewrite as a question")
    assert form_messages("Why is the sky blue?")[-1]["content"].startswith("Rewrite as a command")
    msgs = form_messages(text)
    assert [m["role"] for m in msgs[:3]] == ["system", "user", "assistant"]
    plain = messages_as_plain(msgs)
    assert plain.endswith(f"Request: {msgs[-1]['content']}\nRewrite:")


def test_clean_rewrite():
    assert clean_rewrite('Rewritten text: "Tell me why the sky is blue."') == "Tell me why the sky is blue."
    assert (
        clean_rewrite("Here is the shorter version:\nWhy is the sky blue?\n\nI hope this helps!")
        == "Why is the sky blue?"
    )
    assert clean_rewrite("  Name the   largest planet.  ") == "Name the largest planet."
    assert clean_rewrite("") == ""


def test_rewrites_are_cached_by_content():
    prompts = pd.DataFrame({"prompt_id": ["a", "b"], "prompt": ["Why is the sky blue?", "Name a prime number."]})
    requests = rewrite_requests(prompts, [0.5, 2], form=True, baseline="original")
    assert len(requests) == 6
    assert requests[requests["kind"] == "form"]["strength"].tolist() == [1.0, -1.0]
    calls = []

    def fake(instructions):
        calls.append(len(instructions))
        return [f"Output: rewrite {i}" for i in range(len(instructions))]

    first, n_new = run_rewrites(requests, fake, "digest1", 64)
    assert n_new == 6 and calls == [6]
    cache = merge_cache(None, first)
    again, n_new = run_rewrites(requests, fake, "digest1", 64, cache)
    assert n_new == 0 and calls == [6]
    assert again["rewrite"].tolist() == first["rewrite"].tolist()
    other_model, n_new = run_rewrites(requests, fake, "digest2", 64, cache)
    assert n_new == 6


def test_rewrite_anchoring_asks_for_the_anchor_rewrites():
    # the method's anchoring: a 1.0x length rewrite joins the multiples and both forms are
    # written, whatever the prompt's own form; "original" keeps one opposite-form rewrite
    prompts = pd.DataFrame({"prompt_id": ["a", "b"], "prompt": ["Why is the sky blue?", "Name a prime number."]})
    requests = rewrite_requests(prompts, [2, 0.5], form=True, baseline="rewrite")
    got = [(r.prompt_id, r.kind, r.strength) for r in requests.itertuples()]
    assert got == [
        ("a", "length", 0.5), ("a", "length", 1.0), ("a", "length", 2.0), ("a", "form", -1.0), ("a", "form", 1.0),
        ("b", "length", 0.5), ("b", "length", 1.0), ("b", "length", 2.0), ("b", "form", -1.0), ("b", "form", 1.0),
    ]  # fmt: skip
    import json

    last = [json.loads(i)[-1]["content"] for i in requests["instruction"]]
    assert last[3] == "Rewrite as a question asking for the same thing: Why is the sky blue?"
    assert last[4] == "Rewrite as a command asking for the same thing: Why is the sky blue?"
    assert last[1] == "Rewrite in about 5 words, with the same meaning: Why is the sky blue?"
    # no length multiples -> no 1.0x anchor either
    assert rewrite_requests(prompts, [], form=False, baseline="rewrite").empty
    assert is_anchor("length", 1.0) and is_anchor("form", -1.0)
    assert not is_anchor("length", 2.0) and not is_anchor("form", 1.0)
