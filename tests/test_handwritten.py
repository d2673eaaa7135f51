"""The hand-written structural variants: the shipped files cover every packaged prompt as the
rewriter's settings ask, the step's table has the rewriter's shape and rows, and what the files
lack is named by its config key before any job."""

import copy
import json

import pandas as pd
import pytest

from shiftwork.config import ConfigError, check_config, with_defaults
from shiftwork.stability.variants.handwritten import (
    LENGTH_TOLERANCE,
    handwritten_config_errors,
    handwritten_errors,
    handwritten_path,
    handwritten_rewrites,
    read_handwritten,
)
from shiftwork.stability.variants.structural import FORM_STRENGTH, REWRITE_COLUMNS, target_words, word_count
from shiftwork.tables import read_table

LEVELS = {("length", 0.5), ("length", 1.0), ("length", 2.0), ("form", -1.0), ("form", 1.0)}


def shipped_sets(root):
    return sorted((root / "resources" / "prompts").glob("*.jsonl"))


def read_prompts_file(path):
    return {row["id"]: row["prompt"] for row in map(json.loads, path.read_text().splitlines())}


def test_every_packaged_prompt_has_every_level_and_both_forms(root):
    sets = shipped_sets(root)
    assert [p.stem for p in sets] == [
        "instructions", "misconceptions", "multi_hop", "open_questions", "short_facts", "trivia",
    ]  # fmt: skip
    assert sorted(p.name for p in (root / "resources" / "structural").glob("*.jsonl")) == [p.name for p in sets]
    for path in sets:
        prompts = read_prompts_file(path)
        variants = read_handwritten(handwritten_path({"kind": "file", "path": str(path)}))
        assert len(prompts) == 16 and len(variants) == 16 * 5, path.name
        assert set(variants["id"]) == set(prompts), path.name
        for pid, rows in variants.groupby("id"):
            assert set(zip(rows["kind"], rows["strength"])) == LEVELS, pid


def shipped_variants(root):
    """(prompt id, prompt, kind, strength, text) of every shipped hand-written variant."""
    for path in shipped_sets(root):
        prompts = read_prompts_file(path)
        for r in read_handwritten(root / "resources" / "structural" / path.name).itertuples(index=False):
            yield r.id, prompts[r.id], r.kind, r.strength, r.text


def test_length_variants_are_within_the_tolerance_of_their_target(root):
    # e.g. trivia-01 has 12 words: 0.5x targets 6 (5 to 7 words), 2x targets 24 (18 to 30)
    assert target_words("Which African country is home to the ancient trading city of Timbuktu?", 0.5) == 6
    off = []
    n = 0
    for pid, prompt, kind, strength, text in shipped_variants(root):
        if kind == "length":
            n += 1
            target = target_words(prompt, strength)
            if abs(word_count(text) - target) > LENGTH_TOLERANCE * target:
                off.append((pid, strength, target, word_count(text)))
    assert n == 96 * 3 and off == []


def test_question_forms_ask_and_command_forms_do_not(root):
    forms = [(pid, s, t) for pid, _, kind, s, t in shipped_variants(root) if kind == "form"]
    assert len(forms) == 96 * 2
    assert [f for f in forms if f[1] == FORM_STRENGTH["question"] and not f[2].endswith("?")] == []
    assert [f for f in forms if f[1] == FORM_STRENGTH["command"] and (f[2].endswith("?") or f[2][-1] != ".")] == []


def test_no_variant_repeats_its_prompt_or_another_variant(root):
    texts: dict[str, list[str]] = {}
    for pid, prompt, _, _, text in shipped_variants(root):
        texts.setdefault(pid, [prompt]).append(text)
        assert text == text.strip() and "\n" not in text and "  " not in text, pid
    assert len(texts) == 96
    assert {pid: t for pid, t in texts.items() if len(set(t)) != 6} == {}


def test_handwritten_path_is_the_structural_twin_of_a_prompts_folder():
    assert handwritten_path({"kind": "file", "path": "resources/prompts/trivia.jsonl"}) == (
        "resources/structural/trivia.jsonl"
    )
    assert handwritten_path({"kind": "file", "path": "/data/prompts/mine.csv"}) == "/data/structural/mine.jsonl"
    assert handwritten_path({"kind": "file", "path": "data/mine.jsonl"}) is None
    assert handwritten_path({"kind": "hub", "id": "truthfulqa/truthful_qa"}) is None


