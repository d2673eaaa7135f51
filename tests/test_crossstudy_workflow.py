"""The cross-study end to end on a tiny config: the trajectory and organisms targets first, then
`crossstudy`, which must train nothing; its tables are checked against independent
recomputations from the per-checkpoint deltas and the two studies' own tables."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
import yaml
from scipy import stats as sps
from test_report import combined_config
from test_trajectory_workflow import MODEL as TRAJ_MODEL
from test_workflow import PROMPTS, run_config, snakemake

from shiftwork.models.prepare import prepared_dir

AXES = ["Act", "BLEU", "BERT", "Prob", "Ent", "MR"]
TRAINING = ("finetune_model", "train_sft", "train_rl")


def cross_config(data) -> dict:
    cfg = combined_config(data)
    cfg["crossstudy"] = {
        "trajectory": {"runs": ["tiny-lora"], "n_prompts": 3},
        "organisms": {"runs": ["cov-ACE"], "n_prompts": 2},
        "freeform": {"checkpoints": 3},
        # the trajectory run's steps 0-6 every 2 in two jobs, the RL run's 0-2 in one
        "checkpoints_per_job": 3,
    }
    return cfg


def scored(res, kind: str, run: str, step: int) -> pd.DataFrame:
    """One checkpoint's rows of a scoring table (a job writes the steps of its chunk in one)."""
    frames = [pd.read_parquet(path) for path in sorted((res / kind / run).glob("steps-*.parquet"))]
    table = pd.concat(frames, ignore_index=True)
    return table[table["step"] == step].reset_index(drop=True)


def jobs_of(proc) -> set[str]:
    out = proc.stdout + proc.stderr
    return {
        line.split()[1].rstrip(":")
        for line in out.splitlines()
        if line.startswith(("rule ", "localrule ", "checkpoint "))
    }


@pytest.fixture(scope="module")
def cross_dir(tmp_path_factory, prepared_smollm):
    work = tmp_path_factory.mktemp("cross")
    data = work / "tiny.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in PROMPTS))
    cfg = cross_config(data)
    target = prepared_dir(TRAJ_MODEL, cfg["models"][TRAJ_MODEL], work / "results")
    shutil.copytree(prepared_smollm, target, copy_function=os.link)
    run_config(work, cfg, "trajectory", "organisms")
    proc = snakemake(work, "crossstudy")
    assert proc.returncode == 0, proc.stderr[-4000:]
    return work, proc


@pytest.mark.workflow
def test_crossstudy_reuses_the_checkpoints_and_trains_nothing(cross_dir):
    work, proc = cross_dir
    jobs = jobs_of(proc)
    assert "crossstudy_score" in jobs and not set(TRAINING) & jobs
    # one job per chunk of consecutive steps, each table holding exactly its chunk's steps
    res = work / "results" / "default" / "crossstudy"
    for run, chunks in (("tiny-lora", {"0-2": [0, 2], "4-6": [4, 6]}), ("cov-ACE", {"0-2": [0, 1, 2]})):
        for kind in ("generations", "probes", "deltas"):
            files = {p.name: p for p in (res / kind / run).glob("*.parquet")}
            assert set(files) == {f"steps-{name}.parquet" for name in chunks}
            for name, steps in chunks.items():
                assert sorted(pd.read_parquet(files[f"steps-{name}.parquet"])["step"].unique()) == steps
    again = snakemake(work, "crossstudy", "-n")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr


