from __future__ import annotations

import unicodedata
from functools import cache

import numpy as np
import pytest

from shiftwork.stability.variants.graphemes import boundaries, clusters
from shiftwork.stability.variants.noise import (
    KINDS,
    MARKS,
    METHOD_MARKS,
    POSITIONS,
    STYLES,
    apply_noise,
    default_marks,
    insert_punctuation,
    insert_spaces,
    insertion_points,
    region,
    upper_case,
    word_boundaries,
)

TEXT = "Explain, in plain words, why the sky looks blue at noon but red at dusk."
ALPHA = "abcdefghijkl"
NUMBERS = "Population 60,316 in 2018-19 U2"
ABBREV = "Is the U.S. large, e.g. in area"
ACCENTS = "caf\u00e9 or cafe\u0301 na\u0308ive"  # precomposed é, then e + U+0301, a + U+0308
EMOJI = "Flag \U0001f1eb\U0001f1f7 family \U0001f468\u200d\U0001f469\u200d\U0001f467 ok \U0001f44d\U0001f3fd love \u2764\ufe0f"
HARD = [NUMBERS, ABBREV, ACCENTS, EMOJI, "60,316", "U2", "", "  two  spaces  "]

# the clusters of EMOJI, written out by hand
EMOJI_CLUSTERS = (
    list("Flag ")
    + ["\U0001f1eb\U0001f1f7"]
    + list(" family ")
    + ["\U0001f468\u200d\U0001f469\u200d\U0001f467"]
    + list(" ok ")
    + ["\U0001f44d\U0001f3fd"]
    + list(" love ")
    + ["\u2764\ufe0f"]
)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


class Scripted:
    """A stand-in generator that returns the given draws in order, to replay the reference's choices."""

    def __init__(self, *draws):
        self.draws = [np.asarray(d) for d in draws]

    def integers(self, low, high, size):
        out = self.draws.pop(0)
        assert len(out) == size and ((out >= low) & (out < high)).all()
        return out

    def choice(self, n, size, replace):
        out = self.draws.pop(0)
        assert len(out) == size and not replace and len(set(out.tolist())) == size and (out < n).all()
        return out


# --------------------------------------------------------------------------- independent checks


def _boundary(text: str, p: int) -> bool:
    """A word boundary in the sense of the method, decided from the original text only: start, end,
    or next to whitespace; and not in front of a combining mark, joiner, selector or modifier."""
    if p in (0, len(text)):
        return True
    cur = text[p]
    if unicodedata.category(cur).startswith("M") or cur in "\u200d\ufe0f" or 0x1F3FB <= ord(cur) <= 0x1F3FF:
        return False
    return text[p - 1].isspace() or cur.isspace()


def inserts_at_boundaries(original: str, noisy: str, allowed: str) -> bool:
    """Whether ``noisy`` is ``original`` with characters from ``allowed`` inserted only at word
    boundaries of ``original`` (exhaustive search over alignments, so repeated marks such as the
    dots of "U.S." cannot fool it)."""

    @cache
    def ok(i: int, j: int) -> bool:
        if j == len(noisy):
            return i == len(original)
        if i < len(original) and noisy[j] == original[i] and ok(i + 1, j + 1):
            return True
        return noisy[j] in allowed and _boundary(original, i) and ok(i, j + 1)

    return ok(0, 0)


def recased_only(original: str, noisy: str) -> bool:
    """Same length, and every changed character is a letter of ``original`` turned upper case."""
    return len(original) == len(noisy) and all(
        a == b or (a.isalpha() and b == a.upper()) for a, b in zip(original, noisy)
    )


# --------------------------------------------------------------------------- graphemes


def test_clusters_keep_accents_flags_zwj_modifiers_and_selectors():
    assert clusters(EMOJI) == EMOJI_CLUSTERS
    assert clusters("cafe\u0301") == ["c", "a", "f", "e\u0301"]
    assert clusters("\U0001f1eb\U0001f1f7\U0001f1e9\U0001f1ea") == ["\U0001f1eb\U0001f1f7", "\U0001f1e9\U0001f1ea"]
    assert clusters("a\r\nb") == ["a", "\r\n", "b"]
    assert clusters("\u1100\u1161\u11a8") == ["\u1100\u1161\u11a8"]  # conjoining jamo of one syllable
    assert boundaries("") == [0] and clusters("") == []
    assert boundaries("ab") == [0, 1, 2]


