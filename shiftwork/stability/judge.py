"""A pairwise LLM judge of mirroring, as the method measures register mirroring.

The judge sees the original prompt with its reply and the variant prompt with its reply, is told
which way the variant moved (more polite, ruder; rewritten as a command or as a question), and
answers YES when the variant's reply moved the same way compared with the original reply, NO
otherwise. The verdict is the variant's mirroring value (the original against itself is 0 by
definition). Register variants and sentence-form rewrites are judged; surface noise and length
keep their rule-based detectors (the method's, see :mod:`shiftwork.stability.mirroring`).

The judge is any ``complete(prompts) -> answers`` callable: a prepared local model
(:func:`local_completer`) or an API model. The prompt contract is the same for both.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from shiftwork.inference.formatting import model_input

Complete = Callable[[list[str]], list[str]]

JUDGED: tuple[tuple[str, str], ...] = (("register", "tone"), ("structural", "form"))
PAIR_COLUMNS = [
    "family",
    "kind",
    "strength",
    "original_prompt",
    "original_reply",
    "variant_prompt",
    "variant_reply",
]
MAX_CHARS = 1500

_RULES = (
    "Judge only the replies, and only the quality named below; the prompts are context. Differences "
    "in facts, correctness or length do not count. If the difference is small or unclear, answer NO."
)
_SHIFT = {
    ("register", 1): (
        "The variant prompt asks the same thing more politely.",
        "Is REPLY B clearly more polite than REPLY A: warmer, more courteous, more hedged, "
        "with more thanks or softening?",
    ),
    ("register", -1): (
        "The variant prompt asks the same thing more rudely or with a negative framing.",
        "Is REPLY B clearly blunter or curter than REPLY A: fewer courtesies, less warmth, "
        "harsher wording? Apologies, refusals and 'as an AI' remarks are not bluntness.",
    ),
    ("form", 1): (
        "The variant prompt is rewritten as a command (imperative form).",
        "Does REPLY B take a more imperative form than REPLY A: instructions, directives or "
        "steps addressed to the reader?",
    ),
    ("form", -1): (
        "The variant prompt is rewritten as a question (interrogative form).",
        "Does REPLY B take a more interrogative form than REPLY A: asking questions back, "
        "or answering in the shape of a question?",
    ),
}


def _clip(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS] + " [...]"


def judge_prompt(
    kind: str,
    strength: float,
    original_prompt: str,
    original_reply: str,
    variant_prompt: str,
    variant_reply: str,
) -> str:
    """The question put to the judge for one (original, variant) pair of ``kind`` "tone" or "form"."""
    key = ("register" if kind == "tone" else kind, 1 if strength > 0 else -1)
    if key not in _SHIFT or strength == 0:
        raise ValueError(f"no judge question for kind {kind!r} at strength {strength!r}")
    context, question = _SHIFT[key]
    return (
        "You compare two replies of an assistant to find out whether the second one mirrors how its "
        f"prompt was changed. {context}\n{_RULES}\n\n"
        f"PROMPT A:\n{_clip(original_prompt)}\n\nREPLY A:\n{_clip(original_reply)}\n\n"
        f"PROMPT B:\n{_clip(variant_prompt)}\n\nREPLY B:\n{_clip(variant_reply)}\n\n"
        f"{question} Answer with one word, YES or NO.\nAnswer:"
    )


_VERDICT = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


def parse_verdict(answer: str) -> int | None:
    """1 for YES, 0 for NO (the first of the two words in the answer decides), None for neither."""
    m = _VERDICT.search(answer or "")
    if m is None:
        return None
    return int(m.group(1).lower() == "yes")


def is_judged(family: str, kind: str) -> bool:
    return (family, kind) in JUDGED


def judge_pairs(pairs: pd.DataFrame, complete: Complete, ask_unchanged: bool = False) -> pd.DataFrame:
    """``pairs`` (columns :data:`PAIR_COLUMNS`) with ``judge_prompt``, ``asked``, ``answer``,
    ``verdict`` (0/1) and ``parsed``. Each distinct judge prompt is asked once; an answer with
    neither YES nor NO counts as NO (the judge is told to answer NO when unsure) and has
    ``parsed`` False. A variant reply equal to the original reply (surrounding whitespace aside)
    has not moved at all: it is NO without asking (``asked`` False, ``answer`` empty), since a
    weak judge answers YES to such pairs about as often as to any other; with ``ask_unchanged``
    (the judge's controls, :mod:`shiftwork.stability.judge_controls`) such pairs are asked too."""
    missing = [c for c in PAIR_COLUMNS if c not in pairs.columns]
    if missing:
        raise ValueError(f"judge pairs are missing column(s) {missing}")
    out = pairs.reset_index(drop=True).copy()
    out["judge_prompt"] = [
        judge_prompt(r.kind, r.strength, r.original_prompt, r.original_reply, r.variant_prompt, r.variant_reply)
        for r in out.itertuples(index=False)
    ]
    out["asked"] = [
        ask_unchanged or a.strip() != b.strip() for a, b in zip(out["original_reply"], out["variant_reply"])
    ]
    unique = list(dict.fromkeys(out.loc[out["asked"], "judge_prompt"]))
    answers = complete(unique) if unique else []
    if len(answers) != len(unique):
        raise ValueError(f"judge returned {len(answers)} answers for {len(unique)} prompts")
    by_prompt = dict(zip(unique, answers))
    out["answer"] = [by_prompt[p] if asked else "" for p, asked in zip(out["judge_prompt"], out["asked"])]
    verdicts = [parse_verdict(a) if asked else 0 for a, asked in zip(out["answer"], out["asked"])]
    out["parsed"] = [v is not None for v in verdicts]
    out["verdict"] = np.array([v or 0 for v in verdicts], dtype=np.int64)
    return out


# the method's politeness cues (utils/metrics.py, _POLITE_CUES), matched as substrings of the
# lower-cased reply; "if it’s not too much trouble" with the typographic apostrophe, as there
POLITENESS_CUES: tuple[str, ...] = (
    "please",
    "thank",
    "thanks",
    "appreciate",
    "sorry",
    "apolog",
    "kindly",
    "would you",
    "could you",
    "if you don't mind",
    "if it’s not too much trouble",
    "happy to",
    "glad to",
    "certainly",
    "of course",
)


def politeness_cues(text: str) -> int:
    """How many of :data:`POLITENESS_CUES` occur in ``text`` (lower-cased), each counted once."""
    lowered = (text or "").lower()
    return sum(cue in lowered for cue in POLITENESS_CUES)


def cue_guarded(verdict: int, family: str, original_reply: str, variant_reply: str) -> int:
    """The method's guard on a judged register verdict: a YES becomes NO when neither reply holds
    a politeness cue (:func:`politeness_cues`), since a tone shift with no sign of courtesy on
    either side is taken for a random YES. Other families and NO verdicts pass unchanged."""
    if family != "register" or not verdict:
        return verdict
    return int(politeness_cues(original_reply) > 0 or politeness_cues(variant_reply) > 0)


def guard_judgments(table: pd.DataFrame) -> pd.DataFrame:
    """A :func:`judge_pairs` table with :func:`cue_guarded` applied to every verdict, and a column
    ``cue_guard``, True where it turned a YES into NO."""
    guarded = [
        cue_guarded(int(v), f, a, b)
        for v, f, a, b in zip(table["verdict"], table["family"], table["original_reply"], table["variant_reply"])
    ]
    out = table.copy()
    out["cue_guard"] = (out["verdict"].to_numpy() == 1) & (np.asarray(guarded) == 0)
    out["verdict"] = np.asarray(guarded, dtype=np.int64)
    return out


def local_completer(lm, batch_size: int = 16, max_new_tokens: int = 4) -> Complete:
    """A judge on a prepared local model: greedy, a few tokens, chat template when it has one."""
    from shiftwork.inference.engine import Decoding, generate

    def complete(prompts: Sequence[str]) -> list[str]:
        inputs = [model_input(lm.tokenizer, p, lm.chat) for p in prompts]
        return [g.response for g in generate(lm, inputs, Decoding(max_new_tokens, batch_size), what="judge")]

    return complete


def api_completer(name: str, source: dict, cache_dir: str, max_new_tokens: int = 4) -> Complete:
    """A judge behind an OpenAI-compatible API: each judge prompt is one user message; replies are
    cached per request under ``cache_dir`` (see :mod:`shiftwork.inference.api`)."""
    from shiftwork.inference.engine import make_complete

    chat = make_complete(name, source, cache_dir)

    def complete(prompts: Sequence[str]) -> list[str]:
        return chat([[{"role": "user", "content": p}] for p in prompts], max_new_tokens)

    complete.client = chat.client  # type: ignore[attr-defined]
    return complete


def validation_sample(judgments: pd.DataFrame, per_cell: int, seed: int) -> pd.DataFrame:
    """Up to ``per_cell`` judged pairs per (model, family, kind, verdict), drawn by ``seed``, for
    a person to check the judge by hand (the method kept examples of both verdicts)."""
    if judgments.empty:
        return judgments.copy()
    keys = [c for c in ("model", "family", "kind", "verdict") if c in judgments.columns]
    parts = []
    for i, (_, group) in enumerate(judgments.groupby(keys, sort=True)):
        rng = np.random.default_rng([seed, i])
        take = rng.choice(len(group), size=min(per_cell, len(group)), replace=False)
        parts.append(group.iloc[np.sort(take)])
    return pd.concat(parts, ignore_index=True)
