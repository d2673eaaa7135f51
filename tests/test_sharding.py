"""Sharded generate jobs (stability.shard_size): shard selection, merging, and a sharded
run whose merged tables equal the unsharded run's."""

import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from test_workflow import snakemake

from shiftwork.models.prepare import prepared_dir
from shiftwork.provenance import make_provenance
from shiftwork.stability.steps import merge_shards, shard_rows
from shiftwork.tables import read_provenance, write_table

ROOT = Path(__file__).resolve().parent.parent
MODEL = "smollm2-135m-instruct"


def tiny_config(n_prompts: int, shard_size: int = 0) -> dict:
    """The default config cut down to the stability study of SmolLM2 on ``n_prompts`` of the
    trivia set, without the structural rewriter (the test_workflow.py approach)."""
    default = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg = {key: default[key] for key in ("name", "encoders", "stability")}
    cfg["studies"] = ["stability"]
    # float32 everywhere: the shards batch prompts differently from the whole run, and in
    # bfloat16 (auto on a CPU with native bfloat16) a near tie between two tokens can then go
    # the other way and change a greedy reply
    cfg["models"] = {MODEL: {**default["models"][MODEL], "dtype": "float32"}}
    cfg["datasets"] = {
        "tiny": {
            "source": {"kind": "file", "path": str(ROOT / "resources/prompts/trivia.jsonl")},
            "fields": {"prompt": "prompt", "id": "id"},
            "n": n_prompts,
        }
    }
    st = cfg["stability"]
    st.update(models=[MODEL], datasets=["tiny"], shard_size=shard_size)
    if shard_size:  # shards split per-dataset jobs
        st["generate_jobs"] = "per_dataset"
    st["variants"] = {
        "register": {"enabled": True, "strengths": [-10, 10], "positions": ["prefix"]},
        "noise": {"enabled": True, "positions": ["suffix"], "spacing": [3], "punctuation": [], "casing": []},
        "structural": {"enabled": False},
    }
    st["generation"] = {"max_new_tokens": 12}
    return cfg


def make_workdir(work: Path, cfg: dict, prepared_model: Path) -> Path:
    (work / "config").mkdir(parents=True)
    (work / "config" / "config.yaml").write_text(yaml.safe_dump(cfg))
    # the session's prepared model, hard-linked (no copy of the weights)
    shutil.copytree(prepared_model, prepared_dir(MODEL, cfg["models"][MODEL], work / "results"), copy_function=os.link)
    return work


