from shiftwork.logs import log_to
from shiftwork.trajectory.steps import make_suite

with log_to(snakemake.log[0]):
    make_suite(snakemake.params.spec, snakemake.output.suite)
