"""Binary mirroring detectors: does a model's reply take up the perturbation it was prompted with?

Each detector returns ``1`` (the reply mirrors the variant) or ``0`` (it does not). They are
deliberately simple, rule-based and documented rule by rule, so that a mirroring rate can be
read back to the exact test that produced it. :func:`mirroring` picks the detector for a
variant's family and kind.

* register   -> :func:`register_mirrors` (the reply's tone has the sign of the prompt's tone)
* noise      -> :func:`method_noise_mirrors` (the method's counts and thresholds) or
  :func:`noise_mirrors` (the reply is noisier than the baseline reply by a margin)
* structural length -> :func:`length_mirrors` (the reply's length moved by the prompt's multiple)
* structural form   -> :func:`form_mirrors` (a command gets a command, a question a question)
* baseline   -> always 0
"""

from __future__ import annotations

import math
import numbers
import re

from shiftwork.stability.variants.noise import MARKS
from shiftwork.stability.variants.register import tone_score

NOISE_KINDS: tuple[str, ...] = ("spacing", "punctuation", "casing")
# Default margins for noise_mirrors: how much noisier than the baseline reply a reply must be.
NOISE_MARGINS: dict[str, float] = {
    "spacing": 0.5,  # runs of 2+ spaces per 100 characters
    "punctuation": 0.5,  # misplaced marks per 100 characters
    "casing": 0.05,  # share of non-initial letters that are upper case
}
# Slack for "exactly at multiple +/- tolerance" when the ratio is not exactly representable.
LENGTH_EPS: float = 1e-9

# First words that read as an instruction to the reader. Kept short and unambiguous: words that
# often open a plain statement ("first", "here", "this") are left out on purpose, and "let" does
# not count when followed by "me" ("Let me explain" is the model talking about itself).
IMPERATIVE_VERBS: frozenset[str] = frozenset(
    {
        "please",
        "let",
        "let's",
        "try",
        "consider",
        "make",
        "take",
        "use",
        "remember",
        "note",
        "imagine",
        "think",
        "start",
        "begin",
        "follow",
        "go",
        "add",
        "mix",
        "put",
        "keep",
        "check",
        "open",
        "click",
        "choose",
        "select",
        "write",
        "read",
        "list",
        "name",
        "describe",
        "explain",
        "find",
        "look",
        "ask",
        "avoid",
        "don't",
        "do",
        "never",
        "always",
        "be",
        "get",
        "give",
        "tell",
        "see",
        "set",
        "turn",
        "place",
        "combine",
        "calculate",
        "compute",
        "identify",
        "define",
        "compare",
        "install",
        "run",
        "stop",
        "ensure",
        "visit",
        "contact",
        "focus",
        "prepare",
        "apply",
        "pick",
    }
)

_SPACE_RUN_RE = re.compile(r"(?<=\S) {2,}(?=\S)")
_WORD_RE = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")
_NUMBERED_STEP_RE = re.compile(r"^\s*1[.)](?:\s|$)")
_STEP_WORD_RE = re.compile(r"^\s*(?:\*\*)?step\s*(?:1|one)\b", re.IGNORECASE)
_BULLET_RE = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+(.*)$")
_SENTENCE_END_RE = re.compile(r"[.!?](?=\s|$)|\n")
_CLOSERS = ")]}\"'\u00bb\u201d\u2019"


