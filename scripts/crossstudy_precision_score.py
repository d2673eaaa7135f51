from shiftwork.crossstudy.jobs import ScoredCheckpoint
from shiftwork.gpu_claim import claim_gpu
from shiftwork.logs import log_to

checkpoints = [
    ScoredCheckpoint.of_job(
        snakemake.params.study,
        snakemake.wildcards.run,
        step,
        snakemake.input.base,
        snakemake.input.checkpoints,
    )
    for step in snakemake.params.steps
]

# the claim sets CUDA_VISIBLE_DEVICES, which CUDA reads once: import the step after it
with log_to(snakemake.log[0]), claim_gpu():
    from shiftwork.crossstudy.precision_steps import crossstudy_precision_score

    crossstudy_precision_score(
        checkpoints,
        snakemake.input,
        snakemake.params.settings,
        snakemake.wildcards.dtype,
        snakemake.params.encoder,
        snakemake.params.encoder_spec,
        snakemake.output,
        threads=snakemake.threads,
    )
