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

from shiftwork.models.prepare import prepared_dir

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = [
    {"id": "w1", "prompt": "What is the boiling point of water at sea level?"},
    {"id": "w2", "prompt": "Explain why the sky looks blue during the day."},
    {"id": "w3", "prompt": "Which planet is known as the Red Planet?"},
]


def tiny_config(data: Path) -> dict:
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg["models"] = {"smollm2-135m-instruct": cfg["models"]["smollm2-135m-instruct"]}
    cfg.pop("organisms", None)  # its model is not in this trimmed registry
    cfg.pop("crossstudy", None)  # its runs are the organisms' and trajectory's
    cfg["datasets"] = {
        "tiny": {"source": {"kind": "file", "path": str(data)}, "fields": {"prompt": "prompt", "id": "id"}, "n": 3}
    }
    st = cfg["stability"]
    st["models"] = ["smollm2-135m-instruct"]
    st["datasets"] = ["tiny"]
    st["variants"] = {
        "register": {"enabled": True, "strengths": [-10, 10], "positions": ["prefix"]},
        "noise": {"enabled": True, "positions": ["suffix"], "spacing": [3], "punctuation": [], "casing": []},
        "structural": {
            "enabled": True,
            "rewriter": "smollm2-135m-instruct",
            "lengths": [2],
            "form": True,
            "max_new_tokens": 32,
        },
    }
    st["generation"] = {"max_new_tokens": 12}
    st["statistics"] = {"eps": [0.01, 0.05, 0.1], "primary_eps": 0.05}
    return cfg


def snakemake_cmd(workdir: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(ROOT / "Snakefile"),
        "--directory",
        str(workdir),
        "--configfile",
        str(workdir / "config" / "config.yaml"),
        "--cores",
        "2",
        *args,
    ]


ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(snakemake_cmd(workdir, *args), capture_output=True, text=True, env=ENV, timeout=1800)


def default_config(study: str) -> dict:
    """``config/config.yaml`` running only ``study``, its dataset files named by absolute path (a
    test runs the workflow in a directory of its own)."""
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg["studies"] = [study]
    cfg.pop("crossstudy")  # a study's own test replaces the runs the cross-study names
    for spec in cfg["datasets"].values():
        spec["source"]["path"] = str(ROOT / spec["source"]["path"])
    return cfg


def run_config(workdir: Path, cfg: dict, *targets: str) -> Path:
    """Write ``cfg`` as ``workdir``'s config, run snakemake for ``targets`` and check it succeeded."""
    (workdir / "config").mkdir(exist_ok=True)
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = snakemake(workdir, *targets)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return workdir


def planned_jobs(workdir: Path) -> set[str]:
    """Rule names of the jobs a dry run would execute."""
    proc = snakemake(workdir, "-n")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    return {
        line.split()[1].rstrip(":")
        for line in out.splitlines()
        if line.startswith(("rule ", "localrule ", "checkpoint "))
    }


def start_until_writing(workdir: Path, target: Path, timeout: float = 300) -> tuple[subprocess.Popen, bool]:
    """Start snakemake for ``target`` in a session of its own and wait until its job writes
    ``target`` (its temporary sibling holds rows). The process, and whether it got that far."""
    import time

    proc = subprocess.Popen(
        snakemake_cmd(workdir, str(target.relative_to(workdir))),
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + timeout
    writing = False
    while time.time() < deadline and proc.poll() is None and not writing:
        writing = any(t.stat().st_size > 0 for t in target.parent.glob(f".{target.name}.*.tmp"))
        time.sleep(0.02)
    return proc, writing


def kill_while_writing(workdir: Path, target: Path, timeout: float = 300) -> bool:
    """Run snakemake for ``target`` and SIGKILL it and its jobs while the job writes ``target``
    (:func:`start_until_writing`). Whether the job got that far before it was killed."""
    import signal

    proc, writing = start_until_writing(workdir, target, timeout)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return writing


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, prepared_smollm):
    work = tmp_path_factory.mktemp("flow")
    data = work / "tiny.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in PROMPTS))
    (work / "config").mkdir()
    cfg = tiny_config(data)
    cfg["stability"]["axes"]["judge"] = "smollm2-135m-instruct"  # a judge, checked by its controls
    (work / "config" / "config.yaml").write_text(yaml.safe_dump(cfg))
    # reuse the session's prepared model (hard links: no copy of the weights)
    spec = cfg["models"]["smollm2-135m-instruct"]
    shutil.copytree(
        prepared_smollm, prepared_dir("smollm2-135m-instruct", spec, work / "results"), copy_function=os.link
    )
    proc = snakemake(work)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return work