def _check_str(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a str, got {type(value).__name__}")
    return value


def _check_number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


# --------------------------------------------------------------------------- register


def register_mirrors(response: str, strength: float) -> int:
    """1 if the reply takes up the sign of the prompt's social tone, else 0.

    Rule: ``strength > 0`` and ``tone_score(response) > 0`` (polite prompt, polite reply), or
    ``strength < 0`` and ``tone_score(response) < 0`` (hostile prompt, hostile reply).
    ``strength == 0`` always gives 0.
    """
    _check_str(response, "response")
    s = _check_number(strength, "strength")
    if s == 0:
        return 0
    score = tone_score(response)
    return int((s > 0 and score > 0) or (s < 0 and score < 0))


# --------------------------------------------------------------------------- noise


def _per_100(count: int, text: str) -> float:
    return 100.0 * count / len(text) if text else 0.0


def _mark_is_normal(text: str, i: int) -> bool:
    """Whether the mark at ``text[i]`` sits where ordinary prose puts it (see :func:`noise_level`)."""
    nxt = text[i + 1] if i + 1 < len(text) else ""
    prev = text[i - 1] if i > 0 else ""
    if nxt == "" or nxt.isspace() or nxt in _CLOSERS:
        return True
    if prev.isdigit() and nxt.isdigit():  # 3.14, 1,000, 10:30, 1990-1995
        return True
    return text[i] == "-" and prev.isalnum() and nxt.isalnum()  # well-known, COVID-19


def noise_level(text: str, kind: str) -> float:
    """How noisy ``text`` is in the sense of noise ``kind``; 0.0 for empty text.

    * ``spacing``: runs of two or more consecutive spaces lying between two non-space characters,
      per 100 characters of text. Indentation at the start of a line and trailing spaces at the
      end of a line are not counted (they are layout, not noise).
    * ``punctuation``: characters from :data:`MARKS` (``.,;:!-``) in an abnormal position, per
      100 characters. A mark is normal when it is followed by whitespace, the end of the text or
      a closing bracket/quote (``"end."``, ``"word, next"``, ``"(sic.)"``); when it sits between
      two digits (``3.14``, ``1,000``, ``10:30``); or, for ``-`` only, between two letters or
      digits (``well-known``). Every other mark is abnormal (``"wo;rd"``, the first of ``",,"``).
    * ``casing``: share of upper-case letters among cased letters that are not the first letter
      of a word (a letter directly after another letter is "not first"); 0.0 if there are none.
    """
    _check_str(text, "text")
    if kind not in NOISE_KINDS:
        raise ValueError(f"kind must be one of {NOISE_KINDS}, got {kind!r}")
    if not text:
        return 0.0
    if kind == "spacing":
        return _per_100(len(_SPACE_RUN_RE.findall(text)), text)
    if kind == "punctuation":
        bad = sum(1 for i, c in enumerate(text) if c in MARKS and not _mark_is_normal(text, i))
        return _per_100(bad, text)
    upper = total = 0
    for i, c in enumerate(text):
        if not (c.isupper() or c.islower()):
            continue
        if i > 0 and text[i - 1].isalpha():
            total += 1
            upper += c.isupper()
    return upper / total if total else 0.0


def noise_mirrors(response: str, baseline_response: str, kind: str, margin: float | None = None) -> int:
    """1 if ``response`` is noisier than ``baseline_response`` by more than ``margin``, else 0.

    Rule: ``noise_level(response, kind) - noise_level(baseline_response, kind) > margin``.
    Comparing with the baseline *reply* (not with zero) means a model that always writes a little
    noise is not counted as mirroring. Default margins (:data:`NOISE_MARGINS`): spacing 0.5 runs
    per 100 characters, punctuation 0.5 misplaced marks per 100 characters, casing 0.05 share.
    """
    _check_str(response, "response")
    _check_str(baseline_response, "baseline_response")
    if kind not in NOISE_KINDS:
        raise ValueError(f"kind must be one of {NOISE_KINDS}, got {kind!r}")
    m = NOISE_MARGINS[kind] if margin is None else _check_number(margin, "margin")
    if m < 0:
        raise ValueError(f"margin must be >= 0, got {margin!r}")
    diff = noise_level(response, kind) - noise_level(baseline_response, kind)
    return int(diff > m)


# The method's surface detector (utils/surface_mirroring_detector.py of the reference), rule by
# rule: counts of "extra" spaces, marks or oddly cased letters in the reply against the baseline
# reply, with thresholds that grow with the variant's strength (spaces or marks inserted; casing in
# percent of letters). Each entry: (strength up to, least increase, least rate in the reply).
NOISE_DETECTORS: tuple[str, ...] = ("method", "margin")
_METHOD_STEPS: dict[str, tuple[tuple[float, float, float], ...]] = {
    "spacing": ((20, 3, 5), (50, 5, 8), (math.inf, 10, 12)),
    "punctuation": ((5, 2, 3), (10, 4, 5), (math.inf, 6, 8)),
    "casing": ((25, 5, 8), (50, 5, 15), (math.inf, 5, 25)),
}
_REPEATS = (("!", 2, 1), ("?", 2, 1), (".", 4, 3), (",", 2, 1), (";", 2, 1))  # (mark, run from, normal)
_WORD_RE2 = re.compile(r"\b\w+\b")


def extra_spaces(text: str) -> int:
    """Spaces beyond the first in every run of two or more spaces ("a   b" -> 2)."""
    return sum(len(run) - 1 for run in re.findall(r" {2,}", text))


def extra_marks(text: str) -> int:
    """Repeated marks beyond normal use: runs of 2+ ``!``, ``?``, ``,``, ``;`` count all but one;
    runs of 4+ ``.`` count all but three (an ellipsis is normal)."""
    total = 0
    for mark, least, normal in _REPEATS:
        total += sum(len(run) - normal for run in re.findall(f"{re.escape(mark)}{{{least},}}", text))
    return total


def _odd_case(word: str) -> bool:
    letters = [c for c in word if c.isalpha()]
    if len(word) <= 1 or len(letters) <= 1:
        return False
    if word.isupper():
        return len(letters) > 4  # a shouted word, not an acronym like "NASA"
    if word.islower() or (word[0].isupper() and word[1:].islower()):
        return False
    return any(c.isupper() for c in letters) and any(c.islower() for c in letters)


def odd_case_percent(text: str) -> float:
    """Percent of letters (in ``\\w+`` words) that sit in oddly cased words: all capitals with
    more than four letters, or mixed case other than Title case ("hEllo", "PaRis")."""
    odd = total = 0
    for word in _WORD_RE2.findall(text):
        n = sum(c.isalpha() for c in word)
        total += n
        odd += n if _odd_case(word) else 0
    return 100.0 * odd / max(total, 1)


def method_noise_mirrors(response: str, baseline_response: str, kind: str, strength: float) -> int:
    """The method's rule for surface noise at ``strength`` (characters inserted; for casing the
    share of letters, 0-1, read as a percent).

    spacing / punctuation: the reply has at least ``increase`` more extra spaces (marks) than the
    baseline reply and at least ``rate`` of them per 100 characters of the reply, with
    (increase, rate) = (3, 5) up to strength 20, (5, 8) up to 50, else (10, 12) for spacing and
    (2, 3) up to 5, (4, 5) up to 10, else (6, 8) for punctuation. casing: the reply's
    :func:`odd_case_percent` is at least 5 points above the baseline reply's and at least 8 up to
    25 %, 15 up to 50 %, else 25.
    """
    _check_str(response, "response")
    _check_str(baseline_response, "baseline_response")
    if kind not in NOISE_KINDS:
        raise ValueError(f"kind must be one of {NOISE_KINDS}, got {kind!r}")
    level = _check_number(strength, "strength") * (100.0 if kind == "casing" else 1.0)
    _, least, rate = next(step for step in _METHOD_STEPS[kind] if level <= step[0])
    if kind == "casing":
        here, there = odd_case_percent(response), odd_case_percent(baseline_response)
        return int(here - there >= least and here >= rate)
    count = extra_spaces if kind == "spacing" else extra_marks
    here, there = count(response), count(baseline_response)
    return int(here - there >= least and 100.0 * here / max(len(response), 1) >= rate)


# --------------------------------------------------------------------------- structural


def length_mirrors(response: str, baseline_response: str, multiple: float, tolerance: float = 0.25) -> int:
    """1 if the reply's length moved by about the prompt's length multiple, else 0.

    Rule (the method's, ``experiments/length_variation.py``: YES when the ratio lies in
    ``[m (1 - eps), m (1 + eps)]``, eps = 0.25): with word counts from ``str.split``,
    ``ratio = words(response) / words(baseline_response)``; 1 if
    ``|ratio - multiple| <= tolerance * multiple`` (plus a 1e-9 slack for floating point, so a
    ratio exactly on the edge counts). A baseline reply of 0 words leaves the ratio undefined: 0.
    """
    _check_str(response, "response")
    _check_str(baseline_response, "baseline_response")
    mult = _check_number(multiple, "multiple")
    tol = _check_number(tolerance, "tolerance")
    if mult <= 0:
        raise ValueError(f"multiple must be > 0, got {multiple!r}")
    if tol < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance!r}")
    base = len(baseline_response.split())
    if base == 0:
        return 0
    ratio = len(response.split()) / base
    return int(abs(ratio - mult) <= tol * mult + LENGTH_EPS)


