from shiftwork.logs import log_to

with log_to(snakemake.log[0]):
    from shiftwork.stability.steps import generate_api_responses

    generate_api_responses(
        snakemake.input.variants,
        snakemake.wildcards.model,
        snakemake.params.source,
        snakemake.params.chat,
        snakemake.output.generations,
        snakemake.output.probes,
        snakemake.params.max_new_tokens,
        snakemake.params.cache,
    )
