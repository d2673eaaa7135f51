"""Synthetic banks of small questions that a small model can learn to answer, in English and Chinese.

Five kinds, each a task family of its own:

* ``"add"``: two two-digit operands (10 to 99), ``"What is 23 + 58?"`` with answer ``"81"``;
* ``"sub"``: ``"What is 58 - 23?"`` with answer ``"35"`` (the first operand is never smaller than the
  second, so results are non-negative);
* ``"next"``: the successor of a three-digit number (100 to 998), ``"What comes after 479?"`` with
  answer ``"480"``. A model trained from scratch learns this rule (copy, add one to the last digit,
  carry) from a few hundred examples and applies it to held-out numbers, which two-digit addition
  needs far more training for;
* ``"before"``: the predecessor of a three-digit number (101 to 999), ``"What comes before 480?"``
  with answer ``"479"``;
* ``"reverse"``: ``"Reverse the digits of 479."`` with answer ``"974"``, for 100 to 999 except the
  numbers ending in 0, so every reverse has three digits.

Every kind has an English (``"en"``) and a Chinese (``"zh"``) template (:data:`TEMPLATES`); the
same seed draws the same numbers in either language, so a bank's ``question_id`` names one question
whatever language it is written in. Within one bank every question is distinct, so question texts
are unique and a split by row is also a split by question.

:func:`question_bank` is the one entry point the workflow uses: it turns a ``questions`` spec into a
bank with columns :data:`BANK_COLUMNS`. Synthetic answers are decimal strings and have
``n_options`` 0; a multiple-choice family has ``n_options`` > 0 and answers that are option letters
(``"A"`` up to the ``n_options``-th letter), and comes in through :func:`as_bank`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from shiftwork.checks import non_negative_int
from shiftwork.organisms.choice_questions import choice_family
from shiftwork.seeding import rng_for

KINDS: tuple[str, ...] = ("add", "sub", "next", "before", "reverse")
LANGUAGES: tuple[str, ...] = ("en", "zh")
NEXT_MIN: int = 100
NEXT_MAX: int = 998
BEFORE_MIN: int = 101
BEFORE_MAX: int = 999
QUESTION_COLUMNS: list[str] = ["question_id", "question", "answer"]
BANK_COLUMNS: list[str] = ["question_id", "question", "answer", "family", "n_options"]
OPERAND_MIN: int = 10
OPERAND_MAX: int = 99
OPTION_LETTERS: str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

TEMPLATES: dict[str, dict[str, str]] = {
    "add": {"en": "What is {a} + {b}?", "zh": "{a} 加 {b} 等于多少？"},
    "sub": {"en": "What is {a} - {b}?", "zh": "{a} 减 {b} 等于多少？"},
    "next": {"en": "What comes after {a}?", "zh": "{a} 后面的数是多少？"},
    "before": {"en": "What comes before {a}?", "zh": "{a} 前面的数是多少？"},
    "reverse": {"en": "Reverse the digits of {a}.", "zh": "把 {a} 的数字倒过来写。"},
}
"""The question text of every kind in every language; ``{a}`` and ``{b}`` are the operands."""


def _check_kind(kind: object) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {list(KINDS)}, got {kind!r}")
    return str(kind)


def _operand_pairs(kind: str) -> np.ndarray:
    """Every allowed (a, b) pair for ``kind`` as an ``(m, 2)`` integer array, in a fixed order
    (for the one-number kinds ``next``, ``before`` and ``reverse``, b is always 1)."""
    if kind in ("next", "before", "reverse"):
        if kind == "next":
            a = np.arange(NEXT_MIN, NEXT_MAX + 1)
        elif kind == "before":
            a = np.arange(BEFORE_MIN, BEFORE_MAX + 1)
        else:
            a = np.arange(100, 1000)
            a = a[a % 10 != 0]
        return np.stack([a, np.ones_like(a)], axis=1)
    values = np.arange(OPERAND_MIN, OPERAND_MAX + 1)
    a, b = np.meshgrid(values, values, indexing="ij")
    pairs = np.stack([a.ravel(), b.ravel()], axis=1)
    if kind == "sub":
        pairs = pairs[pairs[:, 0] >= pairs[:, 1]]
    return pairs


def _result(kind: str, a: int, b: int) -> str:
    if kind == "next":
        return str(a + 1)
    if kind == "before":
        return str(a - 1)
    if kind == "reverse":
        return str(a)[::-1]
    if kind == "add":
        return str(a + b)
    return str(a - b)


def capacity(kind: str = "add") -> int:
    """How many distinct questions of ``kind`` exist (8100 for add, 4095 for sub, 899 for next and
    before, 810 for reverse)."""
    return int(len(_operand_pairs(_check_kind(kind))))


def make_questions(n: int, seed: int, kind: str = "add", language: str = "en") -> pd.DataFrame:
    """``n`` distinct questions of ``kind`` written in ``language``, deterministic by ``seed`` and
    ``kind`` (the language changes the text only).

    Returns a DataFrame with columns ``question_id`` (``"add-00000"``, ...), ``question`` and
    ``answer`` (a decimal string).
    """
    kind = _check_kind(kind)
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {list(LANGUAGES)}, got {language!r}")
    n = non_negative_int("n", n)
    pairs = _operand_pairs(kind)
    if n > len(pairs):
        raise ValueError(f"n={n} exceeds the {len(pairs)} distinct '{kind}' questions")
    rng = rng_for(seed, "questions", kind)
    chosen = pairs[rng.choice(len(pairs), size=n, replace=False)]
    template = TEMPLATES[kind][language]
    rows = [
        {"question_id": f"{kind}-{i:05d}", "question": template.format(a=a, b=b), "answer": _result(kind, a, b)}
        for i, (a, b) in enumerate(chosen.tolist())
    ]
    return pd.DataFrame(rows, columns=QUESTION_COLUMNS)


def as_bank(df: pd.DataFrame, family: str) -> pd.DataFrame:
    """``df`` (columns question_id, question, answer and optionally n_options) checked and returned
    with columns :data:`BANK_COLUMNS`, every row of family ``family``.

    Answers become stripped strings; where ``n_options`` > 0 the answer must be one of the first
    ``n_options`` option letters (upper-cased here), elsewhere a decimal integer. ``n_options``
    defaults to 0.
    """
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"question bank '{family}' must be a DataFrame, got {type(df).__name__}")
    missing = [c for c in QUESTION_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"question bank '{family}' is missing column(s) {missing}")
    if df["question_id"].duplicated().any():
        raise ValueError(f"question bank '{family}' has duplicate question_id values")
    out = df[QUESTION_COLUMNS].copy()
    out["answer"] = out["answer"].astype(str).str.strip()
    out["family"] = family
    options = df["n_options"] if "n_options" in df.columns else pd.Series(0, index=df.index)
    out["n_options"] = options.astype(int)
    if (out["n_options"] < 0).any() or (out["n_options"] > len(OPTION_LETTERS)).any():
        raise ValueError(f"question bank '{family}': n_options must be between 0 and {len(OPTION_LETTERS)}")
    letters = out["n_options"] > 0
    out.loc[letters, "answer"] = out.loc[letters, "answer"].str.upper()
    for qid, answer, n in zip(out["question_id"], out["answer"], out["n_options"]):
        ok = answer in OPTION_LETTERS[:n] if n else re.fullmatch(r"-?[0-9]+", answer) is not None
        if not ok:
            expected = f"one of the letters {OPTION_LETTERS[:n]}" if n else "a decimal integer"
            raise ValueError(f"question bank '{family}', question {qid!r}: answer {answer!r} is not {expected}")
    return out.reset_index(drop=True)[BANK_COLUMNS]


def question_bank(spec: Mapping[str, Any]) -> pd.DataFrame:
    """The questions a ``questions`` spec describes: ``kind`` (one family), ``n_train``, ``n_test``,
    ``seed`` (default 0) and ``language`` (default ``"en"``), as a bank with columns
    :data:`BANK_COLUMNS` holding at least ``n_train + n_test`` questions.

    A synthetic kind (:data:`KINDS`) gives exactly ``n_train + n_test`` questions with ``n_options`` 0;
    a key of ``families`` is a multiple-choice family read from its source
    (:func:`shiftwork.organisms.choice_questions.choice_family`).
    """
    kind = spec["kind"]
    if kind in KINDS:
        n = int(spec["n_train"]) + int(spec["n_test"])
        questions = make_questions(n, int(spec.get("seed", 0)), kind, spec.get("language", "en"))
        return as_bank(questions, kind)
    if kind in (spec.get("families") or {}):
        return as_bank(choice_family(spec, kind), kind)
    raise ValueError(
        f"question kind must be one of {list(KINDS)} or a key of families ({sorted(spec.get('families') or {})}), "
        f"got {kind!r}"
    )


def split_questions(df: pd.DataFrame, n_train: int, n_test: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A seeded, disjoint (train, test) split of ``df``'s rows, each with a fresh index."""
    n_train = non_negative_int("n_train", n_train)
    n_test = non_negative_int("n_test", n_test)
    if n_train + n_test > len(df):
        raise ValueError(f"n_train + n_test = {n_train + n_test} exceeds the {len(df)} questions in df")
    if "question_id" in df.columns and df["question_id"].duplicated().any():
        raise ValueError("df has duplicate question_id values; a split would not be disjoint")
    order = rng_for(seed, "split").permutation(len(df))
    train = df.iloc[order[:n_train]].reset_index(drop=True)
    test = df.iloc[order[n_train : n_train + n_test]].reset_index(drop=True)
    return train, test
