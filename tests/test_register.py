from __future__ import annotations

import pytest

from shiftwork.stability.variants.register import (
    HOSTILE_CUES,
    POLITE_CUES,
    POSITIONS,
    PREFIX,
    STRENGTHS,
    SUFFIX,
    apply_register,
    tone_score,
)

PROMPT = "Summarise the causes of the French Revolution in three sentences."


def test_strength_and_position_constants():
    assert STRENGTHS == (-10, -8, -6, -4, -2, 2, 4, 6, 8, 10)
    assert POSITIONS == ("prefix", "suffix", "global")
    assert set(PREFIX) == set(STRENGTHS)
    assert set(SUFFIX) == set(STRENGTHS)


@pytest.mark.parametrize("position", POSITIONS)
def test_ten_distinct_variants_per_position(position):
    outs = {apply_register(PROMPT, s, position) for s in STRENGTHS}
    assert len(outs) == 10
    assert PROMPT not in outs


def test_phrases_have_no_question_mark():
    for s in STRENGTHS:
        assert "?" not in SUFFIX[s], s
        assert "?" not in PREFIX[s], s


@pytest.mark.parametrize("s", STRENGTHS)
def test_sign_respected_by_tone_score(s):
    for phrase in (PREFIX[s], SUFFIX[s]):
        score = tone_score(phrase)
        if s > 0:
            assert score > 0, phrase
        else:
            assert score < 0, phrase
    combined = tone_score(apply_register(PROMPT, s, "global"))
    assert (combined > 0) == (s > 0)


@pytest.mark.parametrize("sign", [1, -1])
def test_intensity_grows_with_strength(sign):
    levels = [sign * a for a in (2, 4, 6, 8, 10)]
    tones = [abs(tone_score(f"{PREFIX[s]} {SUFFIX[s]}")) for s in levels]
    lengths = [len(PREFIX[s]) + len(SUFFIX[s]) for s in levels]
    assert all(a <= b for a, b in zip(tones, tones[1:])), tones
    assert all(a < b for a, b in zip(lengths, lengths[1:])), lengths
    assert tones[-1] > tones[0]


@pytest.mark.parametrize("s", STRENGTHS)
def test_placement(s):
    pre = apply_register(PROMPT, s, "prefix")
    suf = apply_register(PROMPT, s, "suffix")
    glo = apply_register(PROMPT, s, "global")
    assert pre == f"{PREFIX[s]} {PROMPT}"
    assert suf == f"{PROMPT} {SUFFIX[s]}"
    assert glo == f"{PREFIX[s]} {PROMPT} {SUFFIX[s]}"
    assert pre.endswith(PROMPT) and not pre.startswith(PROMPT)
    assert suf.startswith(PROMPT) and not suf.endswith(PROMPT)
    assert PROMPT in glo and not glo.startswith(PROMPT) and not glo.endswith(PROMPT)


def test_original_text_verbatim_even_with_odd_whitespace():
    text = "  Translate:\n\t'bonjour'  "
    for s in STRENGTHS:
        for position in POSITIONS:
            assert text in apply_register(text, s, position)


@pytest.mark.parametrize("position", POSITIONS)
def test_strength_zero_is_identity(position):
    assert apply_register(PROMPT, 0, position) == PROMPT
    assert apply_register("", 0, position) == ""


@pytest.mark.parametrize("bad", [1, 3, -3, 12, -12, 2.5, "2", None, True])
def test_bad_strength(bad):
    with pytest.raises(ValueError, match="strength"):
        apply_register(PROMPT, bad, "prefix")


@pytest.mark.parametrize("bad", ["Prefix", "middle", "", None])
def test_bad_position(bad):
    with pytest.raises(ValueError, match="position"):
        apply_register(PROMPT, 2, bad)
    with pytest.raises(ValueError, match="prefix"):
        apply_register(PROMPT, 0, bad)


def test_cue_lists_are_lowercase_disjoint_and_count_once():
    assert set(POLITE_CUES).isdisjoint(HOSTILE_CUES)
    for cue in POLITE_CUES:
        assert cue == cue.lower()
        assert tone_score(cue) == 1, cue
        assert tone_score(cue.upper()) == 1, cue
    for cue in HOSTILE_CUES:
        assert cue == cue.lower()
        assert tone_score(cue) == -1, cue
    for cue in ("please", "thank you", "kindly", "happy to", "apologi"):
        assert cue in POLITE_CUES
    for cue in ("stupid", "useless", "hurry", "whatever"):
        assert cue in HOSTILE_CUES


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", 0),
        ("Write a haiku about autumn.", 0),
        # please(+1) thank you(+1)
        ("Please write a haiku. Thank you!", 2),
        # PLEASE(+1) kindly(+1) stupid(-1)
        ("PLEASE, kindly ignore the stupid typo.", 1),
        # hurry(-1) useless(-1) whatever(-1)
        ("Hurry up, you useless thing, whatever.", -3),
        # apologi stem matches "Apologies" and "apologise" (+2); "thank" alone is not a cue
        ("Apologies, I apologise; thank the team.", 2),
        # whole words only: "hurrying" and "uselessness" are not "hurry" / "useless"
        ("Stop hurrying; uselessness is a concept.", 0),
        # phrase across a line break: happy to(+1); sorry(+1); damn(-1)
        ("I am happy\nto help, sorry for the damn delay.", 1),
        # pleased is not "please"; "thankyou" is not "thank you"
        ("I was pleased, thankyou.", 0),
    ],
)
def test_tone_score_hand_counted(text, expected):
    assert tone_score(text) == expected


def test_tone_score_rejects_non_string():
    with pytest.raises(ValueError, match="text"):
        tone_score(None)  # type: ignore[arg-type]
