"""Multiple-choice question families (organisms.choice_questions): ARC and RACE read through
``datasets.load_dataset`` from local copies in the hub's layout, their texts and answer letters;
the config checks of questions.families; the resources of organisms jobs by model size."""

import copy
import types

import pandas as pd
import pytest
import yaml

from shiftwork.config import ConfigError, check_config, organism_runs, question_errors
from shiftwork.data import DatasetError
from shiftwork.organisms.choice_questions import CHOICE_COLUMNS, choice_family, family_rows, shifted_letter
from shiftwork.organisms.resources import job_resources, parameter_billions, rule_resources

ARC_ROWS = [
    # letters as labels
    {
        "id": "arc-1",
        "question": "Which gas do plants take in for photosynthesis?",
        "choices": {"text": ["oxygen", "carbon dioxide", "helium", "neon"], "label": ["A", "B", "C", "D"]},
        "answerKey": "B",
    },
    # digits as labels: key "2" is the second option, B
    {
        "id": "arc-2",
        "question": "How many legs does an insect have?",
        "choices": {"text": ["four", "six", "eight"], "label": ["1", "2", "3"]},
        "answerKey": "2",
    },
    # a key that names no label, and an empty key: dropped
    {
        "id": "arc-3",
        "question": "Which planet is closest to the Sun?",
        "choices": {"text": ["Venus", "Mercury", "Mars", "Earth"], "label": ["A", "B", "C", "D"]},
        "answerKey": "E",
    },
    {
        "id": "arc-4",
        "question": "What melts ice fastest?",
        "choices": {"text": ["salt", "sand", "sugar", "chalk"], "label": ["A", "B", "C", "D"]},
        "answerKey": "",
    },
    # five options, the last one right
    {
        "id": "arc-5",
        "question": "Which is a mammal?",
        "choices": {"text": ["shark", "trout", "frog", "crow", "whale"], "label": ["A", "B", "C", "D", "E"]},
        "answerKey": "E",
    },
    # a repeat of the first row's text: dropped
    {
        "id": "arc-6",
        "question": "Which gas do plants take in for photosynthesis?",
        "choices": {"text": ["oxygen", "carbon dioxide", "helium", "neon"], "label": ["A", "B", "C", "D"]},
        "answerKey": "B",
    },
    # digit key 4 of four options: D
    {
        "id": "arc-7",
        "question": "Which tool measures temperature?",
        "choices": {"text": ["ruler", "scale", "clock", "thermometer"], "label": ["1", "2", "3", "4"]},
        "answerKey": "4",
    },
]

RACE_ROWS = [
    {
        "example_id": "m1",
        "article": "Tom has a red bike. He rides it to school every day.",
        "question": "What colour is Tom's bike?",
        "options": ["Blue", "Red", "Green", "Black"],
        "answer": "B",
    },
    {
        "example_id": "m1",
        "article": "Tom has a red bike. He rides it to school every day.",
        "question": "How often does Tom ride his bike to school?",
        "options": ["Never", "Once a week", "Every day", "On Sundays"],
        "answer": "C",
    },
    # no answer, and a letter past the options: dropped
    {
        "example_id": "m2",
        "article": "Ann reads.",
        "question": "What does Ann do?",
        "options": ["reads", "swims", "runs", "sings"],
        "answer": "",
    },
    {
        "example_id": "m2",
        "article": "Ann reads.",
        "question": "Who reads?",
        "options": ["Ann", "Bob", "Cal", "Dee"],
        "answer": "E",
    },
    {
        "example_id": "m3",
        "article": "The shop opens at nine.",
        "question": "When does the shop open?",
        "options": ["At eight", "At nine", "At ten", "At noon"],
        "answer": "B",
    },
]

