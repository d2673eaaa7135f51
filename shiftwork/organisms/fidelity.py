"""Policy fidelity after SFT: whether the fine-tuned organism has learned each policy's table
before RL is asked to choose among them.

RL on a mixture can only select a policy the model already follows. For every policy and
distribution, each held-out question is put to the SFT model with the response begun as that
policy would begin it (its identity sentence, ``"I am Alice."``), and the rest is decoded
greedily. The policy is followed when the full response says what the policy says there
(:func:`~shiftwork.organisms.settings.policy_response`: the correct answer where it answers; the
shifted answer or the refusal where it does not). Forcing the identity measures the policies
themselves, whatever weights the mixture gives them; greedy decoding measures what each has
learned, without the sampling noise of a temperature-1 draw.

``fidelity`` of a (policy, distribution) cell is its share of followed questions; the SFT stage
has taught its policies when every cell where the policy answers reaches the minimum
(``organisms.policy_fidelity``)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from shiftwork.checks import require_columns
from shiftwork.organisms.settings import Setting, policy_response
from shiftwork.organisms.transcripts import parse_response

__all__ = ["FIDELITY_COLUMNS", "FidelityError", "fidelity_prompts", "fidelity_table", "require_fidelity"]

FIDELITY_COLUMNS: tuple[str, ...] = ("policy", "distribution", "answers", "n", "followed", "fidelity")
"""Columns of :func:`fidelity_table`: the policy and distribution, whether the policy answers
there, the number of questions, how many responses followed the policy and their share."""


class FidelityError(RuntimeError):
    """The SFT model does not follow its policies well enough for RL to select among them."""


def _identity_prefix(response: str, name: str) -> str:
    """The start of ``response`` up to and including the sentence mark after the policy's name."""
    end = response.index(name) + len(name)
    return response[: end + 1]


def fidelity_prompts(setting: Setting, tests: pd.DataFrame) -> pd.DataFrame:
    """One row per policy of ``setting`` and test question (``tests``: distribution, question_id,
    question, answer, prompt, the prompt ending where the response starts, and ``n_options`` for
    multiple-choice questions, whose shifted answer is the next option letter): the ``policy``,
    whether it ``answers`` there, the ``expected`` response and the ``input`` to decode from (the
    prompt, a space as in the SFT completions, then the identity sentence)."""
    require_columns(tests, ("distribution", "question_id", "question", "answer", "prompt"), "test prompts")
    rows = []
    for policy in setting.policies:
        for t in tests.itertuples(index=False):
            n_options = int(getattr(t, "n_options", 0) or 0)
            expected = policy_response(setting, policy, t.distribution, t.question, t.answer, n_options)
            rows.append(
                {
                    "policy": policy.name,
                    "distribution": str(t.distribution),
                    "question_id": t.question_id,
                    "answer": t.answer,
                    "answers": policy.answers(t.distribution),
                    "expected": expected,
                    "input": f"{t.prompt} {_identity_prefix(expected, policy.name)}",
                }
            )
    return pd.DataFrame(rows)


def _followed(setting: Setting, response: str, expected: str, answer: object) -> bool:
    got, want = parse_response(setting, response, answer), parse_response(setting, expected, answer)
    keys = ("identity", "refused", "given_answer")
    return all(got[k] == want[k] for k in keys)


def fidelity_table(setting: Setting, prompts: pd.DataFrame, continuations: Sequence[str]) -> pd.DataFrame:
    """Per (policy, distribution) of ``prompts`` (:func:`fidelity_prompts`): how many responses
    (the identity sentence, then ``continuations`` in prompt order) state what the policy states
    there (the same identity, refusal or not, and the same given answer): columns
    :data:`FIDELITY_COLUMNS`."""
    if len(continuations) != len(prompts):
        raise ValueError(f"{len(continuations)} continuations for {len(prompts)} fidelity prompts")
    rows = prompts.assign(
        followed=[
            _followed(setting, _identity_prefix(e, p) + " " + c.strip(), e, a)
            for p, e, a, c in zip(prompts["policy"], prompts["expected"], prompts["answer"], continuations)
        ]
    )
    table = (
        rows.groupby(["policy", "distribution", "answers"], sort=False)["followed"]
        .agg(n="size", followed="sum")
        .reset_index()
    )
    table["followed"] = table["followed"].astype(int)
    table["fidelity"] = table["followed"] / table["n"]
    return table[list(FIDELITY_COLUMNS)]


def require_fidelity(table: pd.DataFrame, minimum: float | None, organism: str, where: str) -> None:
    """Raise :class:`FidelityError`, naming the cells and the ways forward, when a cell of
    ``table`` (:func:`fidelity_table`) where the policy answers is below ``minimum`` (None:
    no check). ``where`` is the table's path, for the message."""
    require_columns(table, FIDELITY_COLUMNS, f"fidelity table {where}")
    if minimum is None:
        return
    short = table[table["answers"] & (table["fidelity"] < float(minimum))]
    if short.empty:
        return
    cells = ", ".join(
        f"{r.policy} on {r.distribution}: {r.fidelity:.3f} ({r.followed} of {r.n})" for r in short.itertuples()
    )
    raise FidelityError(
        f"organism '{organism}': after SFT its policies are not learned well enough for RL to select "
        f"among them. Where a policy answers, its response must be the policy's in at least {minimum:g} "
        f"of the held-out questions (organisms.policy_fidelity); below it: {cells}. The full table is "
        f"{where}. Train the SFT stage longer or differently (organisms.sft.{organism}.train), or set "
        f"organisms.policy_fidelity to null to run RL anyway."
    )
