from shiftwork.logs import log_to
from shiftwork.stability.steps import select_handwritten_rewrites

with log_to(snakemake.log[0]):
    select_handwritten_rewrites(
        snakemake.input.prompts, snakemake.input.variants, snakemake.params.settings, snakemake.output.rewrites
    )
