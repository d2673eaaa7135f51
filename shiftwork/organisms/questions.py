"""A synthetic bank of small arithmetic questions that a small model can learn to answer.

Three kinds:

* ``"add"``: two two-digit operands (10 to 99), ``"What is 23 + 58?"`` with answer ``"81"``;
* ``"sub"``: ``"What is 58 - 23?"`` with answer ``"35"`` (the first operand is never smaller than the
  second, so results are non-negative);
* ``"next"``: the successor of a three-digit number (100 to 998), ``"What comes after 479?"`` with
  answer ``"480"``. A model trained from scratch learns this rule (copy, add one to the last digit,
  carry) from a few hundred examples and applies it to held-out numbers, which two-digit addition
  needs far more training for.

Within one bank every question is distinct, so question texts are unique and a split by row is also
a split by question.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from shiftwork.checks import non_negative_int
from shiftwork.seeding import rng_for

KINDS: tuple[str, ...] = ("add", "sub", "next")
NEXT_MIN: int = 100
NEXT_MAX: int = 998
QUESTION_COLUMNS: list[str] = ["question_id", "question", "answer"]
OPERAND_MIN: int = 10
OPERAND_MAX: int = 99


def _operand_pairs(kind: str) -> np.ndarray:
    """Every allowed (a, b) pair for ``kind`` as an ``(m, 2)`` integer array, in a fixed order
    (for ``"next"``, b is always 1)."""
    if kind == "next":
        a = np.arange(NEXT_MIN, NEXT_MAX + 1)
        return np.stack([a, np.ones_like(a)], axis=1)
    values = np.arange(OPERAND_MIN, OPERAND_MAX + 1)
    a, b = np.meshgrid(values, values, indexing="ij")
    pairs = np.stack([a.ravel(), b.ravel()], axis=1)
    if kind == "sub":
        pairs = pairs[pairs[:, 0] >= pairs[:, 1]]
    return pairs


def capacity(kind: str = "add") -> int:
    """How many distinct questions of ``kind`` exist (8100 for add, 4095 for sub, 899 for next)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {list(KINDS)}, got {kind!r}")
    return int(len(_operand_pairs(kind)))


def make_questions(n: int, seed: int, kind: str = "add") -> pd.DataFrame:
    """``n`` distinct arithmetic questions, deterministic by ``seed`` and ``kind``.

    Returns a DataFrame with columns ``question_id`` (``"add-00000"``, ...), ``question`` and
    ``answer`` (the result as a decimal string).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {list(KINDS)}, got {kind!r}")
    n = non_negative_int("n", n)
    pairs = _operand_pairs(kind)
    if n > len(pairs):
        raise ValueError(f"n={n} exceeds the {len(pairs)} distinct '{kind}' questions")
    rng = rng_for(seed, "questions", kind)
    chosen = pairs[rng.choice(len(pairs), size=n, replace=False)]
    rows = []
    for i, (a, b) in enumerate(chosen.tolist()):
        if kind == "next":
            text, result = f"What comes after {a}?", a + 1
        elif kind == "add":
            text, result = f"What is {a} + {b}?", a + b
        else:
            text, result = f"What is {a} - {b}?", a - b
        rows.append({"question_id": f"{kind}-{i:05d}", "question": text, "answer": str(result)})
    return pd.DataFrame(rows, columns=QUESTION_COLUMNS)


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
