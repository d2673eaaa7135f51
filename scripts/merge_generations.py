from shiftwork.logs import log_to
from shiftwork.stability.steps import merge_generations

with log_to(snakemake.log[0]):
    merge_generations(list(snakemake.input.shards), snakemake.output.merged)
