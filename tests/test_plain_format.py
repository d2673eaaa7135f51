"""How a base model (chat: false) is asked: the plain formats, and the one a model's config names
reaching the text it reads in the stability study's generation."""

from __future__ import annotations

import copy

import pandas as pd
import pytest

from shiftwork.config import ConfigError, check_config
from shiftwork.inference.formatting import PLAIN_TEMPLATE, model_input, plain_template, trim_response
from shiftwork.stability import steps
from shiftwork.stability.api_generation import api_model_input
from shiftwork.stability.jobs import GenerateJob
from shiftwork.tables import write_table

TWO_SHOT_WHY = (
    "Question: What is the capital of France?\n"
    "Answer: The capital of France is Paris.\n"
    "\n"
    "Question: Give one tip for sleeping better.\n"
    "Answer: Keep a regular bedtime, even at weekends.\n"
    "\n"
    "Question: Why is the sky blue?\n"
    "Answer:"
)


def test_each_format_by_hand():
    assert plain_template("qa") == PLAIN_TEMPLATE
    assert model_input(None, "Why is the sky blue?", False) == "Question: Why is the sky blue?\nAnswer:"
    assert model_input(None, "Why is the sky blue?", False, plain_template("qa_two_shot")) == TWO_SHOT_WHY


def test_an_unknown_format_names_the_choices():
    with pytest.raises(ValueError, match=r"plain_format must be one of \['qa', 'qa_two_shot'\], got 'three_shot'"):
        plain_template("three_shot")


def test_a_two_shot_reply_is_cut_where_the_model_starts_a_next_question():
    reply = "Mount Kilimanjaro, in Tanzania.\n\nQuestion: What is the longest river?\nAnswer: The Nile"
    assert trim_response(reply, chat=False) == "Mount Kilimanjaro, in Tanzania."


def test_a_base_model_behind_an_api_is_sent_its_format():
    assert api_model_input("Why is the sky blue?", False, "qa_two_shot") == TWO_SHOT_WHY
    assert api_model_input("Why is the sky blue?", False) == "Question: Why is the sky blue?\nAnswer:"
    # a chat model's message is the prompt alone, whatever the format
    assert api_model_input("Hi", True, "qa_two_shot") == '[{"role": "user", "content": "Hi"}]'


def test_the_config_refuses_an_unknown_format_naming_the_key(default_config):
    cfg = copy.deepcopy(default_config)
    cfg["models"]["gemma3-270m"]["plain_format"] = "three_shot"
    with pytest.raises(ConfigError, match=r"models\.gemma3-270m\.plain_format"):
        check_config(cfg)


class _Stop(Exception):
    pass


def test_the_generate_step_asks_a_base_model_in_the_jobs_format(tmp_path, monkeypatch):
    """The distinct inputs generate_responses hands to its engine, for a model with chat false."""
    rows = [("d", "p", "p|base", "Why is the sky blue?", "baseline", "none", "none", 0.0)]
    rows += [("d", "p", "p|v1", "Why  is the sky blue?", "noise", "spacing", "global", 1.0)]
    cols = ["dataset", "prompt_id", "variant_id", "text", "family", "kind", "position", "strength"]
    filtered = write_table(pd.DataFrame(rows, columns=cols), tmp_path / "filtered.parquet")
    seen: dict[str, list[str]] = {}

    def answer_inputs(model_dir, tokenizer, chat, unique_inputs, job, times):
        seen[job.plain_format] = unique_inputs
        raise _Stop

    monkeypatch.setattr(steps, "read_info", lambda model_dir: {"chat": False})
    monkeypatch.setattr(steps, "load_tokenizer", lambda model_dir, side: None)
    monkeypatch.setattr(steps, "_answer_inputs", answer_inputs)
    for plain_format in ("qa", "qa_two_shot"):
        job = GenerateJob(max_new_tokens=4, batch_size=2, dtype="float32", plain_format=plain_format)
        with pytest.raises(_Stop):
            steps.generate_responses(str(filtered), str(tmp_path), "m", "g.parquet", "p.parquet", job)
    assert seen["qa"] == ["Question: Why is the sky blue?\nAnswer:", "Question: Why  is the sky blue?\nAnswer:"]
    assert seen["qa_two_shot"][0] == TWO_SHOT_WHY
    assert seen["qa_two_shot"][1] == TWO_SHOT_WHY.replace("Why is the sky", "Why  is the sky")
