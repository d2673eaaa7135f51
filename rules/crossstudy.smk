# The cross-study (shiftwork.crossstudy): prompt stability of the trajectory and organisms
# studies' checkpoints. Per run: prompts that fit its checkpoints -> variants -> meaning gate;
# per (run, step): responses, probes and axis deltas; then SGS along each run, paired tests
# against step 0, partial correlations with OOD accuracy, figures and findings.


include: "crossstudy_inputs.smk"


rule crossstudy_prompts:
    input:
        source=cross_prompt_source,
    output:
        prompts=res("crossstudy/prompts/{run}.parquet"),
    log:
        logs("crossstudy_prompts/{run}.log"),
    conda:
        "../envs/shiftwork.yaml"
    params:
        study=cross_study,
        n=cross_n_prompts,
        seed=CROSS["seed"],
        pattern=cross_pattern,
    script:
        "../scripts/crossstudy_prompts.py"


rule crossstudy_variants:
    input:
        prompts=res("crossstudy/prompts/{run}.parquet"),
    output:
        variants=res("crossstudy/variants/{run}.parquet"),
    log:
        logs("crossstudy_variants/{run}.log"),
    conda:
        "../envs/shiftwork.yaml"
    params:
        settings=cross_variants,
        seed=CROSS["seed"],
    script:
        "../scripts/crossstudy_variants.py"


# the stability study's gate, with its rescale baseline b (mismatched pairs of its own prompts)
rule crossstudy_gate:
    input:
        variants=res("crossstudy/variants/{run}.parquet"),
        baseline=res("stability/gate/baseline.parquet"),
    output:
        kept=res("crossstudy/filtered/{run}.parquet"),
    log:
        logs("crossstudy_gate/{run}.log"),
    conda:
        gpu_env
    resources:
        gpu=1,
    params:
        encoder=GATE["encoder"],
        encoder_spec=encoder_spec,
        gate=GATE,
    script:
        "../scripts/crossstudy_gate.py"


rule crossstudy_score:
    input:
        prompts=res("crossstudy/prompts/{run}.parquet"),
        filtered=res("crossstudy/filtered/{run}.parquet"),
        baseline=res("stability/gate/baseline.parquet"),
        base=cross_base,
        checkpoints=cross_checkpoints,
    output:
        generations=res("crossstudy/generations/{run}/steps-{chunk}.parquet"),
        probes=res("crossstudy/probes/{run}/steps-{chunk}.parquet"),
        deltas=res("crossstudy/deltas/{run}/steps-{chunk}.parquet"),
    log:
        logs("crossstudy_score/{run}/steps-{chunk}.log"),
    benchmark:
        bench("crossstudy_score/{run}/steps-{chunk}.tsv")
    wildcard_constraints:
        chunk=r"\d+-\d+",
    conda:
        gpu_env
    threads: 1
    resources:
        gpu=1,
    params:
        study=cross_study,
        steps=cross_chunk_steps,
        settings=cross_score_settings,
        encoder=GATE["encoder"],
        encoder_spec=encoder_spec,
    script:
        "../scripts/crossstudy_score.py"


rule crossstudy_collect:
    input:
        deltas=cross_outputs("deltas"),
        generations=cross_outputs("generations"),
    output:
        per_prompt=res("crossstudy/per_prompt.parquet"),
        sgs=res("crossstudy/sgs.parquet"),
        changes=res("crossstudy/changes.parquet"),
        change_null=res("crossstudy/change_null.parquet"),
        behaviour=res("crossstudy/behaviour.parquet"),
        replies=res("crossstudy/replies.parquet"),
        # the organisms' variants that keep the trained template (letter case only)
        template_per_prompt=res("crossstudy/template/per_prompt.parquet"),
        template_sgs=res("crossstudy/template/sgs.parquet"),
        template_changes=res("crossstudy/template/changes.parquet"),
        template_change_null=res("crossstudy/template/change_null.parquet"),
        template_behaviour=res("crossstudy/template/behaviour.parquet"),
    log:
        logs("crossstudy_collect.log"),
    conda:
        "../envs/shiftwork.yaml"
    params:
        runs={
            run: {"study": study, "answers": cross_answers(run)}
            for run, study in CROSS_RUNS.items()
        },
        R=STATS_R,
        alpha=TRAJECTORY["analysis"]["alpha"],
        calibration=TRAJECTORY["analysis"]["calibration"],
    script:
        "../scripts/crossstudy_collect.py"


