from shiftwork.logs import log_to
from shiftwork.organisms.steps import make_rl_prompts

with log_to(snakemake.log[0]):
    make_rl_prompts(
        snakemake.wildcards.run,
        snakemake.params.setting,
        snakemake.input.questions,
        snakemake.params.stages,
        snakemake.params.n_prompts,
        snakemake.params.seed,
        snakemake.output.prompts,
    )
