from __future__ import annotations

import numpy as np
import pytest

from shiftwork.stability.variants.noise import (
    KINDS,
    MARKS,
    POSITIONS,
    apply_noise,
    insert_punctuation,
    insert_spaces,
    region,
    upper_case,
)

TEXT = "Explain, in plain words, why the sky looks blue at noon but red at dusk."
ALPHA = "abcdefghijkl"  # len 12 -> m = 4: prefix gaps 0..4, suffix gaps 8..12


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def inserted(original: str, noisy: str) -> list[tuple[int, str]]:
    """Walk both strings; return (original gap index, char) for each char not matched to the original.

    Fails the test if ``original`` is not a subsequence of ``noisy``.
    """
    out = []
    i = 0
    for c in noisy:
        if i < len(original) and c == original[i]:
            i += 1
        else:
            out.append((i, c))
    assert i == len(original), "original text is not a subsequence of the noisy text"
    return out


def test_constants():
    assert KINDS == ("spacing", "punctuation", "casing")
    assert POSITIONS == ("prefix", "suffix", "global")
    assert MARKS == ".,;:!-"


@pytest.mark.parametrize(
    "text, position, expected",
    [
        ("abcdefghij", "prefix", (0, 4)),
        ("abcdefghij", "suffix", (6, 10)),
        ("abcdefghij", "global", (0, 10)),
        (ALPHA, "prefix", (0, 4)),
        (ALPHA, "suffix", (8, 12)),
        ("abcdefg", "prefix", (0, 3)),
        ("abcdefg", "suffix", (4, 7)),
        ("a", "prefix", (0, 1)),
        ("a", "suffix", (0, 1)),
        ("", "prefix", (0, 0)),
        ("", "suffix", (0, 0)),
        ("", "global", (0, 0)),
    ],
)
def test_region(text, position, expected):
    assert region(text, position) == expected


@pytest.mark.parametrize("k", [0, 1, 3, 7, 25])
@pytest.mark.parametrize("position", POSITIONS)
def test_spaces_exact_count_and_recoverable(k, position):
    out = insert_spaces(TEXT, k, position, rng(k))
    assert out.count(" ") == TEXT.count(" ") + k
    assert len(out) == len(TEXT) + k
    extra = inserted(TEXT, out)
    assert len(extra) == k
    assert all(c == " " for _, c in extra)
    assert out.replace(" ", "") == TEXT.replace(" ", "")


@pytest.mark.parametrize("k", [0, 1, 3, 7, 25])
@pytest.mark.parametrize("position", POSITIONS)
def test_punctuation_exact_count_and_marks(k, position):
    text = "Name three primary colours and say why they are primary"
    out = insert_punctuation(text, k, position, rng(k))
    extra = inserted(text, out)
    assert len(extra) == k
    assert len(out) == len(text) + k
    assert all(c in MARKS for _, c in extra)


def test_punctuation_never_question_mark_many_seeds():
    seen = set()
    for seed in range(300):
        out = insert_punctuation(TEXT, 6, "global", rng(seed))
        assert "?" not in out
        seen.update(c for _, c in inserted(TEXT, out))
    assert seen == set(MARKS)  # every mark is drawn at some point


def test_punctuation_custom_marks():
    out = insert_punctuation(ALPHA, 5, "global", rng(1), marks="*")
    assert out.count("*") == 5
    assert out.replace("*", "") == ALPHA


def test_noise_never_adds_question_mark_via_apply():
    for seed in range(100):
        for kind, level in (("spacing", 5), ("punctuation", 5), ("casing", 0.5)):
            assert "?" not in apply_noise(ALPHA, kind, level, "global", rng(seed))


@pytest.mark.parametrize("fn", [insert_spaces, insert_punctuation])
def test_insertions_respect_position(fn):
    gaps = {"prefix": set(), "suffix": set(), "global": set()}
    for seed in range(200):
        for position in POSITIONS:
            out = fn(ALPHA, 4, position, rng(seed))
            gaps[position].update(g for g, _ in inserted(ALPHA, out))
    # gaps are inclusive of the region's end: prefix 0..4, suffix 8..12 (12 = after the last char)
    assert gaps["prefix"] == {0, 1, 2, 3, 4}
    assert gaps["suffix"] == {8, 9, 10, 11, 12}
    assert gaps["global"] == set(range(13))


def test_several_insertions_may_share_a_gap():
    # one-character text has two gaps; 10 spaces must double up
    out = insert_spaces("x", 10, "global", rng(3))
    assert out.strip() == "x" and len(out) == 11


def test_upper_case_exact_count_within_region():
    text = "hello World, this is a lower-case test sentence."
    for position in POSITIONS:
        start, end = region(text, position)
        lower = [i for i in range(start, end) if text[i].isalpha() and text[i].islower()]
        for share in (0.1, 0.25, 0.5, 0.9, 1.0):
            out = upper_case(text, share, position, rng(7))
            assert len(out) == len(text)
            changed = [i for i in range(len(text)) if out[i] != text[i]]
            assert len(changed) == round(share * len(lower))
            assert set(changed) <= set(lower)
            assert all(out[i] == text[i].upper() for i in changed)


