"""The trajectory study's paper setting (config/paper.yaml): every hub set of its suites loads
through the real loader from a local copy in the hub's layout, with the authors' two-way labels,
and a dry run plans one fine-tuning job per (model, ID set, shots, seed)."""

import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from shiftwork.config import check_config
from shiftwork.trajectory.tasks import PATTERN, VERBALISERS, load_set, map_labels, render

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def paper() -> dict:
    return check_config(yaml.safe_load((ROOT / "config" / "paper.yaml").read_text()))


def labelled_sets(paper: dict) -> list[tuple[str, str, str, dict]]:
    """(suite, split, set name, spec) of every labelled set of the paper config's suites."""
    out = []
    for suite, spec in paper["trajectory"]["suites"].items():
        out.append((suite, "train", "id", spec["id_train"]))
        out.append((suite, "test", "id", spec["id_test"]))
        out += [(suite, "test", name, ood) for name, ood in spec["ood"].items()]
    return out


def raw_label(key: str) -> object:
    return int(key) if re.fullmatch(r"-?\d+", key) else key


def source_rows(spec: dict, split: str) -> pd.DataFrame:
    """Hand-made rows of one split of a hub set: one row per source label of the set's mapping,
    in the mapping's order, with the set's column names."""
    fields = spec["fields"]
    keys = list(spec["labels"])
    return pd.DataFrame(
        {
            fields["premise"]: [f"{spec['source']['id']} {split} premise {i}." for i in range(len(keys))],
            fields["hypothesis"]: [f"{split} hypothesis {i}." for i in range(len(keys))],
            fields["label"]: [raw_label(k) for k in keys],
            "idx": range(len(keys)),
        }
    )


def write_local_copies(paper: dict, root: Path) -> None:
    """Each hub set as the hub lays it out, under ``root/<hub id>``: a dataset card whose
    ``configs`` name the data files of each config and split (a config-less set is the card's
    default config), or, for a set read from the hub's Parquet export (revision
    refs/convert/parquet), that branch's ``<config>/<split>/0000.parquet`` files and no card."""
    cards: dict[str, dict[str | None, dict[str, pd.DataFrame]]] = {}
    for _, _, _, spec in labelled_sets(paper):
        src = spec["source"]
        for split in src["split"].split("+"):
            cards.setdefault(src["id"], {}).setdefault(src.get("config"), {})[split] = source_rows(spec, split)
        if src.get("revision") == "refs/convert/parquet":
            cards[src["id"]]["__export__"] = {}
    for hub_id, configs in cards.items():
        repo = root / hub_id
        export = configs.pop("__export__", None) is not None
        card = []
        for config, splits in configs.items():
            name = config or "plain_text"
            for split, rows in splits.items():
                path = (
                    repo / name / split / "0000.parquet" if export else repo / name / f"{split}-00000-of-00001.parquet"
                )
                path.parent.mkdir(parents=True, exist_ok=True)
                rows.to_parquet(path)
            entry = {"config_name": name, "data_files": [{"split": s, "path": f"{name}/{s}-*"} for s in splits]}
            card.append({**entry, "default": True} if config is None else entry)
        if not export:
            (repo / "README.md").write_text("---\n" + yaml.safe_dump({"configs": card}) + "---\n")


def test_the_authors_two_way_labels(paper):
    suites = paper["trajectory"]["suites"]
    drop_neutral = suites["mnli"]["id_train"]["labels"]
    got = map_labels("mnli", pd.Series([0, 1, 2, -1]), drop_neutral).tolist()
    assert got == ["entailment", "drop", "not_entailment", "drop"]
    for suite in ("mnli", "snli"):
        sets = {"id": suites[suite]["id_test"], "train": suites[suite]["id_train"], **suites[suite]["ood"]}
        for name in ("mnli", "snli", "anli", "id", "train"):
            if name in sets:
                assert sets[name]["labels"] == drop_neutral, (suite, name)
        assert sets["wnli"]["labels"] == {"1": "entailment", "0": "not_entailment"}
        assert sets["paws"]["labels"] == {"1": "entailment", "0": "not_entailment"}
        assert sets["hans"]["labels"] == {"0": "entailment", "1": "not_entailment"}
        assert sets["rte"]["labels"] == {"0": "entailment", "1": "not_entailment"}
        assert sets["scitail"]["labels"] == {"entails": "entailment", "neutral": "not_entailment"}
        other = {"mnli": "snli", "snli": "mnli"}[suite]
        assert sorted(sets) == sorted(["anli", "hans", "id", "paws", "rte", "scitail", "train", "wnli", other])
    # each ID set is an OOD set of the other suite, read from the same split
    assert suites["mnli"]["ood"]["snli"] == suites["snli"]["id_test"]
    assert suites["snli"]["ood"]["mnli"] == suites["mnli"]["id_test"]


