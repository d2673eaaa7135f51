"""Stand-ins of hub data sets: a few rows in the real columns (nested fields included) and splits,
written into the ``datasets`` cache (``HF_DATASETS_CACHE/ORG___NAME/CONFIG/0.0.0/HASH``) that
``load_dataset(ID, CONFIG, split=...)`` reads when the hub is offline. The loading code is then the
paper run's own (:func:`shiftwork.data.read_source`), split arithmetic (``test_r1+test_r2``) and
revisions (the parquet branch of a script data set) included.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROWS = 24
HASH = "0000000000000000"

SUBJECTS = ["the cat", "a farmer", "the old bridge", "my sister", "the river", "a student", "the city council"]
VERBS = ["crossed", "painted", "visited", "described", "measured", "repaired", "watched"]
OBJECTS = ["the valley", "a red barn", "the harbour", "an old map", "the garden", "a long letter", "the tower"]
TOPICS = ["history", "science", "geography", "music", "sports", "art"]


def sentence(i: int) -> str:
    return f"{SUBJECTS[i % 7].capitalize()} {VERBS[(3 * i + 1) % 7]} {OBJECTS[(5 * i + 2) % 7]}."


def question(i: int) -> str:
    return f"Why did {SUBJECTS[i % 7]} {VERBS[(2 * i) % 7].removesuffix('ed')} {OBJECTS[(i + 3) % 7]}?"


def answer(i: int) -> str:
    return f"Because of {OBJECTS[(i + 4) % 7]} in {1900 + 7 * i}."


Row = Callable[[int, str], dict[str, Any]]


def _pair(i: int) -> tuple[str, str]:
    return sentence(i), sentence(i + 1 if i % 2 else i)


def nli(labels: list[Any], premise: str = "premise", hypothesis: str = "hypothesis", **extra: Any) -> Row:
    def row(i: int, split: str) -> dict[str, Any]:
        p, h = _pair(i)
        out = {premise: p, hypothesis: h, "label": labels[i % len(labels)]}
        return out | {k: (v(i) if callable(v) else v) for k, v in extra.items()}

    return row


SCHEMAS: dict[str, Row] = {
    "truthfulqa/truthful_qa": lambda i, s: {
        "type": "Adversarial",
        "category": TOPICS[i % 6].capitalize(),
        "question": question(i),
        "best_answer": answer(i),
        "correct_answers": [answer(i), answer(i + 1)],
        "incorrect_answers": [answer(i + 2)],
        "source": f"https://example.org/{i}",
    },
    "google-research-datasets/natural_questions": lambda i, s: {
        "id": str(5_000_000_000_000_000 + i),
        "document": {"title": OBJECTS[i % 7], "url": f"https://example.org/{i}", "html": f"<p>{sentence(i)}</p>"},
        "question": {"text": question(i).lower().rstrip("?"), "tokens": question(i).lower().rstrip("?").split()},
        "long_answer_candidates": {"start_token": [0], "end_token": [5], "top_level": [True]},
        "annotations": {"id": [str(i)], "yes_no_answer": [-1]},
    },
    "tatsu-lab/alpaca": lambda i, s: {
        "instruction": f"Describe how {SUBJECTS[i % 7]} {VERBS[i % 7]} {OBJECTS[i % 7]}.",
        "input": "" if i % 3 else sentence(i + 2),
        "output": sentence(i + 3),
        "text": f"### Instruction:\n{sentence(i)}",
    },
    "google/simpleqa-verified": lambda i, s: {
        "original_index": i,
        "problem": question(i),
        "answer": str(1900 + 7 * i),
        "topic": TOPICS[i % 6],
        "answer_type": "Date",
        "multi_step": bool(i % 2),
        "requires_reasoning": False,
        "urls": f"https://example.org/{i}",
    },
    "mandarjoshi/trivia_qa": lambda i, s: {
        "question": question(i),
        "question_id": f"tc_{i}",
        "question_source": "http://www.quizballs.com/",
        "entity_pages": {"doc_source": [], "filename": [], "title": [], "wiki_context": []},
        "search_results": {"description": [], "filename": [], "rank": [], "title": [], "url": [], "search_context": []},
        "answer": {
            "aliases": [answer(i)],
            "normalized_aliases": [answer(i).lower()],
            "matched_wiki_entity_name": "",
            "normalized_matched_wiki_entity_name": "",
            "normalized_value": answer(i).lower(),
            "type": "WikipediaEntity",
            "value": answer(i),
        },
    },
    "hotpotqa/hotpot_qa": lambda i, s: {
        "id": f"5a8b57f25542995d1e6f{i:04d}",
        "question": question(i),
        "answer": answer(i),
        "type": "comparison" if i % 2 else "bridge",
        "level": "hard",
        "supporting_facts": {"title": [OBJECTS[i % 7]], "sent_id": [0]},
        "context": {"title": [OBJECTS[i % 7]], "sentences": [[sentence(i), sentence(i + 1)]]},
    },
    "nyu-mll/glue/mnli": nli([0, 1, 2], idx=lambda i: i),
    "nyu-mll/glue/rte": nli([0, 1], "sentence1", "sentence2", idx=lambda i: i),
    "nyu-mll/glue/wnli": nli([0, 1], "sentence1", "sentence2", idx=lambda i: i),
    "stanfordnlp/snli": nli([0, 1, 2, -1]),
    "allenai/scitail": nli(["entails", "neutral"], hypothesis_graph_structure=""),
    "jhu-cogsci/hans": nli(
        [0, 1],
        parse_premise="",
        parse_hypothesis="",
        binary_parse_premise="",
        binary_parse_hypothesis="",
        heuristic="lexical_overlap",
        subcase="ln_subject/object_swap",
        template="temp1",
    ),
    "facebook/anli": nli([0, 1, 2], uid=lambda i: f"anli-{i}", reason=""),
    "google-research-datasets/paws": nli([0, 1], "sentence1", "sentence2", id=lambda i: i + 1),
    "allenai/ai2_arc": lambda i, s: {
        "id": f"Mercury_{7000 + i}",
        "question": question(i),
        "choices": {"text": [answer(i), answer(i + 1), answer(i + 2), answer(i + 3)], "label": list("ABCD")},
        # a few rows carry digit labels, as some real ones do
        "answerKey": "ABCD"[i % 4],
    },
    "ehovy/race": lambda i, s: {
        "example_id": f"middle{i}.txt",
        "article": " ".join(sentence(i + k) for k in range(4)),
        "answer": "ABCD"[i % 4],
        "question": question(i),
        "options": [answer(i), answer(i + 1), answer(i + 2), answer(i + 3)],
    },
}

# the splits of each data set as the hub has them (config -> splits); configs not named get the
# splits of None
SPLITS: dict[str, dict[str | None, list[str]]] = {
    "truthfulqa/truthful_qa": {None: ["validation"]},
    "google-research-datasets/natural_questions": {None: ["train", "validation"]},
    "tatsu-lab/alpaca": {None: ["train"]},
    "google/simpleqa-verified": {None: ["eval"]},
    "mandarjoshi/trivia_qa": {None: ["train", "validation", "test"]},
    "hotpotqa/hotpot_qa": {None: ["train", "validation"]},
    "nyu-mll/glue": {
        "mnli": ["train", "validation_matched", "validation_mismatched", "test_matched", "test_mismatched"],
        None: ["train", "validation", "test"],
    },
    "stanfordnlp/snli": {None: ["train", "validation", "test"]},
    "allenai/scitail": {None: ["train", "validation", "test"]},
    "jhu-cogsci/hans": {None: ["train", "validation"]},
    "facebook/anli": {None: [f"{s}_r{r}" for r in (1, 2, 3) for s in ("train", "dev", "test")]},
    "google-research-datasets/paws": {None: ["train", "validation", "test"]},
    "allenai/ai2_arc": {None: ["train", "validation", "test"]},
    "ehovy/race": {None: ["train", "validation", "test"]},
}

# the config a data set without one is cached under (what the hub's export calls it)
DEFAULT_CONFIG: dict[str, str] = {
    "tatsu-lab/alpaca": "default",
    "stanfordnlp/snli": "plain_text",
    "jhu-cogsci/hans": "plain_text",
    "facebook/anli": "plain_text",
}


def schema(hub_id: str, config: str | None) -> Row:
    row = SCHEMAS.get(f"{hub_id}/{config}") or SCHEMAS.get(hub_id)
    if row is None:
        raise ValueError(f"no stand-in rows for hub data set '{hub_id}'; add them to shiftwork.rehearsal.datasets")
    return row


def splits(hub_id: str, config: str | None) -> list[str]:
    known = SPLITS.get(hub_id) or {None: ["train", "validation", "test"]}
    return known.get(config, known[None])


def frame(hub_id: str, config: str | None, split: str, rows: int = ROWS) -> pd.DataFrame:
    row = schema(hub_id, config)
    offset = 1000 * splits(hub_id, config).index(split)
    return pd.DataFrame([row(offset + i, split) for i in range(rows)])


def write_dataset(datasets_cache: Path, hub_id: str, config: str | None, rows: int = ROWS) -> Path:
    """Cache the stand-in of ``hub_id`` (config ``config``) where an offline ``load_dataset`` finds it."""
    import datasets
    from datasets.packaged_modules.parquet.parquet import Parquet

    name = config or DEFAULT_CONFIG.get(hub_id, "default")
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for split in splits(hub_id, config):
            path = Path(tmp) / f"{split}.parquet"
            frame(hub_id, config, split, rows).to_parquet(path)
            files[split] = [str(path)]
        builder = Parquet(
            cache_dir=str(datasets_cache),
            dataset_name=hub_id.split("/")[-1],
            config_name=name,
            config_id=name,
            data_files=files,
            hash=HASH,
        )
        # the cache folder of the hub data set (ORG___NAME), not of the local files
        builder.repo_id = hub_id
        builder._cache_dir = builder._build_cache_dir()
        datasets.disable_progress_bars()
        builder.download_and_prepare()
        return Path(builder.cache_dir)


def hub_sources(config: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every hub data set source of a config: stability prompt sets, trajectory sets, organisms'
    question families."""

    def walk(node: Any) -> Iterator[dict[str, Any]]:
        if isinstance(node, Mapping):
            src = node.get("source")
            if isinstance(src, Mapping) and src.get("kind") == "hub" and "split" in src:
                yield dict(src)
            for value in node.values():
                yield from walk(value)
        elif isinstance(node, list):
            for value in node:
                yield from walk(value)

    for key in ("datasets", "trajectory", "organisms"):
        yield from walk(config.get(key) or {})


def dataset_ids(config: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    return sorted({(s["id"], s.get("config")) for s in hub_sources(config)}, key=lambda k: (k[0], k[1] or ""))


def as_numpy_free(value: Any) -> Any:
    """Plain Python values of a Parquet cell (for comparisons in tests)."""
    if isinstance(value, np.ndarray):
        return [as_numpy_free(v) for v in value.tolist()]
    if isinstance(value, Mapping):
        return {k: as_numpy_free(v) for k, v in value.items()}
    return value
