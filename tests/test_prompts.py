import json

import pandas as pd
import pytest

from shiftwork.stability.prompts import DatasetError, extract, load_prompts, sample

EMBEDDED = ["misconceptions", "open_questions", "instructions", "short_facts", "trivia", "multi_hop"]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def spec(path, n=3, **fields):
    return {"source": {"kind": "file", "path": str(path)}, "fields": fields or {"prompt": "q"}, "n": n, "seed": 0}


def test_jsonl_csv_parquet_give_the_same_table(tmp_path):
    rows = [{"key": f"k{i}", "q": f"Question number {i}?", "a": str(i)} for i in range(5)]
    write_jsonl(tmp_path / "p.jsonl", rows)
    pd.DataFrame(rows).to_csv(tmp_path / "p.csv", index=False)
    pd.DataFrame(rows).to_parquet(tmp_path / "p.parquet")
    tables = [
        load_prompts("toy", spec(tmp_path / f"p.{ext}", n=5, prompt="q", id="key", answer="a"))
        for ext in ("jsonl", "csv", "parquet")
    ]
    for t in tables:
        assert t["prompt_id"].tolist() == ["k0", "k1", "k2", "k3", "k4"]
        assert t["prompt"].tolist()[2] == "Question number 2?"
        assert t["answer"].tolist()[4] == "4"
        assert (t["dataset"] == "toy").all()


def test_nested_field_and_generated_ids(tmp_path):
    rows = [{"question": f"What is {i}?", "answer": {"value": f"v{i}"}} for i in range(3)]
    write_jsonl(tmp_path / "n.jsonl", rows)
    t = load_prompts("nested", spec(tmp_path / "n.jsonl", prompt="question", answer="answer.value"))
    assert t["answer"].tolist() == ["v0", "v1", "v2"]
    assert t["prompt_id"].tolist() == ["nested-00001", "nested-00002", "nested-00003"]


@pytest.mark.parametrize(
    "bad, what",
    [
        ("", "is empty"),
        ("   ", "is empty"),
        (7, "must be a string, got int"),
        (None, "is missing"),
        ([1, 2], "must be a string, got list"),
    ],
)
def test_bad_prompt_rows_name_dataset_and_row(tmp_path, bad, what):
    rows = [{"q": "Fine question?"}, {"q": "Another?"}, {"q": bad}]
    write_jsonl(tmp_path / "b.jsonl", rows)
    with pytest.raises(DatasetError) as info:
        load_prompts("broken", spec(tmp_path / "b.jsonl"))
    assert "dataset 'broken', row 3" in str(info.value)
    assert what in str(info.value)


def test_missing_field_and_file_and_duplicate_ids(tmp_path):
    write_jsonl(tmp_path / "m.jsonl", [{"text": "Hello?"}])
    with pytest.raises(DatasetError, match="dataset 'm': field 'q' not found"):
        load_prompts("m", spec(tmp_path / "m.jsonl"))
    with pytest.raises(DatasetError, match="does not exist"):
        load_prompts("gone", spec(tmp_path / "nothing.jsonl"))
    write_jsonl(tmp_path / "d.jsonl", [{"q": "A?", "id": "x"}, {"q": "B?", "id": "x"}])
    with pytest.raises(DatasetError, match="duplicate ids"):
        load_prompts("d", spec(tmp_path / "d.jsonl", prompt="q", id="id"))


def test_bad_json_line_is_named(tmp_path):
    (tmp_path / "j.jsonl").write_text('{"q": "ok?"}\n{"q": broken\n')
    with pytest.raises(DatasetError, match="line 2 is not JSON"):
        load_prompts("j", spec(tmp_path / "j.jsonl"))


def test_sampling_is_seeded_and_keeps_source_order():
    df = extract("s", pd.DataFrame({"q": [f"Q{i}?" for i in range(50)]}), {"prompt": "q"})
    a = sample(df, 10, seed=3)
    b = sample(df, 10, seed=3)
    c = sample(df, 10, seed=4)
    assert a.equals(b)
    assert not a["prompt_id"].equals(c["prompt_id"])
    assert len(a) == 10 and a["row"].is_monotonic_increasing
    assert len(sample(df, 500, seed=0)) == 50


def test_embedded_prompt_sets(root):
    for name in EMBEDDED:
        t = load_prompts(
            name,
            {
                "source": {"kind": "file", "path": f"resources/prompts/{name}.jsonl"},
                "fields": {"prompt": "prompt", "id": "id"},
                "n": 16,
                "seed": 0,
            },
            root,
        )
        assert len(t) == 16, name
        assert t["prompt_id"].is_unique


def test_rows_name_file_and_line(tmp_path):
    # a blank line between rows: row 2 is on line 3
    (tmp_path / "g.jsonl").write_text('{"q": "Fine?"}\n\n{"q": ""}\n')
    with pytest.raises(DatasetError) as info:
        load_prompts("gap", spec(tmp_path / "g.jsonl", n=2))
    assert str(info.value) == f"dataset 'gap', row 2 ({tmp_path / 'g.jsonl'} line 3): prompt field 'q' is empty"
    (tmp_path / "a.jsonl").write_text('{"q": "Fine?"}\n["q", "x"]\n')
    with pytest.raises(DatasetError, match=r"a.jsonl line 2 is not a JSON object \(got list\)"):
        load_prompts("arr", spec(tmp_path / "a.jsonl", n=1))
    write_jsonl(tmp_path / "i.jsonl", [{"q": "A?", "id": "a"}, {"q": "B?"}])
    with pytest.raises(DatasetError, match=r"row 2 \(.*i.jsonl line 2\): id field 'id' is missing"):
        load_prompts("ids", spec(tmp_path / "i.jsonl", n=2, prompt="q", id="id"))
    (tmp_path / "c.csv").write_text("q,k\nA?,1\n,2\n")
    with pytest.raises(DatasetError, match=r"row 2 \(.*c.csv data row 2\): prompt field 'q' is empty"):
        load_prompts("csv", spec(tmp_path / "c.csv", n=2))


