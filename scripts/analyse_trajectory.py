from pathlib import Path

from shiftwork.logs import log_to
from shiftwork.trajectory.steps import analyse_trajectory

with log_to(snakemake.log[0]):
    analyse_trajectory(
        snakemake.input.scores,
        snakemake.params.alpha,
        snakemake.params.spline_df,
        snakemake.output.pairs,
        snakemake.output.summary,
        snakemake.output.report,
        str(Path(snakemake.output.figures[0]).parent),
    )
