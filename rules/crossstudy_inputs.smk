# The cross-study's settings and input functions; rules/crossstudy.smk includes this file first.
from shiftwork.crossstudy.select import (
    chunk_name,
    chunk_steps,
    evenly_spaced,
    every_kth,
    job_chunks,
    steps_on_disk,
)
from shiftwork.schema import with_defaults

# without a crossstudy section: no runs, every setting at its default
CROSS = config.get("crossstudy") or with_defaults({"crossstudy": {}})["crossstudy"]
# each cross-study run and its study (trajectory or organisms)
CROSS_RUNS = {
    run: study for study in ("trajectory", "organisms") for run in CROSS[study]["runs"]
}


def cross_study(wildcards):
    return CROSS_RUNS[wildcards.run]


def cross_prompt_source(wildcards):
    """The suite of a trajectory run, the held-out test table of an organisms run."""
    if CROSS_RUNS[wildcards.run] == "trajectory":
        return f"{OUT}/trajectory/suites/{RUNS[wildcards.run]['suite']}.parquet"
    organism = ORGANISM_RUNS[wildcards.run]["organism"]
    return f"{OUT}/organisms/{organism}/data/test.parquet"


def cross_n_prompts(wildcards):
    return CROSS[CROSS_RUNS[wildcards.run]]["n_prompts"]


def cross_pattern(wildcards):
    if CROSS_RUNS[wildcards.run] == "trajectory":
        return TRAJECTORY["suites"][RUNS[wildcards.run]["suite"]]["pattern"]
    return None


def cross_variants(wildcards):
    """The stability study's variants at the cross-study's register strengths, without structural
    rewrites (no rewriter model here); an organisms run's casing noise at the levels of
    crossstudy.template_casing (its variants that keep the trained template)."""
    register = {
        **STABILITY["variants"]["register"],
        "strengths": CROSS["register_strengths"],
    }
    noise = STABILITY["variants"]["noise"]
    if CROSS_RUNS[wildcards.run] == "organisms":
        noise = {**noise, "casing": CROSS["template_casing"]}
    return {
        **STABILITY["variants"],
        "register": register,
        "noise": noise,
        "structural": {"enabled": False},
    }


def cross_base(wildcards):
    """What a run's checkpoints load onto: the prepared model a trajectory run fine-tunes, the
    SFT organism an RL run starts from."""
    if CROSS_RUNS[wildcards.run] == "trajectory":
        return prepared(RUNS[wildcards.run]["model"])
    return organism_sft_model(wildcards)


def cross_checkpoints(wildcards):
    study = CROSS_RUNS[wildcards.run]
    return f"{OUT}/{study}/runs/{wildcards.run}/checkpoints"


def cross_score_settings(wildcards):
    """How a run's checkpoints answer: the verbaliser word of the run's suite (trajectory) or a
    greedy response as long as the organisms evaluation's (organisms)."""
    if CROSS_RUNS[wildcards.run] == "trajectory":
        suite = TRAJECTORY["suites"][RUNS[wildcards.run]["suite"]]
        answer = {
            "mode": "verbaliser",
            "verbalisers": suite["verbalisers"],
            "dtype": TRAJECTORY["eval_dtype"],
        }
    else:
        answer = {
            "mode": "generate",
            "max_new_tokens": ORGANISMS["evaluation"]["max_new_tokens"],
            "dtype": ORGANISMS["evaluation"]["dtype"],
            "setting": organism_setting(wildcards),
        }
    return answer | {
        "batch_size": CROSS["batch_size"],
        "bleu": STABILITY["axes"]["bleu"],
    }


def cross_answers(run):
    """The words a run's checkpoints answer with: the verbalisers of a trajectory run's suite
    (its replies are labels); none for an organisms run, whose replies are free-form."""
    if CROSS_RUNS[run] != "trajectory":
        return []
    return [
        word.strip()
        for word in TRAJECTORY["suites"][RUNS[run]["suite"]]["verbalisers"].values()
    ]


def cross_steps(run):
    """The checkpoint steps of ``run`` the cross-study scores: every k-th (step 0 always). An
    organisms run's steps are known once its RL job has run (rule train_rl is a checkpoint).
    """
    study = CROSS_RUNS[run]
    if study == "trajectory":
        steps = run_steps(RUNS[run])
    else:
        done = checkpoints.train_rl.get(run=run).output.checkpoints
        steps = steps_on_disk(done)
    return every_kth(steps, CROSS[study]["every"])


def cross_chunks(run):
    """The scored steps of ``run`` in the chunks one job each scores
    (crossstudy.checkpoints_per_job)."""
    return job_chunks(cross_steps(run), CROSS["checkpoints_per_job"])


def cross_chunk_steps(wildcards):
    return chunk_steps(cross_chunks(wildcards.run), wildcards.chunk)


def cross_outputs(kind, prefix="crossstudy"):
    """The input function of one kind of scoring table (deltas, generations) of every chunk of
    scored checkpoints, under ``prefix`` (a precision's folder for the precision comparison).
    """

    def paths(wildcards):
        return [
            f"{OUT}/{prefix}/{kind}/{run}/steps-{chunk_name(chunk)}.parquet"
            for run in CROSS_RUNS
            for chunk in cross_chunks(run)
        ]

    return paths