# the free-form probe: evenly spaced checkpoints of a trajectory run answer the stability study's
# own prompts and gated variants (structural rewrites included), as that study asks the model
rule crossstudy_freeform_score:
    input:
        filtered=freeform_filtered,
        baseline=res("stability/gate/baseline.parquet"),
        base=cross_base,
        checkpoints=cross_checkpoints,
    output:
        generations=res("crossstudy/freeform/generations/{run}/step-{step}.parquet"),
        probes=res("crossstudy/freeform/probes/{run}/step-{step}.parquet"),
        deltas=res("crossstudy/freeform/deltas/{run}/step-{step}.parquet"),
    log:
        logs("crossstudy_freeform_score/{run}/step-{step}.log"),
    benchmark:
        bench("crossstudy_freeform_score/{run}/step-{step}.tsv")
    conda:
        gpu_env
    threads: 1
    resources:
        gpu=1,
    params:
        settings=freeform_settings,
        encoder=GATE["encoder"],
        encoder_spec=encoder_spec,
    script:
        "../scripts/crossstudy_freeform_score.py"


rule crossstudy_freeform_collect:
    input:
        deltas=freeform_outputs("deltas"),
        generations=freeform_outputs("generations"),
    output:
        per_prompt=res("crossstudy/freeform/per_prompt.parquet"),
        sgs=res("crossstudy/freeform/sgs.parquet"),
        changes=res("crossstudy/freeform/changes.parquet"),
        change_null=res("crossstudy/freeform/change_null.parquet"),
        replies=res("crossstudy/freeform/replies.parquet"),
    log:
        logs("crossstudy_freeform_collect.log"),
    conda:
        "../envs/shiftwork.yaml"
    params:
        runs=FREEFORM_RUNS,
        R=STATS_R,
        alpha=TRAJECTORY["analysis"]["alpha"],
        calibration=TRAJECTORY["analysis"]["calibration"],
    script:
        "../scripts/crossstudy_freeform_collect.py"


rule crossstudy_analyse:
    input:
        unpack(cross_analysis_inputs),
    output:
        pairs=res("crossstudy/pairs.parquet"),
        organisms_steps=res("crossstudy/organisms_steps.parquet"),
        organisms_timing=res("crossstudy/organisms_timing.parquet"),
        template_organisms_steps=res("crossstudy/template/organisms_steps.parquet"),
        template_organisms_timing=res("crossstudy/template/organisms_timing.parquet"),
    log:
        logs("crossstudy_analyse.log"),
    conda:
        "../envs/shiftwork.yaml"
    params:
        organisms=cross_organisms,
        analysis=TRAJECTORY["analysis"],
        collapse=ORGANISMS["headline"]["held_out_accuracy"],
    script:
        "../scripts/crossstudy_analyse.py"


# the stability pairs' analysis on null runs whose OOD sets share nothing with the axes
rule crossstudy_calibrate:
    input:
        per_prompt=res("crossstudy/per_prompt.parquet"),
        scores=res("trajectory/scores.parquet"),
        item_table=res("trajectory/items.parquet"),
    output:
        calibration=res("crossstudy/calibration.parquet"),
    log:
        logs("crossstudy_calibrate.log"),
    benchmark:
        bench("crossstudy_calibrate.tsv")
    conda:
        "../envs/shiftwork.yaml"
    params:
        analysis=TRAJECTORY["analysis"],
    script:
        "../scripts/crossstudy_calibrate.py"


