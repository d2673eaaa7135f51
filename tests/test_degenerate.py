"""Degenerate replies: the rule on hand-worked replies (loops and empties count, normal
repetition does not), the shares per model and dataset, the step and the report's table."""

import math

import pandas as pd
import pytest

from shiftwork.provenance import make_provenance
from shiftwork.stability.degenerate import (
    DEGENERATE_COLUMNS,
    degenerate_reason,
    degenerate_shares,
    is_degenerate,
    loop_words,
    words,
)
from shiftwork.stability.report import degenerate_display, write_degenerate_tables
from shiftwork.tables import read_provenance, read_table, write_table


def test_words_are_lower_cased_without_edge_punctuation():
    assert words("Answer: ANSWER, (Paris). don't -- ?") == ["answer", "answer", "paris", "don't", "--", "?"]
    assert words("  \n ") == []


@pytest.mark.parametrize(
    "tokens, covered",
    [
        (["y", "y", "y"], 0),  # three repeats of one word, but under 4 words
        (["y", "y", "y", "y"], 4),
        (["x", "y", "y", "y", "y", "z"], 4),  # the loop is words 2 to 5
        (["a", "b", "a", "b", "a"], 0),  # two and a half repeats of "a b"
        (["a", "b", "a", "b", "a", "b"], 6),  # three repeats
        (["a", "b", "a", "b", "a", "b", "a"], 7),  # and a cut-off fourth
        (["a", "b", "c", "d", "e", "a", "b", "c", "d", "e"], 0),  # a group of 5: longer than 4
        (["p", "q", "r", "s"] * 3, 12),  # a group of 4, three times
    ],
)
def test_loop_words_by_hand(tokens, covered):
    assert loop_words(tokens) == covered


@pytest.mark.parametrize(
    "reply, reason",
    [
        ("", "empty"),
        ("   \n\t", "empty"),
        ("? ? ? ?", "empty"),
        ("...!", "empty"),
        ("Answer: Answer: Answer: Answer: Answer:", "loop"),
        ("no no no no", "loop"),
        ("the end the end the end", "loop"),
        # 8 of 11 words loop ("paris." then seven "paris"): 8 >= 5.5
        ("The capital is Paris. Paris Paris Paris Paris Paris Paris Paris", "loop"),
        # exactly half the words loop: 4 of 8
        ("one two three four no no no no", "loop"),
        # 4 of 9: under half
        ("one two three four five no no no no", None),
        # 12 words, 2 distinct, no loop: few words
        ("cat dog dog cat cat dog cat dog dog dog cat cat", "few_words"),
        # 12 words, 3 distinct (a quarter), no loop
        ("red blue red green blue blue red green red green blue red", "few_words"),
        # the same with a fourth word: a third distinct
        ("red blue red green blue blue red green red green blue pink", None),
        # normal replies
        ("Paris is the capital of France.", None),
        ("42", None),
        ("No, no.", None),
        ("no, no, no", None),
        ("- Tip: sleep early - Tip: eat well - Tip: read a book", None),
        ("1. Asia 2. Africa 3. North America 4. South America", None),
        ("very very very good indeed, and well done to you all", None),
        # a six-word sentence said twice and a half: a group longer than 4, 6 of 16 distinct
        ("What is the capital of France? What is the capital of France? What is the capital", None),
    ],
)
def test_degenerate_reason_by_hand(reply, reason):
    assert degenerate_reason(reply) == reason
    assert is_degenerate(reply) == (reason is not None)


def generations() -> pd.DataFrame:
    rows = [
        ("m1", "d1", "baseline", "Paris."),
        ("m1", "d1", "register", "Answer: Answer: Answer: Answer:"),
        ("m1", "d1", "noise", ""),
        ("m1", "d1", "structural", "It is Paris."),
        ("m1", "d2", "baseline", "? ? ?"),
        ("m1", "d2", "register", "Rome."),
        ("m0", "d1", "baseline", "Yes."),
        ("m0", "d1", "noise", None),
    ]
    return pd.DataFrame(rows, columns=["model", "dataset", "family", "response"])


