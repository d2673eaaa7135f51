"""Mirroring detectors on hand-made replies; every expected level is worked out in a comment."""

from __future__ import annotations

import pytest

from shiftwork.stability.mirroring import (
    NOISE_MARGINS,
    form_mirrors,
    length_mirrors,
    mirroring,
    noise_level,
    noise_mirrors,
    register_mirrors,
    response_form,
)

POLITE = "Thank you so much, I am happy to help!"  # "thank you" + "happy to" -> tone +2
HOSTILE = "Ugh, whatever, here it is."  # "ugh" + "whatever" -> tone -2
NEUTRAL = "Paris is the capital."  # no cue -> tone 0


# --------------------------------------------------------------------------- register


@pytest.mark.parametrize(
    ("response", "strength", "expected"),
    [
        (POLITE, 6, 1),  # polite prompt, polite reply
        (POLITE, -6, 0),  # hostile prompt, polite reply: the sign does not match
        (POLITE, 0, 0),  # strength 0 never mirrors
        (HOSTILE, -4, 1),
        (HOSTILE, 4, 0),
        (NEUTRAL, 10, 0),  # tone 0 is neither polite nor hostile
        (NEUTRAL, -10, 0),
        (POLITE, 0.5, 1),  # only the sign of strength matters
    ],
)
def test_register_mirrors(response, strength, expected):
    assert register_mirrors(response, strength) == expected


def test_register_mirrors_rejects_bad_arguments():
    with pytest.raises(ValueError, match="response"):
        register_mirrors(None, 2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="strength"):
        register_mirrors(POLITE, float("nan"))


# --------------------------------------------------------------------------- noise levels


def test_spacing_level_counts_runs_per_100_chars():
    # "a  b  c": 7 characters, 2 runs of two spaces -> 2 * 100 / 7
    assert noise_level("a  b  c", "spacing") == pytest.approx(200 / 7)
    assert noise_level("a b c", "spacing") == 0.0
    # "x   y": 5 characters, one run (of three spaces) -> 100 / 5 = 20
    assert noise_level("x   y", "spacing") == pytest.approx(20.0)
    assert noise_level("", "spacing") == 0.0


def test_spacing_level_ignores_indentation_and_trailing_spaces():
    # Leading indentation and trailing spaces on a line are layout, not noise.
    assert noise_level("    indented\n  code  \nend", "spacing") == 0.0


def test_punctuation_level_counts_misplaced_marks():
    # "wo;rd ,,x" has 9 characters: ";" before "r", "," before ",", "," before "x": 3 misplaced
    assert noise_level("wo;rd ,,x", "punctuation") == pytest.approx(300 / 9)
    # ordinary punctuation: followed by a space or the end of text
    assert noise_level("word, next end.", "punctuation") == 0.0
    # numbers, hyphenated words and a mark before a closing bracket are ordinary too
    assert noise_level("pi is 3.14, a well-known value (sic.)", "punctuation") == 0.0
    # "a!b": 3 characters, "!" before "b" -> 100 / 3
    assert noise_level("a!b", "punctuation") == pytest.approx(100 / 3)
    assert noise_level("", "punctuation") == 0.0


def test_casing_level_is_share_of_upper_case_non_initial_letters():
    # "HeLLo World": non-initial letters e,L,L,o,o,r,l,d = 8, of which 2 upper -> 0.25
    assert noise_level("HeLLo World", "casing") == pytest.approx(0.25)
    # capitals at word starts do not count
    assert noise_level("Hello World", "casing") == 0.0
    # no non-initial letters at all -> 0
    assert noise_level("A I", "casing") == 0.0
    assert noise_level("", "casing") == 0.0


def test_noise_level_rejects_unknown_kind():
    with pytest.raises(ValueError, match="kind"):
        noise_level("abc", "emoji")


# --------------------------------------------------------------------------- noise mirroring


def test_noise_mirrors_compares_with_the_baseline_reply():
    assert noise_mirrors("a  b  c", "a b c", "spacing") == 1  # 28.6 - 0 > 0.5
    assert noise_mirrors("a b c", "a b c", "spacing") == 0
    # a baseline reply that is just as noisy: no mirroring
    assert noise_mirrors("a  b  c", "a  b  c", "spacing") == 0
    assert noise_mirrors("wo;rd ,,x", "word, next", "punctuation") == 1  # 33.3 - 0
    assert noise_mirrors("HeLLo World", "Hello World", "casing") == 1  # 0.25 - 0 > 0.05
    # a reply less noisy than the baseline reply never mirrors
    assert noise_mirrors("Hello World", "HeLLo World", "casing") == 0


