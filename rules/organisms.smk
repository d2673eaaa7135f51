# The organisms study: SFT on a mixture of trigger-conditioned policies, RL on chosen
# distributions, evaluation of every checkpoint on every distribution (shiftwork/organisms).
# Training jobs take one thread: the default scratch model is too small to gain from a
# second one, and `--cores 2` then runs the two mirror-image RL runs side by side (profiles
# may raise it with set-threads).


rule organism_data:
    output:
        sft="results/organisms/{organism}/data/sft.parquet",
        questions="results/organisms/{organism}/data/questions.parquet",
        test="results/organisms/{organism}/data/test.parquet",
    log:
        "logs/organism_data/{organism}.log",
    conda:
        "../envs/shiftwork.yaml"
    params:
        spec=lambda w: ORGANISM_SFT[w.organism],
    script:
        "../scripts/organism_data.py"


rule sft:
    input:
        model=organism_base_model,
        sft="results/organisms/{organism}/data/sft.parquet",
    output:
        model=directory("results/organisms/{organism}/sft"),
    log:
        "logs/sft/{organism}.log",
    benchmark:
        "benchmarks/sft/{organism}.tsv"
    conda:
        "../envs/shiftwork.yaml"
    threads: 1
    resources:
        gpu=1,
    params:
        train=lambda w: ORGANISM_SFT[w.organism]["train"],
        seed=lambda w: ORGANISM_SFT[w.organism].get("seed", 0),
    script:
        "../scripts/sft.py"


rule rl_prompts:
    input:
        questions=lambda w: f"results/organisms/{organism_of(w)}/data/questions.parquet",
    output:
        prompts="results/organisms/runs/{orun}/prompts.parquet",
    log:
        "logs/rl_prompts/{orun}.log",
    conda:
        "../envs/shiftwork.yaml"
    params:
        setting=organism_setting,
        stages=lambda w: ORGANISM_RUNS[w.orun]["stages"],
        n_prompts=lambda w: organism_rl_settings(w).get("n_prompts", 512),
        seed=lambda w: ORGANISM_RUNS[w.orun].get("seed", 0),
    script:
        "../scripts/rl_prompts.py"


rule rl:
    input:
        sft=organism_sft_model,
        prompts="results/organisms/runs/{orun}/prompts.parquet",
    output:
        checkpoints=directory("results/organisms/runs/{orun}/checkpoints"),
    log:
        "logs/rl/{orun}.log",
    benchmark:
        "benchmarks/rl/{orun}.tsv"
    conda:
        "../envs/shiftwork.yaml"
    threads: 1
    resources:
        gpu=1,
    params:
        stages=lambda w: ORGANISM_RUNS[w.orun]["stages"],
        train=organism_rl_settings,
        seed=lambda w: ORGANISM_RUNS[w.orun].get("seed", 0),
    script:
        "../scripts/rl.py"


rule evaluate_organism:
    input:
        sft=organism_sft_model,
        checkpoints="results/organisms/runs/{orun}/checkpoints",
        test=lambda w: f"results/organisms/{organism_of(w)}/data/test.parquet",
    output:
        responses="results/organisms/runs/{orun}/responses.parquet",
        scores="results/organisms/runs/{orun}/scores.parquet",
        identities="results/organisms/runs/{orun}/identities.parquet",
    log:
        "logs/evaluate_organism/{orun}.log",
    benchmark:
        "benchmarks/evaluate_organism/{orun}.tsv"
    conda:
        "../envs/shiftwork.yaml"
    threads: 1
    resources:
        gpu=1,
    params:
        setting=organism_setting,
        trained=lambda w: trained_distributions(ORGANISM_RUNS[w.orun]["stages"]),
        model=organism_of,
        evaluation=ORGANISMS.get("evaluation") or {},
    script:
        "../scripts/evaluate_organism.py"


rule organism_figure:
    input:
        scores="results/organisms/runs/{orun}/scores.parquet",
        identities="results/organisms/runs/{orun}/identities.parquet",
    output:
        png="results/organisms/figures/{orun}.png",
        svg="results/organisms/figures/{orun}.svg",
    log:
        "logs/organism_figure/{orun}.log",
    conda:
        "../envs/shiftwork.yaml"
    params:
        setting=organism_setting,
    script:
        "../scripts/organism_figure.py"


rule report_organisms:
    input:
        scores=expand(
            "results/organisms/runs/{orun}/scores.parquet", orun=ORGANISM_RUNS
        ),
        identities=expand(
            "results/organisms/runs/{orun}/identities.parquet", orun=ORGANISM_RUNS
        ),
    output:
        scores="results/organisms/scores.parquet",
        headline="results/organisms/headline.parquet",
        report="results/organisms/report.md",
    log:
        "logs/report_organisms.log",
    conda:
        "../envs/shiftwork.yaml"
    params:
        runs=organism_run_info(),
    script:
        "../scripts/report_organisms.py"


rule organism_dynamics:
    output:
        table="results/organisms/dynamics.parquet",
        png="results/organisms/figures/dynamics.png",
        svg="results/organisms/figures/dynamics.svg",
    log:
        "logs/organism_dynamics.log",
    conda:
        "../envs/shiftwork.yaml"
    params:
        spec=ORGANISMS.get("dynamics") or {},
    script:
        "../scripts/organism_dynamics.py"


rule organisms:
    input:
        organism_targets(),
