from shiftwork.gpu_claim import claim_gpu
from shiftwork.logs import log_to

# the claim sets CUDA_VISIBLE_DEVICES, which CUDA reads once: import the step after it
with log_to(snakemake.log[0]), claim_gpu():
    from shiftwork.crossstudy.run_steps import crossstudy_gate

    crossstudy_gate(
        snakemake.input.variants,
        snakemake.input.baseline,
        snakemake.params.encoder,
        snakemake.params.encoder_spec,
        snakemake.params.gate,
        snakemake.output.kept,
    )
