"""Degenerate replies: replies that say nothing, or that are mostly a loop, as small base models
often answer ("Answer: Answer: Answer: ...", "? ? ? ?"). The stability axes compare such a reply
with another like any reply; the share of them says how far the axes measure a model's
behaviour and how far its failure to answer.

The rule works on a reply's words: its whitespace-separated tokens, lower-cased, with the
punctuation at either end stripped (a token of punctuation only is kept as it is, so "?" is a
word). A reply is degenerate, for the first reason that applies, when it is

* ``empty``: it holds no letter and no digit (nothing, whitespace, or punctuation only);
* ``loop``: the words inside loops make up at least :data:`LOOP_SHARE` of its words. A loop is a
  stretch in which a group of 1 to :data:`MAX_PERIOD` words repeats back to back, at least
  :data:`MIN_REPEATS` times and over at least :data:`MIN_LOOP_WORDS` words (a last, cut-off
  repeat counts with it): "yes yes yes yes" (one word four times), "the end the end the end"
  (two words three times);
* ``few_words``: it has at least :data:`MIN_WORDS_FOR_VARIETY` words, of which at most
  :data:`MAX_DISTINCT_SHARE` are distinct (a jumble of a few words that never quite loops).

Normal repetition stays clear of all three: "No, no." and "no, no, no" are too short to loop; a
list's bullets and labels ("- Tip: sleep early - Tip: eat well") do not repeat back to back.
"""

from __future__ import annotations

import re

import pandas as pd

from shiftwork.stability.stats import ALL

#: the longest group of words whose back-to-back repeats make a loop
MAX_PERIOD = 4
#: how often a group must repeat back to back to make a loop
MIN_REPEATS = 3
#: the fewest words a loop spans ("no, no, no" is no loop; "no no no no" is one)
MIN_LOOP_WORDS = 4
#: the share of a reply's words inside loops from which the reply is a loop
LOOP_SHARE = 0.5
#: the fewest words from which a reply's variety of words is judged
MIN_WORDS_FOR_VARIETY = 12
#: at most this share of distinct words makes a long enough reply degenerate
MAX_DISTINCT_SHARE = 0.25
REASONS: tuple[str, ...] = ("empty", "loop", "few_words")
#: the replies each row of :func:`degenerate_shares` counts: the prompts', the variants', both
REPLIES: tuple[str, ...] = ("baseline", "variant", "all")
DEGENERATE_COLUMNS = ["model", "dataset", "replies", "n_replies", "n_degenerate", "share", *REASONS]

_EDGE_PUNCTUATION = re.compile(r"^[\W_]+|[\W_]+$")
_LETTER_OR_DIGIT = re.compile(r"[^\W_]")


def words(reply: str) -> list[str]:
    """The reply's words as the rule reads them: lower-cased tokens without the punctuation at
    either end; a token of punctuation only stays as it is."""
    out = []
    for token in reply.lower().split():
        stripped = _EDGE_PUNCTUATION.sub("", token)
        out.append(stripped or token)
    return out


def loop_words(tokens: list[str]) -> int:
    """How many of ``tokens`` lie inside a loop: a stretch where a group of ``n`` (1 to
    :data:`MAX_PERIOD`) tokens repeats back to back at least :data:`MIN_REPEATS` times and over
    at least :data:`MIN_LOOP_WORDS` tokens. A token that equals the one ``n`` before it echoes;
    a run of ``k`` echoing tokens is a loop of ``k + n`` tokens."""
    covered: set[int] = set()
    for n in range(1, MAX_PERIOD + 1):
        start = n
        for i in range(n, len(tokens) + 1):
            if i < len(tokens) and tokens[i] == tokens[i - n]:
                continue
            span = i - start + n  # tokens from start - n to i - 1
            if i > start and span >= max(MIN_REPEATS * n, MIN_LOOP_WORDS):
                covered.update(range(start - n, i))
            start = i + 1
    return len(covered)


def degenerate_reason(reply: str) -> str | None:
    """Why ``reply`` is degenerate (one of :data:`REASONS`, the first that applies), or None."""
    if not _LETTER_OR_DIGIT.search(reply):
        return "empty"
    tokens = words(reply)
    if loop_words(tokens) >= LOOP_SHARE * len(tokens):
        return "loop"
    if len(tokens) >= MIN_WORDS_FOR_VARIETY and len(set(tokens)) <= MAX_DISTINCT_SHARE * len(tokens):
        return "few_words"
    return None


def is_degenerate(reply: str) -> bool:
    """Whether ``reply`` is empty, a loop or a jumble of a few words (:func:`degenerate_reason`)."""
    return degenerate_reason(reply) is not None


def _counts(reasons: pd.Series) -> dict[str, float | int]:
    """The counts of one group's reasons (None: not degenerate)."""
    n = len(reasons)
    n_bad = int(reasons.notna().sum())
    return {
        "n_replies": n,
        "n_degenerate": n_bad,
        "share": n_bad / n if n else float("nan"),
        **{r: int((reasons == r).sum()) for r in REASONS},
    }


def degenerate_shares(generations: pd.DataFrame) -> pd.DataFrame:
    """The share of degenerate replies per model and dataset, and per model over all its
    datasets (dataset ``all``), each for the baselines' replies, the variants' and all
    (``replies``), with the count of each reason (:data:`DEGENERATE_COLUMNS`).

    ``generations`` has ``model``, ``dataset``, ``family`` (``baseline`` for a prompt's own
    reply) and ``response``."""
    reasons = generations["response"].fillna("").map(degenerate_reason)
    frame = generations[["model", "dataset"]].assign(
        _reason=reasons, _replies=generations["family"].eq("baseline").map({True: "baseline", False: "variant"})
    )
    rows = []
    for model, by_model in frame.groupby("model", sort=True):
        datasets = [(d, g) for d, g in by_model.groupby("dataset", sort=True)] + [(ALL, by_model)]
        for dataset, group in datasets:
            for replies in REPLIES:
                chosen = group if replies == "all" else group[group["_replies"] == replies]
                rows.append({"model": model, "dataset": dataset, "replies": replies, **_counts(chosen["_reason"])})
    return pd.DataFrame(rows, columns=DEGENERATE_COLUMNS)
