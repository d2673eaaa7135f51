# The organisms study's settings and input functions (Snakemake's lint keeps functions out of
# rule files); rules/organisms.smk includes this file first.
from shiftwork.organisms.config import organism_runs
from shiftwork.organisms.resources import rule_resources
from shiftwork.organisms.settings import load_setting
from shiftwork.organisms.steps import trained_distributions
from shiftwork.schema import empty_section, overridden

ORGANISMS = config.get("organisms") or empty_section("organisms")
ORGANISM_SFT = ORGANISMS["sft"]
# runs that list seeds stand for one run per seed, <run>-s<seed>
ORGANISM_RUNS = organism_runs(ORGANISMS)


wildcard_constraints:
    organism="|".join(map(re.escape, ORGANISM_SFT)) or "no-organism",


def organism_spec(wildcards):
    """What the organism's data is made from: its SFT entry without policy_fidelity, which only RL
    reads (so that setting it reruns no data or SFT job)."""
    return {
        k: v
        for k, v in ORGANISM_SFT[wildcards.organism].items()
        if k != "policy_fidelity"
    }


def organism_sft_settings(wildcards):
    return ORGANISM_SFT[wildcards.organism]["train"]


def organism_seed(wildcards):
    return ORGANISM_SFT[wildcards.organism]["seed"]


def organism_questions(wildcards):
    return f"{OUT}/organisms/{organism_of(wildcards)}/data/questions.parquet"


def organism_test_prompts(wildcards):
    return f"{OUT}/organisms/{organism_of(wildcards)}/data/test.parquet"


def organism_run_stages(wildcards):
    return ORGANISM_RUNS[wildcards.run]["stages"]


def organism_run_n_prompts(wildcards):
    return organism_rl_settings(wildcards)["n_prompts"]


def organism_run_seed(wildcards):
    return ORGANISM_RUNS[wildcards.run]["seed"]


def organism_run_trained(wildcards):
    return trained_distributions(organism_run_stages(wildcards))


def organism_base_model(wildcards):
    spec = ORGANISM_SFT[wildcards.organism]
    if "start_from" in spec:
        return f"{OUT}/organisms/{spec['start_from']}/sft"
    return prepared(spec["model"])


def organism_of(wildcards):
    return ORGANISM_RUNS[wildcards.run]["organism"]


def organism_sft_model(wildcards):
    return sft_model_of(organism_of(wildcards))


def sft_model_of(organism):
    """The fine-tuned organism RL starts from: train_sft's output, or its given directory."""
    return ORGANISM_SFT[organism].get("path", f"{OUT}/organisms/{organism}/sft")


def organism_sft_model_of_organism(wildcards):
    return sft_model_of(wildcards.organism)


def organism_own_setting(wildcards):
    return ORGANISM_SFT[wildcards.organism]["setting"]


def fidelity_table_of(organism):
    """Where rule sft_fidelity writes the organism's policy fidelity table."""
    return f"{OUT}/organisms/{organism}/fidelity.parquet"


def organism_fidelity_table(wildcards):
    return fidelity_table_of(organism_of(wildcards))


def organism_fidelity_tables():
    """The policy fidelity table of every organism an RL run starts from."""
    organisms = sorted({spec["organism"] for spec in ORGANISM_RUNS.values()})
    return [fidelity_table_of(organism) for organism in organisms]


def organism_policy_fidelity(wildcards):
    """The least policy fidelity RL asks of the run's organism: organisms.sft.NAME.policy_fidelity
    where the organism sets it, else organisms.policy_fidelity."""
    sft = ORGANISM_SFT[organism_of(wildcards)]
    return (
        sft["policy_fidelity"]
        if "policy_fidelity" in sft
        else ORGANISMS["policy_fidelity"]
    )


def organism_checkpoint_origin(run):
    """Where a checkpoint of RL run ``run`` comes from (a model source of kind checkpoint): the
    checkpoints train_rl writes and the SFT organism RL started from."""
    return {
        "checkpoints": f"{OUT}/organisms/runs/{run}/checkpoints",
        "base": sft_model_of(ORGANISM_RUNS[run]["organism"]),
    }


def organism_evaluation(wildcards):
    return ORGANISMS["evaluation"]


def organism_dynamics(wildcards):
    return ORGANISMS["dynamics"]


def organism_setting(wildcards):
    return ORGANISM_SFT[organism_of(wildcards)]["setting"]


def organism_policy_names(wildcards):
    """The run's policies, which the reward reads under reward_format: template."""
    return load_setting(ORGANISM_SFT[organism_of(wildcards)]["setting"]).policy_names


def organism_rl_settings(wildcards):
    return overridden(ORGANISMS["rl"], ORGANISM_RUNS[wildcards.run]["train"])


def organism_run_info():
    return {
        run: {
            "setting": ORGANISM_SFT[spec["organism"]]["setting"],
            "trained": trained_distributions(spec["stages"]),
            "stages": spec["stages"],
            "base": spec["base"],
            "seed": spec["seed"],
            "beta": float(overridden(ORGANISMS["rl"], spec["train"])["beta"]),
        }
        for run, spec in ORGANISM_RUNS.items()
    }


def organism_headline():
    return ORGANISMS["headline"]


def organism_targets():
    targets = [res("organisms/report.md"), res("organisms/headline.parquet")]
    targets += expand(res("organisms/figures/{run}.png"), run=ORGANISM_RUNS)
    if "dynamics" in ORGANISMS:
        targets.append(res("organisms/figures/dynamics.png"))
    return targets
