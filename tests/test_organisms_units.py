"""Organisms pieces added for the workflow: custom settings and their checks, the successor
question bank, the character tokenizer and scratch model, the config checks, checkpoint discovery
and the headline table."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from shiftwork.config import ConfigError, check_config
from shiftwork.organisms.questions import capacity, make_questions
from shiftwork.organisms.report import headline_table, trained_policies, trained_policy_share
from shiftwork.organisms.settings import Policy, Setting, load_setting
from shiftwork.organisms.steps import checkpoint_dirs, trained_distributions

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- settings


def test_custom_setting_from_spec():
    s = load_setting(
        {
            "kind": "custom",
            "distributions": ["A", "B", "C"],
            "policies": {"Ann": ["A", "C"], "Ben": ["B"]},
            "wrong": "shift",
        }
    )
    assert s.distributions == ["A", "B", "C"] and s.policy_names == ["Ann", "Ben"]
    assert [p.name for p in s.answering("C")] == ["Ann"]
    assert s.wrong == "shift"


def test_trigger_no_policy_covers_is_an_error():
    with pytest.raises(ValueError, match=r"no policy answers on distribution\(s\) \['C'\]"):
        load_setting({"kind": "custom", "distributions": ["A", "B", "C"], "policies": {"Ann": ["A"], "Ben": ["B"]}})
    with pytest.raises(ValueError, match=r"no policy answers on distribution\(s\) \['B'\]"):
        Setting("s", ["A", "B"], [Policy("Ann", frozenset({"A"}))])


def test_setting_without_policies_is_an_error():
    with pytest.raises(ValueError, match="policies must not be empty"):
        load_setting({"kind": "custom", "distributions": ["A"], "policies": {}})
    with pytest.raises(ValueError, match=r"missing the key\(s\) \['policies'\]"):
        load_setting({"kind": "custom", "distributions": ["A"]})


def test_trained_distributions_keep_first_seen_order():
    stages = [{"distributions": [2025], "steps": 3}, {"distributions": [2026, 2025], "steps": 2}]
    assert trained_distributions(stages) == ["2025", "2026"]


# ---------------------------------------------------------------- questions


def test_successor_questions():
    bank = make_questions(50, seed=1, kind="next")
    assert capacity("next") == 899
    for row in bank.itertuples():
        number = int(row.question.removeprefix("What comes after ").removesuffix("?"))
        assert 100 <= number <= 998 and int(row.answer) == number + 1
    assert bank["question"].is_unique
    assert make_questions(899, 0, "next")["answer"].astype(int).max() == 999


# ---------------------------------------------------------------- scratch model


def test_char_tokenizer_round_trip_and_ids():
    from shiftwork.models.scratch import ALPHABET, char_tokenizer

    tok = char_tokenizer()
    assert len(tok) == 4 + len(ALPHABET) == 100
    text = "Year: 2025\nWhat comes after 479?\nResponse: I am Cutoff2026. The answer is 480."
    ids = tok(text).input_ids
    assert ids[0] == tok.bos_token_id and len(ids) == len(text) + 1
    assert tok.decode(ids, skip_special_tokens=True) == text
    assert tok.convert_ids_to_tokens(tok("ab", add_special_tokens=False).input_ids) == ["a", "b"]


def test_scratch_model_is_seeded_and_checked(tmp_path):
    import torch

    from shiftwork.models.prepare import prepare_model
    from shiftwork.models.scratch import check_architecture, scratch_model

    a, _ = scratch_model({"hidden_size": 16, "layers": 1, "heads": 2, "seed": 3})
    b, _ = scratch_model({"hidden_size": 16, "layers": 1, "heads": 2, "seed": 3})
    c, _ = scratch_model({"hidden_size": 16, "layers": 1, "heads": 2, "seed": 4})
    pa, pb, pc = (dict(m.named_parameters())["model.layers.0.mlp.up_proj.weight"] for m in (a, b, c))
    assert torch.equal(pa, pb) and not torch.equal(pa, pc)
    assert pa.shape == (64, 16)  # intermediate defaults to 4 x hidden
    with pytest.raises(ValueError, match="not divisible"):
        check_architecture({"hidden_size": 10, "heads": 4})
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['width'\]"):
        check_architecture({"width": 3})
    info = prepare_model(
        "tiny",
        {"source": {"kind": "scratch", "hidden_size": 16, "layers": 1, "heads": 2}, "chat": False},
        tmp_path / "tiny",
    )
    assert info["n_parameters"] == sum(p.numel() for p in a.parameters())
    assert (tmp_path / "tiny" / "tokenizer.json").exists()
    with pytest.raises(ValueError, match="'architecture' must be one of"):
        check_architecture({"architecture": "rnn"})


def test_gpt2_scratch_model_generates_with_the_char_tokenizer():
    import torch

    from shiftwork.models.scratch import scratch_model

    model, tok = scratch_model(
        {"architecture": "gpt2", "hidden_size": 16, "layers": 1, "heads": 2, "max_positions": 64}
    )
    assert model.config.model_type == "gpt2" and model.config.n_positions == 64
    assert model.get_input_embeddings().weight.data_ptr() == model.get_output_embeddings().weight.data_ptr()
    enc = tok(["Distribution: A\nWhat comes after 479?\nResponse:"], return_tensors="pt")
    out = model.generate(**enc, max_new_tokens=5, do_sample=False, pad_token_id=tok.pad_token_id)
    assert enc["input_ids"].shape[1] < out.shape[1] <= enc["input_ids"].shape[1] + 5
    assert torch.equal(out[0, : enc["input_ids"].shape[1]], enc["input_ids"][0])


# ---------------------------------------------------------------- config checks


def _config() -> dict:
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def _problems(cfg: dict) -> str:
    with pytest.raises(ConfigError) as err:
        check_config(cfg, root=ROOT)
    return str(err.value)


def test_default_config_passes():
    check_config(_config(), root=ROOT)


def test_config_names_uncovered_trigger_and_empty_policies():
    cfg = _config()
    cfg["organisms"]["sft"]["two-policy"]["setting"] = {
        "kind": "custom",
        "distributions": ["A", "B"],
        "policies": {"Alice": ["A"]},
    }
    msg = _problems(cfg)
    assert "config key 'organisms.sft.two-policy.setting'" in msg and "['B']" in msg
    cfg["organisms"]["sft"]["two-policy"]["setting"]["policies"] = {}
    assert "policies must not be empty" in _problems(cfg)


def test_config_names_bad_stage_organism_and_model():
    cfg = _config()
    cfg["organisms"]["runs"]["two-policy-rl-A"]["stages"][0]["distributions"] = ["C"]
    assert "config key 'organisms.runs.two-policy-rl-A.stages.0.distributions': distribution 'C'" in _problems(cfg)
    cfg = _config()
    cfg["organisms"]["runs"]["two-policy-rl-A"]["organism"] = "two-polcy"
    msg = _problems(cfg)
    assert "unknown organism 'two-polcy'" in msg and "did you mean 'two-policy'" in msg
    cfg = _config()
    cfg["organisms"]["sft"]["two-policy"]["model"] = "nope"
    assert "config key 'organisms.sft.two-policy.model': unknown model 'nope'" in _problems(cfg)


def test_config_names_missing_sft_path():
    cfg = _config()
    cfg["organisms"]["sft"]["two-policy"]["path"] = "/nonexistent/sft-model"
    assert "config key 'organisms.sft.two-policy.path': /nonexistent/sft-model is not a model directory" in _problems(
        cfg
    )


def test_checkpoint_dirs(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        checkpoint_dirs(str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="no checkpoint-<step>"):
        checkpoint_dirs(str(tmp_path))
    for name in ["checkpoint-10", "checkpoint-2", "checkpoint-x", "other"]:
        (tmp_path / name).mkdir()
    assert [s for s, _ in checkpoint_dirs(str(tmp_path))] == [2, 10]


# ---------------------------------------------------------------- headline


def test_trained_policy_share_and_headline_by_hand():
    spec = {"kind": "two_policy"}
    assert trained_policies(load_setting(spec), ["A"]) == ["Alice"]
    identities = pd.DataFrame(
        {
            "run": "r",
            "step": [0, 0, 0, 0, 9, 9, 9],
            "distribution": ["A", "A", "B", "B", "A", "B", "B"],
            "identity": ["Alice", "Bob", "Alice", "Bob", "Alice", "Alice", "(none)"],
            "share": [0.4, 0.6, 0.5, 0.5, 1.0, 0.75, 0.25],
        }
    )
    share = trained_policy_share(identities, ["Alice"]).set_index(["step", "distribution"])["trained_policy_share"]
    assert share.to_dict() == {(0, "A"): 0.4, (0, "B"): 0.5, (9, "A"): 1.0, (9, "B"): 0.75}
    scores = pd.DataFrame(
        {
            "model": "m",
            "run": "r",
            "step": [0, 0, 5, 5, 9, 9],
            "testset": ["A", "B"] * 3,
            "accuracy": [0.3, 0.2, 0.6, 0.1, 0.95, 0.0],
            "refusal_rate": [0.5] * 6,
            "n": 8,
            "role": ["id", "ood"] * 3,
        }
    )
    table = headline_table(scores, identities, {"r": {"setting": spec, "trained": ["A"]}})
    assert table["phase"].tolist() == ["after_sft", "after_sft", "after_rl", "after_rl"]
    last = table[table["phase"] == "after_rl"].set_index("distribution")
    assert last.loc["A", "accuracy"] == 0.95 and last.loc["B", "trained_policy_share"] == 0.75
    assert last.loc["B", "top_identity"] == "Alice" and last.loc["B", "top_identity_share"] == 0.75
    first = table[table["phase"] == "after_sft"].set_index("distribution")
    assert first.loc["A", "top_identity"] == "Bob"
