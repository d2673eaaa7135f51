"""Run snakemake end to end on a tiny config with the real packaged model and encoder."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = [
    {"id": "w1", "prompt": "What is the boiling point of water at sea level?"},
    {"id": "w2", "prompt": "Explain why the sky looks blue during the day."},
    {"id": "w3", "prompt": "Which planet is known as the Red Planet?"},
]


def tiny_config(data: Path) -> dict:
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg["models"] = {"smollm2-135m-instruct": cfg["models"]["smollm2-135m-instruct"]}
    cfg["datasets"] = {"tiny": {"source": {"kind": "file", "path": str(data)}, "fields": {"prompt": "prompt", "id": "id"}, "n": 3}}
    st = cfg["stability"]
    st["models"] = ["smollm2-135m-instruct"]
    st["datasets"] = ["tiny"]
    st["variants"] = {
        "register": {"enabled": True, "strengths": [-10, 10], "positions": ["prefix"]},
        "noise": {"enabled": True, "positions": ["suffix"], "spacing": [3], "punctuation": [], "casing": []},
        "structural": {"enabled": True, "rewriter": "smollm2-135m-instruct", "lengths": [2], "form": True, "max_new_tokens": 32},
    }
    return cfg


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir),
           "--configfile", str(workdir / "config" / "config.yaml"), "--cores", "2", *args]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, prepared_smollm):
    work = tmp_path_factory.mktemp("flow")
    data = work / "tiny.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in PROMPTS))
    (work / "config").mkdir()
    (work / "config" / "config.yaml").write_text(yaml.safe_dump(tiny_config(data)))
    # reuse the session's prepared model (hard links: no copy of the weights)
    shutil.copytree(prepared_smollm, work / "results" / "models" / "smollm2-135m-instruct", copy_function=os.link)
    proc = snakemake(work)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return work


@pytest.mark.workflow
def test_variants_and_gate_values(run_dir):
    from bert_score import score

    from shiftwork.encoders import encoder_model_type

    variants = pd.read_parquet(run_dir / "results/stability/variants/tiny.parquet")
    # 3 prompts x (baseline + 2 register + 1 noise + 2 structural)
    assert len(variants) == 18
    assert variants.groupby("family").size().to_dict() == {"baseline": 3, "noise": 3, "register": 6, "structural": 6}

    base = pd.read_parquet(run_dir / "results/stability/gate/baseline.parquet").iloc[0]
    cfg = yaml.safe_load((run_dir / "config" / "config.yaml").read_text())
    enc = cfg["encoders"]["minilm-l6"]
    model_type = encoder_model_type("minilm-l6", enc)
    texts = [p["prompt"] for p in PROMPTS]
    pairs = [(i, j) for i in range(3) for j in range(3) if i != j]
    _, _, f = score([texts[i] for i, _ in pairs], [texts[j] for _, j in pairs], model_type=model_type, num_layers=6)
    assert base["method"] == "mismatched prompt pairs" and base["n_pairs"] == 6
    assert base["b"] == pytest.approx(float(f.mean()), abs=1e-5)

    # the gate's decision, recomputed independently from bert-score
    gated = variants[variants["family"].isin(["register", "structural"])].reset_index(drop=True)
    _, _, f = score(gated["text"].tolist(), gated["original"].tolist(), model_type=model_type, num_layers=6)
    rescaled = (f.numpy() - base["b"]) / (1 - base["b"])
    expect_dropped = sorted(set(gated.loc[rescaled < 0.11, "prompt_id"]))
    dropped = pd.read_parquet(run_dir / "results/stability/gate/tiny.dropped.parquet")
    kept = pd.read_parquet(run_dir / "results/stability/filtered/tiny.parquet")
    assert sorted(dropped["prompt_id"]) == expect_dropped
    assert sorted(kept["prompt_id"].unique()) == sorted(set(variants["prompt_id"]) - set(expect_dropped))
    report = (run_dir / "results/stability/gate/report.md").read_text()
    assert f"b = {base['b']:.4f}" in report


@pytest.mark.workflow
def test_rerun_does_nothing_and_rewrites_come_from_cache(run_dir):
    proc = snakemake(run_dir, "-n")
    assert proc.returncode == 0
    assert "Nothing to be done" in proc.stdout + proc.stderr
    before = pd.read_parquet(run_dir / "results/stability/rewrites/tiny.parquet")
    (run_dir / "results/stability/rewrites/tiny.parquet").unlink()
    proc = snakemake(run_dir, "results/stability/rewrites/tiny.parquet")
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = (run_dir / "logs/rewrite_prompts/tiny.log").read_text()
    assert "0 generated, 6 from cache" in log
    after = pd.read_parquet(run_dir / "results/stability/rewrites/tiny.parquet")
    assert after["rewrite"].tolist() == before["rewrite"].tolist()


@pytest.mark.workflow
def test_bad_config_stops_before_any_job(tmp_path):
    (tmp_path / "config").mkdir()
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg["stability"]["models"] = ["smollm2-135m-instruct", "gpt-5"]
    cfg["stability"]["gate"]["treshold"] = 0.11
    (tmp_path / "config" / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = snakemake(tmp_path)
    assert proc.returncode != 0
    err = proc.stdout + proc.stderr
    assert "stability.gate" in err and "'treshold'" in err and "did you mean 'threshold'" in err
    assert not (tmp_path / "results").exists()
    cfg["stability"]["gate"]["threshold"] = cfg["stability"]["gate"].pop("treshold")
    (tmp_path / "config" / "config.yaml").write_text(yaml.safe_dump(cfg))
    err = (lambda p: p.stdout + p.stderr)(snakemake(tmp_path))
    assert "stability.models.1" in err and "unknown model 'gpt-5'" in err