# --------------------------------------------------------------------------- constants, points


def test_constants():
    assert KINDS == ("spacing", "punctuation", "casing")
    assert POSITIONS == ("prefix", "suffix", "global")
    assert STYLES == ("method", "region")
    assert MARKS == ".,;:!-"
    assert METHOD_MARKS == ".,!'()[];:-"  # the reference's PUNCTUATION_POOL, in its order
    assert default_marks("method") == METHOD_MARKS and default_marks("region") == MARKS


@pytest.mark.parametrize(
    "text, position, expected",
    [
        ("abcdefghij", "prefix", (0, 4)),
        ("abcdefghij", "suffix", (6, 10)),
        ("abcdefghij", "global", (0, 10)),
        ("abcdefg", "prefix", (0, 3)),
        ("abcdefg", "suffix", (4, 7)),
        ("a", "suffix", (0, 1)),
        ("", "global", (0, 0)),
    ],
)
def test_region(text, position, expected):
    assert region(text, position) == expected


def test_method_points_are_the_reference_valid_indices():
    # reference: re.split(r"(\s+)", "Hello big world") = ['Hello', ' ', 'big', ' ', 'world'],
    # valid_indices [0, 1, 3, 5] = start, after each whitespace part, end -> offsets 0, 6, 10, 15
    assert insertion_points("Hello big world", "global", "method") == [0, 6, 10, 15]
    # trailing whitespace: parts end [' ', ''] so "after the last whitespace" and "end" are both 22
    assert insertion_points("What is  the capital? ", "global", "method") == [0, 5, 9, 13, 22, 22]
    assert insertion_points("Hello big world", "prefix", "method") == [0]
    assert insertion_points("Hello big world", "suffix", "method") == [15]
    assert insertion_points("", "global", "method") == [0, 0]  # parts [''] -> valid [0, 1]


def test_region_points_are_word_boundaries_inside_the_region():
    assert word_boundaries("ab cd  ef") == [0, 2, 3, 5, 6, 7, 9]
    # len 9 -> m = 3: prefix (0, 3), suffix (6, 9)
    assert insertion_points("ab cd  ef", "prefix", "region") == [0, 2, 3]
    assert insertion_points("ab cd  ef", "suffix", "region") == [6, 7, 9]
    assert insertion_points("ab cd  ef", "global", "region") == [0, 2, 3, 5, 6, 7, 9]
    # a word longer than the prefix region leaves only the start
    assert insertion_points("Supercalifragilistic is", "prefix", "region") == [0]
    # never between a space and a mark that combines with it
    assert word_boundaries("a \u0301b") == [0, 1, 3, 4]  # not 2, inside " \u0301"


# --------------------------------------------------------------------------- worked examples


def test_method_global_punctuation_replays_reference_choices():
    # reference apply_punctuation("Hello big world", 3, "global") drawing targets 3, 1, 3 and marks
    # "!", "(", "." (pool indices 2, 4, 0): additions {3: ['!', '.'], 1: ['(']}, each appended after
    # its whitespace part -> "Hello (big !.world"
    out = insert_punctuation("Hello big world", 3, "global", Scripted([2, 1, 2], [2, 4, 0]), style="method")
    assert out == "Hello (big !.world"
    # target 0 (start) and len(parts) (end): "!Hello big world)"
    out = insert_punctuation("Hello big world", 2, "global", Scripted([0, 3], [2, 5]), style="method")
    assert out == "!Hello big world)"


def test_method_prefix_and_suffix_put_all_noise_outside_the_text():
    for seed in range(30):
        for k in (1, 5, 20):
            pre = insert_punctuation(NUMBERS, k, "prefix", rng(seed), style="method")
            suf = insert_punctuation(NUMBERS, k, "suffix", rng(seed), style="method")
            assert pre.endswith(NUMBERS) and set(pre[:k]) <= set(METHOD_MARKS) and len(pre) == len(NUMBERS) + k
            assert suf.startswith(NUMBERS) and set(suf[-k:]) <= set(METHOD_MARKS) and len(suf) == len(NUMBERS) + k
            assert insert_spaces(NUMBERS, k, "prefix", rng(seed), style="method") == " " * k + NUMBERS
            assert insert_spaces(NUMBERS, k, "suffix", rng(seed), style="method") == NUMBERS + " " * k


