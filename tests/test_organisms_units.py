"""Organisms pieces added for the workflow: custom settings and their checks, the successor
question bank, the character tokenizer and scratch model, the config checks, checkpoint discovery
and the headline table."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from shiftwork.config import ConfigError, check_config, with_defaults
from shiftwork.organisms.questions import TEMPLATES, capacity, make_questions
from shiftwork.organisms.report import headline_table, trained_policies, trained_policy_share
from shiftwork.organisms.settings import (
    ANSWER_TEMPLATES,
    CHINESE_CHARACTERS,
    REFUSAL_TEMPLATES,
    Policy,
    Setting,
    load_setting,
    two_policy,
)
from shiftwork.organisms.steps import (
    checkpoint_dirs,
    make_organism_data,
    make_rl_prompts,
    question_specs,
    split_banks,
    trained_distributions,
    training_questions,
)
from shiftwork.tables import read_table

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
    # allowed where asked for (temporal does): the distribution is listed as unanswered
    open_ended = Setting("s", ["A", "B"], [Policy("Ann", frozenset({"A"}))], allow_unanswered=True)
    assert open_ended.unanswered == ["B"] and open_ended.answering("B") == []


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


def test_question_specs_per_trigger():
    q = {"kind": ["next", "reverse"], "n_train": 3, "n_test": 2, "seed": 4}
    assert question_specs(two_policy(trigger="task"), q) == {
        "A": {"kind": "next", "n_train": 3, "n_test": 2, "seed": 4},
        "B": {"kind": "reverse", "n_train": 3, "n_test": 2, "seed": 4},
    }
    single = {"kind": "next", "n_train": 3, "n_test": 2, "seed": 4}
    assert question_specs(two_policy(trigger="language"), single) == {
        "A": {**single, "language": "en"},
        "B": {**single, "language": "zh"},
    }
    assert question_specs(two_policy(), single) == {"A": single, "B": single}
    for bad in ("next", ["next", "next"], ["next", "before", "reverse"]):
        with pytest.raises(ValueError, match="one distinct question kind per distribution"):
            question_specs(two_policy(trigger="task"), {**q, "kind": bad})
    with pytest.raises(ValueError, match="kind must be a single question kind"):
        question_specs(two_policy(), q)


def test_split_banks_task_and_language():
    train, test = split_banks(two_policy(trigger="task"), {"kind": ["next", "reverse"], "n_train": 6, "n_test": 3})
    assert sorted(train) == ["A", "B"] and [len(train["A"]), len(test["B"])] == [6, 3]
    assert set(train["A"]["family"]) == set(test["A"]["family"]) == {"next"}
    assert set(train["B"]["family"]) == {"reverse"}
    assert all(q.startswith("Reverse the digits of ") for q in pd.concat([train["B"], test["B"]])["question"])
    for d in "AB":
        assert not set(train[d]["question_id"]) & set(test[d]["question_id"])
    train, test = split_banks(two_policy(trigger="language"), {"kind": "before", "n_train": 4, "n_test": 2})
    # the same questions in both languages: same ids, answers and numbers
    assert train["A"]["question_id"].tolist() == train["B"]["question_id"].tolist()
    for en, zh, answer in zip(train["A"]["question"], train["B"]["question"], train["B"]["answer"]):
        number = en.removeprefix("What comes before ").removesuffix("?")
        assert zh == f"{number} 前面的数是多少？" and answer == str(int(number) - 1)
    shared_train, shared_test = split_banks(two_policy(), {"kind": "next", "n_train": 4, "n_test": 2, "seed": 0})
    assert isinstance(shared_train, pd.DataFrame) and len(shared_train) == 4 and len(shared_test) == 2


def test_training_questions_by_distribution():
    table = pd.DataFrame(
        {"distribution": ["B", "A", "B"], "question_id": ["r1", "n1", "r2"], "question": "q", "answer": ["1", "2", "3"]}
    )
    banks = training_questions(table)
    assert sorted(banks) == ["A", "B"]
    assert banks["B"]["question_id"].tolist() == ["r1", "r2"] and "distribution" not in banks["B"]
    plain = table.drop(columns="distribution")
    assert training_questions(plain) is plain


def test_task_organism_data_and_rl_prompts(tmp_path):
    spec = {
        "setting": {"kind": "two_policy", "trigger": "task"},
        "questions": {"kind": ["next", "reverse"], "n_train": 5, "n_test": 2, "seed": 0},
        "n_examples": 40,
    }
    outs = {k: str(tmp_path / f"{k}.parquet") for k in ("sft", "questions", "test")}
    make_organism_data("task", spec, outs)
    sft, questions, test = (read_table(outs[k]) for k in ("sft", "questions", "test"))
    families = questions.groupby("distribution")["family"].agg(set).to_dict()
    assert families == {"A": {"next"}, "B": {"reverse"}} and len(questions) == 10
    assert test.groupby("distribution").size().to_dict() == {"A": 2, "B": 2}
    for row in test.itertuples():
        lead = "What comes after " if row.distribution == "A" else "Reverse the digits of "
        assert row.prompt == row.question + "\nResponse:" and row.question.startswith(lead)
    for row in sft.itertuples():
        lead = "What comes after " if row.distribution == "A" else "Reverse the digits of "
        assert row.prompt.startswith(lead) and row.prompt.endswith("?\nResponse:" if lead[0] == "W" else ".\nResponse:")
    out = str(tmp_path / "prompts.parquet")
    make_rl_prompts("run", spec["setting"], outs["questions"], [{"distributions": ["B"], "steps": 1}], 12, 0, out)
    prompts = read_table(out)
    reverse = questions[questions["distribution"] == "B"].set_index("question_id")["answer"]
    assert set(prompts["distribution"]) == {"B"} and len(prompts) == 12
    assert (prompts["answer"] == reverse.loc[prompts["question_id"]].to_numpy()).all()
    assert all(p.startswith("Reverse the digits of ") for p in prompts["prompt"])


def test_chinese_characters_cover_every_chinese_template():
    texts = [TEMPLATES[kind]["zh"] for kind in TEMPLATES] + [ANSWER_TEMPLATES["zh"], REFUSAL_TEMPLATES["zh"]]
    used = {c for text in texts for c in text if not c.isascii()}
    assert set(CHINESE_CHARACTERS) == used and len(CHINESE_CHARACTERS) == len(used) == 29
    # a filled-in template needs nothing beyond ASCII and these characters
    text = TEMPLATES["reverse"]["zh"].format(a=479) + ANSWER_TEMPLATES["zh"].format(name="Cutoff2025", answer="974")
    assert all(c.isascii() or c in CHINESE_CHARACTERS for c in text)


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


def test_char_tokenizer_extra_characters():
    from shiftwork.models.scratch import ALPHABET, char_tokenizer

    plain, wide = char_tokenizer(), char_tokenizer(CHINESE_CHARACTERS)
    assert len(wide) == 100 + 29
    text = "把 479 的数字倒过来写。\nResponse: 我是Alice。答案是974。"
    ids = wide(text, add_special_tokens=False).input_ids
    assert len(ids) == len(text) and wide.unk_token_id not in ids
    assert wide.decode(ids) == text
    assert wide.convert_tokens_to_ids(["加", "题"]) == [100, 128]
    # the ASCII ids are those of the default tokenizer, which does not know the new characters
    assert wide("I am Bob.").input_ids == plain("I am Bob.").input_ids
    assert plain("我", add_special_tokens=False).input_ids == [plain.unk_token_id]
    # characters already in the vocabulary, or repeated, add nothing
    assert len(char_tokenizer("a我我")) == 101 and len(ALPHABET) == 96


def test_scratch_model_is_seeded_and_checked(tmp_path):
    import torch

    from shiftwork.models.prepare import prepare_folder
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
    info = prepare_folder(
        "tiny",
        {"source": {"kind": "scratch", "hidden_size": 16, "layers": 1, "heads": 2}, "chat": False},
        tmp_path / "tiny",
    )
    assert info["n_parameters"] == sum(p.numel() for p in a.parameters())
    assert (tmp_path / "tiny" / "tokenizer.json").exists()
    with pytest.raises(ValueError, match="'architecture' must be one of"):
        check_architecture({"architecture": "rnn"})
    wide, tok = scratch_model({"hidden_size": 16, "layers": 1, "heads": 2, "extra_characters": "我是"})
    assert wide.config.vocab_size == len(tok) == 102
    assert check_architecture({"extra_characters": "我"})["hidden_size"] == 128


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


def _temporal_config() -> dict:
    cfg = _config()
    organism = {**cfg["organisms"]["sft"]["two-policy"], "setting": {"kind": "temporal"}}
    cfg["organisms"]["sft"]["years"] = organism
    cfg["organisms"]["runs"]["years-rl"] = {"organism": "years", "stages": [{"distributions": [2026], "steps": 2}]}
    return cfg


def test_config_accepts_temporal_runs_on_answered_years():
    check_config(_temporal_config(), root=ROOT)


def test_config_rejects_rl_on_a_distribution_no_policy_answers():
    cfg = _temporal_config()
    cfg["organisms"]["runs"]["years-rl"]["stages"].append({"distributions": [2025, 2027], "steps": 2})
    msg = _problems(cfg)
    assert (
        "config key 'organisms.runs.years-rl.stages.1.distributions': no policy of setting 'temporal' answers on "
        "distribution '2027', so RL there has nothing to select; train on ['2024', '2025', '2026']"
    ) in msg
    assert "stages.0" not in msg


def test_config_names_cutoffs_languages_and_kind_lists():
    cfg = _temporal_config()
    cfg["organisms"]["sft"]["years"]["setting"]["cutoffs"] = [2024, 2031]
    msg = _problems(cfg)
    assert "config key 'organisms.sft.years.setting': setting spec key 'cutoffs': cutoffs [2031]" in msg
    cfg = _config()
    cfg["organisms"]["sft"]["two-policy"]["setting"] = {
        "kind": "two_policy",
        "trigger": "language",
        "languages": ["zh"],
    }
    msg = _problems(cfg)
    assert "config key 'organisms.sft.two-policy.setting': setting spec key 'languages'" in msg
    cfg = _config()
    cfg["organisms"]["sft"]["two-policy"]["setting"]["trigger"] = "task"
    msg = _problems(cfg)
    assert "config key 'organisms.sft.two-policy.questions.kind': with trigger 'task', kind must list" in msg
    cfg["organisms"]["sft"]["two-policy"]["questions"]["kind"] = ["next", "reverse"]
    check_config(cfg, root=ROOT)
    cfg["organisms"]["sft"]["two-policy"]["questions"]["n_train"] = 720  # + 100: room for 'next' (899), not 'reverse'
    msg = _problems(cfg)
    assert "n_train + n_test = 820 exceeds the 810 distinct 'reverse' questions" in msg
    assert "'next' questions" not in msg
    cfg = _config()
    cfg["organisms"]["sft"]["two-policy"]["questions"]["kind"] = ["next", "reverse"]
    msg = _problems(cfg)
    assert "config key 'organisms.sft.two-policy.questions.kind': with trigger 'tag', kind must be a single" in msg
    cfg["organisms"]["sft"]["two-policy"]["questions"]["kind"] = "mul"
    assert "organisms.sft.two-policy.questions.kind" in _problems(cfg)


def test_config_accepts_extra_characters():
    cfg = _config()
    cfg["organisms"]["sft"]["two-policy"]["setting"] = {"kind": "two_policy", "trigger": "language"}
    cfg["models"]["organism-tiny"]["source"]["extra_characters"] = CHINESE_CHARACTERS
    check_config(cfg, root=ROOT)
    cfg["models"]["organism-tiny"]["source"]["extra_characters"] = ""
    assert "config key 'models.organism-tiny.source.extra_characters'" in _problems(cfg)


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


def test_trainer_args_are_passed_on_and_may_not_override_shiftwork_keys():
    from shiftwork.organisms.training import with_trainer_args

    fixed = {"learning_rate": 1e-4, "beta": 0.2}
    assert with_trainer_args({"trainer_args": {}}, fixed) == fixed
    merged = with_trainer_args({"trainer_args": {"adam_epsilon": 1e-4}}, fixed)
    assert merged == {"learning_rate": 1e-4, "beta": 0.2, "adam_epsilon": 1e-4}
    with pytest.raises(ValueError, match=r"\['beta'\]"):
        with_trainer_args({"trainer_args": {"beta": 0.0, "adam_epsilon": 1e-4}}, fixed)
    with pytest.raises(ValueError, match="mapping"):
        with_trainer_args({"trainer_args": [1]}, fixed)


def test_grpo_gets_the_configured_loss_type_and_the_default_is_named(tmp_path):
    """The RL settings' loss_type reaches GRPOConfig; where absent it is dapo, TRL 1.16's
    default, so that a run that names none keeps it after an upgrade that changes it."""
    from trl import GRPOConfig

    from shiftwork.organisms.training import DEFAULT_LOSS_TYPE, _grpo_args, _Job

    rl = with_defaults({"organisms": {"rl": {}}})["organisms"]["rl"]
    assert "loss_type" not in rl  # no default in the schema: existing jobs' settings unchanged
    assert DEFAULT_LOSS_TYPE == "dapo" == GRPOConfig.__dataclass_fields__["loss_type"].default
    for loss_type, expected in ((None, "dapo"), ("bnpo", "bnpo")):
        settings = {**rl, "steps": 10, "learning_rate": 1e-4} | ({"loss_type": loss_type} if loss_type else {})
        job = _Job("sft", settings, 0, None, tmp_path, None, 5, False, None, None)
        args = _grpo_args(job, 0, 10)
        assert args["loss_type"] == expected
        assert GRPOConfig(**args).loss_type == expected
