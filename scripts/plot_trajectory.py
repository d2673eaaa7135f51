from pathlib import Path

from shiftwork.logs import log_to
from shiftwork.trajectory.steps import plot_trajectory

with log_to(snakemake.log[0]):
    plot_trajectory(
        snakemake.input.scores,
        snakemake.input.pairs,
        snakemake.params.analysis,
        snakemake.output.raw_vs_partial,
        snakemake.output.fingerprint,
        snakemake.output.get("windows"),
        snakemake.output.markdown,
        str(Path(snakemake.output.figures[0]).parent),
    )
