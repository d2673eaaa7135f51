import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from shiftwork.logs import log_to
from shiftwork.steps import filter_variants

with log_to(snakemake.log[0]):
    filter_variants(
        snakemake.input.variants,
        snakemake.input.baseline,
        snakemake.params.encoder,
        snakemake.params.encoder_spec,
        snakemake.params.gate,
        snakemake.output.kept,
        snakemake.output.summary,
        snakemake.output.dropped,
    )
