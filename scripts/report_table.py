from shiftwork.logs import log_to
from shiftwork.reports.steps import report_table

with log_to(snakemake.log[0]):
    report_table(snakemake.input[0], snakemake.output[0], snakemake.params.title)
