from shiftwork.logs import log_to
from shiftwork.stability.steps import make_variants

with log_to(snakemake.log[0]):
    make_variants(
        snakemake.input.prompts,
        snakemake.params.settings,
        snakemake.params.seed,
        snakemake.output.variants,
        rewrites_path=snakemake.input.get("rewrites"),
    )
