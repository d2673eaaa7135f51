import os
from pathlib import Path

import pytest
import tiers
import yaml

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def pytest_addoption(parser):
    parser.addoption(
        "--stage",
        choices=tiers.STAGES,
        help="run only the tests of one stage (tests/tiers.py): " + ", ".join(tiers.STAGES),
    )


def pytest_collection_modifyitems(config, items):
    """Mark each test by what its code does (tests/tiers.py), then keep one stage if asked."""
    wanted = config.getoption("--stage")
    keep, drop = [], []
    for item in items:
        have = {m.name for m in item.iter_markers()}
        found = tiers.markers_for(item)
        for name in sorted(found - have):
            item.add_marker(name)
        item.stash[STAGE] = tiers.stage(have | found)
        (keep if wanted in (None, item.stash[STAGE]) else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


STAGE = pytest.StashKey[str]()


@pytest.fixture(autouse=True)
def _unit_stage_guard(request, monkeypatch):
    """A unit-stage test that starts Snakemake or loads a packaged model fails, naming its marker."""
    if request.node.stash.get(STAGE, "unit") == "unit":
        tiers.guard(monkeypatch, request.node.nodeid)
    yield


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
    from shiftwork.models.prepare import prepare_folder

    with open(ROOT / "config" / "config.yaml") as fh:
        spec = yaml.safe_load(fh)["models"]["smollm2-135m-instruct"]
    out = tmp_path_factory.mktemp("models") / "smollm2-135m-instruct"
    prepare_folder("smollm2-135m-instruct", spec, out)
    return out
