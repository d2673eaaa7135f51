# The stability study (shiftwork.stability): prompts -> variants -> meaning gate -> responses
# and probes -> axis deltas -> SGS and t-tests -> tables and figures.


include: "stability_inputs.smk"


rule sample_prompts:
    input:
        data=dataset_file,
    output:
        prompts=update(res("stability/prompts/{dataset}.parquet")),
    log:
        logs("sample_prompts/{dataset}.log"),
    conda:
        "../envs/shiftwork.yaml"
    params:
        spec=dataset_spec,
    script:
        "../scripts/sample_prompts.py"


# Structural variants: by the rewriter model named in stability.variants.structural.rewriter,
# or, with none named, from the prompt set's hand-written file (no model, no GPU).
rule rewrite_prompts:
    input:
        prompts=res("stability/prompts/{dataset}.parquet"),
        model=rewriter_model,
    output:
        rewrites=res("stability/rewrites/{dataset}.parquet"),
    log:
        logs("rewrite_prompts/{dataset}.log"),
    benchmark:
        bench("rewrite_prompts/{dataset}.tsv")
    wildcard_constraints:
        dataset=rewrites_pattern(handwritten=False),
    conda:
        gpu_env
    resources:
        gpu=1,
    params:
        settings=STRUCTURAL,
        cache=rewrite_cache,
        batch_size=rewriter_batch_size,
        dtype=rewriter_dtype,
        api=rewriter_api,
        api_cache=rewriter_cache,
    script:
        "../scripts/rewrite_prompts.py"


rule select_handwritten_rewrites:
    input:
        prompts=res("stability/prompts/{dataset}.parquet"),
        variants=handwritten_file,
    output:
        rewrites=res("stability/rewrites/{dataset}.parquet"),
    log:
        logs("select_handwritten_rewrites/{dataset}.log"),
    wildcard_constraints:
        dataset=rewrites_pattern(handwritten=True),
    conda:
        "../envs/shiftwork.yaml"
    params:
        settings=HANDWRITTEN,
    script:
        "../scripts/select_handwritten_rewrites.py"


rule make_variants:
    input:
        unpack(variant_inputs),
    output:
        variants=res("stability/variants/{dataset}.parquet"),
    log:
        logs("make_variants/{dataset}.log"),
    conda:
        "../envs/shiftwork.yaml"
    params:
        settings=VARIANTS,
        seed=STABILITY["seed"],
    script:
        "../scripts/make_variants.py"


rule estimate_gate_baseline:
    input:
        prompts=study_prompts,
    output:
        baseline=res("stability/gate/baseline.parquet"),
    log:
        logs("estimate_gate_baseline.log"),
    conda:
        gpu_env
    resources:
        gpu=1,
    params:
        encoder=GATE["encoder"],
        encoder_spec=encoder_spec,
        baseline=GATE["baseline"],
        seed=STABILITY["seed"],
    script:
        "../scripts/estimate_gate_baseline.py"


rule filter_variants:
    input:
        variants=res("stability/variants/{dataset}.parquet"),
        baseline=res("stability/gate/baseline.parquet"),
    output:
        kept=res("stability/filtered/{dataset}.parquet"),
        summary=res("stability/gate/{dataset}.summary.parquet"),
        dropped=res("stability/gate/{dataset}.dropped.parquet"),
        scores=res("stability/gate/{dataset}.scores.parquet"),
    log:
        logs("filter_variants/{dataset}.log"),
    benchmark:
        bench("filter_variants/{dataset}.tsv")
    conda:
        gpu_env
    resources:
        gpu=1,
    params:
        encoder=GATE["encoder"],
        encoder_spec=encoder_spec,
        gate=GATE,
    script:
        "../scripts/filter_variants.py"


rule report_gate:
    input:
        summaries=gate_outputs("summary"),
        dropped=gate_outputs("dropped"),
        variants=study_variants,
    output:
        table=res("stability/gate/report.parquet"),
        markdown=res("stability/gate/report.md"),
    log:
        logs("report_gate.log"),
    conda:
        "../envs/shiftwork.yaml"
    script:
        "../scripts/report_gate.py"