rule crossstudy_report:
    input:
        unpack(lambda wildcards: freeform_report_inputs()),
        sgs=res("crossstudy/sgs.parquet"),
        changes=res("crossstudy/changes.parquet"),
        change_null=res("crossstudy/change_null.parquet"),
        pairs=res("crossstudy/pairs.parquet"),
        organisms_steps=res("crossstudy/organisms_steps.parquet"),
        organisms_timing=res("crossstudy/organisms_timing.parquet"),
        template_organisms_steps=res("crossstudy/template/organisms_steps.parquet"),
        template_organisms_timing=res("crossstudy/template/organisms_timing.parquet"),
        template_change_null=res("crossstudy/template/change_null.parquet"),
        replies=res("crossstudy/replies.parquet"),
        trajectory_scores=(
            [res("trajectory/scores.parquet")]
            if "trajectory" in CROSS_RUNS.values()
            else []
        ),
        calibration=(
            [res("crossstudy/calibration.parquet")]
            if "trajectory" in CROSS_RUNS.values()
            else []
        ),
    output:
        findings=res("crossstudy/findings.md"),
        figures=[path for pair in cross_figures().values() for path in pair],
    log:
        logs("crossstudy_report.log"),
    conda:
        "../envs/shiftwork.yaml"
    params:
        figures=cross_figures(),
        settings={
            "alpha": TRAJECTORY["analysis"]["alpha"],
            "collapse": ORGANISMS["headline"]["held_out_accuracy"],
            "pinned": TRAJECTORY["analysis"]["pinned"],
        },
    script:
        "../scripts/crossstudy_report.py"


# the precision comparison (make crossstudy-precision, not part of the crossstudy target): every
# scored checkpoint once more in float32 and in bfloat16, in the scoring's chunks
rule crossstudy_precision_score:
    input:
        prompts=res("crossstudy/prompts/{run}.parquet"),
        filtered=res("crossstudy/filtered/{run}.parquet"),
        baseline=res("stability/gate/baseline.parquet"),
        base=cross_base,
        checkpoints=cross_checkpoints,
    output:
        generations=res(
            "crossstudy/precision/{dtype}/generations/{run}/steps-{chunk}.parquet"
        ),
        probes=res("crossstudy/precision/{dtype}/probes/{run}/steps-{chunk}.parquet"),
        deltas=res("crossstudy/precision/{dtype}/deltas/{run}/steps-{chunk}.parquet"),
    log:
        logs("crossstudy_precision_score/{dtype}/{run}/steps-{chunk}.log"),
    benchmark:
        bench("crossstudy_precision_score/{dtype}/{run}/steps-{chunk}.tsv")
    wildcard_constraints:
        dtype="float32|bfloat16",
        chunk=r"\d+-\d+",
    conda:
        gpu_env
    threads: 1
    resources:
        gpu=1,
    params:
        study=cross_study,
        steps=cross_chunk_steps,
        settings=cross_score_settings,
        encoder=GATE["encoder"],
        encoder_spec=encoder_spec,
    script:
        "../scripts/crossstudy_precision_score.py"


rule crossstudy_precision:
    input:
        unpack(cross_precision_inputs),
    output:
        agreement=res("crossstudy/precision/agreement.parquet"),
        sgs=res("crossstudy/precision/sgs.parquet"),
        findings=res("crossstudy/precision/findings.parquet"),
        report=res("crossstudy/precision.md"),
    log:
        logs("crossstudy_precision.log"),
    conda:
        "../envs/shiftwork.yaml"
    params:
        runs={
            run: {"study": study, "answers": cross_answers(run)}
            for run, study in CROSS_RUNS.items()
        },
        R=STATS_R,
        analysis=TRAJECTORY["analysis"],
    script:
        "../scripts/crossstudy_precision.py"


rule crossstudy:
    input:
        crossstudy_targets(),