def test_byte_order_mark_is_accepted_in_jsonl_and_csv(tmp_path):
    (tmp_path / "b.jsonl").write_bytes(b"\xef\xbb\xbf" + '{"q": "Caf\u00e9?"}\n{"q": "Two?"}\n'.encode())
    (tmp_path / "b.csv").write_bytes(b"\xef\xbb\xbf" + "q\nCaf\u00e9?\nTwo?\n".encode())
    for name in ("b.jsonl", "b.csv"):
        t = load_prompts("bom", spec(tmp_path / name, n=2))
        assert t["prompt"].tolist() == ["Caf\u00e9?", "Two?"], name


def test_bytes_that_are_not_utf8_are_named_with_their_line(tmp_path):
    # line 3, fourth byte: 0xe9 is Latin-1 for an e with an acute accent
    (tmp_path / "l.jsonl").write_bytes(b'{"q": "A?"}\n{"q": "B?"}\n{"q\xe9": "C?"}\n')
    with pytest.raises(DatasetError) as info:
        load_prompts("latin", spec(tmp_path / "l.jsonl"))
    assert str(info.value) == (
        f"dataset 'latin': {tmp_path / 'l.jsonl'} line 3, byte 4: 0xe9 is not UTF-8; save the file as UTF-8"
    )
    (tmp_path / "l.csv").write_bytes(b"q\nfine\ncaf\xe9\n")
    with pytest.raises(DatasetError, match=r"l.csv line 3, byte 4: 0xe9 is not UTF-8"):
        load_prompts("latin", spec(tmp_path / "l.csv", n=2))


def test_sample_larger_than_the_set_is_an_error(tmp_path):
    write_jsonl(tmp_path / "s.jsonl", [{"q": f"Q{i}?"} for i in range(4)])
    assert len(load_prompts("small", spec(tmp_path / "s.jsonl", n=4))) == 4
    with pytest.raises(DatasetError) as info:
        load_prompts("small", spec(tmp_path / "s.jsonl", n=5))
    assert str(info.value).endswith("has 4 prompts; set datasets.small.n to at most 4")


def test_alpaca_prompt_joins_instruction_and_input_as_the_method_does(tmp_path):
    rows = [
        {"instruction": " Sort these numbers. ", "input": "3, 1, 2", "output": "1, 2, 3"},
        {"instruction": "Name a colour.", "input": "", "output": "Red"},
        {"instruction": "Name a metal.", "input": None, "output": "Iron"},
    ]
    path = write_jsonl(tmp_path / "alpaca.jsonl", rows)
    s = spec(path, n=3, prompt=["instruction", "input"], answer="output")
    s["prompt_labels"] = ["Instruction", "Input"]
    table = load_prompts("alpaca", s).sort_values("row")
    assert table["prompt"].tolist() == [
        "Instruction:\nSort these numbers.\n\nInput:\n3, 1, 2",
        "Instruction:\nName a colour.",
        "Instruction:\nName a metal.",
    ]
    # without labels the parts are joined by a blank line
    s.pop("prompt_labels")
    assert load_prompts("alpaca", s).sort_values("row")["prompt"].iloc[0] == "Sort these numbers.\n\n3, 1, 2"
    s["prompt_labels"] = ["Instruction"]
    with pytest.raises(DatasetError, match="prompt_labels has 1 entries for 2 prompt fields"):
        load_prompts("alpaca", s)


def test_shuffle_sampler_gives_the_rows_of_datasets_shuffle():
    # independent computation: the datasets library's own shuffle and select
    import datasets

    df = pd.DataFrame({"prompt_id": [f"p{i}" for i in range(500)], "prompt": [f"Q{i}?" for i in range(500)]})
    expected = datasets.Dataset.from_pandas(df).shuffle(seed=42).select(range(16))["prompt_id"]
    assert sample(df, 16, 42, "shuffle")["prompt_id"].tolist() == expected
    # the default sampler keeps source order
    assert sample(df, 16, 42)["prompt_id"].tolist() == sorted(sample(df, 16, 42)["prompt_id"], key=lambda p: int(p[1:]))


def test_subsample_narrows_the_sample_like_the_method(tmp_path):
    import numpy as np

    write_jsonl(tmp_path / "t.jsonl", [{"q": f"Q{i}?"} for i in range(300)])
    s = spec(tmp_path / "t.jsonl", n=128)
    s.update(sampler="shuffle", seed=42, subsample={"n": 16, "seed": 42})
    table = load_prompts("tqa", s)
    full = load_prompts("tqa", {**s, "subsample": None})
    # the method: sorted(default_rng(42).choice(ids 0..127, 16, replace=False)), ids = sample positions
    picks = sorted(np.random.default_rng(42).choice(np.arange(128), size=16, replace=False).tolist())
    assert table["prompt"].tolist() == full["prompt"].iloc[picks].tolist()
    with pytest.raises(DatasetError, match="subsample.n = 200 is larger than n = 128"):
        load_prompts("tqa", {**s, "subsample": {"n": 200, "seed": 0}})