# Responses from vLLM (or transformers: stability.generation.engine, or models.NAME.engine),
# then one transformers probe pass over them (shiftwork.inference.generation, shiftwork.inference.probe).
rule generate_responses:
    input:
        variants=res("stability/filtered/{dataset}.parquet"),
        model=evaluated_model,
    output:
        generations=res("stability/generations/{model}/{dataset}.parquet"),
        probes=res("stability/probes/{model}/{dataset}.parquet"),
    log:
        logs("generate_responses/{model}/{dataset}.log"),
    benchmark:
        bench("generate_responses/{model}/{dataset}.tsv")
    wildcard_constraints:
        dataset=datasets_pattern(sharded=False),
        model=local_models_pattern(),
    conda:
        gpu_env
    threads: 2
    resources:
        gpu=1,
    params:
        max_new_tokens=GENERATION["max_new_tokens"],
        engine=model_engine,
        batch_size=model_batch_size,
        dtype=model_dtype,
        store_hidden=PROBE["store_hidden"],
        plain_format=model_plain_format,
    script:
        "../scripts/generate_responses.py"


# stability.generate_jobs: per_model (the default): one job per model over all the study's
# datasets, which starts vLLM once per model.
use rule generate_responses as generate_model_responses with:
    input:
        variants=study_filtered,
        model=evaluated_model,
    output:
        generations=model_outputs("generations"),
        probes=model_outputs("probes"),
    log:
        logs("generate_responses/{model}.log"),
    benchmark:
        bench("generate_responses/{model}.tsv")
    wildcard_constraints:
        model=models_pattern(),


# A dataset of more than stability.shard_size prompts: one generate job per shard of its
# prompts (each shard holds its prompts' baselines), merged into the same tables that
# `generate` writes for a whole dataset.
use rule generate_responses as generate_shard_responses with:
    output:
        generations=res("stability/generations/{model}/{dataset}/shard-{shard}.parquet"),
        probes=res("stability/probes/{model}/{dataset}/shard-{shard}.parquet"),
    log:
        logs("generate_responses/{model}/{dataset}/shard-{shard}.log"),
    benchmark:
        bench("generate_responses/{model}/{dataset}/shard-{shard}.tsv")
    wildcard_constraints:
        dataset=datasets_pattern(sharded=True),
        model=local_models_pattern(),
        shard=r"\d+",
    params:
        max_new_tokens=GENERATION["max_new_tokens"],
        engine=model_engine,
        batch_size=model_batch_size,
        dtype=model_dtype,
        store_hidden=PROBE["store_hidden"],
        plain_format=model_plain_format,
        shard=shard_index,
        n_shards=shard_count,


# A model behind an OpenAI-compatible API: its replies over HTTP (cached per request), and a
# probes table in which what an API cannot show (Act, Prob; Ent without log-probabilities) is
# missing. Not a GPU job.
rule generate_api_responses:
    input:
        variants=res("stability/filtered/{dataset}.parquet"),
    output:
        generations=res("stability/generations/{model}/{dataset}.parquet"),
        probes=res("stability/probes/{model}/{dataset}.parquet"),
    log:
        logs("generate_api_responses/{model}/{dataset}.log"),
    benchmark:
        bench("generate_api_responses/{model}/{dataset}.tsv")
    wildcard_constraints:
        model=api_models_pattern(),
    conda:
        "../envs/shiftwork.yaml"
    params:
        source=model_source,
        chat=model_chat,
        plain_format=model_plain_format,
        max_new_tokens=GENERATION["max_new_tokens"],
        api_baseline=GENERATION["api_baseline"],
        cache=model_api_cache,
    script:
        "../scripts/generate_api_responses.py"


rule merge_generations:
    input:
        shards=generation_shards,
    output:
        merged=res("stability/generations/{model}/{dataset}.parquet"),
    log:
        logs("merge_generations/{model}/{dataset}.log"),
    wildcard_constraints:
        dataset=datasets_pattern(sharded=True),
        model=local_models_pattern(),
    conda:
        "../envs/shiftwork.yaml"
    script:
        "../scripts/merge_generations.py"


rule merge_probes:
    input:
        shards=probe_shards,
    output:
        merged=res("stability/probes/{model}/{dataset}.parquet"),
    log:
        logs("merge_probes/{model}/{dataset}.log"),
    wildcard_constraints:
        dataset=datasets_pattern(sharded=True),
        model=local_models_pattern(),
    conda:
        "../envs/shiftwork.yaml"
    script:
        "../scripts/merge_probes.py"


# The mirroring judge's controls, on a sample of the register and form pairs of every model and
# dataset; score_axes takes the judge's verdicts only if it passed them. Runs with a judge only.
rule check_judge:
    input:
        unpack(judge_check_inputs),
    output:
        controls=res("stability/judge/controls.parquet"),
        report=res("stability/judge/report.parquet"),
        markdown=res("stability/judge/report.md"),
    log:
        logs("check_judge.log"),
    benchmark:
        bench("check_judge.tsv")
    conda:
        judge_env
    resources:
        gpu=JUDGE_GPU,
    params:
        judge_batch_size=judge_batch_size,
        judge_api=judge_api,
        judge_cache=judge_cache,
        judge_name=JUDGE,
        controls=JUDGE_CONTROLS,
        seed=STABILITY["seed"],
    script:
        "../scripts/check_judge.py"


