"""Structural rewrites (length and sentence form) by a rewriter model, with a content-keyed cache.

Two ways to anchor a structural variant (``stability.variants.structural.baseline``):

* ``rewrite`` (the method's): the rewriter also writes a 1.0x length rewrite and both sentence
  forms (interrogative, strength -1; imperative, strength +1); a Length variant is measured against
  the 1.0x rewrite and the imperative rewrite against the interrogative one, so a rewrite's own
  wording change is not counted as instability;
* ``original``: every rewrite is measured against the original prompt, and the form rewrite is
  the one opposite form of the prompt (+1 question -> command, -1 command -> question).

With ``rewrite``, ``stability.variants.structural.length_anchor`` says what the 1.0 length level is:
the rewriter's 1.0x rewrite (``rewrite``), or the prompt itself (``original``, the method's: its
``apply_length_variation`` returns the text unchanged at a multiple within 0.05 of 1), so that
length variants are measured against the original prompt and no 1.0x rewrite is asked for.
"""

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
# (source, target form, rewrite); a text already in the target form comes back reworded at most
FORM_SHOTS = (
    ("What is the tallest mountain in Africa?", "command", "Name the tallest mountain in Africa."),
    ("How do plants make their food?", "command", "Explain how plants make their food."),
    ("Describe the causes of the French Revolution.", "question", "What were the causes of the French Revolution?"),
    ("List three uses of copper.", "question", "What are three uses of copper?"),
    ("Which planet is closest to the sun?", "question", "Which planet is closest to the sun?"),
    ("Give two examples of mammals that lay eggs.", "command", "Give two examples of mammals that lay eggs."),
)
BASELINES: tuple[str, ...] = ("rewrite", "original")
LENGTH_ANCHORS: tuple[str, ...] = ("rewrite", "original")
# strength of each sentence form in the ``rewrite`` anchoring
FORM_STRENGTH: dict[str, float] = {"question": -1.0, "command": 1.0}
# the rewrite each structural kind is measured against in the ``rewrite`` anchoring
ANCHOR_STRENGTH: dict[str, float] = {"length": 1.0, "form": FORM_STRENGTH["question"]}


def _length_request(text: str, target: int) -> str:
    return f"Rewrite in about {target} words, with the same meaning: {text}"


def _form_request(text: str, target: str) -> str:
    return f"Rewrite as a {target} asking for the same thing: {text}"


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


def opposite_form(text: str) -> str:
    return "command" if is_question(text) else "question"


def form_messages(text: str, target: str | None = None) -> list[dict[str, str]]:
    """The rewriter's chat for a ``target`` form ("question" or "command"; default: the opposite
    of the text's own form)."""
    target = target or opposite_form(text)
    if target not in FORM_STRENGTH:
        raise ValueError(f"target must be one of {tuple(FORM_STRENGTH)}, got {target!r}")
    shots = [(_form_request(src, form), out) for src, form, out in FORM_SHOTS]
    return _chat(shots, _form_request(text, target))


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


def is_anchor(kind: str, strength: float) -> bool:
    """Whether a structural variant is the rewrite its kind is measured against (``rewrite`` anchoring)."""
    return kind in ANCHOR_STRENGTH and float(strength) == ANCHOR_STRENGTH[kind]


def anchor_strengths(length_anchor: str = "rewrite") -> dict[str, float]:
    """The strength of the rewrite each structural kind is measured against in the ``rewrite``
    anchoring: length at its 1.0x rewrite unless ``length_anchor`` is ``original`` (then the
    1.0 level is the prompt itself and length variants are not anchored), form at the
    interrogative rewrite."""
    if length_anchor not in LENGTH_ANCHORS:
        raise ValueError(
            f"stability.variants.structural.length_anchor must be one of {list(LENGTH_ANCHORS)}, got {length_anchor!r}"
        )
    if length_anchor == "original":
        return {k: s for k, s in ANCHOR_STRENGTH.items() if k != "length"}
    return dict(ANCHOR_STRENGTH)


def length_multiples(
    lengths: Sequence[float], baseline: str = "rewrite", length_anchor: str = "rewrite"
) -> list[float]:
    """The length multiples the rewriter is asked for, in increasing order: ``lengths``, and 1.0
    where the 1.0 level is a rewrite (``baseline`` and ``length_anchor`` both ``rewrite``, and at
    least one length). With ``length_anchor`` ``original`` the 1.0 level is the prompt itself and
    is not rewritten."""
    anchored = baseline == "rewrite" and "length" in anchor_strengths(length_anchor)
    return sorted({float(m) for m in lengths} | ({1.0} if anchored and len(lengths) else set()))


def rewrite_requests(
    prompts: pd.DataFrame,
    lengths: Sequence[float],
    form: bool,
    baseline: str = "rewrite",
    length_anchor: str = "rewrite",
) -> pd.DataFrame:
    """One row per (prompt, rewrite); ``instruction`` is the JSON of the few-shot chat for the rewriter.

    With ``baseline="rewrite"`` a 1.0x length rewrite joins ``lengths`` (when there are any, and
    unless ``length_anchor`` is ``original``) and ``form`` asks for both forms; with
    ``"original"``, ``lengths`` as given and one opposite-form rewrite."""
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {BASELINES}, got {baseline!r}")
    multiples = length_multiples(lengths, baseline, length_anchor)
    rows = []
    for p in prompts.itertuples(index=False):
        for m in multiples:
            rows.append((p.prompt_id, "length", m, json.dumps(length_messages(p.prompt, m))))
        if not form:
            continue
        targets = list(FORM_STRENGTH) if baseline == "rewrite" else [opposite_form(p.prompt)]
        for target in targets:
            strength = FORM_STRENGTH[target] if baseline == "rewrite" else form_strength(p.prompt)
            rows.append((p.prompt_id, "form", strength, json.dumps(form_messages(p.prompt, target))))
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
