import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from shiftwork.gpu_claim import claim_gpu
from shiftwork.logs import log_to

# the claim sets CUDA_VISIBLE_DEVICES, which CUDA reads once: import the step after it
with log_to(snakemake.log[0]), claim_gpu():
    from shiftwork.stability_steps import probe_responses

    probe_responses(
        snakemake.input.generations,
        snakemake.input.model,
        snakemake.wildcards.model,
        snakemake.output.probes,
        batch_size=snakemake.params.batch_size,
        dtype=snakemake.params.dtype,
        threads=snakemake.threads,
        store_hidden=snakemake.params.store_hidden,
    )