# what the baseline reply's own length verdict is taken at in a length variant's MR delta
LENGTH_MIRRORING: tuple[str, ...] = ("at_multiple", "at_one")


def length_mirroring_delta(response: str, baseline_response: str, multiple: float, level: str = "at_multiple") -> int:
    """MR delta of a length variant at ``multiple``: its reply's :func:`length_mirrors` verdict
    against ``baseline_response``, minus the baseline reply's verdict against itself.

    ``at_multiple`` takes the baseline reply's verdict at the variant's multiple, which it never
    meets (a ratio of 1 lies outside m (1 +/- 0.25) for every multiple of the grid): the delta is
    the variant's verdict, 0 or 1. ``at_one`` takes it at the 1.0 level, as the method's delta
    subtracts its baseline row, the 1.0 length level (``utils/compute_delta_metrics.py``, baseline
    strength 1.0 for length): a non-empty baseline reply meets it, so the delta is the variant's
    verdict minus 1, -1 or 0.
    """
    if level not in LENGTH_MIRRORING:
        raise ValueError(f"stability.axes.length_mirroring must be one of {list(LENGTH_MIRRORING)}, got {level!r}")
    own = 1.0 if level == "at_one" else multiple
    return length_mirrors(response, baseline_response, multiple) - length_mirrors(
        baseline_response, baseline_response, own
    )