@pytest.mark.workflow
def test_sgs_and_changes_follow_from_the_deltas(cross_dir):
    res = cross_dir[0] / "results" / "default" / "crossstudy"
    per_prompt = pd.read_parquet(res / "per_prompt.parquet")
    sgs = pd.read_parquet(res / "sgs.parquet")
    changes = pd.read_parquet(res / "changes.parquet")
    R = {"Act": 2, "BLEU": 100, "BERT": 1, "Ent": 10, "Prob": 250, "MR": 1}
    # every scored checkpoint: trajectory steps 0-6 every 2, RL steps 0-2
    assert sorted(per_prompt.loc[per_prompt["run"] == "tiny-lora", "step"].unique()) == [0, 2, 4, 6]
    assert sorted(per_prompt.loc[per_prompt["run"] == "cov-ACE", "step"].unique()) == [0, 1, 2]
    # the organism's casing variants keep its template (every character in its place): they have
    # their own tables under template/, and the others' tables leave them out
    kept_tables = {name: pd.read_parquet(res / "template" / f"{name}.parquet") for name in ("per_prompt", "sgs")}
    assert set(kept_tables["per_prompt"]["run"]) == {"cov-ACE"}
    cases = (
        ("tiny-lora", 4, lambda v: v, per_prompt, sgs),
        ("cov-ACE", 2, lambda v: v[v["kind"] != "casing"], per_prompt, sgs),
        ("cov-ACE", 2, lambda v: v[v["kind"] == "casing"], kept_tables["per_prompt"], kept_tables["sgs"]),
    )
    for run, step, chosen, per_prompt_table, sgs_table in cases:
        deltas = scored(res, "deltas", run, step)
        variants = chosen(deltas[deltas["family"] != "baseline"])
        assert len(variants)
        mine = per_prompt_table[(per_prompt_table["run"] == run) & (per_prompt_table["step"] == step)]
        mine = mine.set_index("prompt_id")
        # the NLI run answers with labels: label consistency instead of the text axes
        labels = run == "tiny-lora"
        for axis in ("Act", "Prob") if labels else ("Act", "Prob", "BLEU"):
            scaled = variants[axis] / R[axis]
            rms = (scaled**2).groupby(variants["prompt_id"]).mean() ** 0.5
            assert mine[axis].reindex(rms.index).to_numpy() == pytest.approx(rms.to_numpy(), abs=1e-12)
        flips = variants["flipped"].astype(float).groupby(variants["prompt_id"]).mean()
        if labels:
            assert mine["Label"].reindex(flips.index).to_numpy() == pytest.approx(flips.to_numpy(), abs=1e-12)
            assert mine[["BLEU", "BERT", "MR"]].isna().all().all() and (mine["label_share"] == 1.0).all()
        else:
            assert mine["Label"].isna().all() and mine["label_share"].isna().all()
        pooled = sgs_table[(sgs_table["run"] == run) & (sgs_table["step"] == step) & (sgs_table["dataset"] == "all")]
        pooled = pooled.iloc[0]
        assert pooled["Act"] == pytest.approx(mine["Act"].mean()) and pooled["n_prompts"] == len(mine)
    # the NLI prompts: 3 of each of the tiny suite's sets; the organism: 2 of each of A-F
    assert per_prompt[per_prompt["run"] == "tiny-lora"].groupby("dataset")["prompt_id"].nunique().max() <= 3
    assert set(per_prompt.loc[per_prompt["run"] == "cov-ACE", "dataset"]) <= set("ABCDEF")
    row = changes[
        (changes["run"] == "tiny-lora")
        & (changes["dataset"] == "all")
        & (changes["axis"] == "Act")
        & (changes["step"] == 6)
    ].iloc[0]
    base = per_prompt[(per_prompt["run"] == "tiny-lora") & (per_prompt["step"] == 0)].set_index(
        ["dataset", "prompt_id"]
    )["Act"]
    last = per_prompt[(per_prompt["run"] == "tiny-lora") & (per_prompt["step"] == 6)].set_index(
        ["dataset", "prompt_id"]
    )["Act"]
    ref = sps.ttest_rel(last.to_numpy(), base.reindex(last.index).to_numpy())
    assert row["p"] == pytest.approx(ref.pvalue) and row["change"] == pytest.approx(last.mean() - base.mean())


