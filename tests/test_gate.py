import numpy as np
import pandas as pd
import pytest

from shiftwork.stability.gate import apply_gate, estimate_baseline, gate_scores, gate_summary, mismatched_pairs, rescale


def test_rescale_by_hand():
    # (0.85 - 0.831) / (1 - 0.831) = 0.019 / 0.169 = 0.11243
    assert rescale(0.85, 0.831) == pytest.approx(0.112426, abs=1e-6)
    assert rescale(np.array([0.17, 1.0]), 0.17).tolist() == pytest.approx([0.0, 1.0])
    with pytest.raises(ValueError, match="baseline b"):
        rescale(0.5, 1.0)


def test_gate_scores_scales():
    f1 = np.array([0.6, 0.2])
    assert gate_scores(f1, "raw", None).tolist() == [0.6, 0.2]
    assert gate_scores(f1, "rescaled", 0.2).tolist() == pytest.approx([0.5, 0.0])
    with pytest.raises(ValueError, match="needs a baseline"):
        gate_scores(f1, "rescaled", None)


def table(rows):
    return pd.DataFrame(rows, columns=["prompt_id", "family", "kind", "position", "strength", "f1", "gate_score"])


def test_gate_drops_on_register_and_structural_only():
    t = table(
        [
            ("p1", "baseline", "none", "none", 0, 1.0, 1.0),
            ("p1", "register", "tone", "prefix", 10, 0.5, 0.30),
            ("p1", "noise", "casing", "global", 0.5, 0.1, -0.5),  # noise under threshold: exempt
            ("p2", "baseline", "none", "none", 0, 1.0, 1.0),
            ("p2", "register", "tone", "suffix", -10, 0.3, 0.05),  # under 0.11: drops p2
            ("p2", "structural", "length", "global", 3, 0.2, 0.02),  # also under, and the worst
            ("p3", "baseline", "none", "none", 0, 1.0, 1.0),
            ("p3", "structural", "form", "global", 1, 0.4, 0.11),  # exactly at threshold: kept
        ]
    )
    kept, dropped = apply_gate(t, 0.11)
    assert sorted(kept["prompt_id"].unique()) == ["p1", "p3"]
    assert len(kept) == 5
    assert dropped["prompt_id"].tolist() == ["p2"]
    row = dropped.iloc[0]
    assert row["n_failing"] == 2
    assert row["worst_family"] == "structural" and row["worst_strength"] == 3.0
    assert row["worst_score"] == pytest.approx(0.02)
    assert "register/structural" in row["reason"]


def test_gate_summary_means():
    t = table(
        [
            ("p1", "register", "tone", "prefix", 10, 0.5, 0.3),
            ("p2", "register", "tone", "prefix", 10, 0.7, 0.1),
            ("p1", "baseline", "none", "none", 0, 1.0, 1.0),
        ]
    )
    s = gate_summary(t, 0.11)
    assert len(s) == 1
    assert s.iloc[0]["n"] == 2 and s.iloc[0]["n_under"] == 1
    assert s.iloc[0]["mean_f1"] == pytest.approx(0.6)


def test_mismatched_pairs_and_baseline():
    pairs = mismatched_pairs(3, 100, 0)
    assert pairs == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
    some = mismatched_pairs(10, 7, 1)
    assert len(some) == 7 and all(i != j for i, j in some)

    # a fake F1: 1 when the first letters agree, else 0.25
    def fake(c, r):
        return np.array([1.0 if a[0] == b[0] else 0.25 for a, b in zip(c, r)])

    b, n = estimate_baseline(fake, ["apple", "avocado", "banana"], max_pairs=100)
    # pairs: (a,a) twice -> 1.0, four mixed pairs -> 0.25: mean = (2 + 1) / 6
    assert n == 6 and b == pytest.approx(0.5)


def test_encoder_scores_in_its_configured_batches_and_skips_empty_pairs(monkeypatch):
    """The pairs reach the scoring in chunks of CHUNK_BATCHES of the scorer's batches
    (encoders.<name>.batch_size); empty texts score 0 unscored."""
    import torch

    from shiftwork import encoders

    calls = []

    class FakeScorer:
        batch_size = 3

    def pair_f1(scorer, cands, refs):
        calls.append((len(cands), scorer.batch_size))
        return torch.tensor([len(c) / 10 for c in cands])

    monkeypatch.setattr(encoders, "pair_f1", pair_f1)
    enc = object.__new__(encoders.Encoder)
    enc.scorer = FakeScorer()
    n = encoders.CHUNK_BATCHES * 3 + 2
    cands = ["x" * (k % 5 + 1) for k in range(n)] + [""]
    refs = ["ref"] * (n + 1)
    f1 = enc.f1(cands, refs)
    assert calls == [(encoders.CHUNK_BATCHES * 3, 3), (2, 3)]
    assert f1[:-1] == pytest.approx([(k % 5 + 1) / 10 for k in range(n)])
    assert f1[-1] == 0.0
