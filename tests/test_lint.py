"""The workflow is formatted, lint-clean, and both shipped configs give a DAG."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.workflow
def test_snakefmt_check():
    proc = run(str(BIN / "snakefmt"), "--check", "Snakefile", "rules")
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]])
def test_ruff_is_clean(args):
    proc = run(str(BIN / "ruff"), *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_pre_commit_hooks_pass():
    """Every hook of .pre-commit-config.yaml on every tracked file (the hooks run from this
    environment, so the environment's bin directory goes first on PATH)."""
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    proc = subprocess.run(
        [str(BIN / "pre-commit"), "run", "--all-files", "--show-diff-on-failure"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


@pytest.mark.workflow
def test_snakemake_lint_is_clean():
    proc = run(sys.executable, "-m", "snakemake", "--lint")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Congratulations, your workflow is in a good condition!" in out


@pytest.mark.workflow
@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--configfile", "config/paper.yaml"],
        ["trajectory"],
        ["organisms", "--configfile", "config/organisms-smollm2.yaml"],
        ["organisms", "--configfile", "config/organisms-coverage.yaml"],
        ["--configfile", "config/smoke.yaml"],
        # every study in rule all: the HTML report then lists each study's tables, each of
        # which needs its entry in report/catalogue.yaml
        ["--config", "studies=[stability,trajectory,organisms,crossstudy]"],
    ],
)
def test_dry_runs(args):
    proc = run(sys.executable, "-m", "snakemake", "-n", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.workflow
def test_smollm2_organism_plans_only_its_own_runs():
    """config/organisms-smollm2.yaml replaces the default config: its target trains the SmolLM2
    organism and its two runs, not the default's scratch organism."""
    args = ["-n", "--forceall", "organisms", "--configfile", "config/organisms-smollm2.yaml"]
    proc = run(sys.executable, "-m", "snakemake", *args)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-2000:]
    import re

    organisms = set(re.findall(r"wildcards: organism=([\w.-]+)", out))
    runs = set(re.findall(r"wildcards: run=([\w.-]+)", out))
    assert organisms == {"smollm2-two-policy"}, organisms
    assert runs == {"smollm2-two-policy-rl-A", "smollm2-two-policy-rl-B"}, runs


def planned_paths(*args: str) -> set[str]:
    """Every output, log and benchmark path of every job a forced dry run plans."""
    import re

    proc = run(sys.executable, "-m", "snakemake", "-n", "--forceall", *args)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-2000:]
    paths = set()
    for field in re.findall(r"^\s+(?:output|log|benchmark): (.+)$", out, re.M):
        paths.update(p.strip() for p in field.split(","))
    return paths


@pytest.mark.workflow
def test_default_and_paper_configs_write_to_their_own_folders():
    """The default run and the paper config plan every output, log and benchmark in a folder of
    their own name; only prepared models (results/models) are shared, as they depend only on
    their source."""
    default = planned_paths("all", "trajectory", "organisms")
    paper = planned_paths("--configfile", "config/paper.yaml")
    own = {"default": default, "paper": paper}
    for name, paths in own.items():
        outside = [
            p
            for p in paths
            if not p.startswith((f"results/{name}/", f"logs/{name}/", f"benchmarks/{name}/"))
            and not p.startswith(("results/models/", "logs/prepare_model/", "benchmarks/prepare_model/"))
        ]
        assert not outside, (name, sorted(outside)[:5])
        assert sum(p.startswith(f"results/{name}/") for p in paths) > 50
    shared = default & paper
    assert all(p.split("/")[1] in ("models", "prepare_model") for p in shared), sorted(shared)[:5]


@pytest.mark.workflow
def test_paper_gpu_jobs():
    proc = run(sys.executable, "-m", "snakemake", "-n", "--configfile", "config/paper.yaml")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-2000:]
    import re

    blocks = re.split(r"\n(?=\[\w{3} \w{3} )", out)
    counts = {}
    for block in blocks:
        lines = block.strip().splitlines()
        rule = next(
            (line.split()[-1].rstrip(":") for line in lines if line.startswith(("rule ", "localrule ", "checkpoint "))),
            None,
        )
        if rule in ("generate_responses", "finetune_model", "evaluate_checkpoint"):
            assert any("gpu=1" in line for line in lines), block
            counts[rule] = counts.get(rule, 0) + 1
    # 8 models x 6 datasets; 320 trajectory runs (8 models x 2 ID sets x 4 shot counts x 5 seeds),
    # 41 checkpoints each
    assert counts == {"generate_responses": 48, "finetune_model": 320, "evaluate_checkpoint": 320 * 41}


def test_every_rule_has_a_script_and_a_step_of_its_name():
    """rule X -> scripts/X.py -> X in a steps module of a study (``shiftwork.<study>.steps``, or
    ``shiftwork.<study>.<part>_steps`` where a study keeps some steps apart), found by grep from
    the rule name; each step name is defined once."""
    import ast
    import re

    rules_dir = ROOT / "rules"
    rule_re = re.compile(r"^(?:rule|checkpoint) (\w+):", re.M)
    derived_re = re.compile(r"^use rule (\w+) as (\w+)", re.M)
    steps = {}
    for module in ["stability", "trajectory", "organisms", "crossstudy", "models", "reports"]:
        for path in sorted((ROOT / "shiftwork" / module).glob("*steps.py")):
            tree = ast.parse(path.read_text())
            for node in tree.body:
                if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                    assert node.name not in steps, f"step {node.name} defined twice"
                    steps[node.name] = f"{module}.{path.stem}"
    checked = 0
    for smk in sorted(rules_dir.glob("*.smk")):
        text = smk.read_text()
        for block in re.split(r"\n(?=(?:rule|checkpoint) \w+:)", text):
            m = rule_re.match(block.lstrip("\n"))
            if not m or "script:" not in block:
                continue  # target rules (all, trajectory, organisms) run nothing
            name = m.group(1)
            script = re.search(r'script:\s*"\.\./scripts/(\w+)\.py"', block).group(1)
            assert script == name, f"rule {name} runs scripts/{script}.py"
            source = (ROOT / "scripts" / f"{name}.py").read_text()
            assert name in steps, f"no function {name} in any steps module of shiftwork.<study>"
            assert f"from shiftwork.{steps[name]} import {name}" in source, f"scripts/{name}.py"
            checked += 1
        for parent, child in derived_re.findall(text):
            assert child.startswith(parent.split("_")[0]), (parent, child)
    assert checked >= 25
