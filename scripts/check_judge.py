from contextlib import nullcontext

from shiftwork.gpu_claim import claim_gpu
from shiftwork.logs import log_to
from shiftwork.stability.jobs import JudgeCheckJob, judge_model
from shiftwork.stability.sections import JudgeControlSettings

params = snakemake.params
judge = judge_model(params, snakemake.input)
job = JudgeCheckJob(judge=judge, controls=JudgeControlSettings.from_config(params.controls), seed=params.seed)

# a local judge takes a GPU: the claim sets CUDA_VISIBLE_DEVICES, which CUDA reads once, so the
# step is imported after it; a judge behind an API claims nothing
with log_to(snakemake.log[0]), claim_gpu() if judge.model_dir else nullcontext():
    from shiftwork.stability.steps import check_judge

    check_judge(
        list(snakemake.input.generations),
        job,
        {
            "controls": snakemake.output.controls,
            "report": snakemake.output.report,
            "markdown": snakemake.output.markdown,
        },
    )
