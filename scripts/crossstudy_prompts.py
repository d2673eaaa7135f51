from shiftwork.crossstudy.run_steps import crossstudy_prompts
from shiftwork.logs import log_to

with log_to(snakemake.log[0]):
    crossstudy_prompts(
        snakemake.params.study,
        snakemake.input.source,
        snakemake.params.n,
        snakemake.params.seed,
        snakemake.output.prompts,
        pattern=snakemake.params.pattern,
    )
