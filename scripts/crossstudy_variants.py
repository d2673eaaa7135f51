from shiftwork.crossstudy.run_steps import crossstudy_variants
from shiftwork.logs import log_to

with log_to(snakemake.log[0]):
    crossstudy_variants(
        snakemake.input.prompts,
        snakemake.params.settings,
        snakemake.params.seed,
        snakemake.output.variants,
    )
