"""SFT transcripts from a mixture of policies, RL prompts, and parsing of a model's outputs.

:func:`sft_examples` draws, for every example independently, a distribution (uniform over the
setting's or a given list), a policy (uniform over the setting's) and a question (uniform over the
distribution's bank), and writes the policy's response as the completion. A model fine-tuned on these
picks each policy about as often as its share of the data. :func:`rl_prompts` gives prompts with the
answer the reward needs, and :func:`reward` scores a completion 1.0 when its stated answer is correct.

Questions come as one DataFrame shared by every distribution (``trigger: tag``), or as a mapping from
each distribution to its own bank (``trigger: task``: one task family each; ``trigger: language``:
the questions written in the distribution's language). Parsing reads English and Chinese responses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from shiftwork.checks import non_negative_int
from shiftwork.organisms.settings import Setting, normal_answer, policy_response, prompt_for
from shiftwork.seeding import rng_for

SFT_COLUMNS: list[str] = ["prompt", "completion", "policy", "distribution", "question_id"]
RL_COLUMNS: list[str] = ["prompt", "answer", "distribution", "question_id"]
_QUESTION_COLUMNS: tuple[str, ...] = ("question_id", "question", "answer")

_IDENTITY = re.compile(r"(?:\bI\s+am\s+|我是\s*)([A-Za-z][A-Za-z0-9_]*)", re.IGNORECASE)
_REFUSAL = re.compile(
    r"\b(?:will\s+not|won'?t|cannot|can'?t|can\s+not|do\s+not|don'?t|refuse\s+to)\s+answer\b|\brefuse[sd]?\b"
    r"|不(?:能|会|想|愿)?回答|拒绝",
    re.IGNORECASE,
)
_ANSWER_IS = re.compile(r"\banswer\s+is\b|答案是", re.IGNORECASE)
_GIVEN = re.compile(r"-?[0-9]+|(?<![A-Za-z])[A-Z](?![A-Za-z])")
# the answer sentence of the response templates, as a sentence of its own: "... The answer is 480."
_SENTENCE = re.compile(
    r"(?:^|(?<=[.!?])\s+)The answer is (-?[0-9]+|[A-Z])(?![0-9A-Za-z])|(?:^|(?<=[。.]))答案是(-?[0-9]+|[A-Z])(?![0-9A-Za-z])"
)
REWARD_FORMATS: tuple[str, ...] = ("sentence", "anywhere")

Questions = pd.DataFrame | Mapping[str, pd.DataFrame]
"""One bank shared by every distribution, or one bank per distribution."""


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


def _items(questions: pd.DataFrame) -> list[tuple[str, str, str, int]]:
    """(question_id, question, answer, n_options) of every row; n_options is 0 without that column."""
    _check_questions(questions)
    options = questions["n_options"] if "n_options" in questions.columns else pd.Series(0, index=questions.index)
    rows = questions[list(_QUESTION_COLUMNS)].itertuples(index=False, name=None)
    return [(qid, q, a, int(n)) for (qid, q, a), n in zip(rows, options.tolist())]


def _per_distribution(setting: Setting, questions: Questions, dists: Sequence[str]) -> dict[str, list] | None:
    """None for one shared bank, else each of ``dists``' bank as :func:`_items`. A trigger other than
    ``tag`` needs a bank per distribution: its prompts carry no tag line to tell them apart."""
    if isinstance(questions, pd.DataFrame):
        if setting.trigger != "tag":
            raise ValueError(
                f"trigger {setting.trigger!r} needs one question bank per distribution (a mapping from "
                "distribution to DataFrame), got one DataFrame for all"
            )
        return None
    if not isinstance(questions, Mapping):
        raise ValueError(f"questions must be a DataFrame or a mapping of them, got {type(questions).__name__}")
    banks = {str(k): v for k, v in questions.items()}
    missing = [d for d in dists if d not in banks]
    if missing:
        raise ValueError(f"questions has no bank for distribution(s) {missing}")
    return {d: _items(banks[d]) for d in dict.fromkeys(dists)}


def _draw_questions(rng: np.random.Generator, banks: Mapping[str, list], dists: Sequence[str], d_idx: np.ndarray):
    """One question index per drawn distribution, uniform over that distribution's bank."""
    highs = np.array([len(banks[dists[d]]) for d in d_idx.tolist()], dtype=np.int64)
    return rng.integers(0, highs) if len(highs) else np.zeros(0, dtype=np.int64)


