"""Social register variants: wrap a prompt in polite or hostile framing without changing the task.

Strength runs from -10 (openly hostile) to +10 (effusively deferential); 0 means "leave the prompt alone".
The same cue lists drive :func:`tone_score`, which a later step uses to ask whether a model's reply
mirrors the tone it was addressed in.
"""

from __future__ import annotations

import numbers
import re

STRENGTHS: tuple[int, ...] = (-10, -8, -6, -4, -2, 2, 4, 6, 8, 10)
POSITIONS: tuple[str, ...] = ("prefix", "suffix", "global")

# Phrases are attitude only: no extra requests, no change of format, no question marks.
PREFIX: dict[int, str] = {
    2: "Please take a look at this.",
    4: "I would appreciate your help with the following, please.",
    6: "Hello, I hope you are well. I would be very grateful if you could kindly help me with the following.",
    8: (
        "Good day, and my apologies for taking up your time. I would be truly grateful "
        "if you would kindly help me with the following, please."
    ),
    10: (
        "Dear esteemed assistant, please accept my most humble apologies for intruding upon your "
        "valuable time. It would be an immense honour and a true privilege if you would be so kind "
        "as to graciously assist me with the following."
    ),
    -2: "Hurry up with this one.",
    -4: "Ugh, hurry up and deal with this already.",
    -6: "I am fed up with your slow, useless answers, so hurry up and deal with this.",
    -8: (
        "Listen, you useless, clueless machine, I am sick of your pathetic excuses, "
        "so hurry up and deal with this for once."
    ),
    -10: (
        "Listen up, you worthless, brainless heap of junk. I am absolutely sick of your pathetic, "
        "incompetent drivel, and you are the most useless excuse for an assistant I have ever had "
        "the misfortune to deal with, so hurry up and handle this for once."
    ),
}

SUFFIX: dict[int, str] = {
    2: "Thanks.",
    4: "Thank you so much for your help.",
    6: "Thank you so much, I really appreciate your time and help.",
    8: "Thank you very much in advance; I sincerely appreciate your generous help and your patience.",
    10: (
        "With my deepest and most heartfelt gratitude, I thank you a thousand times over for your "
        "generous patience and wonderful kindness; I am forever in your debt and truly grateful "
        "for the privilege of your help."
    ),
    -2: "Whatever, just get it done.",
    -4: "And do not waste my time, I am losing patience.",
    -6: "Do not waste my time again with your usual sloppy nonsense.",
    -8: "Your answers are ridiculous garbage and a complete waste of my time, as usual.",
    -10: (
        "I have had it with your idiotic garbage, you hopeless, embarrassing waste of electricity. "
        "You are a damn disgrace and I despise having to deal with you."
    ),
}

POLITE_CUES: tuple[str, ...] = (
    "please",
    "thank you",
    "thanks",
    "kindly",
    "happy to",
    "glad to",
    "apologi",
    "sorry",
    "appreciat",
    "grateful",
    "gratitude",
    "sincere",
    "humble",
    "gracious",
    "honou",
    "privilege",
    "so kind",
    "kindness",
    "generous",
    "wonderful",
    "hope you",
    "hope this helps",
    "my pleasure",
    "esteemed",
    "heartfelt",
)
HOSTILE_CUES: tuple[str, ...] = (
    "stupid",
    "useless",
    "hurry",
    "whatever",
    "ugh",
    "waste of",
    "waste my",
    "wasting my",
    "losing patience",
    "fed up",
    "sick of",
    "sloppy",
    "nonsense",
    "clueless",
    "pathetic",
    "for once",
    "worthless",
    "brainless",
    "junk",
    "incompetent",
    "drivel",
    "ridiculous",
    "garbage",
    "idiotic",
    "hopeless",
    "embarrassing",
    "damn",
    "disgrace",
    "despise",
)
# Cues that are word stems: they may match the start of a longer word ("apologi" -> "apologies").
STEM_CUES: frozenset[str] = frozenset({"apologi", "appreciat", "sincere", "gracious", "honou"})


def _cue_pattern(cues: tuple[str, ...]) -> re.Pattern[str]:
    alternatives = []
    for cue in sorted(cues, key=len, reverse=True):
        body = r"\s+".join(re.escape(word) for word in cue.split())
        tail = r"\w*" if cue in STEM_CUES else r"\b"
        alternatives.append(rf"\b{body}{tail}")
    return re.compile("|".join(alternatives), re.IGNORECASE)


_POLITE_RE = _cue_pattern(POLITE_CUES)
_HOSTILE_RE = _cue_pattern(HOSTILE_CUES)


def tone_score(text: str) -> int:
    """Polite cue occurrences minus hostile cue occurrences in ``text`` (case-insensitive, whole words).

    Stem cues (:data:`STEM_CUES`) also match as the start of a longer word. Matches do not overlap.
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    return len(_POLITE_RE.findall(text)) - len(_HOSTILE_RE.findall(text))


def apply_register(text: str, strength: int, position: str) -> str:
    """Wrap ``text`` in the register phrase(s) for ``strength`` at ``position``; strength 0 is a no-op."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    if position not in POSITIONS:
        raise ValueError(f"position must be one of {POSITIONS}, got {position!r}")
    if isinstance(strength, bool) or not isinstance(strength, numbers.Integral) or strength not in (0, *STRENGTHS):
        raise ValueError(f"strength must be 0 or one of {STRENGTHS}, got {strength!r}")
    s = int(strength)
    if s == 0:
        return text
    if position == "prefix":
        return f"{PREFIX[s]} {text}"
    if position == "suffix":
        return f"{text} {SUFFIX[s]}"
    return f"{PREFIX[s]} {text} {SUFFIX[s]}"
