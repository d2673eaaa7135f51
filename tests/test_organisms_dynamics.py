"""Mixture-weight dynamics under RL (Proposition 2.1): replicator flow, softmax ascent, held-out read-out.

Expected values are worked out in comments. The tie tests check what is true of each flow:
the replicator flow keeps the ratio of tied optimal components exactly; plain softmax gradient
ascent on the logits does not (it amplifies the larger one) and is not the replicator flow.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from shiftwork.organisms.dynamics import (
    held_out_accuracy,
    plot_dynamics,
    replicator_step,
    simulate,
    softmax,
    softmax_ascent_step,
    softmax_natural_step,
)


def assert_on_simplex(traj: np.ndarray) -> None:
    assert np.all(traj >= 0.0)
    np.testing.assert_allclose(traj.sum(axis=1), 1.0, rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- single steps


def test_replicator_step_by_hand_two_policies():
    # J = 0.5*1 + 0.5*0 = 0.5; w1 += 0.1*0.5*(1-0.5) = 0.025 -> 0.525; w2 += 0.1*0.5*(0-0.5) -> 0.475
    np.testing.assert_allclose(replicator_step([0.5, 0.5], [1.0, 0.0], 0.1), [0.525, 0.475], rtol=0, atol=1e-15)


def test_replicator_step_by_hand_three_policies():
    # J = 0.2*1 + 0.3*0.5 + 0.5*0 = 0.35
    # w1 += 0.1*0.2*0.65 = 0.013; w2 += 0.1*0.3*0.15 = 0.0045; w3 += 0.1*0.5*(-0.35) = -0.0175
    out = replicator_step([0.2, 0.3, 0.5], [1.0, 0.5, 0.0], 0.1)
    np.testing.assert_allclose(out, [0.213, 0.3045, 0.4825], rtol=0, atol=1e-15)


def test_softmax_steps_by_hand():
    # theta = 0 -> w = [0.5, 0.5], J = 0.5
    # plain ascent: theta += 0.1 * w * (r - J) = 0.1 * 0.5 * [+0.5, -0.5] = [0.025, -0.025]
    np.testing.assert_allclose(softmax_ascent_step([0.0, 0.0], [1.0, 0.0], 0.1), [0.025, -0.025], atol=1e-15)
    # natural: theta += 0.1 * (r - J) = [0.05, -0.05]
    np.testing.assert_allclose(softmax_natural_step([0.0, 0.0], [1.0, 0.0], 0.1), [0.05, -0.05], atol=1e-15)


def test_softmax_is_stable_and_handles_minus_inf():
    np.testing.assert_allclose(softmax([1000.0, 1000.0]), [0.5, 0.5])
    np.testing.assert_allclose(softmax([0.0, -np.inf]), [1.0, 0.0])


@pytest.mark.parametrize(
    "w, r, lr",
    [
        ([0.5, 0.6], [1.0, 0.0], 0.1),  # sum 1.1
        ([0.5, 0.5 + 2e-9], [1.0, 0.0], 0.1),  # off the simplex by more than 1e-9
        ([1.2, -0.2], [1.0, 0.0], 0.1),  # negative weight
        ([0.5, 0.5], [1.0, 0.0, 0.0], 0.1),  # length mismatch
        ([0.5, 0.5], [1.0, 0.0], 0.0),  # lr not positive
        ([0.5, 0.5], [1.0, 0.0], -0.1),
        ([0.5, 0.5], [1.0, np.nan], 0.1),
        ([[0.5, 0.5]], [1.0, 0.0], 0.1),  # not 1-D
        ([0.5, 0.5], [1.0, 0.0], 3.0),  # 1 + 3*(0 - 0.5) < 0: would leave the simplex
    ],
)
def test_replicator_step_validates(w, r, lr):
    with pytest.raises(ValueError):
        replicator_step(w, r, lr)


def test_replicator_step_accepts_simplex_within_tolerance():
    out = replicator_step([0.5, 0.5 + 5e-10], [1.0, 0.0], 0.1)
    assert out.sum() == pytest.approx(1.0, abs=1e-15)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"steps": -1},
        {"steps": 2.5},
        {"method": "adam"},
        {"w0": [0.7, 0.7, -0.4]},
        {"r": [1.0, 0.0]},
    ],
)
def test_simulate_validates(kwargs):
    args = {"w0": [0.2, 0.3, 0.5], "r": [1.0, 0.5, 0.0], "steps": 3, "lr": 0.1, "method": "replicator"}
    args.update(kwargs)
    with pytest.raises(ValueError):
        simulate(**args)


@pytest.mark.parametrize("method", ["replicator", "softmax", "natural"])
def test_simulate_shape_and_first_row(method):
    traj = simulate([0.2, 0.3, 0.5], [1.0, 0.5, 0.0], 7, 0.1, method=method)
    assert traj.shape == (8, 3)
    np.testing.assert_allclose(traj[0], [0.2, 0.3, 0.5], atol=1e-15)
    assert simulate([0.2, 0.3, 0.5], [1.0, 0.5, 0.0], 0, 0.1, method=method).shape == (1, 3)


def test_replicator_trajectory_matches_repeated_steps():
    traj = simulate([0.2, 0.3, 0.5], [1.0, 0.5, 0.0], 2, 0.1)
    np.testing.assert_allclose(traj[1], [0.213, 0.3045, 0.4825], atol=1e-15)
    np.testing.assert_allclose(traj[2], replicator_step(traj[1], [1.0, 0.5, 0.0], 0.1), atol=1e-15)


# --------------------------------------------------------------------------- replicator flow


def test_suboptimal_components_vanish_and_weights_stay_on_simplex():
    # d/dt log(w_sub / w_opt) = r_sub - r_opt <= -0.4, over time 3000*0.1 = 300: factor < e^-120
    traj = simulate([0.05, 0.45, 0.5], [1.0, 0.6, 0.2], 3000, 0.1)
    assert_on_simplex(traj)
    assert traj[-1, 1] < 1e-3 and traj[-1, 2] < 1e-3
    assert traj[-1, 0] > 1 - 1e-3
    # J(w(t)) never decreases along the flow (Euler step with lr*(max r - min r) < 1)
    j = traj @ np.array([1.0, 0.6, 0.2])
    assert np.all(np.diff(j) >= -1e-15)


def test_zero_weight_stays_zero():
    # a policy absent from the mixture cannot be recruited by reweighting, even if it is the best
    for method in ("replicator", "softmax", "natural"):
        traj = simulate([0.0, 0.4, 0.6], [1.0, 0.5, 0.0], 200, 0.1, method=method)
        assert np.all(traj[:, 0] == 0.0)


def test_tied_optimal_ratio_preserved_exactly_while_suboptimal_vanishes():
    # r tied at 1 for components 0 and 1: each step multiplies both by 1 + lr*(1 - J),
    # so w1/w0 = 0.3/0.1 = 3 at every step; the suboptimal one vanishes.
    w0 = np.array([0.1, 0.3, 0.6])
    traj = simulate(w0, [1.0, 1.0, 0.0], 3000, 0.1)
    assert_on_simplex(traj)
    np.testing.assert_allclose(traj[:, 1] / traj[:, 0], 3.0, rtol=1e-9, atol=0)
    assert traj[-1, 2] < 1e-3
    # final split among the optimal set equals the initial ratio: 0.1/0.4 and 0.3/0.4
    np.testing.assert_allclose(traj[-1, :2], [0.25, 0.75], atol=1e-9)
    # relative to the suboptimal component every optimal share is amplified, monotonically
    assert np.all(np.diff(traj[:, 0] / traj[:, 2]) > 0)
    assert np.all(np.diff(traj[:, 1] / traj[:, 2]) > 0)


def test_tiny_gap_higher_reward_wins_not_the_initially_larger():
    # r = [1, 1 - delta], w0 = [0.1, 0.9]: log(w0/w1) rises at rate delta = 0.01 per unit time,
    # from log(1/9); the lead changes at t ~ log(9)/0.01 ~ 220, i.e. ~2200 steps of lr = 0.1.
    delta = 0.01
    traj = simulate([0.1, 0.9], [1.0, 1.0 - delta], 20000, 0.1)
    assert_on_simplex(traj)
    assert np.all(np.diff(traj[:, 0]) > 0)  # the better one gains at every step
    assert traj[500, 1] > traj[500, 0]  # at t = 50 the initially larger one still leads
    crossing = int(np.argmax(traj[:, 0] > 0.5))
    assert crossing == pytest.approx(math.log(9) / delta / 0.1, rel=0.01)
    assert traj[-1, 0] > 1 - 1e-6  # eventually the higher-reward one has all the weight


def test_tiny_gap_with_a_clearly_bad_third_component():
    # near-tie at the top plus a bad third: the bad one dies quickly (rate ~1), the two near-optimal
    # ones keep roughly their initial ratio 1:9 for a long time, then the better one takes over.
    traj = simulate([0.05, 0.45, 0.5], [1.0, 0.99, 0.0], 30000, 0.1)
    assert traj[300, 2] < 1e-3  # t = 30
    assert traj[300, 1] / traj[300, 0] == pytest.approx(9 * math.exp(-0.01 * 30), rel=1e-2)
    assert traj[-1, 0] > 1 - 1e-6


# --------------------------------------------------------------------------- softmax parameterisations


@pytest.mark.parametrize("w0, r", [([0.5, 0.3, 0.2], [1.0, 0.5, 0.0]), ([0.1, 0.3, 0.6], [1.0, 1.0, 0.0])])
def test_natural_softmax_and_replicator_agree_for_small_lr(w0, r):
    # both are O(lr) discretisations of dw_i/dt = w_i (r_i - J); compare at matched time steps*lr = 10
    rep = simulate(w0, r, 1000, 0.01)
    nat = simulate(w0, r, 1000, 0.01, method="natural")
    assert np.abs(rep - nat).max() < 1e-2
    # and the gap shrinks with lr (first-order convergence): halve lr, double steps
    rep2 = simulate(w0, r, 2000, 0.005)
    nat2 = simulate(w0, r, 2000, 0.005, method="natural")
    gap, gap2 = np.abs(rep[-1] - nat[-1]).max(), np.abs(rep2[-1] - nat2[-1]).max()
    assert gap2 < 0.6 * gap or gap < 1e-12


def test_plain_softmax_ascent_is_not_the_replicator_flow():
    # dw_0/dt for r = [1, 0]: replicator w0 w1 = 0.25 at w = [.5, .5]; plain softmax 2 w0^2 w1^2 = 0.125.
    # At matched time the trajectories separate by far more than 1e-2.
    rep = simulate([0.5, 0.3, 0.2], [1.0, 0.5, 0.0], 1000, 0.01)
    soft = simulate([0.5, 0.3, 0.2], [1.0, 0.5, 0.0], 1000, 0.01, method="softmax")
    assert np.abs(rep - soft).max() > 0.1


def test_plain_softmax_ascent_follows_its_own_flow():
    # dw_i/dt = w_i (w_i (r_i - J) - sum_j w_j^2 (r_j - J)); check with a tiny step
    w = np.array([0.5, 0.3, 0.2])
    r = np.array([1.0, 0.5, 0.0])
    lr = 1e-6
    g = w * (r - w @ r)
    predicted = w * (g - w @ g)
    observed = (softmax(softmax_ascent_step(np.log(w), r, lr)) - w) / lr
    np.testing.assert_allclose(observed, predicted, atol=1e-5)


def test_plain_softmax_ascent_same_winner_but_amplifies_ties():
    # same limit set: the suboptimal weight goes to zero (slowly, ~1/t) and stays on the simplex,
    # but the tied ratio w1/w0 grows from 3 (the larger tied component gains share).
    traj = simulate([0.1, 0.3, 0.6], [1.0, 1.0, 0.0], 10000, 0.1, method="softmax")
    assert_on_simplex(traj)
    assert traj[-1, 2] < 1e-3
    ratio = traj[:, 1] / traj[:, 0]
    assert ratio[0] == pytest.approx(3.0)
    assert np.all(np.diff(ratio) > 0)
    assert ratio[-1] > 30  # far from the replicator's exact 3


# --------------------------------------------------------------------------- two-policy collapse


def test_two_policy_collapse_on_held_out_distribution():
    # Alice answers on A (RL distribution, reward 1), Bob answers only on B (reward 0 on A).
    w_bob0 = 0.5
    traj = simulate([1 - w_bob0, w_bob0], [1.0, 0.0], 1000, 0.1)
    acc_b = held_out_accuracy(traj, [0, 1])
    acc_a = held_out_accuracy(traj, [1, 0])
    assert acc_b[0] == pytest.approx(w_bob0)
    assert acc_b[-1] < 0.01
    assert np.all(np.diff(acc_b) < 0)
    assert acc_a[-1] > 0.99
    assert np.all(traj[:, 1] > 0)  # Bob, who could answer B, never leaves the mixture


def test_held_out_accuracy_by_hand_and_validation():
    traj = np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])
    np.testing.assert_allclose(held_out_accuracy(traj, [1, 0, 1]), [0.7, 0.9])
    np.testing.assert_allclose(held_out_accuracy(traj, [True, True, False]), [0.5, 0.2])
    with pytest.raises(ValueError):
        held_out_accuracy(traj, [1, 0])
    with pytest.raises(ValueError):
        held_out_accuracy(traj, [1, 0.5, 0])
    with pytest.raises(ValueError):
        held_out_accuracy(np.array([0.5, 0.5]), [1, 0])


# --------------------------------------------------------------------------- figure


@pytest.mark.parametrize("with_held_out", [True, False])
def test_plot_writes_png_and_svg_atomically(tmp_path: Path, with_held_out: bool):
    traj = simulate([0.5, 0.5], [1.0, 0.0], 100, 0.1)
    held = held_out_accuracy(traj, [0, 1]) if with_held_out else None
    png, svg = tmp_path / "fig" / "dyn.png", tmp_path / "fig" / "dyn.svg"
    out = plot_dynamics(traj, ["Alice", "Bob"], png, svg, held_out=held)
    assert out == (png, svg)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
    text = svg.read_text()
    assert "<svg" in text and "Bob" in text
    assert sorted(p.name for p in (tmp_path / "fig").iterdir()) == ["dyn.png", "dyn.svg"]


def test_plot_validates_and_leaves_nothing(tmp_path: Path):
    traj = simulate([0.5, 0.5], [1.0, 0.0], 10, 0.1)
    with pytest.raises(ValueError):
        plot_dynamics(traj, ["Alice"], tmp_path / "a.png", tmp_path / "a.svg")
    with pytest.raises(ValueError):
        plot_dynamics(traj, ["Alice", "Bob"], tmp_path / "a.png", tmp_path / "a.svg", held_out=[0.5])
    assert list(tmp_path.iterdir()) == []


def test_plot_legend_sits_below_the_axes(monkeypatch):
    from shiftwork.organisms import dynamics

    got = []
    monkeypatch.setattr(dynamics, "save_figure", lambda fig, png, svg: got.append(fig))
    traj = simulate([0.7, 0.3], [0.9, 1.0], 50, 0.1)
    plot_dynamics(traj, ["Alice", "Bob"], "d.png", "d.svg", held_out=held_out_accuracy(traj, [0, 1]))
    ax = got[0].axes[0]
    legend = ax.get_legend()
    got[0].canvas.draw()
    assert legend.get_window_extent().y1 <= ax.get_window_extent().y0  # below the data area, hiding nothing
    assert [t.get_text() for t in legend.get_texts()] == ["w[Alice]", "w[Bob]", "held-out accuracy"]
