import math
import re
import sys
from pathlib import Path

from snakemake.logging import logger
from snakemake.utils import validate

sys.path.insert(0, str(Path(workflow.basedir)))

from shiftwork.config import check_config, run_steps, uses_rewriter
from shiftwork.integrity import check_outputs, clear_stale_locks
from shiftwork.models.prepare import INFO_FILE, preparation, prepared_dir

# Our own check first: it names every offending key; validate() then fills in defaults.
check_config(config, root=".")


validate(config, schema="../config/schema/config.schema.yaml")


STUDY = config["stability"]
VARIANTS = STUDY["variants"]
STRUCTURAL = VARIANTS.get("structural", {})
GATE = STUDY["gate"]
GENERATION = STUDY["generation"]
PROBE = STUDY["probe"]
AXES_ENCODER = STUDY["axes"].get("encoder", GATE["encoder"])
STATS_R = STUDY["axes"]["R"]
JUDGE = STUDY["axes"].get("judge")
STATISTICS = STUDY["statistics"]
SHARD_SIZE = STUDY.get("shard_size") or 0


TRAJECTORY = config.get("trajectory", {"suites": {}, "runs": {}})
TRAJECTORY_ANALYSIS = TRAJECTORY.get("analysis", {})
RUNS = TRAJECTORY.get("runs", {})


wildcard_constraints:
    model="|".join(map(re.escape, config["models"])),
    dataset="|".join(map(re.escape, config["datasets"])),
    run="|".join(map(re.escape, RUNS)) or "no-run",
    suite="|".join(map(re.escape, TRAJECTORY.get("suites", {}))) or "no-suite",
    step=r"\d+",


def dataset_spec(wildcards):
    return config["datasets"][wildcards.dataset]


def dataset_file(wildcards):
    source = config["datasets"][wildcards.dataset]["source"]
    return source["path"] if source["kind"] == "file" else []


def prepared(name):
    """The record of a prepared model (rule prepare_model); its directory holds the weights."""
    return str(prepared_dir(name, config["models"][name]) / INFO_FILE)


def model_preparation(wildcards):
    """What prepare_model depends on (not batch size or dtype, which later jobs use)."""
    return preparation(config["models"][wildcards.model])


def rewriter_model(wildcards):
    return prepared(STRUCTURAL["rewriter"])


def rewriter_batch_size(wildcards):
    return config["models"][STRUCTURAL["rewriter"]].get("batch_size", 16)


def rewriter_dtype(wildcards):
    return config["models"][STRUCTURAL["rewriter"]].get("dtype", "auto")


def variant_inputs(wildcards):
    inputs = {"prompts": f"results/stability/prompts/{wildcards.dataset}.parquet"}
    if uses_rewriter(STRUCTURAL):
        inputs["rewrites"] = f"results/stability/rewrites/{wildcards.dataset}.parquet"
    return inputs


def encoder_spec(wildcards=None):
    return config["encoders"][GATE["encoder"]]


def study_prompts(wildcards=None):
    return expand(
        "results/stability/prompts/{dataset}.parquet", dataset=STUDY["datasets"]
    )


def gate_outputs(kind):
    return expand(
        "results/stability/gate/{dataset}.{kind}.parquet",
        dataset=STUDY["datasets"],
        kind=kind,
    )


def study_variants(wildcards=None):
    return expand(
        "results/stability/variants/{dataset}.parquet", dataset=STUDY["datasets"]
    )


def n_shards(dataset):
    """generate and probe jobs per model x dataset: a sample of more than stability.shard_size
    prompts is split into ceil(n / shard_size) shards, merged afterwards; else one job.
    """
    n = config["datasets"][dataset]["n"]
    return math.ceil(n / SHARD_SIZE) if SHARD_SIZE and n > SHARD_SIZE else 1


def datasets_pattern(sharded):
    """A wildcard constraint matching the datasets that are (or are not) sharded."""
    names = [d for d in config["datasets"] if (n_shards(d) > 1) == sharded]
    return "|".join(map(re.escape, names)) or "(?!)"


def shard_count(wildcards):
    return n_shards(wildcards.dataset)


def shard_index(wildcards):
    return int(wildcards.shard)


def generation_shards(wildcards):
    return expand(
        "results/stability/generations/{model}/{dataset}/shard-{shard}.parquet",
        model=wildcards.model,
        dataset=wildcards.dataset,
        shard=range(n_shards(wildcards.dataset)),
    )


def probe_shards(wildcards):
    return expand(
        "results/stability/probes/{model}/{dataset}/shard-{shard}.parquet",
        model=wildcards.model,
        dataset=wildcards.dataset,
        shard=range(n_shards(wildcards.dataset)),
    )


def evaluated_model(wildcards):
    return prepared(wildcards.model)


def model_batch_size(wildcards):
    return config["models"][wildcards.model]["batch_size"]


def model_dtype(wildcards):
    return config["models"][wildcards.model]["dtype"]


def axes_encoder_spec(wildcards):
    return config["encoders"][AXES_ENCODER]


def score_inputs(wildcards):
    inputs = {
        "generations": f"results/stability/generations/{wildcards.model}/{wildcards.dataset}.parquet",
        "probes": f"results/stability/probes/{wildcards.model}/{wildcards.dataset}.parquet",
    }
    if JUDGE:
        inputs["judge"] = prepared(JUDGE)
    return inputs


