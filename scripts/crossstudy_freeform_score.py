from shiftwork.crossstudy.jobs import ScoredCheckpoint
from shiftwork.gpu_claim import claim_gpu
from shiftwork.logs import log_to

checkpoint = ScoredCheckpoint.of_job(
    "trajectory",
    snakemake.wildcards.run,
    snakemake.wildcards.step,
    snakemake.input.base,
    snakemake.input.checkpoints,
)

# the claim sets CUDA_VISIBLE_DEVICES, which CUDA reads once: import the step after it
with log_to(snakemake.log[0]), claim_gpu():
    from shiftwork.crossstudy.freeform_steps import crossstudy_freeform_score

    crossstudy_freeform_score(
        checkpoint,
        {"filtered": list(snakemake.input.filtered), "baseline": snakemake.input.baseline},
        snakemake.params.settings,
        snakemake.params.encoder,
        snakemake.params.encoder_spec,
        snakemake.output,
        threads=snakemake.threads,
    )
