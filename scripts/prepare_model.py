from pathlib import Path

from shiftwork.logs import log_to
from shiftwork.models.steps import prepare_model

with log_to(snakemake.log[0]):
    prepare_model(snakemake.wildcards.model, snakemake.params.spec, str(Path(snakemake.output[0]).parent))
