"""The throughput benchmark's equality check: shiftwork's generate and probe jobs give the same
responses and probe values as the plain one-variant-at-a-time loop (bench/throughput.py)."""

import importlib.util

import numpy as np
import pandas as pd
import pytest

from shiftwork.tables import write_table


@pytest.fixture(scope="module")
def bench(root):
    spec = importlib.util.spec_from_file_location("bench_throughput", root / "bench" / "throughput.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _outputs(rows):
    cols = [
        "dataset",
        "prompt_id",
        "variant_id",
        "response",
        "n_tokens",
        "stopped",
        "logprob",
        "entropy",
        "act_cos",
        "act_cos_layers",
    ]
    return pd.DataFrame([dict(zip(cols, r)) for r in rows])


BASE = ("d", "p1", "p1|baseline|none|none|0", "Rome.", 2, True, -1.0, 0.5, 1.0, [1.0, 1.0])
VAR = ("d", "p1", "p1|noise|casing|global|0.3", "Rome!", 2, True, -2.0, 0.7, 0.9, [0.8, 1.0])


def test_compare_accepts_equal_outputs_within_tolerance(bench):
    a = _outputs([BASE, VAR])
    b = _outputs([BASE, VAR[:6] + (-2.0004, 0.7, 0.9, [0.8, 0.9999])])
    report = bench.compare(a, b, tol=1e-3)
    assert report["equal"] and report["rows"] == 2
    assert report["max_abs_diff"]["logprob"] == pytest.approx(4e-4)


def test_compare_finds_a_changed_response_and_a_probe_value_outside_tolerance(bench):
    a = _outputs([BASE, VAR])
    b = _outputs([BASE, VAR[:3] + ("Rome?", 2, True, -2.01, 0.7, 0.9, [0.8, 1.0])])
    report = bench.compare(a, b, tol=1e-3)
    assert not report["equal"]
    assert report["response_mismatches"] == 1 and report["mismatched_variants"] == [VAR[2]]
    assert report["probe_values_outside_tol"] == 1


def test_bench_variants_are_deterministic(bench, default_config):
    a = bench.bench_variants(default_config, 3)
    b = bench.bench_variants(default_config, 3)
    pd.testing.assert_frame_equal(a, b)
    assert len(a) == 3 * 16 and a["prompt_id"].nunique() == 3 and a["dataset"].nunique() == 3
    assert (a["family"] == "baseline").sum() == 3


@pytest.mark.model
def test_pipeline_equals_the_reference_loop(bench, default_config, prepared_smollm, tmp_path):
    """Two prompts, a baseline and two variants each: responses token for token, probe values within 1e-3."""
    from shiftwork.models.loading import load_prepared

    variants = bench.bench_variants(default_config, 2)
    keep = variants.groupby("prompt_id", sort=False).head(3)
    path = tmp_path / "variants.parquet"
    write_table(keep, path)
    ours, stats = bench.run_pipeline(
        str(path),
        str(prepared_smollm),
        str(tmp_path / "a"),
        max_new_tokens=10,
        batch_size=4,
        dtype="float32",
        threads=None,
    )
    lm = load_prepared(prepared_smollm, "float32", device="cpu")
    ref = bench.reference_loop(lm, keep, max_new_tokens=10)
    report = bench.compare(ours, ref, tol=1e-3)
    assert report["rows"] == len(keep) == 6 and report["unmatched_rows"] == 0
    assert report["response_mismatches"] == 0, report
    assert report["probe_values_outside_tol"] == 0, report
    assert stats["tokens"] == int(ref["n_tokens"].sum()) > 0
    base = ref[ref["variant_id"].str.contains("|baseline|", regex=False)]
    assert np.allclose(np.stack(base["act_cos_layers"].to_list()), 1.0)
