from shiftwork.logs import log_to
from shiftwork.trajectory.sections import AnalysisSettings, CalibrationSettings
from shiftwork.trajectory.steps import calibrate_trajectory

with log_to(snakemake.log[0]):
    calibrate_trajectory(
        snakemake.input.scores,
        snakemake.input.item_table,
        AnalysisSettings.from_config(snakemake.params.analysis),
        CalibrationSettings.from_config(snakemake.params.calibration),
        snakemake.output.calibration,
    )
