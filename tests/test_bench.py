"""The throughput benchmark's equality checks (bench/throughput.py), and the generate job against
the plain one-variant-at-a-time loop."""

import importlib.util
import json
import os
import subprocess
import sys

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


def test_equal_outputs_within_tolerance(bench):
    a = _outputs([BASE, VAR])
    b = _outputs([BASE, VAR[:6] + (-2.0004, 0.7, 0.9, [0.8, 0.9999])])
    same = bench.same_responses(a, b)
    assert same["identical"] == same["rows"] == 2 and same["identical_share"] == 1.0 and not same["differing"]
    probes = bench.probe_diffs(a, b, tol=1e-3)
    assert probes["outside_tol"] == 0 and probes["rows_compared"] == 2
    assert probes["max_abs_diff"]["logprob"] == pytest.approx(4e-4)
    assert probes["max_abs_diff"]["act_cos_layers"] == pytest.approx(1e-4)


def test_a_changed_response_and_a_probe_value_outside_tolerance_are_found(bench):
    a = _outputs([BASE, VAR])
    b = _outputs([BASE, VAR[:3] + ("Rome?", 2, True, -2.01, 0.7, 0.9, [0.8, 1.0])])
    same = bench.same_responses(a, b)
    assert same["identical"] == 1 and same["identical_share"] == 0.5
    assert same["differing"] == [{"variant_id": VAR[2], "a": "Rome!", "b": "Rome?"}]
    assert bench.probe_diffs(a, b, tol=1e-3)["outside_tol"] == 1


def test_probes_are_compared_only_where_the_baseline_responses_agree(bench):
    a = _outputs([BASE, VAR])
    b = _outputs([BASE[:3] + ("Paris.",) + BASE[4:], VAR[:6] + (-5.0, 0.7, 0.9, [0.8, 1.0])])
    assert bench.probe_diffs(a, b, tol=1e-3)["rows_compared"] == 0


def test_bench_variants_are_deterministic(bench, default_config):
    a = bench.bench_variants(default_config, 3)
    b = bench.bench_variants(default_config, 3)
    pd.testing.assert_frame_equal(a, b)
    assert len(a) == 3 * 16 and a["prompt_id"].nunique() == 3 and a["dataset"].nunique() == 3
    assert (a["family"] == "baseline").sum() == 3


@pytest.mark.model
def test_job_equals_the_reference_loop(bench, default_config, prepared_smollm, tmp_path):
    """Two prompts, a baseline and two variants each: the generate job (vLLM, then the probe pass)
    against the one-at-a-time loop, responses token for token, probe values within 1e-3."""
    from shiftwork.models.loading import load_prepared

    variants = bench.bench_variants(default_config, 2)
    keep = variants.groupby("prompt_id", sort=False).head(3)
    path = tmp_path / "variants.parquet"
    write_table(keep, path)
    stats = bench.run_generate(str(path), str(prepared_smollm), str(tmp_path), 10, 4, "float32", 2, "vllm")
    ours = bench.pipeline_outputs(str(tmp_path))
    lm = load_prepared(prepared_smollm, "float32", device="cpu")
    ref = bench.reference_loop(lm, keep, max_new_tokens=10)
    same = bench.same_responses(ours, ref)
    assert same["rows"] == len(keep) == 6 and same["unmatched_rows"] == 0
    assert same["identical"] == 6, same
    assert bench.probe_diffs(ours, ref, tol=1e-3)["outside_tol"] == 0
    assert stats["tokens"] == int(ref["n_tokens"].sum()) > 0
    assert {"engine_start_s", "generate_s", "model_load_s", "probe_s"} <= set(stats["phases"])
    base = ref[ref["variant_id"].str.contains("|baseline|", regex=False)]
    assert np.allclose(np.stack(base["act_cos_layers"].to_list()), 1.0)


