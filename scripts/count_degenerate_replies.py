from shiftwork.logs import log_to
from shiftwork.stability.steps import count_degenerate_replies

with log_to(snakemake.log[0]):
    count_degenerate_replies(list(snakemake.input.generations), snakemake.output.table)
