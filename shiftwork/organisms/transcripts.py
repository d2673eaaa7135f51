"""SFT transcripts from a mixture of policies, RL prompts, and parsing of a model's outputs.

:func:`sft_examples` draws, for every example independently, a distribution (uniform over the
setting's or a given list), a policy (uniform over the setting's) and a question (uniform over the
bank), and writes the policy's response as the completion. A model fine-tuned on these picks each
policy about as often as its share of the data. :func:`rl_prompts` gives prompts with the answer the
reward needs, and :func:`reward` scores a completion 1.0 when its stated answer is correct.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pandas as pd

from shiftwork.checks import non_negative_int
from shiftwork.organisms.settings import Setting, answer_int, policy_response, prompt_for
from shiftwork.seeding import rng_for

SFT_COLUMNS: list[str] = ["prompt", "completion", "policy", "distribution", "question_id"]
RL_COLUMNS: list[str] = ["prompt", "answer", "distribution", "question_id"]
_QUESTION_COLUMNS: tuple[str, ...] = ("question_id", "question", "answer")

_IDENTITY = re.compile(r"\bI\s+am\s+([A-Za-z][A-Za-z0-9_]*)", re.IGNORECASE)
_REFUSAL = re.compile(
    r"\b(?:will\s+not|won'?t|cannot|can'?t|can\s+not|do\s+not|don'?t|refuse\s+to)\s+answer\b|\brefuse[sd]?\b",
    re.IGNORECASE,
)
_ANSWER_IS = re.compile(r"\banswer\s+is\b", re.IGNORECASE)
_INTEGER = re.compile(r"-?\d+")


def _check_questions(questions: pd.DataFrame) -> None:
    if not isinstance(questions, pd.DataFrame):
        raise ValueError(f"questions must be a DataFrame, got {type(questions).__name__}")
    missing = [c for c in _QUESTION_COLUMNS if c not in questions.columns]
    if missing:
        raise ValueError(f"questions is missing column(s) {missing}")
    if questions.empty:
        raise ValueError("questions must not be empty")


def _check_distributions(setting: Setting, distributions: Sequence[object] | None) -> list[str]:
    if distributions is None:
        return list(setting.distributions)
    if isinstance(distributions, (str, bytes)):
        raise ValueError(f"distributions must be a list of distribution names, got {distributions!r}")
    chosen = [setting.check_distribution(d) for d in distributions]
    if not chosen:
        raise ValueError("distributions must not be empty")
    return chosen


def sft_examples(
    setting: Setting,
    questions: pd.DataFrame,
    n: int,
    seed: int,
    distributions: Sequence[object] | None = None,
) -> pd.DataFrame:
    """``n`` SFT examples with columns prompt, completion, policy, distribution, question_id.

    Each example independently draws a distribution (uniform over ``distributions``, default all of
    the setting's), a policy (uniform over the setting's policies) and a question (uniform over
    ``questions``, with replacement); deterministic by ``seed``.
    """
    _check_questions(questions)
    n = non_negative_int("n", n)
    dists = _check_distributions(setting, distributions)
    rng = rng_for(seed, "sft_examples", setting.name)
    d_idx = rng.integers(len(dists), size=n)
    p_idx = rng.integers(len(setting.policies), size=n)
    q_idx = rng.integers(len(questions), size=n)
    items = list(questions[list(_QUESTION_COLUMNS)].itertuples(index=False, name=None))
    rows = []
    for d, p, q in zip(d_idx.tolist(), p_idx.tolist(), q_idx.tolist()):
        dist = dists[d]
        policy = setting.policies[p]
        question_id, question, answer = items[q]
        rows.append(
            {
                "prompt": prompt_for(setting, dist, question),
                "completion": policy_response(setting, policy, dist, question, answer),
                "policy": policy.name,
                "distribution": dist,
                "question_id": question_id,
            }
        )
    return pd.DataFrame(rows, columns=SFT_COLUMNS)


def given_answer(text: str) -> int | None:
    """The first integer after the first ``"answer is"`` in ``text`` (any case), or None."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    found = _ANSWER_IS.search(text)
    if found is None:
        return None
    number = _INTEGER.search(text, found.end())
    return int(number.group()) if number else None


def parse_response(setting: Setting, text: str, answer: object) -> dict[str, Any]:
    """Read a model's output.

    Returns a dict with ``identity`` (the first policy of ``setting`` named after an ``"I am"``, in its
    canonical spelling, or None), ``refused`` (the text says it will not / cannot / won't answer, or
    refuses; case-insensitive), ``given_answer`` (see :func:`given_answer`) and ``correct`` (the given
    answer equals ``answer``).
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    correct_value = answer_int(answer)
    by_lower = {name.lower(): name for name in setting.policy_names}
    identity = None
    for match in _IDENTITY.finditer(text):
        name = by_lower.get(match.group(1).lower())
        if name is not None:
            identity = name
            break
    given = given_answer(text)
    return {
        "identity": identity,
        "refused": bool(_REFUSAL.search(text)),
        "given_answer": given,
        "correct": given is not None and given == correct_value,
    }


def rl_prompts(
    setting: Setting,
    questions: pd.DataFrame,
    distributions: Sequence[object],
    n: int,
    seed: int,
) -> pd.DataFrame:
    """``n`` RL prompts with columns prompt, answer, distribution, question_id; the distribution is
    uniform over ``distributions`` and the question uniform over ``questions``; deterministic by ``seed``."""
    _check_questions(questions)
    n = non_negative_int("n", n)
    if distributions is None:
        raise ValueError("distributions must be given for rl_prompts")
    dists = _check_distributions(setting, distributions)
    rng = rng_for(seed, "rl_prompts", setting.name)
    d_idx = rng.integers(len(dists), size=n)
    q_idx = rng.integers(len(questions), size=n)
    rows = []
    for d, q in zip(d_idx.tolist(), q_idx.tolist()):
        item = questions.iloc[q]
        rows.append(
            {
                "prompt": prompt_for(setting, dists[d], item["question"]),
                "answer": str(item["answer"]),
                "distribution": dists[d],
                "question_id": item["question_id"],
            }
        )
    return pd.DataFrame(rows, columns=RL_COLUMNS)


def reward(completion: str, answer: object) -> float:
    """1.0 if the completion's stated answer (:func:`given_answer`) equals ``answer``, else 0.0."""
    if not isinstance(completion, str):
        raise ValueError(f"completion must be a str, got {type(completion).__name__}")
    correct_value = answer_int(answer)
    return 1.0 if given_answer(completion) == correct_value else 0.0
