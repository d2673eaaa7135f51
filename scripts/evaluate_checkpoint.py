from pathlib import Path

from shiftwork.gpu_claim import claim_gpu
from shiftwork.logs import log_to
from shiftwork.trajectory.jobs import EvalOptions

# the claim sets CUDA_VISIBLE_DEVICES, which CUDA reads once: import the step after it
with log_to(snakemake.log[0]), claim_gpu():
    from shiftwork.device import set_threads
    from shiftwork.trajectory.steps import evaluate_checkpoint

    set_threads(snakemake.threads)
    evaluate_checkpoint(
        str(Path(snakemake.input.model).parent),
        snakemake.params.checkpoint,
        snakemake.input.suite,
        snakemake.wildcards.run,
        snakemake.params.model,
        int(snakemake.wildcards.step),
        snakemake.output.predictions,
        EvalOptions(
            pattern=snakemake.params.pattern,
            verbalisers=snakemake.params.verbalisers,
            batch_size=snakemake.params.batch_size,
            dtype=snakemake.params.dtype,
        ),
    )
