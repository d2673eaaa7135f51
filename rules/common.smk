# What every study needs: the config check, the shared wildcards, prepared models, the
# targets of `rule all`, and the checks made before any job. Each study's own constants and
# input functions are at the top of its rule file.
import os
import re
import sys

from snakemake.logging import logger

# Snakemake puts the Snakefile's directory, the checkout, on sys.path and hands its sys.path
# to every script, so rules and scripts import this checkout's shiftwork without edits.
from shiftwork.config import check_config, require_api_keys, results_name
from shiftwork.integrity import (
    check_outputs,
    clear_stale_locks,
    job_record,
    missing_intermediate_warnings,
    output_tables,
    refuse_orphaned_jobs,
)
from shiftwork.models.checkpoint_source import is_checkpoint, with_origin
from shiftwork.models.prepare import INFO_FILE, preparation, prepared_dir
from shiftwork.organisms.config import organism_runs
from shiftwork.staleness import (
    check_staleness,
    forced_by_command_line,
    not_forced,
    rule_params_digest,
    stale_tables,
)
from shiftwork.stopping import (
    SigtermNote,
    stop_message,
    stop_status,
    unfinished_labels,
)
from shiftwork.tables import hand_configfiles_to_jobs
from shiftwork.trajectory.config import trajectory_runs

# The check names every offending key and returns the config with the schema's defaults
# filled in, the one place each default is stated (rules and package functions read every key
# directly).
# API keys are checked when a run starts (Snakefile: onstart), so that a dry run plans without them.
config.update(check_config(config, root=".", check_keys=False))

# Each config writes into folders of its own name (config key `name`; see results_name), so the
# default run, config/paper.yaml and a user's config never overwrite each other. Prepared
# models (results/models) and caches (results/cache) are shared: they depend only on their
# source.
NAME = results_name(config, workflow.overwrite_configfiles or ())
config["name"] = NAME
OUT = f"results/{NAME}"


def res(path):
    """``path`` in this config's results folder."""
    return f"{OUT}/{path}"


def logs(path):
    """``path`` in this config's log folder."""
    return f"logs/{NAME}/{path}"


def bench(path):
    """``path`` in this config's benchmark folder."""
    return f"benchmarks/{NAME}/{path}"


# Executors of jobs on SLURM's nodes: the main process's (profiles/slurm) and each job's own.
SLURM_EXECUTORS = ("slurm", "slurm-jobstep")


def gpu_env(wildcards):
    """The conda environment (--sdm conda) of the GPU rules (`gpu=1`): vllm and torch built for
    CUDA when Snakemake sends the jobs to SLURM, the CPU build otherwise. A dry run and
    --conda-create-envs-only have no executor: the run itself creates the CUDA environment.
    """
    executor = workflow.executor_plugin
    if executor is not None and executor.name in SLURM_EXECUTORS:
        return "../envs/shiftwork-cuda.yaml"
    return "../envs/shiftwork.yaml"


def run_names():
    """Runs of the trajectory and organisms studies (one wildcard, `run`, in both)."""
    names = (
        list(trajectory_runs(config["trajectory"])) if "trajectory" in config else []
    )
    names += list(organism_runs(config["organisms"])) if "organisms" in config else []
    return "|".join(map(re.escape, names)) or "no-run"


wildcard_constraints:
    model="|".join(map(re.escape, config["models"])),
    run=run_names(),
    step=r"\d+",


def prepared(name):
    """The record of a prepared model (rule prepare_model); its directory holds the weights."""
    return str(prepared_dir(name, model_spec(name)) / INFO_FILE)


def model_spec(name):
    """Model ``name``'s registry entry; a checkpoint source (kind ``checkpoint``) completed
    with this config's name, the run's checkpoints and the model the run trained from, all of
    which its prepared folder depends on."""
    spec = config["models"][name]
    if not is_checkpoint(spec["source"]):
        return spec
    source = spec["source"]
    return with_origin(spec, NAME, checkpoint_origin(source["run"], source["step"]))


