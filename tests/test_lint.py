"""The workflow is formatted, lint-clean, and both shipped configs give a DAG."""

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


@pytest.mark.workflow
def test_snakemake_lint_is_clean():
    proc = run(sys.executable, "-m", "snakemake", "--lint")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Congratulations, your workflow is in a good condition!" in out


@pytest.mark.workflow
@pytest.mark.parametrize("args", [[], ["--configfile", "config/paper.yaml"], ["trajectory"]])
def test_dry_runs(args):
    proc = run(sys.executable, "-m", "snakemake", "-n", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr


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
        rule = next((l.split()[-1].rstrip(":") for l in lines if l.startswith(("rule ", "localrule "))), None)
        if rule in ("generate", "finetune", "evaluate"):
            assert any("gpu=1" in l for l in lines), block
            counts[rule] = counts.get(rule, 0) + 1
    # 8 models x 6 datasets; 6 trajectory runs, 13 checkpoints each
    assert counts == {"generate": 48, "finetune": 6, "evaluate": 78}