rule score_axes:
    input:
        unpack(score_inputs),
    output:
        deltas=res("stability/deltas/{model}/{dataset}.parquet"),
        judgments=res("stability/judgments/{model}/{dataset}.parquet"),
    log:
        logs("score_axes/{model}/{dataset}.log"),
    benchmark:
        bench("score_axes/{model}/{dataset}.tsv")
    conda:
        gpu_env
    resources:
        gpu=1,
    params:
        encoder=AXES_ENCODER,
        encoder_spec=axes_encoder_spec,
        structural_baseline=STRUCTURAL["baseline"],
        length_anchor=STRUCTURAL["length_anchor"],
        judge_batch_size=judge_batch_size,
        judge_api=judge_api,
        judge_cache=judge_cache,
        judge_name=JUDGE,
        axes=AXES_SETTINGS,
        seed=STABILITY["seed"],
    script:
        "../scripts/score_axes.py"


rule judge_sample:
    input:
        judgments=all_judgments,
    output:
        table=res("stability/judge/sample.parquet"),
        markdown=res("stability/judge/sample.md"),
    log:
        logs("judge_sample.log"),
    conda:
        "../envs/shiftwork.yaml"
    params:
        per_cell=STABILITY["axes"]["judge_sample_size"],
        seed=STABILITY["seed"],
    script:
        "../scripts/judge_sample.py"


rule aggregate_stability:
    input:
        deltas=all_deltas,
    output:
        per_prompt=res("stability/stats/per_prompt.parquet"),
        dataset_sgs=res("stability/stats/dataset_sgs.parquet"),
        total_sgs=res("stability/stats/total_sgs.parquet"),
        ttests_model=res("stability/stats/ttests_model.parquet"),
        ttests_dataset=res("stability/stats/ttests_dataset.parquet"),
        breakdown=res("stability/stats/breakdown.parquet"),
        strength=res("stability/stats/strength.parquet"),
    log:
        logs("aggregate_stability.log"),
    conda:
        "../envs/shiftwork.yaml"
    params:
        R=STATS_R,
        eps=STATISTICS["eps"],
    script:
        "../scripts/aggregate_stability.py"


rule count_degenerate_replies:
    input:
        generations=all_generations,
    output:
        table=res("stability/stats/degenerate.parquet"),
    log:
        logs("count_degenerate_replies.log"),
    conda:
        "../envs/shiftwork.yaml"
    script:
        "../scripts/count_degenerate_replies.py"


rule report_stability:
    input:
        total_sgs=res("stability/stats/total_sgs.parquet"),
        dataset_sgs=res("stability/stats/dataset_sgs.parquet"),
        ttests_model=res("stability/stats/ttests_model.parquet"),
        ttests_dataset=res("stability/stats/ttests_dataset.parquet"),
        breakdown=res("stability/stats/breakdown.parquet"),
        strength=res("stability/stats/strength.parquet"),
        degenerate=res("stability/stats/degenerate.parquet"),
        gate_scores=gate_outputs("scores"),
        judge_report=judge_report,
    output:
        tables=multiext(res("stability/tables/main_table"), ".md", ".tex", ".csv")
        + multiext(res("stability/tables/dataset_table"), ".md", ".tex", ".csv"),
        degenerate=multiext(
            res("stability/tables/degenerate_replies"), ".md", ".tex", ".csv"
        ),
        eps_tables=eps_tables(),
        significance=significance_tables(),
        heatmap_png=res("stability/figures/sgs_heatmap.png"),
        heatmap_svg=res("stability/figures/sgs_heatmap.svg"),
        family_png=res("stability/figures/family.png"),
        family_svg=res("stability/figures/family.svg"),
        radar_png=res("stability/figures/radar.png"),
        radar_svg=res("stability/figures/radar.svg"),
        preservation_png=res("stability/figures/prompt_preservation.png"),
        preservation_svg=res("stability/figures/prompt_preservation.svg"),
        strength_png=res("stability/figures/strength_curves.png"),
        strength_svg=res("stability/figures/strength_curves.svg"),
    log:
        logs("report_stability.log"),
    conda:
        "../envs/shiftwork.yaml"
    params:
        eps=STATISTICS["eps"],
        primary_eps=STATISTICS["primary_eps"],
    script:
        "../scripts/report_stability.py"
