# The trajectory study's settings and input functions (Snakemake's lint keeps functions out of
# rule files); rules/trajectory.smk includes this file first.
from shiftwork.schema import empty_section
from shiftwork.trajectory.config import run_steps, trajectory_runs
from shiftwork.trajectory.sections import AnalysisSettings, CalibrationSettings

TRAJECTORY = config.get("trajectory") or empty_section("trajectory")
# what analyse_trajectory reads of trajectory.analysis (not its windows, which plot_trajectory reads)
ANALYSIS_SETTINGS = AnalysisSettings.read_keys(TRAJECTORY["analysis"])
CALIBRATION_SETTINGS = CalibrationSettings.read_keys(
    TRAJECTORY["analysis"]["calibration"]
)
# the explicit runs and those of trajectory.grid, each with model, suite, shots and seed
RUNS = trajectory_runs(TRAJECTORY)


wildcard_constraints:
    suite="|".join(map(re.escape, TRAJECTORY["suites"])) or "no-suite",


def suite_spec(wildcards):
    return TRAJECTORY["suites"][wildcards.suite]


def suite_files(wildcards):
    """The local files a suite's labelled sets are read from (edits rerun the suite)."""
    spec = suite_spec(wildcards)
    if spec["kind"] != "datasets":
        return []
    sets = [spec["id_train"], spec["id_test"], *spec["ood"].values()]
    return sorted({s["source"]["path"] for s in sets if s["source"]["kind"] == "file"})


def run_suite(wildcards):
    return f"{OUT}/trajectory/suites/{RUNS[wildcards.run]['suite']}.parquet"


def run_model_name(wildcards):
    return RUNS[wildcards.run]["model"]


def run_model(wildcards):
    return prepared(RUNS[wildcards.run]["model"])


def run_finetune_settings(wildcards):
    return RUNS[wildcards.run]["finetune"]


def run_seed(wildcards):
    return RUNS[wildcards.run]["seed"]


def run_pattern(wildcards):
    return TRAJECTORY["suites"][RUNS[wildcards.run]["suite"]]["pattern"]


def run_verbalisers(wildcards):
    return TRAJECTORY["suites"][RUNS[wildcards.run]["suite"]]["verbalisers"]


def run_groups():
    """What collect_scores adds to each run's rows: suite, shots and seed."""
    return {
        run: {key: spec[key] for key in ("suite", "shots", "seed")}
        for run, spec in RUNS.items()
    }


def evaluate_inputs(wildcards):
    inputs = {"suite": run_suite(wildcards), "model": run_model(wildcards)}
    if "finetune" in RUNS[wildcards.run]:
        inputs["checkpoints"] = f"{OUT}/trajectory/runs/{wildcards.run}/checkpoints"
    return inputs


def checkpoint_spec(wildcards):
    run = RUNS[wildcards.run]
    if "finetune" in run:
        return {
            "path": f"{OUT}/trajectory/runs/{wildcards.run}/checkpoints/checkpoint-{wildcards.step}"
        }
    for ck in run["checkpoints"]:
        if int(ck["step"]) == int(wildcards.step):
            return ck
    raise ValueError(
        f"run '{wildcards.run}' has no checkpoint at step {wildcards.step}"
    )


def trajectory_checkpoint_origin(run, step):
    """Where checkpoint ``step`` of trajectory run ``run`` comes from (a model source of kind
    checkpoint): the checkpoints finetune_model writes, or the run's listed checkpoint of that
    step, and the prepared model the run fine-tunes."""
    spec = RUNS[run]
    origin = {"base": prepared(spec["model"])}
    if "finetune" in spec:
        origin["checkpoints"] = f"{OUT}/trajectory/runs/{run}/checkpoints"
    else:
        origin["checkpoint"] = next(
            ck for ck in spec["checkpoints"] if int(ck["step"]) == int(step)
        )
    return origin


def all_predictions(wildcards):
    return [
        f"{OUT}/trajectory/eval/{run}/step-{step}.parquet"
        for run, spec in RUNS.items()
        for step in run_steps(spec)
    ]


def trajectory_figures():
    names = [f"partial_{run}" for run in RUNS] + ["curves"]
    return [
        f"{OUT}/trajectory/figures/{n}.{ext}" for n in names for ext in ("png", "svg")
    ]


def window_outputs():
    """The early/late window table, when config trajectory.analysis.windows asks for it."""
    if TRAJECTORY["analysis"]["windows"]:
        return {"windows": res("trajectory/windows.parquet")}
    return {}


def trajectory_plots():
    """The figures of rule plot_trajectory."""
    names = [f"scatter_{run}" for run in RUNS] + ["raw_vs_partial", "fingerprint"]
    if TRAJECTORY["analysis"]["windows"]:
        names.append("windows")
    return [
        f"{OUT}/trajectory/figures/{n}.{ext}" for n in names for ext in ("png", "svg")
    ]


def trajectory_targets():
    return [
        res("trajectory/report.md"),
        res("trajectory/summary.parquet"),
        res("trajectory/figures.md"),
        res("trajectory/replication.md"),
    ]
