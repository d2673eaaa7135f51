from shiftwork.logs import log_to
from shiftwork.trajectory.sections import AnalysisSettings, CalibrationSettings
from shiftwork.trajectory.steps import replicate_trajectory

with log_to(snakemake.log[0]):
    replicate_trajectory(
        snakemake.input.scores,
        snakemake.input.item_table,
        snakemake.input.pairs,
        AnalysisSettings.from_config(snakemake.params.analysis),
        CalibrationSettings.from_config(snakemake.params.calibration),
        {
            "claims": snakemake.output.claims,
            "calibration": snakemake.output.calibration,
            "reference": snakemake.output.reference,
            "report": snakemake.output.report,
        },
    )
