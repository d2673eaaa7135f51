from shiftwork.logs import log_to
from shiftwork.organisms.steps import plot_organism_run

with log_to(snakemake.log[0]):
    plot_organism_run(
        snakemake.input.scores,
        snakemake.input.identities,
        snakemake.params.setting,
        snakemake.output.png,
        snakemake.output.svg,
    )
