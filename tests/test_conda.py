"""`--sdm conda` end to end, with a stand-in for the conda command (none is installed here).

Snakemake creates the rule's environment from envs/shiftwork.yaml, runs
envs/shiftwork.post-deploy.sh inside it (which installs shiftwork and the offline models'
packages there), and runs a rule's script in it. The stand-in makes the environment a venv
whose only view of the lock's packages is a plain path entry, which does not see the editable
install of `make setup`; so the environment's python imports shiftwork only if the post-deploy
script installed it."""

import json
import os
import site
import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml
from test_workflow import PROMPTS, ROOT, snakemake_cmd, tiny_config

FAKE_CONDA = """#!/usr/bin/env bash
set -euo pipefail
case "$1 ${2:-}" in
  "info --json") printf '{"conda_prefix": "%s", "platform": "linux-64", "conda_version": "24.11.3"}\\n' "$ROOT";;
  "--version ") echo "conda 24.11.3";;
  "config --get") echo '{"get": {"channel_priority": "strict"}}';;
  "env create")
    prefix=$(echo "$@" | sed -E 's/.*--prefix "?([^" ]+)"?.*/\\1/')
    "$BASE_PYTHON" -m venv "$prefix"
    # the environment file asks for setuptools>=70.1; the lock path below provides one
    "$prefix/bin/python" -m pip uninstall --quiet --yes setuptools
    echo "$DEPS" > "$prefix/lib/python3.11/site-packages/lock-packages.pth";;
  "clean -y") ;;
  *) echo "fake conda: unsupported: $*" >&2; exit 2;;
esac
"""


def fake_conda(where: Path) -> dict:
    """A conda command on PATH and the activate script Snakemake sources from its prefix."""
    (where / "bin").mkdir(parents=True)
    conda = where / "bin" / "conda"
    conda.write_text(FAKE_CONDA)
    conda.chmod(0o755)
    (where / "bin" / "activate").write_text('. "$1/bin/activate"\n')
    deps = next(p for p in site.getsitepackages() if p.endswith("site-packages"))
    return {
        **os.environ,
        "PATH": f"{where / 'bin'}:{os.environ['PATH']}",
        "ROOT": str(where),
        "BASE_PYTHON": sys._base_executable,
        "DEPS": deps,
        "SHIFTWORK_ROOT": str(ROOT),
        "HF_HUB_OFFLINE": "1",
    }


def test_conda_environment_installs_the_package_for_the_scripts(tmp_path):
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    work = tmp_path / "work"
    (work / "config").mkdir(parents=True)
    (work / "config" / "config.yaml").write_text(yaml.safe_dump(tiny_config(data)))
    env = fake_conda(tmp_path / "conda")
    envs = tmp_path / "envs"
    target = "results/default/stability/prompts/tiny.parquet"

    def run(*args: str) -> subprocess.CompletedProcess:
        cmd = snakemake_cmd(work, "--sdm", "conda", "--conda-prefix", str(envs), *args, target)
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)

    dry = run("-n")
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "sample_prompts" in dry.stdout + dry.stderr

    proc = run()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Running post-deploy script" in proc.stderr
    assert pd.read_parquet(work / target)["prompt_id"].tolist() == ["w1", "w2", "w3"]

    (prefix,) = [p for p in envs.iterdir() if p.is_dir()]
    where = subprocess.run(
        [prefix / "bin" / "python", "-c", "import shiftwork; print(shiftwork.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    assert Path(where.stdout.strip()) == ROOT / "shiftwork" / "__init__.py"
    # the install is the environment's own (the post-deploy script's), not the lock path's
    assert list((prefix / "lib" / "python3.11" / "site-packages").glob("__editable__*shiftwork*"))


def test_post_deploy_refuses_a_directory_that_is_not_the_checkout(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "SHIFTWORK_ROOT"}
    proc = subprocess.run(
        ["bash", str(ROOT / "envs" / "shiftwork.post-deploy.sh")], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert f"'{tmp_path}' is not a shiftwork checkout; set SHIFTWORK_ROOT" in proc.stderr