def test_upper_case_hand_made_regions():
    for seed in range(50):
        pre = upper_case(ALPHA, 1.0, "prefix", rng(seed))
        suf = upper_case(ALPHA, 1.0, "suffix", rng(seed))
        half = upper_case(ALPHA, 0.5, "suffix", rng(seed))
        assert pre == "ABCDefghijkl"
        assert suf == "abcdefghIJKL"
        assert half[:8] == "abcdefgh"
        assert sum(c.isupper() for c in half[8:]) == 2


def test_upper_case_rounding_is_python_round():
    # region "abcdefghij" global has 10 letters: 0.25 * 10 = 2.5 -> round -> 2 (ties to even)
    out = upper_case("abcdefghij", 0.25, "global", rng(0))
    assert sum(c.isupper() for c in out) == 2
    out = upper_case("abcdefghij", 0.35, "global", rng(0))
    assert sum(c.isupper() for c in out) == 4  # 3.5 -> 4


def test_upper_case_skips_non_lowercase():
    text = "ABC 123 ..."
    assert upper_case(text, 1.0, "global", rng(0)) == text


@pytest.mark.parametrize("kind, level", [("spacing", 6), ("punctuation", 6), ("casing", 0.4)])
def test_same_seed_same_output_different_seeds_differ(kind, level):
    a = apply_noise(TEXT, kind, level, "global", rng(42))
    b = apply_noise(TEXT, kind, level, "global", rng(42))
    assert a == b
    outs = {apply_noise(TEXT, kind, level, "global", rng(seed)) for seed in range(20)}
    assert len(outs) > 1


@pytest.mark.parametrize("position", POSITIONS)
def test_zero_intensity_is_identity(position):
    assert insert_spaces(TEXT, 0, position, rng()) == TEXT
    assert insert_punctuation(TEXT, 0, position, rng()) == TEXT
    assert upper_case(TEXT, 0.0, position, rng()) == TEXT
    for kind in KINDS:
        assert apply_noise(TEXT, kind, 0, position, rng()) == TEXT


def test_apply_noise_dispatch():
    assert apply_noise(ALPHA, "spacing", 3, "global", rng(5)) == insert_spaces(ALPHA, 3, "global", rng(5))
    assert apply_noise(ALPHA, "spacing", 3.0, "global", rng(5)) == insert_spaces(ALPHA, 3, "global", rng(5))
    assert apply_noise(ALPHA, "punctuation", 2, "suffix", rng(5)) == insert_punctuation(ALPHA, 2, "suffix", rng(5))
    assert apply_noise(ALPHA, "casing", 0.5, "prefix", rng(5)) == upper_case(ALPHA, 0.5, "prefix", rng(5))


@pytest.mark.parametrize("bad", [-1, 1.5, "2", None, True])
def test_bad_count(bad):
    with pytest.raises(ValueError, match="k must"):
        insert_spaces(TEXT, bad, "global", rng())
    with pytest.raises(ValueError, match="k must"):
        insert_punctuation(TEXT, bad, "global", rng())


@pytest.mark.parametrize("bad", [-0.1, 1.01, float("nan"), "0.5", None])
def test_bad_share(bad):
    with pytest.raises(ValueError, match="share"):
        upper_case(TEXT, bad, "global", rng())


@pytest.mark.parametrize("bad", ["middle", "Prefix", "", None])
def test_bad_position(bad):
    with pytest.raises(ValueError, match="position"):
        region(TEXT, bad)
    with pytest.raises(ValueError, match="position"):
        insert_spaces(TEXT, 1, bad, rng())
    with pytest.raises(ValueError, match="position"):
        upper_case(TEXT, 0.5, bad, rng())


@pytest.mark.parametrize("marks", ["?", ".,?", ""])
def test_bad_marks(marks):
    with pytest.raises(ValueError, match="marks"):
        insert_punctuation(TEXT, 1, "global", rng(), marks=marks)


def test_apply_noise_bad_kind_and_intensity():
    with pytest.raises(ValueError, match="kind"):
        apply_noise(TEXT, "typos", 1, "global", rng())
    with pytest.raises(ValueError, match="whole number"):
        apply_noise(TEXT, "spacing", 1.5, "global", rng())
    with pytest.raises(ValueError, match="whole number"):
        apply_noise(TEXT, "punctuation", float("inf"), "global", rng())
    with pytest.raises(ValueError, match="k must"):
        apply_noise(TEXT, "spacing", -2, "global", rng())
    with pytest.raises(ValueError, match="share"):
        apply_noise(TEXT, "casing", 2, "global", rng())