def test_method_casing_replays_reference_choices():
    # reference apply_letter_case("What is the capital?", 50, "prefix"): region chars[0:10] =
    # "What is th", letters at 0,1,2,3,5,6,8,9 -> max(1, int(8 * 50 / 100)) = 4; sampling the
    # 2nd, 3rd, 4th and 6th letters (h, a, t, s) gives "WHAT iS the capital?"
    text = "What is the capital?"
    assert upper_case(text, 0.5, "prefix", Scripted([1, 2, 3, 5]), style="method") == "WHAT iS the capital?"
    # suffix: chars[10:20] = "e capital?", 8 letters, 25% -> 2; the 1st and 3rd (e, a)
    assert upper_case(text, 0.25, "suffix", Scripted([0, 2]), style="method") == "What is thE cApital?"
    # global 10%: 16 letters -> int(1.6) = 1; already upper-case letters may be drawn (no change)
    assert upper_case(text, 0.1, "global", Scripted([0]), style="method") == text
    # a share too small for one letter still upper-cases one: max(1, ...)
    assert upper_case("ab", 0.1, "global", Scripted([1]), style="method") == "aB"


def test_exact_strings_for_a_fixed_seed():
    # method global points of NUMBERS: [0, 11, 18, 21, 29, 31]
    assert insertion_points(NUMBERS, "global", "method") == [0, 11, 18, 21, 29, 31]
    assert rng(1).integers(0, 6, size=3).tolist() == [2, 3, 4]
    assert insert_spaces(NUMBERS, 3, "global", rng(1), style="method") == "Population 60,316  in  2018-19  U2"
    draws = rng(3)
    assert draws.integers(0, 6, size=2).tolist() == [4, 0] and draws.integers(0, 11, size=2).tolist() == [1, 2]
    assert insert_punctuation(NUMBERS, 2, "global", rng(3), style="method") == "!Population 60,316 in 2018-19 ,U2"


# --------------------------------------------------------------------------- properties on hard prompts


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("text", HARD)
def test_inserts_only_at_word_boundaries_and_recoverable(text, position, style):
    for seed in range(25):
        for k in (1, 4, 12):
            sp = insert_spaces(text, k, position, rng(seed), style=style)
            pu = insert_punctuation(text, k, position, rng(seed), style=style)
            assert len(sp) == len(pu) == len(text) + k
            assert inserts_at_boundaries(text, sp, " ")
            assert inserts_at_boundaries(text, pu, default_marks(style))
            assert "?" not in pu


@pytest.mark.parametrize("style", STYLES)
def test_numbers_and_abbreviations_are_never_split(style):
    for seed in range(100):
        for text, tokens in ((NUMBERS, ["60,316", "2018-19", "U2"]), (ABBREV, ["U.S.", "e.g."])):
            for fn in (insert_spaces, insert_punctuation):
                out = fn(text, 8, "global", rng(seed), style=style)
                for token in tokens:
                    assert token in out


@pytest.mark.parametrize("style", STYLES)
def test_emoji_and_accents_stay_whole(style):
    for seed in range(100):
        for fn in (insert_spaces, insert_punctuation):
            out = fn(EMOJI, 10, "global", rng(seed), style=style)
            for cluster in EMOJI_CLUSTERS:
                assert cluster in out
            acc = fn(ACCENTS, 10, "global", rng(seed), style=style)
            assert "cafe\u0301" in acc and "na\u0308ive" in acc and "caf\u00e9" in acc


def test_the_reported_splits_do_not_happen():
    # measured before: "60,316" -> "60:,;3:16", "2018-19" -> "20 18-19", "U2" -> "U!2"
    for seed in range(300):
        for style in STYLES:
            out = insert_punctuation(NUMBERS, 6, "global", rng(seed), style=style)
            assert "60,316" in out and "2018-19" in out and "U2" in out
            assert "20 18-19" not in insert_spaces(NUMBERS, 6, "global", rng(seed), style=style)


@pytest.mark.parametrize("style", STYLES)
def test_every_mark_is_drawn_and_never_a_question_mark(style):
    seen = set()
    for seed in range(300):
        out = insert_punctuation("a b", 6, "global", rng(seed), style=style)
        seen.update(c for c in out if c not in "a b")
    assert seen == set(default_marks(style))


