from pathlib import Path

from shiftwork.gpu_claim import claim_gpu
from shiftwork.logs import log_to
from shiftwork.stability.jobs import TextModel

rewriter = TextModel(
    name=snakemake.params.settings["rewriter"],
    model_dir=str(Path(snakemake.input.model).parent) if snakemake.input.get("model") else None,
    api=snakemake.params.api,
    cache=snakemake.params.api_cache,
    batch_size=snakemake.params.batch_size,
    dtype=snakemake.params.dtype,
)

# the claim sets CUDA_VISIBLE_DEVICES, which CUDA reads once: import the step after it
with log_to(snakemake.log[0]), claim_gpu():
    from shiftwork.stability.steps import rewrite_prompts

    rewrite_prompts(
        snakemake.input.prompts, snakemake.params.settings, rewriter, snakemake.output.rewrites, snakemake.params.cache
    )
