from shiftwork.logs import log_to
from shiftwork.stability.jobs import ApiJob

job = ApiJob(
    source=snakemake.params.source,
    chat=snakemake.params.chat,
    max_new_tokens=snakemake.params.max_new_tokens,
    cache_dir=snakemake.params.cache,
    baseline=snakemake.params.api_baseline,
    plain_format=snakemake.params.plain_format,
)

with log_to(snakemake.log[0]):
    from shiftwork.stability.steps import generate_api_responses

    generate_api_responses(
        snakemake.input.variants,
        snakemake.wildcards.model,
        snakemake.output.generations,
        snakemake.output.probes,
        job,
    )
