from shiftwork.crossstudy.steps import crossstudy_collect
from shiftwork.logs import log_to

with log_to(snakemake.log[0]):
    crossstudy_collect(
        snakemake.input.deltas,
        snakemake.input.generations,
        snakemake.params.runs,
        snakemake.params.R,
        snakemake.params.alpha,
        snakemake.params.calibration,
        snakemake.output,
    )
