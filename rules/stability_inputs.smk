# The stability study's settings and input functions (Snakemake's lint keeps functions out of
# rule files); rules/stability.smk includes this file first.
import math

from shiftwork.config import uses_rewriter
from shiftwork.stability.report import SIGNIFICANCE_NAMES, eps_table_names

STABILITY = config["stability"]
VARIANTS = STABILITY["variants"]
STRUCTURAL = VARIANTS["structural"]
GATE = STABILITY["gate"]
GENERATION = STABILITY["generation"]
PROBE = STABILITY["probe"]
AXES_ENCODER = STABILITY["axes"].get("encoder", GATE["encoder"])
STATS_R = STABILITY["axes"]["R"]
JUDGE = STABILITY["axes"].get("judge")
STATISTICS = STABILITY["statistics"]
SHARD_SIZE = STABILITY["shard_size"]
PER_MODEL = STABILITY["generate_jobs"] == "per_model"


wildcard_constraints:
    dataset="|".join(map(re.escape, config["datasets"])),


def dataset_spec(wildcards):
    return config["datasets"][wildcards.dataset]


def dataset_file(wildcards):
    source = config["datasets"][wildcards.dataset]["source"]
    return source["path"] if source["kind"] == "file" else []


def rewriter_model(wildcards):
    return prepared(STRUCTURAL["rewriter"])


def rewriter_batch_size(wildcards):
    return config["models"][STRUCTURAL["rewriter"]]["batch_size"]


def rewriter_dtype(wildcards):
    return config["models"][STRUCTURAL["rewriter"]]["dtype"]


def variant_inputs(wildcards):
    inputs = {"prompts": f"results/stability/prompts/{wildcards.dataset}.parquet"}
    if uses_rewriter(STRUCTURAL):
        inputs["rewrites"] = f"results/stability/rewrites/{wildcards.dataset}.parquet"
    return inputs


def encoder_spec(wildcards=None):
    return config["encoders"][GATE["encoder"]]


def study_prompts(wildcards=None):
    return expand(
        "results/stability/prompts/{dataset}.parquet", dataset=STABILITY["datasets"]
    )


def gate_outputs(kind):
    return expand(
        "results/stability/gate/{dataset}.{kind}.parquet",
        dataset=STABILITY["datasets"],
        kind=kind,
    )


def study_variants(wildcards=None):
    return expand(
        "results/stability/variants/{dataset}.parquet", dataset=STABILITY["datasets"]
    )


def n_shards(dataset):
    """generate and probe jobs per model x dataset: a sample of more than stability.shard_size
    prompts is split into ceil(n / shard_size) shards, merged afterwards; else one job.
    """
    n = config["datasets"][dataset]["n"]
    return math.ceil(n / SHARD_SIZE) if SHARD_SIZE and n > SHARD_SIZE else 1


def datasets_pattern(sharded):
    """A wildcard constraint matching the datasets that are (or are not) sharded; none when
    generate jobs run per model."""
    names = [d for d in config["datasets"] if (n_shards(d) > 1) == sharded]
    return "|".join(map(re.escape, names)) if names and not PER_MODEL else "(?!)"


def models_pattern():
    """A wildcard constraint matching every model when generate jobs run per model, else none."""
    return "|".join(map(re.escape, config["models"])) if PER_MODEL else "(?!)"


def study_filtered(wildcards=None):
    return expand(
        "results/stability/filtered/{dataset}.parquet", dataset=STABILITY["datasets"]
    )


def model_outputs(kind):
    """A model's generations or probes table of every dataset of the study."""
    return expand(
        f"results/stability/{kind}/{{{{model}}}}/{{dataset}}.parquet",
        dataset=STABILITY["datasets"],
    )


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


def judge_batch_size(wildcards):
    return config["models"][JUDGE]["batch_size"] if JUDGE else 16


def all_judgments(wildcards):
    return expand(
        "results/stability/judgments/{model}/{dataset}.parquet",
        model=STABILITY["models"],
        dataset=STABILITY["datasets"],
    )


def all_deltas(wildcards):
    return expand(
        "results/stability/deltas/{model}/{dataset}.parquet",
        model=STABILITY["models"],
        dataset=STABILITY["datasets"],
    )


def rewrite_cache(wildcards):
    return (
        f"results/cache/rewrites/{STRUCTURAL['rewriter']}/{wildcards.dataset}.parquet"
    )


def eps_tables():
    return [
        f"results/stability/tables/{name}"
        for name in eps_table_names(STATISTICS["eps"])
    ]


def significance_tables():
    return [f"results/stability/tables/{name}" for name in SIGNIFICANCE_NAMES]


def stability_targets():
    return [
        "results/stability/gate/report.md",
        "results/stability/gate/report.parquet",
        *multiext("results/stability/tables/main_table", ".md", ".tex", ".csv"),
        "results/stability/figures/sgs_heatmap.png",
        "results/stability/figures/family.png",
        *(["results/stability/judge/sample.md"] if JUDGE else []),
        *eps_tables(),
        *significance_tables(),
        "results/stability/figures/radar.png",
        "results/stability/figures/prompt_preservation.png",
        "results/stability/figures/strength_curves.png",
    ]

# A prompt set read from a file is an input, so editing the file reruns its jobs (Snakemake
# compares checksums of files up to 1 MB, so a touch without an edit reruns nothing).
