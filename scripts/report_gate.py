from shiftwork.logs import log_to
from shiftwork.stability.steps import report_gate

with log_to(snakemake.log[0]):
    report_gate(
        snakemake.input.summaries,
        snakemake.input.dropped,
        snakemake.input.variants,
        snakemake.output.table,
        snakemake.output.markdown,
    )
