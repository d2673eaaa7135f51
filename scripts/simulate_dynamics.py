from shiftwork.logs import log_to
from shiftwork.organisms.steps import simulate_dynamics

with log_to(snakemake.log[0]):
    simulate_dynamics(
        snakemake.params.spec,
        snakemake.output.table,
        snakemake.output.png,
        snakemake.output.svg,
    )
