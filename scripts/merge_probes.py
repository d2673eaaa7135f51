from shiftwork.logs import log_to
from shiftwork.stability.steps import merge_probes

with log_to(snakemake.log[0]):
    merge_probes(list(snakemake.input.shards), snakemake.output.merged)
