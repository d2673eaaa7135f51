"""Where KL-regularised RL would leave the mixture of policies, if it moved the mixture weights only.

The paper's organism is a mixture ``sum_i w_i pi_i`` of conditional policies whose weights do not
depend on the input. If RL changes only the weights, maximising the expected reward minus ``beta``
times the KL divergence from the starting model has a closed-form optimum: ``w_i`` proportional to
``w0_i * exp(R_i / beta)``, where ``R_i`` is policy ``i``'s expected reward on the RL prompts (here
the share of the stage's distributions it answers on, the prompts being spread evenly over them)
and ``w0`` the weights before RL (even, as SFT trains them). At ``beta`` 0 the optimum is the best
policies alone, shared as ``w0`` shares them.

Every RL stage measures its KL divergence from the SFT model
(:func:`shiftwork.organisms.training.anchor_reference`), so a stage's optimum does not depend on
the stages before it: after the last stage the optimum is ``w0 * exp(R / beta)`` with that stage's
rewards.

Held-out accuracy at the optimum is the mean, over the distributions RL never trained on, of the
weight on the policies that answer there. It is what selection alone can reach; a measured
held-out accuracy far above it means RL rewrote the policies rather than choosing among them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from shiftwork.organisms.settings import Setting

BETAS: tuple[float, ...] = (0.0, 0.05, 0.1, 0.2, 0.5)
"""The KL weights of the report's optimum table, beside each run's own."""


def policy_rewards(setting: Setting, distributions: Sequence[str]) -> np.ndarray:
    """Each policy's expected reward on prompts spread evenly over ``distributions``: the share of
    them it answers on, in the setting's policy order."""
    keys = [setting.check_distribution(d) for d in distributions]
    if not keys:
        raise ValueError("a stage needs at least one distribution")
    return np.array([np.mean([p.answers(d) for d in keys]) for p in setting.policies], dtype=float)


def optimum_weights(rewards: Sequence[float], beta: float, prior: Sequence[float] | None = None) -> np.ndarray:
    """The weights maximising ``sum w R - beta KL(w || prior)``: ``prior * exp(R / beta)``,
    normalised (the best policies in proportion to ``prior`` at ``beta`` 0). ``prior`` defaults to
    even weights."""
    reward = np.asarray(rewards, dtype=float)
    base = np.full(len(reward), 1.0 / len(reward)) if prior is None else np.asarray(prior, dtype=float)
    if base.shape != reward.shape:
        raise ValueError(f"{len(base)} prior weights for {len(reward)} policies")
    if beta < 0 or not np.isfinite(beta):
        raise ValueError(f"beta must be a finite number >= 0, got {beta}")
    if (base < 0).any() or base.sum() <= 0:
        raise ValueError("prior weights must be >= 0 and not all 0")
    if beta == 0:
        best = reward == reward[base > 0].max()
        weights = np.where(best & (base > 0), base, 0.0)
    else:
        # subtracting the largest exponent keeps exp from overflowing at small beta
        exponent = np.where(base > 0, reward / beta, -np.inf)
        weights = base * np.exp(exponent - exponent.max())
    return weights / weights.sum()


def stage_optimum(setting: Setting, stages: Sequence[Sequence[str]], beta: float) -> np.ndarray:
    """The policies' weights at the optimum of the last of ``stages`` (each a list of
    distributions), from the even weights after SFT, the reference of every stage."""
    if not stages:
        raise ValueError("RL needs at least one stage")
    for distributions in stages:
        policy_rewards(setting, distributions)  # every stage's distributions are checked
    return optimum_weights(policy_rewards(setting, stages[-1]), beta)


def trained(setting: Setting, stages: Sequence[Sequence[str]]) -> list[str]:
    """The distributions any stage trains on, each once, in the order the stages name them."""
    return list(dict.fromkeys(setting.check_distribution(d) for stage in stages for d in stage))


def selected(setting: Setting, stages: Sequence[Sequence[str]]) -> list[bool]:
    """For each policy, whether it answers on every distribution the stages train on: the policies
    selection keeps."""
    done = trained(setting, stages)
    return [all(p.answers(d) for d in done) for p in setting.policies]


def held_out(setting: Setting, stages: Sequence[Sequence[str]]) -> list[str]:
    """The distributions no stage trains on and no selected policy answers (where selection alone
    predicts accuracy 0), in the setting's order; every untrained one when no policy answers on
    all trained distributions."""
    done = set(trained(setting, stages))
    keep = [p for p, s in zip(setting.policies, selected(setting, stages)) if s]
    return [d for d in setting.distributions if d not in done and not any(p.answers(d) for p in keep)]


def accuracy_at(setting: Setting, weights: np.ndarray, distribution: str) -> float:
    """Accuracy on ``distribution`` of a mixture with ``weights``: the weight on the policies
    answering there."""
    return float(sum(w for w, p in zip(weights, setting.policies) if p.answers(distribution)))


def optimum_table(setting: Setting, stages: Sequence[Sequence[str]], betas: Sequence[float]) -> pd.DataFrame:
    """One row per ``beta`` (ascending, each once): the optimum's weight on the selected policies
    (``selected_share``), its mean accuracy on the trained distributions and on the
    :func:`held_out` ones (NaN when there are none), and the number of policies."""
    done = trained(setting, stages)
    rest = held_out(setting, stages)
    keep = np.array(selected(setting, stages))
    rows = []
    for beta in sorted(dict.fromkeys(float(b) for b in betas)):
        weights = stage_optimum(setting, stages, beta)
        rows.append(
            {
                "beta": beta,
                "selected_share": float(weights[keep].sum()),
                "trained_accuracy": float(np.mean([accuracy_at(setting, weights, d) for d in done])),
                "held_out_accuracy": (
                    float(np.mean([accuracy_at(setting, weights, d) for d in rest])) if rest else float("nan")
                ),
                "policies": len(setting.policies),
            }
        )
    return pd.DataFrame(rows)
