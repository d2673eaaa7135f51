import re
import sys
from pathlib import Path

from snakemake.utils import validate

sys.path.insert(0, str(Path(workflow.basedir)))

from shiftwork.config import check_config

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
STATISTICS = STUDY["statistics"]


wildcard_constraints:
    model="|".join(map(re.escape, config["models"])),
    dataset="|".join(map(re.escape, config["datasets"])),


def uses_rewriter():
    return STRUCTURAL.get("enabled", True) and bool(
        STRUCTURAL.get("lengths") or STRUCTURAL.get("form", True)
    )


def model_spec(wildcards):
    return config["models"][wildcards.model]


def dataset_spec(wildcards):
    return config["datasets"][wildcards.dataset]


def rewriter_dir(wildcards):
    return f"results/models/{STRUCTURAL['rewriter']}"


def rewriter_batch_size(wildcards):
    return config["models"][STRUCTURAL["rewriter"]].get("batch_size", 16)


def rewriter_dtype(wildcards):
    return config["models"][STRUCTURAL["rewriter"]].get("dtype", "auto")


def variant_inputs(wildcards):
    inputs = {"prompts": f"results/stability/prompts/{wildcards.dataset}.parquet"}
    if uses_rewriter():
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


def model_batch_size(wildcards):
    return config["models"][wildcards.model]["batch_size"]


def model_dtype(wildcards):
    return config["models"][wildcards.model]["dtype"]


def axes_encoder_spec(wildcards):
    return config["encoders"][AXES_ENCODER]


def all_deltas(wildcards):
    return expand(
        "results/stability/deltas/{model}/{dataset}.parquet",
        model=STUDY["models"],
        dataset=STUDY["datasets"],
    )


def all_targets():
    targets = [
        "results/stability/gate/report.md",
        "results/stability/gate/report.parquet",
    ]
    targets += multiext("results/stability/tables/main_table", ".md", ".tex", ".csv")
    targets += [
        "results/stability/figures/sgs_heatmap.png",
        "results/stability/figures/family.png",
    ]
    return targets


def rewrite_cache(wildcards):
    return (
        f"results/cache/rewrites/{STRUCTURAL['rewriter']}/{wildcards.dataset}.parquet"
    )
