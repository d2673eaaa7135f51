import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from shiftwork.logs import log_to
from shiftwork.stability_steps import generate_responses

with log_to(snakemake.log[0]):
    generate_responses(
        snakemake.input.variants,
        snakemake.input.model,
        snakemake.wildcards.model,
        snakemake.output.generations,
        max_new_tokens=snakemake.params.max_new_tokens,
        batch_size=snakemake.params.batch_size,
        dtype=snakemake.params.dtype,
        threads=snakemake.threads,
    )