def job_counts(output: str) -> dict[str, int]:
    """The "Job stats" table of a Snakemake run or dry run."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Job stats:")) + 3
    counts = {}
    for line in lines[start:]:
        parts = line.split()
        if len(parts) != 2 or parts[0] == "total":
            break
        counts[parts[0]] = int(parts[1])
    return counts


def by_variant(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values("variant_id").reset_index(drop=True)


# --- shard selection and merging on hand-made tables ---------------------------------------


def variants_frame() -> pd.DataFrame:
    # prompts p3, p1, p2, p5, p4 in order of first appearance; p1 has three rows, p2 one
    rows = [("p3", "b"), ("p1", "b"), ("p1", "v1"), ("p2", "b"), ("p1", "v2"), ("p5", "b"), ("p3", "v1"), ("p4", "b")]
    return pd.DataFrame(
        {
            "model": "m",
            "dataset": "d",
            "prompt_id": [p for p, _ in rows],
            "variant_id": [f"{p}|{v}" for p, v in rows],
            "x": np.arange(len(rows), dtype=float),
        }
    )


def test_shards_split_prompts_in_order_and_keep_prompts_whole():
    df = variants_frame()
    # 5 prompts in 2 shards: 3 + 2, by first appearance
    assert shard_rows(df, 0, 2)["variant_id"].tolist() == ["p3|b", "p1|b", "p1|v1", "p2|b", "p1|v2", "p3|v1"]
    assert shard_rows(df, 1, 2)["variant_id"].tolist() == ["p5|b", "p4|b"]
    # 5 prompts in 3 shards: 2 + 2 + 1; together exactly the table
    shards = [shard_rows(df, k, 3) for k in range(3)]
    assert [sorted(s["prompt_id"].unique()) for s in shards] == [["p1", "p3"], ["p2", "p5"], ["p4"]]
    assert sorted(pd.concat(shards)["variant_id"]) == sorted(df["variant_id"])
    assert shard_rows(df, 0, 1) is df
    # more shards than prompts: the last ones are empty
    assert len(shard_rows(df, 5, 6)) == 0
    with pytest.raises(ValueError, match=r"shard must be in 0\.\.2, got 3"):
        shard_rows(df, 3, 3)


def test_merge_concatenates_shards_and_keeps_provenance(tmp_path):
    df = variants_frame()
    paths = []
    for k in range(3):
        prov = make_provenance(
            "generate",
            {"batch_size": 4},
            model="m",
            weight_digest="w",
            extra={"device": "cpu", "shard": k, "n_shards": 3},
        )
        paths.append(str(write_table(shard_rows(df, k, 3), tmp_path / f"shard-{k}.parquet", prov)))
    # an empty shard (all its prompts dropped by the gate) has no column types; it is skipped
    write_table(
        pd.DataFrame(),
        tmp_path / "shard-3.parquet",
        make_provenance("generate", {"batch_size": 4}, model="m", weight_digest="w"),
    )
    paths.append(str(tmp_path / "shard-3.parquet"))
    assert merge_shards(paths, str(tmp_path / "merged.parquet")) == len(df)
    merged = pd.read_parquet(tmp_path / "merged.parquet")
    pd.testing.assert_frame_equal(by_variant(merged), by_variant(df))
    assert merged["x"].dtype == np.float64
    prov = read_provenance(tmp_path / "merged.parquet")
    assert prov["step"] == "generate" and prov["model"] == "m" and "shard" not in prov
    assert [s["rows"] for s in prov["shards"]] == [5, 2, 1, 0]  # p3+p1, p2+p5, p4, none
    assert [s.get("shard") for s in prov["shards"]] == [0, 1, 2, None]


def test_merge_refuses_mismatched_or_overlapping_shards(tmp_path):
    df = variants_frame()
    a = write_table(
        shard_rows(df, 0, 2), tmp_path / "a.parquet", make_provenance("generate", {"batch_size": 4}, model="m")
    )
    b = write_table(
        shard_rows(df, 1, 2), tmp_path / "b.parquet", make_provenance("generate", {"batch_size": 8}, model="m")
    )
    with pytest.raises(ValueError, match=r"b\.parquet differs from .*a\.parquet in \['config_digest'\]"):
        merge_shards([str(a), str(b)], str(tmp_path / "m.parquet"))
    with pytest.raises(ValueError, match="appear in more than one shard"):
        merge_shards([str(a), str(a)], str(tmp_path / "m.parquet"))
    assert not (tmp_path / "m.parquet").exists()


def planned_jobs_of_two_datasets(tmp_path, shard_size: int) -> dict[str, int]:
    """Jobs per rule in a dry run over two datasets: tiny (5 prompts) and small (2)."""
    cfg = tiny_config(5, shard_size=shard_size)
    cfg["datasets"]["small"] = dict(cfg["datasets"]["tiny"], n=2)
    cfg["stability"]["datasets"] = ["tiny", "small"]
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = snakemake(tmp_path, "-n")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return job_counts(proc.stdout + proc.stderr)


def test_dry_run_shards_only_datasets_larger_than_the_shard_size(tmp_path):
    counts = planned_jobs_of_two_datasets(tmp_path, shard_size=2)
    # tiny: 5 prompts -> 3 shards of at most 2; small: 2 prompts -> one job, nothing to merge
    assert counts["generate_shard_responses"] == 3 and "probe_shard" not in counts
    assert counts["generate_responses"] == 1 and "probe" not in counts
    assert counts["merge_generations"] == counts["merge_probes"] == 1
    assert "generate_model_responses" not in counts


def test_dry_run_runs_one_generate_job_per_model_by_default(tmp_path):
    counts = planned_jobs_of_two_datasets(tmp_path, shard_size=0)
    assert counts["generate_model_responses"] == 1 and counts["score_axes"] == 2
    assert not {"generate_responses", "generate_shard_responses", "merge_generations"} & set(counts)


# --- a sharded run equals the unsharded one ------------------------------------------------


@pytest.mark.workflow
def test_sharded_run_equals_unsharded_run(tmp_path, prepared_smollm):
    whole = make_workdir(tmp_path / "whole", tiny_config(3), prepared_smollm)
    targets = [f"results/default/stability/{stage}/{MODEL}/tiny.parquet" for stage in ("generations", "probes")]
    proc = snakemake(whole, *targets)
    assert proc.returncode == 0, proc.stderr[-4000:]

    # the same run up to the meaning gate, then generate (and probe) in two shards
    sharded = tmp_path / "sharded"
    shutil.copytree(whole, sharded, symlinks=True, copy_function=os.link)
    for stage in ("generations", "probes"):
        shutil.rmtree(sharded / "results/default/stability" / stage)
    (sharded / "config" / "config.yaml").write_text(yaml.safe_dump(tiny_config(3, shard_size=2)))
    proc = snakemake(sharded, *targets)
    assert proc.returncode == 0, proc.stderr[-4000:]
    counts = job_counts(proc.stdout + proc.stderr)
    assert counts == {"generate_shard_responses": 2, "merge_generations": 1, "merge_probes": 1}

    res = "results/default/stability/{}/" + MODEL
    shard_sizes = [
        len(pd.read_parquet(sharded / res.format("generations") / "tiny" / f"shard-{k}.parquet")["prompt_id"].unique())
        for k in range(2)
    ]
    kept = pd.read_parquet(whole / "results/default/stability/filtered/tiny.parquet")["prompt_id"].nunique()
    assert sum(shard_sizes) == kept and max(shard_sizes) <= 2
    # (tests/test_slurm.py compares the tables downstream of these, sharded against whole)
    for stage in ("generations", "probes"):
        a = by_variant(pd.read_parquet(whole / res.format(stage) / "tiny.parquet"))
        b = by_variant(pd.read_parquet(sharded / res.format(stage) / "tiny.parquet"))
        assert len(a) == len(b) > 0
        # batches differ between the runs (a shard batches only its own prompts); the values
        # agree to float32 rounding, the texts exactly
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-4, atol=1e-5)
    prov = read_provenance(sharded / res.format("generations") / "tiny.parquet")
    assert [s["shard"] for s in prov["shards"]] == [0, 1]