def test_shares_per_model_dataset_and_kind_of_reply():
    table = degenerate_shares(generations())
    assert list(table.columns) == DEGENERATE_COLUMNS
    got = [(r.model, r.dataset, r.replies, r.n_replies, r.n_degenerate, r.empty, r.loop) for r in table.itertuples()]
    assert got == [
        ("m0", "d1", "baseline", 1, 0, 0, 0),
        ("m0", "d1", "variant", 1, 1, 1, 0),  # a missing reply is empty
        ("m0", "d1", "all", 2, 1, 1, 0),
        ("m0", "all", "baseline", 1, 0, 0, 0),
        ("m0", "all", "variant", 1, 1, 1, 0),
        ("m0", "all", "all", 2, 1, 1, 0),
        ("m1", "d1", "baseline", 1, 0, 0, 0),
        ("m1", "d1", "variant", 3, 2, 1, 1),
        ("m1", "d1", "all", 4, 2, 1, 1),
        ("m1", "d2", "baseline", 1, 1, 1, 0),
        ("m1", "d2", "variant", 1, 0, 0, 0),
        ("m1", "d2", "all", 2, 1, 1, 0),
        ("m1", "all", "baseline", 2, 1, 1, 0),
        ("m1", "all", "variant", 4, 2, 1, 1),
        ("m1", "all", "all", 6, 3, 2, 1),
    ]
    assert table["share"].tolist() == pytest.approx([0, 1, 0.5, 0, 1, 0.5, 0, 2 / 3, 0.5, 1, 0, 0.5, 0.5, 0.5, 0.5])
    assert table["few_words"].sum() == 0


def test_no_replies_of_a_kind_is_no_share():
    only_baselines = generations().query("family == 'baseline' and model == 'm0'")
    table = degenerate_shares(only_baselines)
    variant = table[(table["dataset"] == "d1") & (table["replies"] == "variant")].iloc[0]
    assert variant["n_replies"] == 0 and math.isnan(variant["share"])


def test_display_and_report_files(tmp_path):
    table = degenerate_shares(generations())
    display = degenerate_display(table)
    assert display.columns.tolist() == ["model", "dataset", "baseline", "variants", "all"]
    assert display.values.tolist() == [
        ["m0", "d1", "0.000 (0 of 1)", "1.000 (1 of 1)", "0.500 (1 of 2)"],
        ["m0", "all", "0.000 (0 of 1)", "1.000 (1 of 1)", "0.500 (1 of 2)"],
        ["m1", "d1", "0.000 (0 of 1)", "0.667 (2 of 3)", "0.500 (2 of 4)"],
        ["m1", "d2", "1.000 (1 of 1)", "0.000 (0 of 1)", "0.500 (1 of 2)"],
        ["m1", "all", "0.500 (1 of 2)", "0.500 (2 of 4)", "0.500 (3 of 6)"],
    ]
    paths = write_degenerate_tables(table, tmp_path)
    assert sorted(paths) == ["degenerate_replies.csv", "degenerate_replies.md", "degenerate_replies.tex"]
    md = (tmp_path / "degenerate_replies.md").read_text()
    assert "| m1 | all | 0.500 (1 of 2) | 0.500 (2 of 4) | 0.500 (3 of 6) |" in md
    assert "a loop (a group of 1 to 4 words" in md
    assert pd.read_csv(tmp_path / "degenerate_replies.csv")["n_degenerate"].tolist() == table["n_degenerate"].tolist()


def test_the_step_counts_every_generations_table(tmp_path):
    from shiftwork.stability.steps import count_degenerate_replies

    gens = generations()
    paths = []
    for model, part in gens.groupby("model"):
        path = tmp_path / f"{model}.parquet"
        write_table(part.reset_index(drop=True), path, make_provenance("generate", {}))
        paths.append(str(path))
    out = tmp_path / "degenerate.parquet"
    count_degenerate_replies(paths, str(out))
    table = read_table(out)
    pd.testing.assert_frame_equal(table, degenerate_shares(gens))
    assert read_provenance(out)["settings"]["max_period"] == 4