def checkpoint_origin(run, step):
    """Where checkpoint ``step`` of training run ``run`` and the model the run trained from
    are: {checkpoints (or a listed checkpoint), base}, from the run's study."""
    if run in RUNS:
        return trajectory_checkpoint_origin(run, step)
    return organism_checkpoint_origin(run)


def model_inputs(wildcards):
    """What prepare_model reads: nothing for most sources; for a checkpoint source, the run's
    checkpoints and the model it trained from, so the run is planned before its checkpoint.
    """
    source = config["models"][wildcards.model]["source"]
    if not is_checkpoint(source):
        return {}
    origin = checkpoint_origin(source["run"], source["step"])
    return {key: origin[key] for key in ("checkpoints", "base") if key in origin}


def model_preparation(wildcards):
    """What prepare_model depends on (not batch size or dtype, which later jobs use)."""
    return preparation(model_spec(wildcards.model))


def all_targets():
    """The final outputs of the studies that config key `studies` lists."""
    targets = []
    if "stability" in config["studies"]:
        targets += stability_targets()
    if "trajectory" in config["studies"]:
        targets += trajectory_targets()
    if "organisms" in config["studies"]:
        targets += organism_targets()
    if "crossstudy" in config["studies"]:
        targets += crossstudy_targets()
    return targets


def producer_rule(path):
    """The rule whose output ``path`` is, or None."""
    return next((r.name for r in workflow.rules if r.is_producer(path)), None)


def check_before_run():
    refuse_orphaned_jobs()
    stale = clear_stale_locks()
    if stale:
        logger.warning(
            f"shiftwork: removed {len(stale)} Snakemake lock file(s) left by a run that was "
            "killed (no other run of this workflow is alive in this directory)"
        )
    # the commands that rebuild a table name the config files of this run, in its messages and
    # in its jobs' (which inherit the environment)
    configfiles = workflow.overwrite_configfiles or ()
    hand_configfiles_to_jobs(configfiles)
    check_outputs("results", producer_rule, tables=OUT, configfiles=configfiles)
    for warning in missing_intermediate_warnings(OUT, producer_rule, configfiles):
        logger.warning(f"shiftwork: {warning}")
    found = stale_tables(
        output_tables("results", OUT),
        lambda path, rule: rule_params_digest(workflow, path, rule),
        lambda path: bool(job_record(path)),
    )
    found = not_forced(found, *forced_by_command_line(sys.argv[1:]))
    for warning in check_staleness(found, configfiles):
        logger.warning(f"shiftwork: {warning}")


# SIGTERM to the main process (a scheduler's time limit, `kill PID`, a shutdown): Snakemake lets
# the running jobs finish and ends the run as if a job had failed. The run notes the signal and
# says what happened instead (shiftwork/stopping.py).
SIGTERM_NOTE = SigtermNote()


def note_sigterm():
    """Note SIGTERM from here on; called at the run's start, after Snakemake's scheduler set its
    own handler, which the note calls in turn."""
    if workflow.is_main_process:
        SIGTERM_NOTE.wrap_handler()


def report_stop(logfiles):
    """At the end of a run that did not succeed: after SIGTERM, say so and whether a job failed.
    When every job it started finished, end the run here with status 143, before Snakemake's
    "At least one job did not complete successfully.": each job's outputs were settled when it
    ended, and the exit passes through Snakemake's lock, which removes its lock files.
    """
    scheduler = workflow.scheduler
    unfinished = unfinished_labels(
        scheduler.failed, scheduler.running, scheduler.open_jobs
    )
    message = stop_message(SIGTERM_NOTE.pid, unfinished)
    if message is None:
        return
    logger.error(message)
    status = stop_status(SIGTERM_NOTE.pid, unfinished)
    if status is not None:
        if logfiles:
            logger.info(f"Complete log(s): {', '.join(map(os.path.abspath, logfiles))}")
        raise SystemExit(status)
