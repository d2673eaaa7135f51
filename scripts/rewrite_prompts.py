import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from shiftwork.logs import log_to
from shiftwork.steps import rewrite_prompts

with log_to(snakemake.log[0]):
    rewrite_prompts(
        snakemake.input.prompts,
        snakemake.input.model,
        snakemake.params.settings,
        snakemake.output.rewrites,
        cache_path=snakemake.params.cache,
        batch_size=snakemake.params.batch_size,
        dtype=snakemake.params.dtype,
    )