PROMPTS = pd.DataFrame(
    {"dataset": "d", "prompt_id": ["a", "b"], "prompt": ["Why is the sky blue?", "Name a prime number."]}
)
VARIANTS = pd.DataFrame(
    [
        ("a", "length", 0.5, "Why blue sky?"),
        ("a", "length", 1.0, "Why is the sky coloured blue?"),
        ("a", "length", 2.0, "Can you tell me why it is that the sky looks blue?"),
        ("a", "form", -1.0, "Why is the sky so blue?"),
        ("a", "form", 1.0, "Explain why the sky is blue."),
        ("b", "length", 0.5, "Name a prime."),
        ("b", "length", 1.0, "Give one prime number."),
        ("b", "length", 2.0, "Please name any one number that is a prime number."),
        ("b", "form", -1.0, "What is a prime number?"),
        ("b", "form", 1.0, "Name any prime number."),
    ],
    columns=["id", "kind", "strength", "text"],
)


def settings(**changes):
    return {"lengths": [2], "form": True, "baseline": "rewrite", "length_anchor": "rewrite", **changes}


def test_rewrite_anchoring_takes_the_anchors_and_both_forms():
    table = handwritten_rewrites(PROMPTS, VARIANTS, settings(), "f.jsonl")
    assert list(table.columns) == REWRITE_COLUMNS
    assert [(r.prompt_id, r.kind, r.strength, r.rewrite) for r in table.itertuples()] == [
        ("a", "length", 1.0, "Why is the sky coloured blue?"),
        ("a", "length", 2.0, "Can you tell me why it is that the sky looks blue?"),
        ("a", "form", -1.0, "Why is the sky so blue?"),
        ("a", "form", 1.0, "Explain why the sky is blue."),
        ("b", "length", 1.0, "Give one prime number."),
        ("b", "length", 2.0, "Please name any one number that is a prime number."),
        ("b", "form", -1.0, "What is a prime number?"),
        ("b", "form", 1.0, "Name any prime number."),
    ]
    assert set(table["instruction"]) == {"hand-written: f.jsonl"} and set(table["cache_key"]) == {""}


def test_original_anchoring_takes_the_opposite_form_and_no_anchor():
    # the question a gets the command form (+1), the command b the question form (-1)
    table = handwritten_rewrites(PROMPTS, VARIANTS, settings(lengths=[0.5], baseline="original"), "f.jsonl")
    assert [(r.prompt_id, r.kind, r.strength, r.rewrite) for r in table.itertuples()] == [
        ("a", "length", 0.5, "Why blue sky?"),
        ("a", "form", 1.0, "Explain why the sky is blue."),
        ("b", "length", 0.5, "Name a prime."),
        ("b", "form", -1.0, "What is a prime number?"),
    ]
    # the prompt is the 1.0 level: no 1.0x rewrite; no form asked for: none
    table = handwritten_rewrites(PROMPTS, VARIANTS, settings(length_anchor="original", form=False), "f.jsonl")
    assert [(r.prompt_id, r.strength) for r in table.itertuples()] == [("a", 2.0), ("b", 2.0)]


def test_a_level_the_file_lacks_is_named_by_its_key():
    errors = handwritten_errors("d", PROMPTS, VARIANTS, settings(lengths=[0.25, 2]), "f.jsonl")
    assert errors == [
        "config key 'stability.variants.structural.lengths': dataset 'd' has no hand-written length variants "
        "at strength 0.25 in f.jsonl (its length levels: 0.5, 1, 2); leave the level out, or name a rewriter "
        "model in stability.variants.structural.rewriter"
    ]
    no_anchor = VARIANTS[~((VARIANTS["kind"] == "length") & (VARIANTS["strength"] == 1.0))]
    (error,) = handwritten_errors("d", PROMPTS, no_anchor, settings(), "f.jsonl")
    assert error.startswith("config key 'stability.variants.structural.length_anchor': dataset 'd' has no ")
    assert "(its length levels: 0.5, 2)" in error
    assert handwritten_errors("d", PROMPTS, no_anchor, settings(length_anchor="original"), "f.jsonl") == []
    no_forms = VARIANTS[VARIANTS["kind"] == "length"]
    assert [e.split(":")[0] for e in handwritten_errors("d", PROMPTS, no_forms, settings(), "f.jsonl")] == [
        "config key 'stability.variants.structural.form'"
    ] * 2


def test_a_prompt_without_its_variant_is_named_and_the_step_refuses():
    lacking = VARIANTS.drop(index=7)  # b's 2x
    assert handwritten_errors("d", PROMPTS, lacking, settings(), "f.jsonl") == [
        "f.jsonl: dataset 'd' prompt_id(s) ['b'] have no hand-written length variant at strength 2; add them to "
        "the file, or name a rewriter model in stability.variants.structural.rewriter"
    ]
    with pytest.raises(ValueError, match=r"prompt_id\(s\) \['b'\] have no hand-written length variant at strength 2"):
        handwritten_rewrites(PROMPTS, lacking, settings(), "f.jsonl")


