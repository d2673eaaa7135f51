from pathlib import Path

from shiftwork.gpu_claim import claim_gpu
from shiftwork.logs import log_to

# the claim sets CUDA_VISIBLE_DEVICES, which CUDA reads once: import the step after it
with log_to(snakemake.log[0]), claim_gpu():
    from shiftwork.device import set_threads
    from shiftwork.trajectory.steps import finetune_model

    set_threads(snakemake.threads)
    finetune_model(
        str(Path(snakemake.input.model).parent),
        snakemake.input.suite,
        snakemake.params.settings,
        snakemake.params.seed,
        snakemake.output.checkpoints,
        snakemake.params.pattern,
        snakemake.params.verbalisers,
    )
