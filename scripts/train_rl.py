from shiftwork.gpu_claim import claim_gpu
from shiftwork.logs import log_to

# the claim sets CUDA_VISIBLE_DEVICES, which CUDA reads once: import the step after it
with log_to(snakemake.log[0]), claim_gpu():
    from shiftwork.device import set_threads
    from shiftwork.organisms.steps import train_rl

    set_threads(snakemake.threads)
    train_rl(
        snakemake.input.sft,
        snakemake.input.prompts,
        snakemake.params.stages,
        snakemake.params.train,
        snakemake.params.seed,
        snakemake.output.checkpoints,
        (snakemake.params.organism, snakemake.input.fidelity, snakemake.params.fidelity),
        snakemake.params.policies,
    )