@pytest.mark.parametrize(
    "line, problem",
    [
        ("[1]", "line 2: is not a JSON object (got list)"),
        ('{"id": "a", "kind": "length", "text": "x"}', "line 2: lacks ['strength']"),
        ('{"id": "a", "kind": "tone", "strength": 1, "text": "x"}', "line 2: kind 'tone' is not one of"),
        ('{"id": "a", "kind": "length", "strength": "2", "text": "x"}', "line 2: strength '2' is not a number"),
        ('{"id": "a", "kind": "form", "strength": 2, "text": "x"}', "line 2: a form variant's strength must be one of"),
        ('{"id": "a", "kind": "length", "strength": 2, "text": " "}', "line 2: text is empty"),
        (
            '{"id": "a", "kind": "length", "strength": 0.5, "text": "y"}',
            "line 2: repeats ('a', 'length', 0.5) of line 1",
        ),
        ("{oops", "line 2: not JSON"),
    ],
)
def test_a_bad_line_is_named_with_its_file_and_line(tmp_path, line, problem):
    path = tmp_path / "s.jsonl"
    path.write_text('{"id": "a", "kind": "length", "strength": 0.5, "text": "x"}\n' + line + "\n")
    with pytest.raises(ValueError) as info:
        read_handwritten(path)
    assert str(info.value).startswith(f"{path} {problem}")


def no_rewriter(cfg, **structural):
    cfg = copy.deepcopy(cfg)
    cfg["stability"]["variants"]["structural"].update(rewriter=None, **structural)
    return cfg


def test_the_default_config_takes_the_handwritten_variants(default_config, root):
    assert default_config["stability"]["variants"]["structural"]["rewriter"] is None
    assert handwritten_config_errors(with_defaults(default_config), root) == []
    # every level of the files, both anchorings
    for extra in ({"lengths": [0.5, 2]}, {"lengths": [0.5], "baseline": "original"}):
        assert handwritten_config_errors(with_defaults(no_rewriter(default_config, **extra)), root) == []


def test_a_hub_dataset_or_missing_level_without_a_rewriter_stops_the_config(default_config, root):
    cfg = no_rewriter(default_config, lengths=[0.25, 2])
    cfg["datasets"]["trivia"]["source"] = {"kind": "hub", "id": "mandarjoshi/trivia_qa"}
    with pytest.raises(ConfigError) as info:
        check_config(cfg, root=root, check_keys=False)
    msg = str(info.value)
    assert (
        "config key 'stability.variants.structural.rewriter': dataset 'trivia' has no hand-written structural "
        "variants (only a prompt set read from DIR/prompts/NAME.jsonl has them)" in msg
    )
    for name in ("misconceptions", "open_questions", "instructions", "short_facts", "multi_hop"):
        assert (
            f"config key 'stability.variants.structural.lengths': dataset '{name}' has no hand-written length "
            f"variants at strength 0.25 in resources/structural/{name}.jsonl" in msg
        )
    # a rewriter writes whatever level is asked for: no hand-written check
    cfg["stability"]["variants"]["structural"]["rewriter"] = "smollm2-135m-instruct"
    assert handwritten_config_errors(with_defaults(cfg), root) == []


def test_the_step_writes_the_rewriter_table_shape(tmp_path, root):
    from shiftwork.provenance import make_provenance
    from shiftwork.stability.steps import select_handwritten_rewrites
    from shiftwork.tables import write_table

    prompts = tmp_path / "prompts.parquet"
    write_table(
        pd.DataFrame({"dataset": "trivia", "prompt_id": ["trivia-13"], "prompt": ["x"]}),
        prompts,
        make_provenance("sample_prompts", {}),
    )
    out = tmp_path / "rewrites.parquet"
    select_handwritten_rewrites(str(prompts), str(root / "resources/structural/trivia.jsonl"), settings(), str(out))
    table = read_table(out)
    assert list(table.columns) == REWRITE_COLUMNS
    assert table["rewrite"].tolist() == [
        "Which city is home to the headquarters of the United Nations?",
        "The United Nations has its main headquarters in one particular city of the world; in which city is "
        "that headquarters building located?",
        "Which city is the headquarters of the United Nations located in?",
        "Name the city where the headquarters of the United Nations is located.",
    ]
