from shiftwork.logs import log_to
from shiftwork.stability.steps import sample_prompts

with log_to(snakemake.log[0]):
    sample_prompts(snakemake.wildcards.dataset, snakemake.params.spec, snakemake.output.prompts)