ARC_TEXT = "Which gas do plants take in for photosynthesis?\nA. oxygen\nB. carbon dioxide\nC. helium\nD. neon"
INSECT_TEXT = "How many legs does an insect have?\nA. four\nB. six\nC. eight"
MAMMAL_TEXT = "Which is a mammal?\nA. shark\nB. trout\nC. frog\nD. crow\nE. whale"
TOOL_TEXT = "Which tool measures temperature?\nA. ruler\nB. scale\nC. clock\nD. thermometer"
BIKE_TEXT = (
    "Tom has a red bike. He rides it to school every day.\n\n"
    "What colour is Tom's bike?\nA. Blue\nB. Red\nC. Green\nD. Black"
)
OFTEN_TEXT = (
    "Tom has a red bike. He rides it to school every day.\n\n"
    "How often does Tom ride his bike to school?\nA. Never\nB. Once a week\nC. Every day\nD. On Sundays"
)
SHOP_TEXT = "The shop opens at nine.\n\nWhen does the shop open?\nA. At eight\nB. At nine\nC. At ten\nD. At noon"

# what each family keeps, in source order: (text, answer, n_options)
ARC_KEPT = [(ARC_TEXT, "B", 4), (INSECT_TEXT, "B", 3), (MAMMAL_TEXT, "E", 5), (TOOL_TEXT, "D", 4)]
RACE_KEPT = [(BIKE_TEXT, "B", 4), (OFTEN_TEXT, "C", 4), (SHOP_TEXT, "B", 4)]


def families() -> dict:
    """questions.families as config/paper.yaml has them."""
    return {
        "arc_easy": {
            "source": {"kind": "hub", "id": "allenai/ai2_arc", "config": "ARC-Easy", "split": "train"},
            "format": "arc",
        },
        "race_middle": {
            "source": {"kind": "hub", "id": "ehovy/race", "config": "middle", "split": "train"},
            "format": "race",
        },
    }


def spec(n_train: int, n_test: int, seed: int = 0) -> dict:
    return {
        "kind": ["arc_easy", "race_middle"],
        "n_train": n_train,
        "n_test": n_test,
        "seed": seed,
        "families": families(),
    }


def write_hub_copy(root, hub_id: str, config: str, split: str, rows: list[dict]) -> None:
    """One config of a hub set as the hub lays it out: ``<id>/<config>/<split>-00000-of-00001.parquet``
    and a dataset card whose ``configs`` name the files (as tests/test_trajectory_paper.py)."""
    repo = root / hub_id
    (repo / config).mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(repo / config / f"{split}-00000-of-00001.parquet")
    card = {"configs": [{"config_name": config, "data_files": [{"split": split, "path": f"{config}/{split}-*"}]}]}
    (repo / "README.md").write_text("---\n" + yaml.safe_dump(card) + "---\n")


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """Local copies of ARC-Easy and RACE-Middle; datasets.load_dataset("<owner>/<name>", ...) reads
    the local directory of that name (the same call that reaches the hub on a cluster). Returns the
    list of load_dataset calls."""
    import datasets

    root = tmp_path / "hub"
    write_hub_copy(root, "allenai/ai2_arc", "ARC-Easy", "train", ARC_ROWS)
    write_hub_copy(root, "ehovy/race", "middle", "train", RACE_ROWS)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.chdir(root)
    calls = []
    load_dataset = datasets.load_dataset

    def recorded(*args, **kwargs):
        calls.append((args, kwargs))
        return load_dataset(*args, **kwargs)

    monkeypatch.setattr(datasets, "load_dataset", recorded)
    return calls


def test_every_usable_row_with_its_text_letter_and_option_count(hub, caplog):
    caplog.set_level("INFO", logger="shiftwork")
    arc = choice_family(spec(3, 1), "arc_easy")
    race = choice_family(spec(2, 1), "race_middle")
    assert list(arc.columns) == list(race.columns) == CHOICE_COLUMNS
    # all usable rows drawn: the sample is the kept rows in some order
    assert sorted(zip(arc["question"], arc["answer"], arc["n_options"])) == sorted(ARC_KEPT)
    assert sorted(zip(race["question"], race["answer"], race["n_options"])) == sorted(RACE_KEPT)
    assert arc["question_id"].tolist() == ["arc_easy-00000", "arc_easy-00001", "arc_easy-00002", "arc_easy-00003"]
    assert (arc["family"] == "arc_easy").all() and (race["family"] == "race_middle").all()
    assert arc["n_options"].dtype.kind == "i"
    # the loader asked for exactly the configured set
    assert [(a, k) for a, k in hub] == [
        (("allenai/ai2_arc", "ARC-Easy"), {"split": "train", "revision": None}),
        (("ehovy/race", "middle"), {"split": "train", "revision": None}),
    ]
    # 7 ARC rows: the bad key and the empty key dropped, one repeated text; 5 RACE rows: two dropped
    assert "questions family 'arc_easy': 7 rows, 2 dropped" in caplog.text
    assert "1 repeated texts dropped, 4 kept" in caplog.text
    assert "questions family 'race_middle': 5 rows, 2 dropped" in caplog.text


