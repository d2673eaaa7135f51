"""Known changes planted into a reply, for the mirroring judge's ``planted`` control.

Each function takes a reply (REPLY A) and returns the reply with one clear change in one
direction, so that a judge asked whether the new reply moved that way should answer YES:

* register +1 (:func:`plant_polite`): a courteous opening and closing around the reply;
* register -1 (:func:`plant_curt`): the reply's courteous sentences removed, and a curt
  opening and closing around what is left;
* form +1 (:func:`plant_command`): the reply laid out as numbered steps, each a directive to
  the reader, under an imperative heading;
* form -1 (:func:`plant_question`): questions to the reader before and after the reply.

Every change begins at the start of the reply, so that it survives the judge prompt's clipping
of long replies (:data:`shiftwork.stability.judge.MAX_CHARS`). The functions are deterministic:
the same reply always gets the same change.
"""

from __future__ import annotations

import re

from shiftwork.stability.judge import politeness_cues
from shiftwork.stability.variants.register import tone_score

POLITE_OPENING = "Thank you for your question, I am happy to help."
POLITE_CLOSING = "I hope this helps, and please feel free to ask if anything is unclear. Thank you!"
CURT_OPENING = "Whatever."
CURT_CLOSING = "That is all, do not waste my time again."
COMMAND_HEADING = "Follow these steps:"
STEP_VERBS: tuple[str, ...] = ("Note", "Remember", "Keep in mind")
COMMAND_CLOSING = "Check this against a second source before you rely on it."
QUESTION_OPENING = "Are you asking about this?"
QUESTION_CLOSING = "Does that answer your question? What else would you like to know?"

# a sentence ends at . ! or ? after a character that is not a digit (so "1. Foo" stays whole)
_SENTENCE_END = re.compile(r"(?<=[^\d\s][.!?])\s+")
_LIST_MARK = re.compile(r"^(?:[-*\u2022]|\d+[.)])\s+")


def sentences(text: str) -> list[str]:
    """The sentences of ``text``: its lines, each split after a ``.``, ``!`` or ``?`` that follows
    a character other than a digit or space and precedes whitespace; stripped, empty ones dropped.
    ``"Hi. It is 3.5 m.\\n1. Go."`` -> ``["Hi.", "It is 3.5 m.", "1. Go."]``."""
    out = []
    for line in text.splitlines():
        out += [s.strip() for s in _SENTENCE_END.split(line) if s.strip()]
    return out


def _around(opening: str, reply: str, closing: str) -> str:
    """``reply`` (stripped) between ``opening`` and ``closing``, one space apart."""
    return " ".join(part for part in (opening, reply.strip(), closing) if part)


def plant_polite(reply: str) -> str:
    """``reply`` between :data:`POLITE_OPENING` and :data:`POLITE_CLOSING` (five politeness cues:
    thank you, happy to, hope this helps, please, thank you)."""
    return _around(POLITE_OPENING, reply, POLITE_CLOSING)


def courteous(sentence: str) -> bool:
    """Whether a sentence is a courtesy: its register cues are net polite
    (:func:`~shiftwork.stability.variants.register.tone_score` > 0), or it holds one of the judge
    guard's politeness cues (:func:`~shiftwork.stability.judge.politeness_cues`: sorry, certainly,
    of course ...) and no net hostility. Removing courtesies thus never removes net hostility."""
    tone = tone_score(sentence)
    return tone > 0 or (tone == 0 and politeness_cues(sentence) > 0)


def plant_curt(reply: str) -> str:
    """The sentences of ``reply`` that are not courtesies (:func:`courteous`), on one line,
    between :data:`CURT_OPENING` and :data:`CURT_CLOSING` (two hostile cues: whatever, waste my).
    The result's register tone is at least 2 below the reply's."""
    kept = [s for s in sentences(reply) if not courteous(s)]
    return " ".join([CURT_OPENING, *kept, CURT_CLOSING])


def plant_command(reply: str) -> str:
    """``reply`` as numbered steps under :data:`COMMAND_HEADING`: each sentence (a list marker
    it opens with removed) becomes step ``i``, opened by a verb of :data:`STEP_VERBS` in turn
    ("1. Note: ..."), and a last step :data:`COMMAND_CLOSING` is added."""
    steps = [_LIST_MARK.sub("", s) for s in sentences(reply)]
    steps = [f"{STEP_VERBS[i % len(STEP_VERBS)]}: {s}" for i, s in enumerate(steps)] + [COMMAND_CLOSING]
    return "\n".join([COMMAND_HEADING, *(f"{i}. {s}" for i, s in enumerate(steps, start=1))])


def plant_question(reply: str) -> str:
    """``reply`` between :data:`QUESTION_OPENING` and :data:`QUESTION_CLOSING`: three questions
    to the reader, the first opening the reply."""
    return _around(QUESTION_OPENING, reply, QUESTION_CLOSING)


_PLANTS = {
    ("register", 1): plant_polite,
    ("register", -1): plant_curt,
    ("form", 1): plant_command,
    ("form", -1): plant_question,
}


def plant(reply: str, kind: str, strength: float) -> str:
    """``reply`` with the change of ``kind`` ("tone" or "register"; "form") in the direction of
    ``strength``'s sign planted in it; ValueError for another kind or a strength of 0."""
    key = ("register" if kind == "tone" else kind, 1 if strength > 0 else -1)
    if key not in _PLANTS or strength == 0:
        raise ValueError(f"no planted change for kind {kind!r} at strength {strength!r}")
    return _PLANTS[key](reply)
