from shiftwork.logs import log_to
from shiftwork.reports.steps import report_figure

with log_to(snakemake.log[0]):
    report_figure(snakemake.input[0], snakemake.output[0])
