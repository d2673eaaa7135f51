from pathlib import Path

from shiftwork.gpu_claim import claim_gpu
from shiftwork.logs import log_to

# the claim sets CUDA_VISIBLE_DEVICES, which CUDA reads once: import the step after it
with log_to(snakemake.log[0]), claim_gpu():
    from shiftwork.device import set_threads
    from shiftwork.organisms.steps import train_sft

    set_threads(snakemake.threads)
    # a prepared model's record file, or another organism's SFT directory (start_from)
    start = Path(snakemake.input.model)
    train_sft(
        str(start if start.is_dir() else start.parent),
        snakemake.input.sft,
        snakemake.params.train,
        snakemake.params.seed,
        snakemake.output.model,
    )
