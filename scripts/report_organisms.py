from shiftwork.logs import log_to
from shiftwork.organisms.steps import report_organisms

with log_to(snakemake.log[0]):
    report_organisms(
        snakemake.input.scores,
        snakemake.input.identities,
        snakemake.input.checkpoints,
        snakemake.params.runs,
        snakemake.params.criteria,
        snakemake.output,
        snakemake.input.fidelity,
        snakemake.params.checkpoint_tables,
    )