@pytest.mark.workflow
def test_pairs_and_organism_steps_match_the_studies_tables(cross_dir):
    root = cross_dir[0] / "results" / "default"
    res = root / "crossstudy"
    pairs = pd.read_parquet(res / "pairs.parquet")
    sgs = pd.read_parquet(res / "sgs.parquet")
    scores = pd.read_parquet(root / "trajectory" / "scores.parquet")
    # the trajectory analysis's score, the lean-free accuracy by default
    wide = scores[scores["run"] == "tiny-lora"].pivot(index="step", columns="testset", values="lean_free_accuracy")
    pooled = sgs[(sgs["run"] == "tiny-lora") & (sgs["dataset"] == "all")].set_index("step")
    assert len(pairs) and set(pairs["ood"]) <= {"negation", "noise"}
    # label replies: no text axis in the pairs
    assert not {a for name in pairs["axis"] for a in name.split("=")} & {"BLEU", "BERT", "MR"}
    # twins analysed once, as A=B with the first's values: no two analysed axes are affinely the same
    analysed = sorted(pairs["axis"].unique())
    for k, a in enumerate(analysed):
        for b in analysed[k + 1 :]:
            r = np.corrcoef(pooled[a.split("=")[0]], pooled[b.split("=")[0]])[0, 1]
            assert not abs(r) >= 0.999, (a, b, r)
    for row in pairs.itertuples():
        table = wide.assign(axis=pooled[row.axis.split("=")[0]])
        ref = pg.partial_corr(data=table, x="axis", y=row.ood, covar="id", method="pearson")
        # the tiny run's ID accuracy stays at 0.5, so nothing is left to correlate after
        # controlling for it: NaN in both
        assert row.r_partial == pytest.approx(float(ref["r"].iloc[0]), abs=1e-9, nan_ok=True)
        if table["axis"].std() > 0 and table[row.ood].std() > 0:
            assert row.r_raw == pytest.approx(sps.pearsonr(table["axis"], table[row.ood])[0], abs=1e-9)
    assert pairs["r_raw"].notna().any()
    steps = pd.read_parquet(res / "organisms_steps.parquet")
    evaluated = pd.read_parquet(root / "organisms" / "runs" / "cov-ACE" / "scores.parquet")
    merged = steps.merge(evaluated, left_on=["step", "dataset"], right_on=["step", "testset"], suffixes=("", "_eval"))
    assert len(merged) == len(steps) == 3 * 6
    assert merged["accuracy"].to_numpy() == pytest.approx(merged["accuracy_eval"].to_numpy())
    assert set(steps.loc[steps["role"] == "id", "dataset"]) == {"A", "C", "E"}
    kept_steps = pd.read_parquet(res / "template" / "organisms_steps.parquet")
    assert len(kept_steps) == len(steps) and (kept_steps["accuracy"].to_numpy() == steps["accuracy"].to_numpy()).all()
    findings = (res / "findings.md").read_text()
    assert "Run `tiny-lora`" in findings and "Run `cov-ACE`" in findings
    q3 = findings.split("## 3.")[1]
    assert "**Variants that change the trained template**" in q3 and "**Variants that keep the trained template**" in q3
    null = pd.read_parquet(res / "template" / "change_null.parquet")
    assert set(null["dataset"]) == {"all", *"ABCDEF"} and set(null["run"]) == {"cov-ACE"}
    assert f"{len(pairs)} (axis, OOD set) pairs over 4 checkpoints" in findings
    assert "BLEU, BERT, MR not applicable: replies are labels (answer words: 1.000 of replies)" in findings
    kinds = pd.read_parquet(res / "replies.parquet").set_index("run")
    assert kinds.loc["tiny-lora", "labels"].all() and not kinds.loc["cov-ACE", "labels"].any()
    # each run under the precision its checkpoints answered in (the precision line: "dtype: `run`, ...; ...")
    said = findings.split("Precision the checkpoints answered in (")[1].split(")")[0]
    named = {
        run.strip(" `"): part.split(": ")[0] for part in said.split("; ") for run in part.split(": ")[1].split(",")
    }
    assert named == kinds.groupby("run")["dtype"].first().to_dict()
    for run in ("tiny-lora", "cov-ACE"):
        assert (res / "figures" / f"{run}.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.workflow
def test_the_free_form_probe_measures_the_text_axes_on_the_stability_prompts(cross_dir):
    """Three evenly spaced checkpoints of the NLI run (steps 0, 4 and 6 of 0-6; the config asks
    for three, the default is two) answer the stability study's
    prompts as that study asks SmolLM2 (its chat template): free-form replies, so the text axes
    are measured and Label is not applicable; the tables follow from the probe's deltas."""
    root = cross_dir[0] / "results" / "default"
    res = root / "crossstudy" / "freeform"
    per_prompt = pd.read_parquet(res / "per_prompt.parquet")
    assert sorted(per_prompt["step"].unique()) == [0, 4, 6] and set(per_prompt["run"]) == {"tiny-lora"}
    filtered = pd.read_parquet(root / "stability" / "filtered" / "tiny.parquet")
    assert set(per_prompt["prompt_id"]) == set(filtered["prompt_id"]) and set(per_prompt["dataset"]) == {"tiny"}
    assert per_prompt["Label"].isna().all() and per_prompt[["BLEU", "BERT"]].notna().all().all()
    gens = pd.read_parquet(res / "generations" / "tiny-lora" / "step-6.parquet")
    assert set(gens["variant_id"]) == set(filtered["variant_id"])
    for row in gens.itertuples():
        assert row.model_input.startswith("<|im_start|>") and f"user\n{row.text}<|im_end|>" in row.model_input
    kinds = pd.read_parquet(res / "replies.parquet")
    assert not kinds["labels"].any() and kinds["label_share"].isna().all()
    deltas = pd.read_parquet(res / "deltas" / "tiny-lora" / "step-6.parquet")
    variants = deltas[deltas["family"] != "baseline"]
    mine = per_prompt[per_prompt["step"] == 6].set_index("prompt_id")
    R = {"Act": 2, "BLEU": 100, "BERT": 1}
    for axis, scale in R.items():
        rms = ((variants[axis] / scale) ** 2).groupby(variants["prompt_id"]).mean() ** 0.5
        assert mine[axis].reindex(rms.index).to_numpy() == pytest.approx(rms.to_numpy(), abs=1e-12)
    null = pd.read_parquet(res / "change_null.parquet")
    cfg = yaml.safe_load((cross_dir[0] / "config" / "config.yaml").read_text())
    replicates = cfg["trajectory"]["analysis"]["calibration"]["replicates"]
    assert set(null["replicates"]) == {replicates} and (null["n_steps"] == 2).all()
    hits = null["false_positives"] / null["replicates"]
    assert null["false_positive_rate"].to_numpy() == pytest.approx(hits.to_numpy())
    findings = (root / "crossstudy" / "findings.md").read_text()
    probe = findings.split("### On the free-form probe")[1].split("## 2.")[0]
    assert "Run `tiny-lora`: 2 checkpoints after step 0, 3 free-form prompts each" in probe
    assert "| BLEU |" in probe and "not applicable: replies are free-form" in probe.split("| Label |")[1]
