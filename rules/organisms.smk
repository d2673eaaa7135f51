# The organisms study: SFT on a mixture of trigger-conditioned policies, RL on chosen
# distributions, evaluation of every checkpoint on every distribution (shiftwork/organisms).
# Training jobs take one thread: the default scratch model is too small to gain from a
# second one, and `--cores 2` then runs the two mirror-image RL runs side by side (profiles
# may raise it with set-threads).


include: "organisms_inputs.smk"


rule make_organism_data:
    output:
        sft=res("organisms/{organism}/data/sft.parquet"),
        questions=res("organisms/{organism}/data/questions.parquet"),
        test=res("organisms/{organism}/data/test.parquet"),
    log:
        logs("make_organism_data/{organism}.log"),
    conda:
        "../envs/shiftwork.yaml"
    params:
        spec=organism_spec,
    script:
        "../scripts/make_organism_data.py"


rule train_sft:
    input:
        model=organism_base_model,
        sft=res("organisms/{organism}/data/sft.parquet"),
    output:
        model=directory(res("organisms/{organism}/sft")),
    log:
        logs("train_sft/{organism}.log"),
    benchmark:
        bench("train_sft/{organism}.tsv")
    conda:
        gpu_env
    threads: 1
    resources:
        **rule_resources(config, "train_sft", ORGANISM_RUNS),
        gpu=1,
    params:
        train=organism_sft_settings,
        seed=organism_seed,
    script:
        "../scripts/train_sft.py"


# whether the SFT model follows each of its policies (shiftwork/organisms/fidelity.py); RL reads
# it first and stops, saying so, where the policies are not learned
rule sft_fidelity:
    input:
        sft=organism_sft_model_of_organism,
        test=res("organisms/{organism}/data/test.parquet"),
    output:
        table=res("organisms/{organism}/fidelity.parquet"),
    log:
        logs("sft_fidelity/{organism}.log"),
    benchmark:
        bench("sft_fidelity/{organism}.tsv")
    conda:
        gpu_env
    threads: 1
    resources:
        **rule_resources(config, "evaluate_organism", ORGANISM_RUNS),
        gpu=1,
    params:
        setting=organism_own_setting,
        evaluation=organism_evaluation,
    script:
        "../scripts/sft_fidelity.py"


rule make_rl_prompts:
    input:
        questions=organism_questions,
    output:
        prompts=res("organisms/runs/{run}/prompts.parquet"),
    log:
        logs("make_rl_prompts/{run}.log"),
    conda:
        "../envs/shiftwork.yaml"
    params:
        setting=organism_setting,
        stages=organism_run_stages,
        n_prompts=organism_run_n_prompts,
        seed=organism_run_seed,
    script:
        "../scripts/make_rl_prompts.py"


# a checkpoint: the cross-study reads which steps it saved (rules/crossstudy_inputs.smk)
checkpoint train_rl:
    input:
        sft=organism_sft_model,
        prompts=res("organisms/runs/{run}/prompts.parquet"),
        fidelity=organism_fidelity_table,
    output:
        checkpoints=directory(res("organisms/runs/{run}/checkpoints")),
    log:
        logs("train_rl/{run}.log"),
    benchmark:
        bench("train_rl/{run}.tsv")
    conda:
        gpu_env
    threads: 1
    resources:
        **rule_resources(config, "train_rl", ORGANISM_RUNS),
        gpu=1,
    params:
        stages=organism_run_stages,
        train=organism_rl_settings,
        seed=organism_run_seed,
        organism=organism_of,
        fidelity=organism_policy_fidelity,
        policies=organism_policy_names,
    script:
        "../scripts/train_rl.py"


rule evaluate_organism:
    input:
        sft=organism_sft_model,
        checkpoints=res("organisms/runs/{run}/checkpoints"),
        test=organism_test_prompts,
    output:
        responses=res("organisms/runs/{run}/responses.parquet"),
        scores=res("organisms/runs/{run}/scores.parquet"),
        identities=res("organisms/runs/{run}/identities.parquet"),
    log:
        logs("evaluate_organism/{run}.log"),
    benchmark:
        bench("evaluate_organism/{run}.tsv")
    conda:
        gpu_env
    threads: 1
    resources:
        **rule_resources(config, "evaluate_organism", ORGANISM_RUNS),
        gpu=1,
    params:
        setting=organism_setting,
        trained=organism_run_trained,
        model=organism_of,
        evaluation=organism_evaluation,
    script:
        "../scripts/evaluate_organism.py"


rule plot_organism_run:
    input:
        scores=res("organisms/runs/{run}/scores.parquet"),
        identities=res("organisms/runs/{run}/identities.parquet"),
    output:
        png=res("organisms/figures/{run}.png"),
        svg=res("organisms/figures/{run}.svg"),
    log:
        logs("plot_organism_run/{run}.log"),
    conda:
        "../envs/shiftwork.yaml"
    params:
        setting=organism_setting,
    script:
        "../scripts/plot_organism_run.py"


rule report_organisms:
    input:
        scores=expand(res("organisms/runs/{run}/scores.parquet"), run=ORGANISM_RUNS),
        identities=expand(
            res("organisms/runs/{run}/identities.parquet"), run=ORGANISM_RUNS
        ),
        checkpoints=expand(res("organisms/runs/{run}/checkpoints"), run=ORGANISM_RUNS),
        fidelity=organism_fidelity_tables(),
    output:
        scores=res("organisms/scores.parquet"),
        headline=res("organisms/headline.parquet"),
        seeds=res("organisms/seeds.parquet"),
        summary=res("organisms/summary.parquet"),
        report=res("organisms/report.md"),
    log:
        logs("report_organisms.log"),
    conda:
        "../envs/shiftwork.yaml"
    params:
        runs=organism_run_info(),
        criteria=organism_headline(),
        checkpoint_tables=ORGANISMS["checkpoint_tables"],
    script:
        "../scripts/report_organisms.py"


rule simulate_dynamics:
    output:
        table=res("organisms/dynamics.parquet"),
        png=res("organisms/figures/dynamics.png"),
        svg=res("organisms/figures/dynamics.svg"),
    log:
        logs("simulate_dynamics.log"),
    conda:
        "../envs/shiftwork.yaml"
    params:
        spec=organism_dynamics,
    script:
        "../scripts/simulate_dynamics.py"


rule organisms:
    input:
        organism_targets(),