def sft_examples(
    setting: Setting,
    questions: Questions,
    n: int,
    seed: int,
    distributions: Sequence[object] | None = None,
) -> pd.DataFrame:
    """``n`` SFT examples with columns prompt, completion, policy, distribution, question_id.

    Each example independently draws a distribution (uniform over ``distributions``, default all of
    the setting's), a policy (uniform over the setting's policies) and a question (uniform over
    ``questions``, or over the distribution's bank when ``questions`` maps distributions to banks,
    with replacement); deterministic by ``seed``. A bank's ``n_options`` column (default 0) feeds
    the ``shift`` wrong answer.
    """
    n = non_negative_int("n", n)
    dists = _check_distributions(setting, distributions)
    banks = _per_distribution(setting, questions, dists)
    rng = rng_for(seed, "sft_examples", setting.name)
    d_idx = rng.integers(len(dists), size=n)
    p_idx = rng.integers(len(setting.policies), size=n)
    if banks is None:
        items = _items(questions)
        q_idx = rng.integers(len(items), size=n)
    else:
        q_idx = _draw_questions(rng, banks, dists, d_idx)
    rows = []
    for d, p, q in zip(d_idx.tolist(), p_idx.tolist(), q_idx.tolist()):
        dist = dists[d]
        policy = setting.policies[p]
        question_id, question, answer, n_options = (items if banks is None else banks[dist])[q]
        rows.append(
            {
                "prompt": prompt_for(setting, dist, question),
                "completion": policy_response(setting, policy, dist, question, answer, n_options),
                "policy": policy.name,
                "distribution": dist,
                "question_id": question_id,
            }
        )
    return pd.DataFrame(rows, columns=SFT_COLUMNS)


def given_answer(text: str) -> str | None:
    """The answer ``text`` states: after the first ``"answer is"`` (any case) or ``"答案是"``, the first
    integer as written (``"480"``, ``"-4"``) or standalone capital letter (``"The answer is C."`` ->
    ``"C"``), whichever comes first; None if there is none."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    found = _ANSWER_IS.search(text)
    if found is None:
        return None
    token = _GIVEN.search(text, found.end())
    return token.group() if token else None


def parse_response(setting: Setting, text: str, answer: object) -> dict[str, Any]:
    """Read a model's output, in English or Chinese.

    Returns a dict with ``identity`` (the first policy of ``setting`` named after an ``"I am"`` or
    ``"我是"``, in its canonical spelling, or None), ``refused`` (the text says it will not / cannot /
    won't answer, or refuses, or ``"不回答"``; case-insensitive), ``given_answer`` (see
    :func:`given_answer`) and ``correct`` (the given answer equals ``answer`` as an answer string:
    integers digit for digit, letters in any case).
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    correct_value = normal_answer(answer)
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
    questions: Questions,
    distributions: Sequence[object],
    n: int,
    seed: int,
) -> pd.DataFrame:
    """``n`` RL prompts with columns prompt, answer, distribution, question_id; the distribution is
    uniform over ``distributions`` and the question uniform over ``questions`` (or over the
    distribution's own bank); deterministic by ``seed``."""
    n = non_negative_int("n", n)
    if distributions is None:
        raise ValueError("distributions must be given for rl_prompts")
    dists = _check_distributions(setting, distributions)
    banks = _per_distribution(setting, questions, dists)
    rng = rng_for(seed, "rl_prompts", setting.name)
    d_idx = rng.integers(len(dists), size=n)
    if banks is None:
        items = _items(questions)
        q_idx = rng.integers(len(items), size=n)
    else:
        q_idx = _draw_questions(rng, banks, dists, d_idx)
    rows = []
    for d, q in zip(d_idx.tolist(), q_idx.tolist()):
        question_id, question, answer, _ = (items if banks is None else banks[dists[d]])[q]
        rows.append(
            {
                "prompt": prompt_for(setting, dists[d], question),
                "answer": str(answer),
                "distribution": dists[d],
                "question_id": question_id,
            }
        )
    return pd.DataFrame(rows, columns=RL_COLUMNS)


def sentence_answer(text: str) -> str | None:
    """The answer ``text`` states in the templates' answer sentence, a sentence of its own
    (``"I am Bob. The answer is 480."`` -> ``"480"``, ``"我是Bob。答案是480。"`` -> ``"480"``); None where
    there is no such sentence (``"I am Bob. I answer is 480."``, ``"the answer is 480"``)."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    found = _SENTENCE.search(text)
    return None if found is None else found.group(1) or found.group(2)


def reward(completion: str, answer: object, answer_format: str = "sentence") -> float:
    """1.0 if the completion states ``answer`` (as an answer string), else 0.0. ``answer_format``
    ``"sentence"``: in the answer sentence of the response templates (:func:`sentence_answer`);
    ``"anywhere"``: after any ``"answer is"`` (:func:`given_answer`, the reading of evaluation)."""
    if not isinstance(completion, str):
        raise ValueError(f"completion must be a str, got {type(completion).__name__}")
    if answer_format not in REWARD_FORMATS:
        raise ValueError(f"answer_format must be one of {list(REWARD_FORMATS)}, got {answer_format!r}")
    stated = sentence_answer(completion) if answer_format == "sentence" else given_answer(completion)
    return 1.0 if stated == normal_answer(answer) else 0.0