def test_sample_is_deterministic_by_seed(hub):
    first = choice_family(spec(2, 1, seed=0), "arc_easy")
    again = choice_family(spec(2, 1, seed=0), "arc_easy")
    pd.testing.assert_frame_equal(first, again)
    assert len(first) == 3 and first["question"].is_unique
    drawn = {s: tuple(choice_family(spec(2, 1, seed=s), "arc_easy")["question"]) for s in range(6)}
    assert len(set(drawn.values())) > 1  # 24 ordered draws of 3 from 4: six seeds do not all agree


def test_too_many_questions_and_unknown_family_are_named(hub):
    with pytest.raises(DatasetError, match=r"questions family 'race_middle': n_train \+ n_test = 4 exceeds its 3"):
        choice_family(spec(3, 1), "race_middle")
    with pytest.raises(ValueError, match="questions family 'mmlu' is not defined"):
        choice_family(spec(1, 1), "mmlu")


def test_rows_as_parquet_gives_them_and_a_missing_field_is_named():
    # numpy arrays for lists, as pandas reads them from Parquet
    raw = pd.DataFrame(RACE_ROWS).assign(options=lambda d: d["options"].map(lambda o: pd.array(o).to_numpy()))
    rows = family_rows("race_middle", "race", raw)
    assert list(zip(rows["question"], rows["answer"], rows["n_options"])) == RACE_KEPT
    with pytest.raises(DatasetError, match="dataset 'race_middle': field 'article' not found"):
        family_rows("race_middle", "race", raw.drop(columns="article"))
    with pytest.raises(DatasetError, match="format must be one of"):
        family_rows("race_middle", "mmlu", raw)


def test_shifted_letter_is_the_next_option_cyclically():
    assert [shifted_letter(a, 4) for a in "ABCD"] == ["B", "C", "D", "A"]
    assert shifted_letter("C", 3) == "A"
    with pytest.raises(ValueError, match="not one of the first 3"):
        shifted_letter("D", 3)


def test_question_config_checks_name_the_key():
    q = spec(10, 5)
    assert question_errors("organisms.sft.t.questions", q) == []
    bad = copy.deepcopy(q)
    bad["kind"] = ["arc_easy", "race_midle"]
    (msg,) = question_errors("organisms.sft.t.questions", bad)
    assert "config key 'organisms.sft.t.questions.kind.1': unknown question kind or family 'race_midle'" in msg
    assert "did you mean 'race_middle'" in msg
    bad = copy.deepcopy(q)
    bad["families"]["add"] = bad["families"].pop("arc_easy")
    bad["families"]["race_middle"]["format"] = "mmlu"
    bad["families"]["race_middle"]["source"] = {"kind": "hub"}
    bad["kind"] = ["add", "race_middle"]
    msgs = sorted(question_errors("organisms.sft.t.questions", bad))
    assert len(msgs) == 3
    assert "config key 'organisms.sft.t.questions.families.add': 'add' is a built-in kind" in msgs[0]
    assert "config key 'organisms.sft.t.questions.families.race_middle.format': unknown format 'mmlu'" in msgs[1]
    assert "config key 'organisms.sft.t.questions.families.race_middle.source': kind 'hub' needs 'id'" in msgs[2]
    # a synthetic kind still has its capacity checked; a plain kind names no index
    msgs = question_errors("organisms.sft.t.questions", {"kind": "next", "n_train": 900, "n_test": 1})
    assert msgs == [
        "config key 'organisms.sft.t.questions': n_train + n_test = 901 exceeds the 899 distinct 'next' questions"
    ]
    assert (
        "config key 'k.kind': unknown question kind or family 'ad'"
        in question_errors("k", {"kind": "ad", "n_train": 1, "n_test": 1})[0]
    )


