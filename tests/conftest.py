import os
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture()
def default_config() -> dict:
    with open(ROOT / "config" / "config.yaml") as fh:
        return yaml.safe_load(fh)


@pytest.fixture(scope="session")
def prepared_smollm(tmp_path_factory) -> Path:
    """SmolLM2-135M-Instruct prepared once per test session (about 30 s on 2 CPU cores)."""
    from shiftwork.models.prepare import prepare_model

    with open(ROOT / "config" / "config.yaml") as fh:
        spec = yaml.safe_load(fh)["models"]["smollm2-135m-instruct"]
    out = tmp_path_factory.mktemp("models") / "smollm2-135m-instruct"
    prepare_model("smollm2-135m-instruct", spec, out)
    return out
