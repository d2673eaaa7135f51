"""Grapheme clusters (what a reader sees as one character), from ``unicodedata`` alone.

A pragmatic subset of Unicode's extended grapheme cluster rules (UAX #29), enough that noise
never lands between a letter and its accent or inside an emoji:

* ``\\r\\n`` stays together; other control characters stand alone (GB3-GB5);
* no break before an extending character: a combining mark (category ``Mn``, ``Mc``, ``Me``),
  the zero-width joiner U+200D, a variation selector (U+FE00-FE0F, U+E0100-E01EF), an emoji
  skin-tone modifier (U+1F3FB-1F3FF) or an emoji tag character (U+E0020-E007F) (GB9, GB9a);
* no break after a zero-width joiner, so ZWJ emoji sequences stay whole (GB11, simplified:
  UAX #29 asks for a pictograph after the joiner; keeping any joined pair together only
  removes break points, never adds one);
* regional indicators pair up into flags (GB12, GB13);
* conjoining Hangul jamo stay with their syllable (GB6-GB8).

Prepend characters (GB9b) are not handled; they are rare outside a few Indic scripts.
"""

from __future__ import annotations

import unicodedata

ZWJ = "\u200d"


def _cp_in(c: str, *ranges: tuple[int, int]) -> bool:
    cp = ord(c)
    return any(lo <= cp <= hi for lo, hi in ranges)


def is_extending(c: str) -> bool:
    """Whether ``c`` attaches to the character before it (combining mark, ZWJ, selector, modifier, tag)."""
    return (
        unicodedata.category(c) in ("Mn", "Mc", "Me")
        or c == ZWJ
        or _cp_in(c, (0xFE00, 0xFE0F), (0xE0100, 0xE01EF), (0x1F3FB, 0x1F3FF), (0xE0020, 0xE007F))
    )


def is_regional_indicator(c: str) -> bool:
    return _cp_in(c, (0x1F1E6, 0x1F1FF))


def _is_control(c: str) -> bool:
    return c in "\r\n" or unicodedata.category(c) in ("Cc", "Zl", "Zp")


def _jamo(c: str) -> str:
    """Hangul syllable type: L, V, T, LV, LVT, or '' for anything else."""
    cp = ord(c)
    if 0x1100 <= cp <= 0x115F or 0xA960 <= cp <= 0xA97C:
        return "L"
    if 0x1160 <= cp <= 0x11A7 or 0xD7B0 <= cp <= 0xD7C6:
        return "V"
    if 0x11A8 <= cp <= 0x11FF or 0xD7CB <= cp <= 0xD7FB:
        return "T"
    if 0xAC00 <= cp <= 0xD7A3:
        return "LV" if (cp - 0xAC00) % 28 == 0 else "LVT"
    return ""


def _joined(prev: str, cur: str, ri_run: int) -> bool:
    """Whether there is no cluster break between ``prev`` and ``cur``; ``ri_run`` counts the
    regional indicators directly before ``cur`` (``prev`` included)."""
    if prev == "\r" and cur == "\n":
        return True
    if _is_control(prev) or _is_control(cur):
        return False
    p, c = _jamo(prev), _jamo(cur)
    if (p == "L" and c in ("L", "V", "LV", "LVT")) or (p in ("LV", "V") and c in ("V", "T")):
        return True
    if p in ("LVT", "T") and c == "T":
        return True
    if is_extending(cur) or prev == ZWJ:
        return True
    return is_regional_indicator(cur) and ri_run % 2 == 1


def boundaries(text: str) -> list[int]:
    """Offsets (into ``text``, in code points) where a grapheme cluster starts, plus ``len(text)``.

    Always includes 0 and ``len(text)``; ``[0]`` for the empty string.
    """
    out = [0]
    ri_run = 0
    for i in range(1, len(text)):
        prev, cur = text[i - 1], text[i]
        ri_run = ri_run + 1 if is_regional_indicator(prev) else 0
        if not _joined(prev, cur, ri_run):
            out.append(i)
    if text:
        out.append(len(text))
    return out


def clusters(text: str) -> list[str]:
    """``text`` split into grapheme clusters; ``"".join(clusters(text)) == text``."""
    b = boundaries(text)
    return [text[b[j] : b[j + 1]] for j in range(len(b) - 1)]