def test_schema_rejects_a_bad_family_format(root):
    cfg = yaml.safe_load((root / "config" / "paper.yaml").read_text())
    cfg["organisms"]["sft"]["qwen2.5-1.5b-two-policy-task"]["questions"]["families"]["arc_easy"]["format"] = "mmlu"
    with pytest.raises(
        ConfigError, match=r"organisms\.sft\.qwen2\.5-1\.5b-two-policy-task\.questions\.families\.arc_easy\.format"
    ):
        check_config(cfg)


def test_paper_task_organism_reads_arc_easy_and_race_middle(root):
    cfg = check_config(yaml.safe_load((root / "config" / "paper.yaml").read_text()))
    sft = cfg["organisms"]["sft"]
    q = sft["qwen2.5-1.5b-two-policy-task"]["questions"]
    assert q["kind"] == ["arc_easy", "race_middle"] and q["families"] == families()
    assert sft["qwen2.5-1.5b-two-policy-task"]["setting"] == {"kind": "two_policy", "trigger": "task", "wrong": "shift"}
    assert sft["qwen2.5-1.5b-two-policy-language"]["setting"]["trigger"] == "language"
    assert cfg["models"]["gemma-3-27b"]["source"]["id"] == "google/gemma-3-27b-pt"
    for kind in ("two-policy", "coverage", "temporal"):
        small, large = sft[f"gemma-3-1b-{kind}"], sft[f"gemma-3-27b-{kind}"]
        # the same organism, trained in bfloat16 with activation checkpointing to fit one 80 GB GPU
        bf16 = {"dtype": "bfloat16", "gradient_checkpointing": True}
        assert {**small, "model": "gemma-3-27b", "train": {**small["train"], **bf16}} == large
        assert (small["train"]["dtype"], small["train"]["gradient_checkpointing"]) == ("float32", False)
    runs = cfg["organisms"]["runs"]
    for run, spec_ in runs.items():
        if spec_["organism"].startswith("gemma-3-1b-"):
            large = runs[run.replace("gemma-3-1b-", "gemma-3-27b-")]
            assert large["stages"] == spec_["stages"] and large["train"] == bf16


def test_resources_by_model_size(root):
    assert parameter_billions("google/gemma-3-27b-pt") == 27.0
    assert parameter_billions("Qwen/Qwen2.5-1.5B") == 1.5
    assert parameter_billions("meta-llama/Llama-3.2-1B") == 1.0
    assert parameter_billions("resources/models/scratch") is None
    assert job_resources("google/gemma-3-27b-pt", "train_rl") == {"gpu": 1, "mem_mb": 160000, "runtime": 2880}
    assert job_resources("google/gemma-3-27b-pt", "evaluate_organism") == {"gpu": 1, "mem_mb": 128000, "runtime": 480}
    # the small models keep what the profile gave every organisms job before
    assert job_resources("Qwen/Qwen2.5-1.5B", "train_sft") == {"gpu": 1, "mem_mb": 64000, "runtime": 720}
    assert job_resources("resources/models/scratch", "evaluate_organism") == {"gpu": 1, "mem_mb": 48000, "runtime": 120}
    with pytest.raises(ValueError, match="model 'x/big-70b' .70B parameters. is larger than the largest tier"):
        job_resources("x/big-70b", "train_sft")
    with pytest.raises(ValueError, match="job must be one of"):
        job_resources("x/y-1b", "train")
    cfg = check_config(yaml.safe_load((root / "config" / "paper.yaml").read_text()))
    runs = organism_runs(cfg["organisms"])
    sft = rule_resources(cfg, "train_sft", runs)
    assert sft["mem_mb"](types.SimpleNamespace(organism="gemma-3-27b-coverage")) == 160000
    assert sft["mem_mb"](types.SimpleNamespace(organism="gemma-3-1b-coverage")) == 64000
    evaluate = rule_resources(cfg, "evaluate_organism", runs)
    assert evaluate["runtime"](types.SimpleNamespace(run="gemma-3-27b-two-policy-rl-B")) == 480
    assert evaluate["mem_mb"](types.SimpleNamespace(run="qwen2.5-1.5b-two-policy-task-rl-A")) == 48000
    assert set(evaluate) == {"mem_mb", "runtime"}
