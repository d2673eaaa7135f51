from shiftwork.logs import log_to
from shiftwork.organisms.steps import make_organism_data

with log_to(snakemake.log[0]):
    make_organism_data(snakemake.wildcards.organism, snakemake.params.spec, snakemake.output)