def test_noise_margin_is_strict_and_per_kind():
    assert NOISE_MARGINS == {"spacing": 0.5, "punctuation": 0.5, "casing": 0.05}
    # 200 characters with one double space: 1 * 100 / 200 = 0.5, not more than 0.5 -> 0
    at_margin = "a" * 99 + "  " + "b" * 99
    assert len(at_margin) == 200
    assert noise_mirrors(at_margin, "ab", "spacing") == 0
    # 199 characters: 100 / 199 = 0.5025 > 0.5 -> 1
    above = "a" * 98 + "  " + "b" * 99
    assert noise_mirrors(above, "ab", "spacing") == 1
    # casing: "A" + 20 lower-case letters, one made upper -> 1 / 20 = 0.05, not more -> 0
    one_upper = "AbcdefghijKlmnopqrstu"
    assert noise_level(one_upper, "casing") == 0.05
    assert noise_mirrors(one_upper, "Abcdefghijklmnopqrstu", "casing") == 0
    # two upper -> 2 / 20 = 0.1 > 0.05 -> 1
    assert noise_mirrors("AbcdefghijKlmnopqRstu", "Abcdefghijklmnopqrstu", "casing") == 1
    # an explicit margin overrides the default
    assert noise_mirrors("a  b  c", "a b c", "spacing", margin=50.0) == 0


def test_noise_mirrors_rejects_bad_arguments():
    with pytest.raises(ValueError, match="kind"):
        noise_mirrors("a", "b", "tone")
    with pytest.raises(ValueError, match="margin"):
        noise_mirrors("a", "b", "spacing", margin=-1.0)
    with pytest.raises(ValueError, match="baseline_response"):
        noise_mirrors("a", None, "spacing")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- length


def _words(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))


@pytest.mark.parametrize(
    ("n_response", "n_baseline", "multiple", "expected"),
    [
        (40, 20, 2.0, 1),  # ratio 2.0, dead on
        (50, 20, 2.0, 1),  # ratio 2.5 = 2 (1 + 0.25): on the edge, counts
        (51, 20, 2.0, 0),  # ratio 2.55, just outside
        (30, 20, 2.0, 1),  # ratio 1.5 = 2 (1 - 0.25): on the edge
        (29, 20, 2.0, 0),  # ratio 1.45, just outside
        (25, 40, 0.5, 1),  # ratio 0.625 = 0.5 (1 + 0.25)
        (26, 40, 0.5, 0),  # ratio 0.65
        (15, 40, 0.5, 1),  # ratio 0.375 = 0.5 (1 - 0.25)
        (14, 40, 0.5, 0),  # ratio 0.35
        (20, 20, 2.0, 0),  # the reply kept its length: no mirroring
        (7, 0, 2.0, 0),  # empty baseline reply: ratio undefined -> 0
    ],
)
def test_length_mirrors_edges(n_response, n_baseline, multiple, expected):
    assert length_mirrors(_words(n_response), _words(n_baseline), multiple) == expected


def test_length_edge_survives_floating_point():
    # 17 / 10 = 1.7 and |1.7 - 2| is 0.30000000000000004 in floating point: still on the edge
    # 2 x 0.15 = 0.3
    assert length_mirrors(_words(17), _words(10), 2.0, tolerance=0.15) == 1
    assert length_mirrors(_words(16), _words(10), 2.0, tolerance=0.15) == 0


def test_length_mirrors_rejects_bad_arguments():
    with pytest.raises(ValueError, match="multiple"):
        length_mirrors("a", "b", 0.0)
    with pytest.raises(ValueError, match="tolerance"):
        length_mirrors("a", "b", 2.0, tolerance=-0.1)


# --------------------------------------------------------------------------- form


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ("Is it raining? I think not.", "question"),
        ("Could you say which city you mean?", "question"),
        ("What a day! Sure, here it is.", "statement"),  # first sentence ends with "!"
        ("Paris is the capital.\nIs that all?", "statement"),  # only the first sentence counts
        ("Paris\nIs that what you meant?", "statement"),  # a line break ends the first sentence
        ("Try restarting the router.", "command"),
        ("**Note:** the value is 4.", "command"),  # markdown skipped, "note" is imperative
        ("Let x be 3. Then x + 1 = 4.", "command"),
        ("Let me explain. The answer is 4.", "statement"),  # "Let me" is not an instruction
        ("Here is how:\n1. Open the box\n2. Take the part out", "command"),  # numbered steps
        ("Here is how:\n1) Open the box", "command"),
        ("Step 1: Boil water.", "command"),
        ("Some tips:\n- Use a ruler\n- Measure twice", "command"),  # imperative bullets
        ("Facts:\n- Paris is large\n- It is old", "statement"),  # bullets of facts
        ("The capital of France is Paris.", "statement"),
        ("", "statement"),
        ("   ", "statement"),
    ],
)
def test_response_form(response, expected):
    assert response_form(response) == expected


