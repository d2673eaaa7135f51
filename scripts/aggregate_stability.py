from shiftwork.logs import log_to
from shiftwork.stability.steps import aggregate_stability

with log_to(snakemake.log[0]):
    aggregate_stability(
        list(snakemake.input.deltas), snakemake.params.R, list(snakemake.params.eps), dict(snakemake.output.items())
    )
