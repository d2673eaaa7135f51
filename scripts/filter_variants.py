from shiftwork.gpu_claim import claim_gpu
from shiftwork.logs import log_to

# the claim sets CUDA_VISIBLE_DEVICES, which CUDA reads once: import the step after it
with log_to(snakemake.log[0]), claim_gpu():
    from shiftwork.stability.steps import filter_variants

    filter_variants(
        snakemake.input.variants,
        snakemake.input.baseline,
        snakemake.params.encoder,
        snakemake.params.encoder_spec,
        snakemake.params.gate,
        dict(snakemake.output.items()),
    )