def all_deltas(wildcards):
    return expand(
        "results/stability/deltas/{model}/{dataset}.parquet",
        model=STUDY["models"],
        dataset=STUDY["datasets"],
    )


def suite_spec(wildcards):
    return TRAJECTORY["suites"][wildcards.suite]


def suite_files(wildcards):
    """The local files a suite's labelled sets are read from (edits rerun the suite)."""
    spec = suite_spec(wildcards)
    if spec["kind"] != "datasets":
        return []
    sets = [spec["id_train"], spec["id_test"], *spec["ood"].values()]
    return sorted({s["source"]["path"] for s in sets if s["source"]["kind"] == "file"})


def run_suite(wildcards):
    return f"results/trajectory/suites/{RUNS[wildcards.run]['suite']}.parquet"


def run_model_name(wildcards):
    return RUNS[wildcards.run]["model"]


def run_model(wildcards):
    return prepared(RUNS[wildcards.run]["model"])


def run_finetune_settings(wildcards):
    return RUNS[wildcards.run]["finetune"]


def run_seed(wildcards):
    return RUNS[wildcards.run].get("seed", 0)


def evaluate_inputs(wildcards):
    inputs = {"suite": run_suite(wildcards), "model": run_model(wildcards)}
    if "finetune" in RUNS[wildcards.run]:
        inputs["checkpoints"] = f"results/trajectory/runs/{wildcards.run}/checkpoints"
    return inputs


def checkpoint_spec(wildcards):
    run = RUNS[wildcards.run]
    if "finetune" in run:
        return {
            "path": f"results/trajectory/runs/{wildcards.run}/checkpoints/checkpoint-{wildcards.step}"
        }
    for ck in run["checkpoints"]:
        if int(ck["step"]) == int(wildcards.step):
            return ck
    raise ValueError(
        f"run '{wildcards.run}' has no checkpoint at step {wildcards.step}"
    )


def all_predictions(wildcards):
    return [
        f"results/trajectory/eval/{run}/step-{step}.parquet"
        for run, spec in RUNS.items()
        for step in run_steps(spec)
    ]


def trajectory_figures():
    names = [f"partial_{run}" for run in RUNS] + ["curves"]
    return [
        f"results/trajectory/figures/{n}.{ext}" for n in names for ext in ("png", "svg")
    ]


def all_targets():
    targets = []
    if "stability" in config["studies"]:
        targets += [
            "results/stability/gate/report.md",
            "results/stability/gate/report.parquet",
        ]
        targets += multiext(
            "results/stability/tables/main_table", ".md", ".tex", ".csv"
        )
        targets += [
            "results/stability/figures/sgs_heatmap.png",
            "results/stability/figures/family.png",
        ]
    if "trajectory" in config["studies"]:
        targets += [
            "results/trajectory/report.md",
            "results/trajectory/summary.parquet",
        ]
    if "organisms" in config["studies"]:
        targets += organism_targets()
    return targets


def producer_rule(path):
    """The rule whose output ``path`` is, or None."""
    return next((r.name for r in workflow.rules if r.is_producer(path)), None)


def check_before_run():
    stale = clear_stale_locks()
    if stale:
        logger.warning(
            f"shiftwork: removed {len(stale)} Snakemake lock file(s) left by a run that was "
            "killed (no other run of this workflow is alive in this directory)"
        )
    check_outputs("results", producer_rule)


def rewrite_cache(wildcards):
    return (
        f"results/cache/rewrites/{STRUCTURAL['rewriter']}/{wildcards.dataset}.parquet"
    )


# ---------------------------------------------------------------- organisms

from shiftwork.organisms.steps import trained_distributions

ORGANISMS = config.get("organisms") or {}
ORGANISM_SFT = ORGANISMS.get("sft") or {}
ORGANISM_RUNS = ORGANISMS.get("runs") or {}


wildcard_constraints:
    organism="|".join(map(re.escape, ORGANISM_SFT)) or "no-organism",
    orun="|".join(map(re.escape, ORGANISM_RUNS)) or "no-organism-run",


def organism_base_model(wildcards):
    return prepared(ORGANISM_SFT[wildcards.organism]["model"])


def organism_of(wildcards):
    return ORGANISM_RUNS[wildcards.orun]["organism"]


def organism_sft_model(wildcards):
    name = organism_of(wildcards)
    return ORGANISM_SFT[name].get("path", f"results/organisms/{name}/sft")


def organism_setting(wildcards):
    return ORGANISM_SFT[organism_of(wildcards)]["setting"]


def organism_rl_settings(wildcards):
    return {
        **(ORGANISMS.get("rl") or {}),
        **(ORGANISM_RUNS[wildcards.orun].get("train") or {}),
    }


def organism_run_info():
    return {
        run: {
            "setting": ORGANISM_SFT[spec["organism"]]["setting"],
            "trained": trained_distributions(spec["stages"]),
        }
        for run, spec in ORGANISM_RUNS.items()
    }


def organism_targets():
    targets = ["results/organisms/report.md", "results/organisms/headline.parquet"]
    targets += expand("results/organisms/figures/{orun}.png", orun=ORGANISM_RUNS)
    if ORGANISMS.get("dynamics"):
        targets.append("results/organisms/figures/dynamics.png")
    return targets