@pytest.mark.workflow
def test_the_judge_counts_only_after_its_controls(run_dir):
    """check_judge asked the judge its four controls; register and form rows take the judge's MR
    only when it passed them, and every other row's MR comes from the rules."""
    stab = run_dir / "results/default/stability"
    report = pd.read_parquet(stab / "judge/report.parquet")
    assert list(report["control"]) == ["identical", "swapped", "opposite", "planted"]
    assert (report["n"] > 0).all()
    assert np.allclose(report["rate"], report["agree"] / report["n"])
    passed = bool(report["judge_passed"].iloc[0])
    assert passed == bool(report["passed"].all())
    deltas = pd.read_parquet(stab / "deltas/smollm2-135m-instruct/tiny.parquet")
    judged = (deltas["family"] == "register") | (deltas["kind"] == "form")
    assert (deltas["mr_source"] == "judge").any() == passed
    assert set(deltas.loc[~judged, "mr_source"]) == {"rules"}
    assert "# Mirroring judge: controls" in (stab / "judge/report.md").read_text()


@pytest.mark.workflow
def test_variants_and_gate_values(run_dir):
    from bert_score import score

    from shiftwork.encoders import encoder_model_type

    variants = pd.read_parquet(run_dir / "results/default/stability/variants/tiny.parquet")
    # 3 prompts x (baseline + 2 register + 1 noise + 4 structural: 2x and its 1.0x anchor, the
    # imperative rewrite and its interrogative anchor)
    assert len(variants) == 24
    assert variants.groupby("family").size().to_dict() == {"baseline": 3, "noise": 3, "register": 6, "structural": 12}

    base = pd.read_parquet(run_dir / "results/default/stability/gate/baseline.parquet").iloc[0]
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
    dropped = pd.read_parquet(run_dir / "results/default/stability/gate/tiny.dropped.parquet")
    kept = pd.read_parquet(run_dir / "results/default/stability/filtered/tiny.parquet")
    assert sorted(dropped["prompt_id"]) == expect_dropped
    assert sorted(kept["prompt_id"].unique()) == sorted(set(variants["prompt_id"]) - set(expect_dropped))
    report = (run_dir / "results/default/stability/gate/report.md").read_text()
    assert f"b = {base['b']:.4f}" in report


@pytest.mark.workflow
def test_rerun_does_nothing_and_rewrites_come_from_cache(run_dir):
    proc = snakemake(run_dir, "-n")
    assert proc.returncode == 0
    assert "Nothing to be done" in proc.stdout + proc.stderr
    before = pd.read_parquet(run_dir / "results/default/stability/rewrites/tiny.parquet")
    (run_dir / "results/default/stability/rewrites/tiny.parquet").unlink()
    proc = snakemake(run_dir, "results/default/stability/rewrites/tiny.parquet")
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = (run_dir / "logs/default/rewrite_prompts/tiny.log").read_text()
    assert "0 generated, 12 from cache" in log
    after = pd.read_parquet(run_dir / "results/default/stability/rewrites/tiny.parquet")
    assert after["rewrite"].tolist() == before["rewrite"].tolist()
    # same content: mark the downstream outputs current again for the tests that follow
    assert snakemake(run_dir, "--touch").returncode == 0


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


