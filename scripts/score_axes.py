from pathlib import Path

from shiftwork.gpu_claim import claim_gpu
from shiftwork.logs import log_to

# the claim sets CUDA_VISIBLE_DEVICES, which CUDA reads once: import the step after it
with log_to(snakemake.log[0]), claim_gpu():
    from shiftwork.stability.steps import score_axes

    score_axes(
        snakemake.input.generations,
        snakemake.input.probes,
        snakemake.params.encoder,
        snakemake.params.encoder_spec,
        snakemake.output.deltas,
        snakemake.output.judgments,
        structural_baseline=snakemake.params.structural_baseline,
        judge_dir=snakemake.input.get("judge") and str(Path(snakemake.input.judge).parent),
        judge_batch_size=snakemake.params.judge_batch_size,
        judge_api=snakemake.params.judge_api,
        judge_cache=snakemake.params.judge_cache,
        judge_name=snakemake.params.judge_name,
        bleu=snakemake.params.bleu,
        bert_scale=snakemake.params.bert_scale,
        bert_baseline=snakemake.params.bert_baseline,
        seed=snakemake.params.seed,
        noise_detector=snakemake.params.noise_detector,
        gate_baseline_path=snakemake.input.get("gate_baseline"),
    )
