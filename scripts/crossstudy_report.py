from shiftwork.crossstudy.steps import crossstudy_report
from shiftwork.logs import log_to

with log_to(snakemake.log[0]):
    crossstudy_report(
        snakemake.input,
        snakemake.input.trajectory_scores[0] if snakemake.input.trajectory_scores else None,
        snakemake.params.settings,
        snakemake.params.figures,
        snakemake.output.findings,
        snakemake.input.calibration[0] if snakemake.input.calibration else None,
    )