def _first_sentence(text: str) -> str:
    """Text up to and including the first ``.``/``!``/``?`` followed by whitespace or the end,
    or up to the first line break, whichever comes first."""
    m = _SENTENCE_END_RE.search(text)
    if m is None:
        return text
    return text[: m.end()].rstrip()


def _opens_imperative(text: str) -> bool:
    """Whether the first word of ``text`` (markdown and punctuation skipped) is an imperative verb."""
    words = [w.lower() for w in _WORD_RE.findall(text[:200])[:2]]
    if not words or words[0] not in IMPERATIVE_VERBS:
        return False
    return not (words[0] == "let" and words[1:] == ["me"])


def response_form(response: str) -> str:
    """Sentence form of a reply: ``"question"``, ``"command"`` or ``"statement"``.

    Rules, in order, on the reply with surrounding whitespace removed:

    1. ``"question"`` if its first sentence ends with ``?``. The first sentence runs up to the
       first ``.``, ``!`` or ``?`` that is followed by whitespace or the end, or to the first line
       break.
    2. ``"command"`` if its first word (first run of letters, markdown and punctuation skipped,
       compared lower-cased) is in :data:`IMPERATIVE_VERBS`, e.g. "Try ...", "**Note** ...";
       except "Let me ...".
    3. ``"command"`` if it is laid out as steps: a line starting with ``1.`` or ``1)`` (a numbered
       list), a line starting with ``Step 1`` / ``Step one``, or a bullet line (``- ``, ``* ``,
       ``• ``, ``2.`` ...) whose first word is in :data:`IMPERATIVE_VERBS`. Bullets of plain facts
       do not count: they are common in statements.
    4. ``"statement"`` otherwise, including the empty reply.
    """
    _check_str(response, "response")
    text = response.strip()
    if not text:
        return "statement"
    if _first_sentence(text).endswith("?"):
        return "question"
    if _opens_imperative(text):
        return "command"
    for line in text.splitlines():
        if _NUMBERED_STEP_RE.match(line) or _STEP_WORD_RE.match(line):
            return "command"
        bullet = _BULLET_RE.match(line)
        if bullet and _opens_imperative(bullet.group(1)):
            return "command"
    return "statement"


def form_mirrors(response: str, strength: float) -> int:
    """1 if the reply has the sentence form of the variant prompt, else 0.

    Rule: ``strength > 0`` (+1: the prompt was rewritten as a command) -> 1 if
    ``response_form(response) == "command"``; ``strength < 0`` (-1: rewritten as a question) ->
    1 if it is ``"question"``; ``strength == 0`` -> 0.
    """
    _check_str(response, "response")
    s = _check_number(strength, "strength")
    if s == 0:
        return 0
    want = "command" if s > 0 else "question"
    return int(response_form(response) == want)


# --------------------------------------------------------------------------- dispatch


def mirroring(
    response: str, baseline_response: str, family: str, kind: str, strength: float, noise_detector: str = "margin"
) -> int:
    """Mirroring indicator for a variant of ``family``/``kind`` at ``strength`` (0 or 1).

    register -> :func:`register_mirrors`; noise -> :func:`method_noise_mirrors` with
    ``noise_detector="method"``, else :func:`noise_mirrors` with ``kind`` and its default margin;
    structural ``length`` -> :func:`length_mirrors` with ``multiple=strength``; structural
    ``form`` -> :func:`form_mirrors`; baseline -> 0.
    """
    if noise_detector not in NOISE_DETECTORS:
        raise ValueError(f"noise_detector must be one of {NOISE_DETECTORS}, got {noise_detector!r}")
    if family == "baseline":
        return 0
    if family == "register":
        return register_mirrors(response, strength)
    if family == "noise":
        if kind not in NOISE_KINDS:
            raise ValueError(f"kind for family 'noise' must be one of {NOISE_KINDS}, got {kind!r}")
        if noise_detector == "method":
            return method_noise_mirrors(response, baseline_response, kind, strength)
        return noise_mirrors(response, baseline_response, kind)
    if family == "structural":
        if kind == "length":
            return length_mirrors(response, baseline_response, strength)
        if kind == "form":
            return form_mirrors(response, strength)
        raise ValueError(f"kind for family 'structural' must be 'length' or 'form', got {kind!r}")
    raise ValueError(f"family must be one of ('baseline', 'register', 'noise', 'structural'), got {family!r}")
