from pathlib import Path

from shiftwork.gpu_claim import claim_gpu
from shiftwork.logs import log_to

# the claim sets CUDA_VISIBLE_DEVICES, which CUDA reads once: import the step after it
with log_to(snakemake.log[0]), claim_gpu():
    from shiftwork.stability.steps import rewrite_prompts

    rewrite_prompts(
        snakemake.input.prompts,
        str(Path(snakemake.input.model).parent) if snakemake.input.get("model") else None,
        snakemake.params.settings,
        snakemake.output.rewrites,
        cache_path=snakemake.params.cache,
        batch_size=snakemake.params.batch_size,
        dtype=snakemake.params.dtype,
        api=snakemake.params.api,
        api_cache=snakemake.params.api_cache,
    )
