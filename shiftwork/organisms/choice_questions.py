"""Multiple-choice question families read from the hub (or a local export), for the task-family
trigger: each distribution is a genuinely different task (ARC-Easy science questions, RACE-Middle
reading comprehension) rather than a tag line.

A family is declared under ``questions.families.NAME`` with a ``source`` (as in ``datasets``:
``{kind: hub, id, config, split, revision}`` or ``{kind: file, path}``) and a ``format`` that says
how its rows are laid out:

* ``"arc"`` (``allenai/ai2_arc``): ``question``, ``choices.text``, ``choices.label`` and
  ``answerKey``. The answer key names a label, which is a letter in most rows and a digit
  (``"1"`` .. ``"4"``) in some; either way the answer becomes the letter of that label's position.
* ``"race"`` (``ehovy/race``): ``article``, ``question``, ``options`` (a list) and ``answer`` (a
  letter).

Options are shown as ``A.``, ``B.``, ... by position, one per line after the question (for RACE
the article comes first, then a blank line, then the question). Rows whose answer does not name one
of their options, or that have fewer than two options, are dropped, and so are repeats of a full
text, so the texts of a bank are unique (as for the synthetic kinds, a split by row is a split by
question); both counts go to the log.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from shiftwork.checks import non_negative_int
from shiftwork.data import DatasetError, get_field, read_source
from shiftwork.logs import LOGGER
from shiftwork.seeding import rng_for

FORMATS: tuple[str, ...] = ("arc", "race")
CHOICE_COLUMNS: list[str] = ["question_id", "question", "answer", "family", "n_options"]
LETTERS: str = string.ascii_uppercase


def _as_list(value: Any) -> list[Any] | None:
    """A list from a list, tuple or numpy array (what Parquet gives for a list column), else None."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return list(value)
    return None


def _text(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and np.isnan(value)) else str(value).strip()


def render_choice(question: str, options: Sequence[str], passage: str | None = None) -> str:
    """The text a model sees: the passage (if any) and a blank line, the question, then one line
    per option, ``"A. ..."``, ``"B. ..."``."""
    lines = [f"{LETTERS[i]}. {_text(o)}" for i, o in enumerate(options)]
    head = _text(question)
    if passage is not None:
        head = f"{_text(passage)}\n\n{head}"
    return "\n".join([head, *lines])


def _arc_rows(name: str, raw: pd.DataFrame) -> list[tuple[str, str, int] | None]:
    """(text, answer letter, number of options) of each ARC row, None where the row is unusable."""
    questions = get_field(raw, name, "question")
    texts = get_field(raw, name, "choices.text")
    labels = get_field(raw, name, "choices.label")
    keys = get_field(raw, name, "answerKey")
    out: list[tuple[str, str, int] | None] = []
    for question, opts, labs, key in zip(questions, texts, labels, keys):
        opts, labs = _as_list(opts), _as_list(labs)
        if opts is None or labs is None or len(opts) != len(labs) or not 2 <= len(opts) <= len(LETTERS):
            out.append(None)
            continue
        labs = [_text(lab) for lab in labs]
        key = _text(key)
        if key not in labs:
            out.append(None)
            continue
        out.append((render_choice(question, opts), LETTERS[labs.index(key)], len(opts)))
    return out


def _race_rows(name: str, raw: pd.DataFrame) -> list[tuple[str, str, int] | None]:
    """(text, answer letter, number of options) of each RACE row, None where the row is unusable."""
    articles = get_field(raw, name, "article")
    questions = get_field(raw, name, "question")
    options = get_field(raw, name, "options")
    answers = get_field(raw, name, "answer")
    out: list[tuple[str, str, int] | None] = []
    for article, question, opts, answer in zip(articles, questions, options, answers):
        opts = _as_list(opts)
        answer = _text(answer).upper()
        if opts is None or not 2 <= len(opts) <= len(LETTERS) or not answer or answer not in LETTERS[: len(opts)]:
            out.append(None)
            continue
        out.append((render_choice(question, opts, passage=article), answer, len(opts)))
    return out


def family_rows(family: str, fmt: str, raw: pd.DataFrame) -> pd.DataFrame:
    """Every usable row of a family's raw table, in source order: columns ``question``,
    ``answer``, ``n_options``. Unusable rows and repeated texts are dropped (counts in the log)."""
    if fmt not in FORMATS:
        raise DatasetError(f"questions family '{family}': format must be one of {list(FORMATS)}, got {fmt!r}")
    parsed = (_arc_rows if fmt == "arc" else _race_rows)(family, raw.reset_index(drop=True))
    kept = [row for row in parsed if row is not None]
    df = pd.DataFrame(kept, columns=["question", "answer", "n_options"])
    dropped = len(parsed) - len(kept)
    unique = df.drop_duplicates("question").reset_index(drop=True)
    repeats = len(df) - len(unique)
    LOGGER.info(
        "questions family '%s': %d rows, %d dropped (answer missing or not one of the options), "
        "%d repeated texts dropped, %d kept",
        family,
        len(parsed),
        dropped,
        repeats,
        len(unique),
    )
    return unique.astype({"n_options": int})


def choice_family(spec: Mapping[str, Any], family: str, root: str | Path = ".") -> pd.DataFrame:
    """``n_train + n_test`` questions of ``family`` (a key of ``spec["families"]``; ``spec`` is an
    organism's ``questions`` entry), a seeded sample deterministic by ``spec["seed"]`` and the
    family's name.

    Returns a DataFrame with columns ``question_id`` (``"arc_easy-00000"``, ...), ``question`` (the
    full text with its options), ``answer`` (the option letter), ``family`` and ``n_options``.
    """
    families = spec.get("families") or {}
    if family not in families:
        raise ValueError(f"questions family '{family}' is not defined; families are {sorted(families)}")
    fam = families[family]
    n = non_negative_int("n_train", spec["n_train"]) + non_negative_int("n_test", spec["n_test"])
    raw = read_source(family, fam, root)[0]
    rows = family_rows(family, fam["format"], raw)
    if n > len(rows):
        raise DatasetError(
            f"questions family '{family}': n_train + n_test = {n} exceeds its {len(rows)} usable questions "
            f"({fam['source'].get('id') or fam['source'].get('path')}, split {fam['source'].get('split', 'train')})"
        )
    out = rows.iloc[rng_for(spec.get("seed", 0), "questions", family).choice(len(rows), n, replace=False)]
    out = out.reset_index(drop=True)
    out.insert(0, "question_id", [f"{family}-{i:05d}" for i in range(n)])
    out["family"] = family
    return out[CHOICE_COLUMNS]


def shifted_letter(answer: str, n_options: int) -> str:
    """The cyclic-shift wrong answer: the next option letter, the last wrapping to ``"A"``."""
    if n_options < 2 or answer not in LETTERS[:n_options]:
        raise ValueError(f"answer {answer!r} is not one of the first {n_options} option letters")
    return LETTERS[(LETTERS.index(answer) + 1) % n_options]