def cross_precision_inputs(wildcards):
    """Both precisions' deltas and generations of every scored checkpoint, and the trajectory
    study's tables the pairs read."""
    inputs = {}
    for dtype in ("float32", "bfloat16"):
        for kind in ("deltas", "generations"):
            paths = cross_outputs(kind, f"crossstudy/precision/{dtype}")
            inputs[f"{kind}_{dtype}"] = paths(wildcards)
    if any(s == "trajectory" for s in CROSS_RUNS.values()):
        inputs["scores"] = res("trajectory/scores.parquet")
        inputs["item_table"] = res("trajectory/items.parquet")
    return inputs


def cross_analysis_inputs(wildcards):
    inputs = {
        "per_prompt": res("crossstudy/per_prompt.parquet"),
        "sgs": res("crossstudy/sgs.parquet"),
        "changes": res("crossstudy/changes.parquet"),
        "behaviour": res("crossstudy/behaviour.parquet"),
        "template_sgs": res("crossstudy/template/sgs.parquet"),
        "template_changes": res("crossstudy/template/changes.parquet"),
        "template_behaviour": res("crossstudy/template/behaviour.parquet"),
    }
    if any(s == "trajectory" for s in CROSS_RUNS.values()):
        inputs["scores"] = res("trajectory/scores.parquet")
        inputs["item_table"] = res("trajectory/items.parquet")
    for run, study in CROSS_RUNS.items():
        if study == "organisms":
            inputs[f"scores_{run}"] = res(f"organisms/runs/{run}/scores.parquet")
            inputs[f"identities_{run}"] = res(
                f"organisms/runs/{run}/identities.parquet"
            )
    return inputs


def cross_organisms(wildcards, input):
    """Per organisms run: its evaluation tables and the names of the policies that answer the
    distributions it was trained on."""
    from shiftwork.organisms.report import trained_policies
    from shiftwork.organisms.settings import load_setting

    out = {}
    for run, study in CROSS_RUNS.items():
        if study == "organisms":
            spec = ORGANISM_RUNS[run]
            setting = load_setting(ORGANISM_SFT[spec["organism"]]["setting"])
            trained = trained_distributions(spec["stages"])
            out[run] = {
                "scores": input[f"scores_{run}"],
                "identities": input[f"identities_{run}"],
                "trained": trained_policies(setting, trained),
            }
    return out


def cross_figures():
    return {
        run: (
            res(f"crossstudy/figures/{run}.png"),
            res(f"crossstudy/figures/{run}.svg"),
        )
        for run in CROSS_RUNS
    }


# the free-form probe: the trajectory runs' checkpoints on the stability study's own prompts
FREEFORM = CROSS["freeform"]
FREEFORM_RUNS = (
    [run for run, study in CROSS_RUNS.items() if study == "trajectory"]
    if FREEFORM["enabled"]
    else []
)


def freeform_steps(run):
    """The checkpoint steps of trajectory run ``run`` the free-form probe reads, evenly spaced."""
    return evenly_spaced(run_steps(RUNS[run]), FREEFORM["checkpoints"])


def freeform_outputs(kind):
    """The input function of one kind of the probe's per-checkpoint tables (deltas, generations)."""

    def paths(wildcards):
        return [
            f"{OUT}/crossstudy/freeform/{kind}/{run}/step-{step}.parquet"
            for run in FREEFORM_RUNS
            for step in freeform_steps(run)
        ]

    return paths


def freeform_filtered(wildcards):
    """The stability study's gated variants of each of its prompt sets."""
    return [res(f"stability/filtered/{name}.parquet") for name in STABILITY["datasets"]]


def freeform_settings(wildcards):
    """How a trajectory checkpoint answers the probe: as the stability study asks the run's model
    (chat template or plain format), in the precision its NLI prompts are scored in, with the
    stability study's reply length and axis definitions."""
    model = config["models"][RUNS[wildcards.run]["model"]]
    axes = STABILITY["axes"]
    return {
        "batch_size": CROSS["batch_size"],
        "dtype": TRAJECTORY["eval_dtype"],
        "max_new_tokens": FREEFORM["max_new_tokens"]
        or STABILITY["generation"]["max_new_tokens"],
        "plain_format": model["plain_format"],
        "axes": {
            key: axes[key]
            for key in (
                "bleu",
                "bert_scale",
                "noise_detector",
                "length_mirroring",
                "empty_baseline",
                "act_layers",
            )
        },
        "structural_baseline": STRUCTURAL["baseline"],
        "length_anchor": STRUCTURAL["length_anchor"],
    }


def freeform_report_inputs():
    """The probe's tables the findings read; none when the probe is off or has no run."""
    if not FREEFORM_RUNS:
        return {}
    return {
        f"freeform_{name}": res(f"crossstudy/freeform/{name}.parquet")
        for name in ("sgs", "changes", "change_null", "replies")
    }


def crossstudy_targets():
    """The findings and figures; nothing without runs (config section crossstudy)."""
    if not CROSS_RUNS:
        return []
    targets = [res("crossstudy/findings.md")]
    targets += [path for pair in cross_figures().values() for path in pair]
    return targets
