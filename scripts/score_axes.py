import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from shiftwork.logs import log_to
from shiftwork.stability_steps import score_deltas

with log_to(snakemake.log[0]):
    score_deltas(
        snakemake.input.generations,
        snakemake.input.probes,
        snakemake.params.encoder,
        snakemake.params.encoder_spec,
        snakemake.output.deltas,
        judge_dir=snakemake.input.get("judge"),
    )
