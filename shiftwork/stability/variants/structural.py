"""Structural rewrites (length and sentence form) by a rewriter model, with a content-keyed cache."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence

import pandas as pd

from shiftwork.provenance import digest

REWRITE_COLUMNS = ["prompt_id", "kind", "strength", "instruction", "rewrite", "cache_key"]


def word_count(text: str) -> int:
    return len(text.split())


def is_question(text: str) -> bool:
    return text.rstrip().endswith("?")


SYSTEM = "You rewrite the user's text exactly as asked. You never answer it and never explain."

# Worked examples shown to the rewriter before each request (written for shiftwork).
LENGTH_SHOTS = (
    (
        "What is the tallest mountain in Africa?",
        15,
        "Could you tell me which mountain is the tallest one anywhere on the African continent?",
    ),
    (
        "Could you please explain to me how it is that plants manage to make their own food?",
        5,
        "How do plants make food?",
    ),
    (
        "Name three uses of copper.",
        14,
        "Please name three different ways in which the metal copper is commonly put to use.",
    ),
    (
        "Describe in a few sentences what the main causes of the French Revolution were.",
        5,
        "Describe the French Revolution's causes.",
    ),
)
FORM_SHOTS = (
    ("What is the tallest mountain in Africa?", "Name the tallest mountain in Africa."),
    ("How do plants make their food?", "Explain how plants make their food."),
    ("Describe the causes of the French Revolution.", "What were the causes of the French Revolution?"),
    ("List three uses of copper.", "What are three uses of copper?"),
)


def _length_request(text: str, target: int) -> str:
    return f"Rewrite in about {target} words, with the same meaning: {text}"


def _form_request(text: str) -> str:
    what = "a command" if is_question(text) else "a question"
    return f"Rewrite as {what} asking for the same thing: {text}"


def _chat(shots: list[tuple[str, str]], request: str) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": SYSTEM}]
    for user, assistant in shots:
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
    return messages + [{"role": "user", "content": request}]


def target_words(text: str, multiple: float) -> int:
    return max(2, round(word_count(text) * multiple))


def length_messages(text: str, multiple: float) -> list[dict[str, str]]:
    shots = [(_length_request(src, n), out) for src, n, out in LENGTH_SHOTS]
    return _chat(shots, _length_request(text, target_words(text, multiple)))


def form_messages(text: str) -> list[dict[str, str]]:
    return _chat([(_form_request(src), out) for src, out in FORM_SHOTS], _form_request(text))


def messages_as_plain(messages: list[dict[str, str]]) -> str:
    """A base-model rendering of the same few-shot conversation, ending where the rewrite starts."""
    lines = [messages[0]["content"], ""]
    for m in messages[1:]:
        lines.append(("Request: " if m["role"] == "user" else "Rewrite: ") + m["content"])
    return "\n".join(lines) + "\nRewrite:"


def form_strength(text: str) -> float:
    """+1 for interrogative -> imperative, -1 for imperative -> interrogative."""
    return 1.0 if is_question(text) else -1.0


_LABEL = re.compile(
    r"^\s*(?:here(?:'s| is)[^:\n]*:|(?:rewritten|shorter|longer|new)?\s*(?:text|question|request|command|version)\s*:)\s*",
    re.I,
)


def clean_rewrite(raw: str) -> str:
    """The rewrite itself: without a leading label line, surrounding quotes or a trailing ramble."""
    text = raw.strip()
    text = _LABEL.sub("", text, count=1).strip()
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    text = paragraphs[0] if paragraphs else ""
    text = " ".join(text.split())
    if len(text) >= 2 and text[0] in "\"'" and text[-1] == text[0]:
        text = text[1:-1].strip()
    return text


def rewrite_requests(prompts: pd.DataFrame, lengths: Sequence[float], form: bool) -> pd.DataFrame:
    """One row per (prompt, rewrite); ``instruction`` is the JSON of the few-shot chat for the rewriter."""
    rows = []
    for p in prompts.itertuples(index=False):
        for m in lengths:
            rows.append((p.prompt_id, "length", float(m), json.dumps(length_messages(p.prompt, float(m)))))
        if form:
            rows.append((p.prompt_id, "form", form_strength(p.prompt), json.dumps(form_messages(p.prompt))))
    return pd.DataFrame(rows, columns=["prompt_id", "kind", "strength", "instruction"])


def cache_key(rewriter_digest: str, instruction: str, max_new_tokens: int) -> str:
    return digest({"rewriter": rewriter_digest, "instruction": instruction, "max_new_tokens": max_new_tokens})


def run_rewrites(
    requests: pd.DataFrame,
    rewrite_fn: Callable[[Sequence[str]], list[str]],
    rewriter_digest: str,
    max_new_tokens: int,
    cache: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, int]:
    """Fill ``rewrite`` for every request, calling ``rewrite_fn(instructions) -> texts`` only
    for instructions the cache does not hold. Returns (table, number of new rewrites)."""
    requests = requests.copy()
    requests["cache_key"] = [cache_key(rewriter_digest, ins, max_new_tokens) for ins in requests["instruction"]]
    known: Mapping[str, str] = {}
    if cache is not None and len(cache):
        known = dict(zip(cache["cache_key"], cache["rewrite"]))
    todo = [k for k in dict.fromkeys(requests["cache_key"]) if k not in known]
    fresh: dict[str, str] = {}
    if todo:
        by_key = dict(zip(requests["cache_key"], requests["instruction"]))
        outputs = rewrite_fn([by_key[k] for k in todo])
        fresh = {k: clean_rewrite(o) for k, o in zip(todo, outputs)}
    lookup = {**known, **fresh}
    requests["rewrite"] = [lookup[k] for k in requests["cache_key"]]
    return requests[REWRITE_COLUMNS], len(fresh)


def merge_cache(cache: pd.DataFrame | None, table: pd.DataFrame) -> pd.DataFrame:
    new = table[["cache_key", "instruction", "rewrite"]]
    if cache is None or not len(cache):
        return new.drop_duplicates("cache_key").reset_index(drop=True)
    both = pd.concat([cache[["cache_key", "instruction", "rewrite"]], new], ignore_index=True)
    return both.drop_duplicates("cache_key", keep="first").sort_values("cache_key").reset_index(drop=True)
