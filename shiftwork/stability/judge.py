"""An optional judge model for register mirroring: a chat model from the registry is asked
whether a response is polite, rude or neutral, instead of counting lexical cues."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from shiftwork.inference.formatting import model_input
from shiftwork.inference.generation import generate_all
from shiftwork.models.loading import LoadedModel

JUDGE_PROMPT = (
    "Read the reply below and say what tone it takes towards the person it answers. "
    "Answer with exactly one word: polite, rude or neutral.\n\nReply:\n{text}"
)
_TONES = {"polite": 1, "courteous": 1, "friendly": 1, "rude": -1, "hostile": -1, "impolite": -1, "neutral": 0}


def parse_tone(answer: str) -> int:
    """+1 polite, -1 rude, 0 neutral; the first tone word in the judge's answer decides,
    and an answer without one counts as neutral."""
    for word in re.findall(r"[a-z]+", answer.lower()):
        if word in _TONES:
            return _TONES[word]
    return 0


def judge_tones(lm: LoadedModel, texts: Sequence[str], batch_size: int = 16, max_chars: int = 1500) -> dict[str, int]:
    """Tone of every distinct text, judged once each."""
    unique = list(dict.fromkeys(texts))
    inputs = [model_input(lm.tokenizer, JUDGE_PROMPT.format(text=t[:max_chars]), lm.chat) for t in unique]
    answers = generate_all(lm, inputs, max_new_tokens=4, batch_size=batch_size)
    return {t: parse_tone(a.response) for t, a in zip(unique, answers)}


def judge_tones_with(
    complete: Callable[[list[list[dict[str, str]]], int], list[str]], texts: Sequence[str], max_chars: int = 1500
) -> dict[str, int]:
    """:func:`judge_tones` with a judge reached through ``complete(messages_list, max_tokens)``,
    e.g. a chat model served over an API (:func:`shiftwork.inference.api.make_complete`)."""
    unique = list(dict.fromkeys(texts))
    chats = [[{"role": "user", "content": JUDGE_PROMPT.format(text=t[:max_chars])}] for t in unique]
    answers = complete(chats, 4) if chats else []
    return {t: parse_tone(a) for t, a in zip(unique, answers)}