@pytest.mark.workflow
def test_stability_values(run_dir):
    from scipy import stats as sps

    from shiftwork.stability.axes import AXES

    res = run_dir / "results/default/stability"
    gens = pd.read_parquet(res / "generations/smollm2-135m-instruct/tiny.parquet")
    kept = pd.read_parquet(res / "filtered/tiny.parquet")
    assert sorted(gens["variant_id"]) == sorted(kept["variant_id"])
    assert (gens["n_tokens"] <= 12).all() and (gens["n_tokens"] > 0).any()
    assert gens["model_input"].str.startswith("<|im_start|>").all()
    deltas = pd.read_parquet(res / "deltas/smollm2-135m-instruct/tiny.parquet")
    base = deltas[deltas["family"] == "baseline"]
    assert (base[list(AXES)] == 0).all().all()
    # the anchors (1.0x length, interrogative form) are not variants
    anchors = {"length|global|1", "form|global|-1"}
    assert not deltas["variant_id"].str.split("|", n=2).str[2].isin(anchors).any()
    against_original = deltas[deltas["family"] != "structural"]
    assert against_original["Act"].between(-2, 0).all() and against_original["BLEU"].between(-100, 0).all()
    assert (against_original["BERT"] <= 1e-6).all()
    # same response as r_0 (as the anchor's, for a structural variant) -> BLEU and BERT exactly 0
    same = deltas[~deltas["flipped"]]
    assert (same[["BLEU", "BERT"]] == 0).all().all()
    # Prob recomputed from the probe table: against the baseline, or against the anchor rewrite
    probes = pd.read_parquet(res / "probes/smollm2-135m-instruct/tiny.parquet").set_index("variant_id")
    for row in deltas.itertuples():
        b = f"{row.prompt_id}|baseline|none|none|0"
        if row.family == "structural":
            b = f"{row.prompt_id}|structural|{row.kind}|global|{1 if row.kind == 'length' else -1}"
        assert row.Prob == pytest.approx(probes.loc[row.variant_id, "logprob"] - probes.loc[b, "logprob"], abs=1e-9)
    # per-prompt RMS, by hand from the deltas
    per_prompt = pd.read_parquet(res / "stats/per_prompt.parquet").set_index("prompt_id")
    R = {"Act": 2, "BLEU": 100, "BERT": 1, "Ent": 10, "Prob": 250, "MR": 1}
    variants = deltas[deltas["family"] != "baseline"]
    for pid, g in variants.groupby("prompt_id"):
        for axis in AXES:
            want = float(np.sqrt(np.mean((g[axis] / R[axis]) ** 2)))
            assert per_prompt.loc[pid, axis] == pytest.approx(want, abs=1e-12)
        assert per_prompt.loc[pid, "flip_rate"] == pytest.approx(g["flipped"].mean())
    total = pd.read_parquet(res / "stats/total_sgs.parquet").iloc[0]
    assert total["Prob"] == pytest.approx(per_prompt["Prob"].mean())
    tests = pd.read_parquet(res / "stats/ttests_model.parquet")
    t = tests[(tests["axis"] == "Act") & (tests["eps"] == 0.05)].iloc[0]
    ref = sps.ttest_1samp(per_prompt["Act"].to_numpy(), 0.05, alternative="greater")
    assert t["n"] == len(per_prompt)
    if np.isfinite(ref.statistic):
        assert t["t"] == pytest.approx(ref.statistic) and t["p"] == pytest.approx(ref.pvalue)
    table = (res / "tables/main_table.md").read_text()
    assert "smollm2-135m-instruct" in table and f"{total['Act']:.3f}" in table
    for name in ["sgs_heatmap", "family", "radar", "prompt_preservation", "strength_curves"]:
        for ext in ("png", "svg"):
            assert (res / "figures" / f"{name}.{ext}").stat().st_size > 1000
    for eps in ("0.01", "0.05", "0.1"):  # the tables at every eps, numbers as in the total
        numeric = pd.read_parquet(res / f"tables/main_table_eps{eps}.parquet")
        assert numeric.loc[0, "Act"] == pytest.approx(total["Act"]) and numeric["eps"].iloc[0] == float(eps)
    counts = pd.read_parquet(res / "tables/significance_counts.parquet")
    overall = counts[(counts["model"] == "all") & (counts["cells"] == "total") & np.isclose(counts["eps"], 0.05)]
    assert overall["n_p05"].item() == int((tests.loc[np.isclose(tests["eps"], 0.05), "p"] < 0.05).sum())
    scores = pd.read_parquet(res / "gate/tiny.scores.parquet")
    assert sorted(scores.loc[scores["kept"], "variant_id"]) == sorted(
        kept.loc[kept["family"] != "baseline", "variant_id"]
    )


@pytest.mark.workflow
def test_degenerate_replies_count_every_reply_once(run_dir):
    from shiftwork.stability.degenerate import is_degenerate

    res = run_dir / "results/default/stability"
    gens = pd.read_parquet(res / "generations/smollm2-135m-instruct/tiny.parquet")
    degenerate = pd.read_parquet(res / "stats/degenerate.parquet")
    every = degenerate[(degenerate["dataset"] == "all") & (degenerate["replies"] == "all")]
    assert every["n_replies"].tolist() == [len(gens)]
    assert every["n_degenerate"].item() == sum(map(is_degenerate, gens["response"].fillna("")))
    assert "degenerate" in (res / "tables/degenerate_replies.md").read_text()


@pytest.mark.workflow
def test_changing_eps_reruns_only_statistics(run_dir):
    cfg_path = run_dir / "config" / "config.yaml"
    original = cfg_path.read_text()
    cfg = yaml.safe_load(original)
    try:
        cfg["stability"]["statistics"] = {"eps": [0.02, 0.05], "primary_eps": 0.05}
        cfg_path.write_text(yaml.safe_dump(cfg))
        assert planned_jobs(run_dir) == {"aggregate_stability", "report_stability", "all"}
        cfg["stability"]["axes"]["R"] = {"Act": 1, "BLEU": 100, "BERT": 1, "Ent": 10, "Prob": 250, "MR": 1}
        cfg_path.write_text(yaml.safe_dump(cfg))
        assert planned_jobs(run_dir) == {"aggregate_stability", "report_stability", "all"}
    finally:
        cfg_path.write_text(original)


@pytest.mark.workflow
def test_killed_generate_leaves_no_parquet_and_rerun_matches(run_dir):
    target = run_dir / "results/default/stability/generations/smollm2-135m-instruct/tiny.parquet"
    before = pd.read_parquet(target)
    target.unlink()
    log = run_dir / "logs/default/generate_responses/smollm2-135m-instruct.log"
    log.unlink(missing_ok=True)
    assert kill_while_writing(run_dir, target), "generate never started writing its output"
    assert not target.exists()
    assert not list(target.parent.glob("*.parquet"))
    assert snakemake(run_dir, "--unlock").returncode == 0
    rerun = snakemake(run_dir, "--rerun-incomplete", str(target.relative_to(run_dir)))
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    after = pd.read_parquet(target)
    key = ["variant_id"]
    pd.testing.assert_frame_equal(
        before.sort_values(key).reset_index(drop=True), after.sort_values(key).reset_index(drop=True)
    )
    assert not list(target.parent.glob(".*.tmp"))