def test_region_style_respects_thirds():
    text = "aa bb cc dd ee ff"  # len 17 -> m = 6: prefix (0, 6), suffix (11, 17)
    for seed in range(50):
        pre = insert_punctuation(text, 5, "prefix", rng(seed), style="region")
        suf = insert_punctuation(text, 5, "suffix", rng(seed), style="region")
        assert pre.endswith("cc dd ee ff") and suf.startswith("aa bb cc")


# --------------------------------------------------------------------------- casing


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("position", POSITIONS)
def test_casing_changes_base_letters_only(style, position):
    for text in (ACCENTS, EMOJI, ABBREV, NUMBERS):
        for seed in range(20):
            out = upper_case(text, 0.6, position, rng(seed), style=style)
            assert recased_only(text, out)
            assert [c[1:] for c in clusters(out)] == [c[1:] for c in clusters(text)]  # marks untouched


def test_casing_combining_accent_keeps_its_mark():
    assert upper_case("e\u0301", 1.0, "global", rng(0), style="method") == "E\u0301"
    assert upper_case("e\u0301", 1.0, "global", rng(0), style="region") == "E\u0301"
    assert upper_case("\u00df", 1.0, "global", rng(0), style="method") == "\u00df"  # not "SS"


def test_region_casing_counts_lower_case_letters_with_python_round():
    text = "hello World, this is a lower-case test sentence."
    for position in POSITIONS:
        start, end = region(text, position)
        lower = [i for i in range(start, end) if text[i].islower()]
        for share in (0.1, 0.25, 0.5, 1.0):
            out = upper_case(text, share, position, rng(7), style="region")
            changed = [i for i in range(len(text)) if out[i] != text[i]]
            assert len(changed) == round(share * len(lower)) and set(changed) <= set(lower)
    assert sum(c.isupper() for c in upper_case("abcdefghij", 0.25, "global", rng(0), style="region")) == 2


def test_method_casing_counts_letters_of_any_case_in_halves():
    text = "ABCDEFGHIJKLmnopqrstuvwx"  # 24 letters; first half upper, second half lower
    assert upper_case(text, 0.5, "prefix", rng(0), style="method") == text  # only upper letters there
    suf = upper_case(text, 0.5, "suffix", rng(0), style="method")
    assert suf[:12] == text[:12] and sum(c.isupper() for c in suf[12:]) == 6  # int(12 * 0.5)


@pytest.mark.parametrize("style", STYLES)
def test_casing_without_lower_case_letters_is_unchanged(style):
    for text in ("ABC DEF", "123 456 ...", ""):
        assert upper_case(text, 1.0, "global", rng(0), style=style) == text


# --------------------------------------------------------------------------- determinism, dispatch, errors


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("kind, level", [("spacing", 6), ("punctuation", 6), ("casing", 0.4)])
def test_same_seed_same_output_different_seeds_differ(kind, level, style):
    a = apply_noise(TEXT, kind, level, "global", rng(42), style)
    assert a == apply_noise(TEXT, kind, level, "global", rng(42), style)
    assert len({apply_noise(TEXT, kind, level, "global", rng(seed), style) for seed in range(20)}) > 1


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("position", POSITIONS)
def test_zero_intensity_is_identity(position, style):
    for kind in KINDS:
        assert apply_noise(TEXT, kind, 0, position, rng(), style) == TEXT


def test_apply_noise_dispatch():
    for style in STYLES:
        assert apply_noise(ALPHA, "spacing", 3.0, "global", rng(5), style) == insert_spaces(
            ALPHA, 3, "global", rng(5), style=style
        )
        assert apply_noise(ALPHA, "punctuation", 2, "suffix", rng(5), style) == insert_punctuation(
            ALPHA, 2, "suffix", rng(5), style=style
        )
        assert apply_noise(ALPHA, "casing", 0.5, "prefix", rng(5), style) == upper_case(
            ALPHA, 0.5, "prefix", rng(5), style=style
        )
    out = apply_noise("a b", "punctuation", 4, "global", rng(1), "method", marks="*")
    assert out.count("*") == 4 and out.replace("*", "") == "a b"


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


def test_bad_style():
    with pytest.raises(ValueError, match="style"):
        apply_noise(TEXT, "spacing", 1, "global", rng(), "paper")
    with pytest.raises(ValueError, match="style"):
        insertion_points(TEXT, "global", "thirds")


@pytest.mark.parametrize("marks", ["?", ".,?", "", ". ", ".a", "1"])
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
    with pytest.raises(ValueError, match="share"):
        apply_noise(TEXT, "casing", 2, "global", rng())
