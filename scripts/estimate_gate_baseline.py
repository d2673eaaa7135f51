import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from shiftwork.logs import log_to
from shiftwork.steps import estimate_gate_baseline

with log_to(snakemake.log[0]):
    estimate_gate_baseline(
        snakemake.input.prompts,
        snakemake.params.encoder,
        snakemake.params.encoder_spec,
        snakemake.params.baseline,
        snakemake.params.seed,
        snakemake.output.baseline,
    )
