from pathlib import Path

from shiftwork.gpu_claim import claim_gpu
from shiftwork.logs import log_to
from shiftwork.stability.jobs import GenerateJob

job = GenerateJob(
    max_new_tokens=snakemake.params.max_new_tokens,
    batch_size=snakemake.params.batch_size,
    dtype=snakemake.params.dtype,
    engine=snakemake.params.engine,
    store_hidden=snakemake.params.store_hidden,
    threads=snakemake.threads,
    shard=snakemake.params.get("shard", 0),
    n_shards=snakemake.params.get("n_shards", 1),
    plain_format=snakemake.params.plain_format,
)

# the claim sets CUDA_VISIBLE_DEVICES, which CUDA reads once: import the step after it
with log_to(snakemake.log[0]), claim_gpu():
    from shiftwork.stability.steps import generate_responses

    generate_responses(
        snakemake.input.variants,
        str(Path(snakemake.input.model).parent),
        snakemake.wildcards.model,
        snakemake.output.generations,
        snakemake.output.probes,
        job,
    )