@pytest.mark.model  # five model paths (generation, probes, LoRA, GRPO, the claim) on tiny models
def test_gpu_check_runs_its_five_parts_on_tiny_models_on_the_cpu(root, tmp_path):
    """bench/gpu_check.py --device cpu --tiny: vLLM generation, the probe pass, a LoRA fine-tuning
    run, GRPO and the GPU claim of two jobs (over simulated device ids), each with its figures."""
    out = tmp_path / "gpu_check.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_", "SHIFTWORK_GPU"))}
    env["PYTHONPATH"] = str(root)
    cmd = [sys.executable, str(root / "bench" / "gpu_check.py"), "--device", "cpu", "--tiny"]
    cmd += ["--out", str(out), "--work", str(tmp_path / "work")]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("gpu_check: ")]
    assert [line.split()[1] for line in lines[1:6]] == ["1/5", "2/5", "3/5", "4/5", "5/5"]
    report = json.loads(out.read_text())
    assert report["failed"] == [] and report["device"] == "cpu" and report["tiny"] is True
    parts = report["parts"]
    assert set(parts) == {"generation", "probe", "lora_finetune", "grpo", "gpu_claim"}

    gen = parts["generation"]["tiny"]
    assert gen["generation_timed_in"] == "process CPU seconds"
    for key in ("tokens_per_s", "decode_step_ms_batch", "decode_step_ms_1", "decode_tb_s_batch", "roofline_share_1"):
        assert gen[key] > 0, key
    assert gen["roofline_share_batch"] == pytest.approx(gen["decode_tb_s_batch"] / report["bandwidth_tb_s"], rel=0.01)
    assert parts["probe"]["tiny"]["pairs_per_s"] > 0

    lora = parts["lora_finetune"]
    assert lora["steps"] == 4 and lora["steps_per_s"] > 0 and lora["tokens_per_s"] > 0
    assert lora["lora_targets"] == "q_proj,v_proj" and 0 < lora["trainable_params"] < lora["total_params"]
    assert lora["on"] == "cpu" and lora["bf16"] is False and lora["weights_dtype"] == "float32"

    grpo = parts["grpo"]
    assert grpo["steps"] == 3 and grpo["reward_logged_steps"] == 3 and grpo["on"] == "cpu"
    assert grpo["config"] == "config/config.yaml" and grpo["method"] == "full" and grpo["batch_size"] == 8
    for key in ("steps_per_s", "tokens_per_s", "completions_per_s"):
        assert grpo[key] > 0, key

    claim = parts["gpu_claim"]
    assert claim["pool"] == "0,1" and claim["two_jobs_devices"] == "0,1"
    assert [job["cuda_visible_devices"] for job in claim["jobs"]] == ["0", "1"]
    assert claim["one_device_device"] == "0" and "no free GPU among ['0']" in claim["one_device_refusal"]
    assert claim["one_device_second_refused_after_s"] >= 1.0 and claim["one_device_third_waited_s"] >= 1.0


@pytest.fixture(scope="module")
def gpu_check(root):
    spec = importlib.util.spec_from_file_location("bench_gpu_check", root / "bench" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_check_reports_a_failed_part_and_runs_the_rest(gpu_check, tmp_path, capsys):
    out = tmp_path / "check.json"
    parts = gpu_check.Parts({"device": "cpu"}, out)

    def broken() -> dict:
        raise RuntimeError("no adapter written")

    assert parts.run(3, "lora_finetune", "LoRA fine-tuning", broken) is None
    assert parts.run(4, "grpo", "GRPO", lambda: {"steps_per_s": 2.5})["steps_per_s"] == 2.5
    printed = capsys.readouterr().out.splitlines()
    assert printed[-2] == "gpu_check: 3/5 FAILED LoRA fine-tuning: RuntimeError: no adapter written"
    assert printed[-1].startswith("gpu_check: 4/5 GRPO: steps_per_s 2.5, part_s ")
    report = json.loads(out.read_text())
    assert report["failed"] == ["3/5 LoRA fine-tuning"]
    assert report["parts"]["lora_finetune"]["error"] == "RuntimeError: no adapter written"
    assert report["parts"]["grpo"]["steps_per_s"] == 2.5


def test_gpu_check_memory_bandwidth_by_device_name(gpu_check):
    assert gpu_check.memory_bandwidth("NVIDIA H200", None, 1.0) == (4.8, "table (h200)")
    assert gpu_check.memory_bandwidth("NVIDIA GH200 480GB", None, 1.0) == (4.0, "table (gh200)")
    assert gpu_check.memory_bandwidth("NVIDIA H100 80GB HBM3", None, 1.0) == (3.35, "table (h100)")
    assert gpu_check.memory_bandwidth("NVIDIA L40S", None, 1.0)[0] == 0.864
    assert gpu_check.memory_bandwidth("NVIDIA L4", None, 1.0)[0] == 0.3
    assert gpu_check.memory_bandwidth("NVIDIA H200", 5.0, 1.0) == (5.0, "--bandwidth-tb-s")
    assert gpu_check.memory_bandwidth("cpu", None, 1.0) == (1.0, "fallback (not in the table, no NVML figure)")