def test_form_mirrors():
    assert form_mirrors("Try restarting the router.", 1) == 1  # command prompt, command reply
    assert form_mirrors("Try restarting the router.", -1) == 0
    assert form_mirrors("Is it raining?", -1) == 1  # question prompt, question reply
    assert form_mirrors("Is it raining?", 1) == 0
    assert form_mirrors("Paris is the capital.", 1) == 0
    assert form_mirrors("Paris is the capital.", -1) == 0
    assert form_mirrors("Is it raining?", 0) == 0


# --------------------------------------------------------------------------- dispatch


def test_mirroring_dispatch():
    assert mirroring(POLITE, NEUTRAL, "baseline", "none", 0) == 0
    assert mirroring(POLITE, NEUTRAL, "baseline", "none", 6) == 0  # baseline is always 0
    assert mirroring(POLITE, NEUTRAL, "register", "tone", 6) == 1
    assert mirroring(POLITE, NEUTRAL, "register", "tone", -6) == 0
    assert mirroring("a  b  c", "a b c", "noise", "spacing", 3) == 1
    assert mirroring("a b c", "a  b  c", "noise", "spacing", 3) == 0
    assert mirroring("wo;rd ,,x", "word, x", "noise", "punctuation", 2) == 1
    assert mirroring("HeLLo World", "Hello World", "noise", "casing", 0.3) == 1
    # structural length: strength is the multiple (40 / 20 = 2)
    assert mirroring(_words(40), _words(20), "structural", "length", 2.0) == 1
    assert mirroring(_words(40), _words(20), "structural", "length", 0.5) == 0
    assert mirroring("Try again.", NEUTRAL, "structural", "form", 1) == 1
    assert mirroring("Try again.", NEUTRAL, "structural", "form", -1) == 0


def test_mirroring_rejects_unknown_family_or_kind():
    with pytest.raises(ValueError, match="family"):
        mirroring("a", "b", "emoji", "none", 1)
    with pytest.raises(ValueError, match="kind"):
        mirroring("a", "b", "structural", "tone", 1)
    with pytest.raises(ValueError, match="kind"):
        mirroring("a", "b", "noise", "length", 1)


# --------------------------------------------------------------------------- the method's noise rule


def test_method_counts_by_hand():
    from shiftwork.stability.mirroring import extra_marks, extra_spaces, odd_case_percent

    assert extra_spaces("a  b   c d") == 1 + 2
    assert extra_spaces("a b") == 0
    # "!!!" -> 2, "??" -> 1, "...." -> 1, "..." -> 0, ",," -> 1, ";;;" -> 2
    assert extra_marks("Wow!!! Really?? Hmm.... ok... a,, b;;;") == 2 + 1 + 1 + 0 + 1 + 2
    # words: "The"(3, title), "HELLO"(5, shouted: odd), "NASA"(4, acronym), "hEllo"(5, odd), "x"(1)
    # letters 3 + 5 + 4 + 5 + 1 = 18, odd 5 + 5 = 10
    assert odd_case_percent("The HELLO NASA hEllo x") == pytest.approx(100 * 10 / 18)
    assert odd_case_percent("") == 0.0


def test_method_noise_rule_thresholds_by_hand():
    from shiftwork.stability.mirroring import method_noise_mirrors

    base = "Paris is the capital."
    # 4 extra spaces in a 28-character reply: 14.3 per 100 characters
    spaced = "Paris  is  the  capital  ok."
    assert len(spaced) == 28
    assert method_noise_mirrors(spaced, base, "spacing", 5) == 1  # needs 3 and 5 per 100
    assert method_noise_mirrors(spaced, base, "spacing", 50) == 0  # needs 5 more
    assert method_noise_mirrors(spaced, spaced, "spacing", 5) == 0  # no increase over the baseline
    # 2 extra marks ("!!!") in 25 characters = 8 per 100: enough up to strength 5 (2, 3),
    # not at 10 (4, 5)
    marked = "Paris is the capital!!!ok"
    assert method_noise_mirrors(marked, base, "punctuation", 3) == 1
    assert method_noise_mirrors(marked, base, "punctuation", 10) == 0
    # casing share 0.3 -> 30 % -> threshold 15 %; 0.75 -> 25 %. "PARIS" is 5 of the
    # 5 + 2 + 3 + 7 + 4 + 2 + 6 = 29 letters: 17.2 %, 17.2 points above the baseline reply's 0
    cased = "PARIS is the capital city of France"
    assert method_noise_mirrors(cased, base, "casing", 0.3) == 1
    assert method_noise_mirrors(cased, base, "casing", 0.75) == 0