def test_every_hub_set_loads_from_a_local_copy_with_its_labels(paper, tmp_path, monkeypatch):
    import datasets

    write_local_copies(paper, tmp_path / "hub")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    # datasets.load_dataset("<owner>/<name>", ...) reads the local directory of that name when
    # there is one: the same call that reaches the hub on a cluster
    monkeypatch.chdir(tmp_path / "hub")
    calls = []
    load_dataset = datasets.load_dataset

    def recorded(*args, **kwargs):
        calls.append((args, kwargs))
        return load_dataset(*args, **kwargs)

    monkeypatch.setattr(datasets, "load_dataset", recorded)
    seen = set()
    for suite, split, set_name, spec in labelled_sets(paper):
        src = spec["source"]
        assert src["kind"] == "hub"
        df = load_set(spec["name"], spec, split, set_name)
        expected_premises, expected_labels = [], []
        for part in src["split"].split("+"):
            rows = source_rows(spec, part)
            mapped = map_labels(spec["name"], rows[spec["fields"]["label"]], spec["labels"])
            keep = mapped != "drop"
            expected_premises += rows[spec["fields"]["premise"]][keep].tolist()
            expected_labels += mapped[keep].tolist()
        assert df["premise"].tolist() == expected_premises, (suite, set_name)
        assert df["label"].tolist() == expected_labels, (suite, set_name)
        assert set(df["label"]) == {"entailment", "not_entailment"}, (suite, set_name)
        assert (df["split"] == split).all() and (df["set"] == set_name).all()
        seen.add((src["id"], src.get("config"), src["split"]))
    assert seen == {
        ("nyu-mll/glue", "mnli", "train"),
        ("nyu-mll/glue", "mnli", "validation_matched"),
        ("stanfordnlp/snli", None, "train"),
        ("stanfordnlp/snli", None, "test"),
        ("allenai/scitail", "dgem_format", "test"),
        ("nyu-mll/glue", "rte", "train"),
        ("jhu-cogsci/hans", None, "validation"),
        ("facebook/anli", None, "test_r1+test_r2+test_r3"),
        ("nyu-mll/glue", "wnli", "train"),
        ("google-research-datasets/paws", "labeled_final", "test"),
    }
    # HANS is read from the hub's Parquet export, whose config is the default one; the rest from main
    revisions = {args[0]: kwargs["revision"] for args, kwargs in calls}
    assert revisions.pop("jhu-cogsci/hans") == "refs/convert/parquet"
    assert set(revisions.values()) == {None}
    # MNLI's rows labelled 0, 1, 2, -1 become entailment, (dropped), not_entailment, (dropped)
    mnli = load_set("mnli", paper["trajectory"]["suites"]["mnli"]["id_test"], "test", "id")
    assert mnli["premise"].tolist() == [
        "nyu-mll/glue validation_matched premise 0.",
        "nyu-mll/glue validation_matched premise 2.",
    ]
    assert mnli["label"].tolist() == ["entailment", "not_entailment"]


def test_the_authors_pattern_and_verbalisers(paper):
    for suite in paper["trajectory"]["suites"].values():
        assert (
            render("A man sleeps. ", "A man rests.", suite["pattern"])
            == "A man sleeps.Question: A man rests. Yes or No?"
        )
        assert suite["verbalisers"] == {"entailment": " Yes", "not_entailment": " No"}
    # a suite that sets neither gets the defaults stated in the schema, the same as the code's
    default = check_config(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()))
    assert default["trajectory"]["suites"]["nli-synthetic"]["pattern"] == PATTERN
    assert default["trajectory"]["suites"]["nli-synthetic"]["verbalisers"] == VERBALISERS


@pytest.mark.workflow
def test_paper_dry_run_plans_one_finetune_per_model_suite_shots_and_seed(paper):
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "trajectory", "-n", "--cores", "2", "--configfile", "config/paper.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    planned, jobs = [], {}
    for block in re.split(r"\n(?=\[\w{3} \w{3} )", out):
        lines = block.strip().splitlines()
        rule = next(
            (ln.split()[-1].rstrip(":") for ln in lines if ln.startswith(("rule ", "localrule ", "checkpoint "))), None
        )
        jobs[rule] = jobs.get(rule, 0) + 1
        if rule == "finetune_model":
            wildcards = next(ln for ln in lines if ln.strip().startswith("wildcards:"))
            planned.append(wildcards.split("run=")[1].strip())
            assert any("gpu=1" in ln for ln in lines), block
    raw = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())["trajectory"]
    expected = [
        f"{model}-{suite}-k{shots}-s{seed}"
        for grid in raw["grid"].values()
        for model, suite, shots, seed in itertools.product(grid["models"], grid["suites"], grid["shots"], grid["seeds"])
    ]
    assert len(expected) == 8 * 2 * 4 * 5  # OLMo-2 x3, OPT x4, SmolLM3; MNLI, SNLI; 4 shot counts; 5 seeds
    assert len(planned) == len(set(planned)) == len(expected)
    assert sorted(planned) == sorted(expected)
    # a checkpoint before training and after each of the 40 epochs, each scored once
    assert jobs["evaluate_checkpoint"] == 41 * len(expected)
    assert jobs["make_suite"] == 2 and jobs["prepare_model"] == 8
    assert json.dumps(sorted(raw["grid"])) == '["olmo2-smollm3", "opt"]'
