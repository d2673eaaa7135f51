from shiftwork.crossstudy.steps import crossstudy_calibrate
from shiftwork.logs import log_to

with log_to(snakemake.log[0]):
    crossstudy_calibrate(
        snakemake.input.per_prompt,
        snakemake.input.scores,
        snakemake.input.item_table,
        snakemake.params.analysis,
        snakemake.output.calibration,
    )
