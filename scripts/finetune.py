import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from shiftwork.device import set_threads
from shiftwork.logs import log_to
from shiftwork.trajectory.steps import run_finetune

with log_to(snakemake.log[0]):
    set_threads(snakemake.threads)
    run_finetune(
        snakemake.input.model,
        snakemake.input.suite,
        snakemake.params.settings,
        snakemake.params.seed,
        snakemake.output.checkpoints,
    )
