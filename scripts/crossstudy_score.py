from pathlib import Path

from shiftwork.crossstudy.jobs import ScoredCheckpoint
from shiftwork.gpu_claim import claim_gpu
from shiftwork.logs import log_to

base = Path(snakemake.input.base)
checkpoint = ScoredCheckpoint(
    study=snakemake.params.study,
    run=snakemake.wildcards.run,
    step=int(snakemake.wildcards.step),
    base_dir=str(base.parent if base.is_file() else base),
    path=f"{snakemake.input.checkpoints}/checkpoint-{snakemake.wildcards.step}",
)

# the claim sets CUDA_VISIBLE_DEVICES, which CUDA reads once: import the step after it
with log_to(snakemake.log[0]), claim_gpu():
    from shiftwork.crossstudy.run_steps import crossstudy_score

    crossstudy_score(
        checkpoint,
        snakemake.input,
        snakemake.params.settings,
        snakemake.params.encoder,
        snakemake.params.encoder_spec,
        snakemake.output,
        threads=snakemake.threads,
    )
