from pathlib import Path

from shiftwork.logs import log_to, short_errors
from shiftwork.models.sources import ModelSourceError
from shiftwork.models.steps import prepare_model

# a model that cannot be had (no network, gated, wrong id) ends the job with its one-paragraph
# message, not a traceback
with log_to(snakemake.log[0]), short_errors(ModelSourceError):
    prepare_model(snakemake.wildcards.model, snakemake.params.spec, str(Path(snakemake.output[0]).parent))
