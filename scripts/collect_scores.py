from shiftwork.logs import log_to
from shiftwork.trajectory.steps import collect_scores

with log_to(snakemake.log[0]):
    collect_scores(
        list(snakemake.input.predictions),
        "id",
        snakemake.output.scores,
        snakemake.output.item_table,
        snakemake.params.runs,
    )
