from pathlib import Path

from shiftwork.logs import log_to
from shiftwork.trajectory.sections import AnalysisSettings
from shiftwork.trajectory.steps import analyse_trajectory

with log_to(snakemake.log[0]):
    analyse_trajectory(
        snakemake.input.scores,
        snakemake.input.item_table,
        AnalysisSettings.from_config(snakemake.params.analysis),
        {
            "pairs": snakemake.output.pairs,
            "summary": snakemake.output.summary,
            "label_bias": snakemake.output.label_bias,
            "seeds": snakemake.output.seeds,
            "report": snakemake.output.report,
        },
        str(Path(snakemake.output.figures[0]).parent),
        snakemake.input.calibration,
    )
