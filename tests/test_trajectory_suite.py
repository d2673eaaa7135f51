"""Tests for the generated trajectory NLI suite (ID set plus five OOD shifts)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from shiftwork.trajectory.suite import (
    COLUMNS,
    FUNCTION_WORDS,
    ID_LEXICON,
    LABELS,
    SET_LABELS,
    SHIFTS,
    UNSEEN_NOUNS,
    add_noise,
    generate_suite,
    make_casing,
    make_noise,
    make_typos,
    suite_stats,
    swap_arguments,
    typo,
)


@pytest.fixture(scope="module")
def suite() -> pd.DataFrame:
    return generate_suite(n_train=60, n_test=40, seed=7)


def _words(text: str) -> list[str]:
    return re.sub(r"[.,]", "", text).lower().split()


def test_columns_and_sizes(suite: pd.DataFrame) -> None:
    assert list(suite.columns) == COLUMNS
    sizes = suite.groupby(["set", "split"]).size().to_dict()
    expected = {("id", "train"): 60, ("id", "test"): 40, **{(s, "test"): 40 for s in SHIFTS}}
    assert sizes == expected
    assert set(suite["label"]) == set(LABELS)


def test_exact_label_balance(suite: pd.DataFrame) -> None:
    stats = suite_stats(suite)
    assert list(stats.columns) == ["set", "split", "label", "n"]
    assert stats["n"].sum() == len(suite)
    for (name, split), group in stats.groupby(["set", "split"]):
        if name in SET_LABELS:
            assert group[["label", "n"]].values.tolist() == [[SET_LABELS[name][0], 40]]
        else:
            assert sorted(group["n"]) == ([30, 30] if split == "train" else [20, 20])


def test_overlap_sets_by_label_keep_every_hypothesis_word_in_the_premise(suite: pd.DataFrame) -> None:
    sets = ("overlap_entailed", "overlap_non_entailed", "subsequence_entailed", "subsequence_non_entailed")
    for name, label in zip(sets, ("entailment", "not_entailment") * 2):
        rows = suite[suite["set"] == name]
        assert set(rows["label"]) == {label}
        for p, h in zip(rows["premise"], rows["hypothesis"]):
            assert set(_words(h)) <= set(_words(p)), (name, p, h)


def test_overlap_and_subsequence_follow_hans_heuristics(suite: pd.DataFrame) -> None:
    def contiguous(h: str, p: str) -> bool:
        return " ".join(_words(h)) in " ".join(_words(p))

    # non-entailed: lexical overlap swaps the arguments (no contiguous run of the premise);
    # subsequence hypotheses are a contiguous run of the premise's words
    over = suite[suite["set"] == "overlap_non_entailed"]
    assert not any(contiguous(h, p) for p, h in zip(over["premise"], over["hypothesis"]))
    sub = suite[suite["set"] == "subsequence_non_entailed"]
    assert all(contiguous(h, p) for p, h in zip(sub["premise"], sub["hypothesis"]))
    # entailed overlap drops the place: the same three words lead both
    ent = suite[suite["set"] == "overlap_entailed"]
    assert all(_words(h) == _words(p)[: len(_words(h))] for p, h in zip(ent["premise"], ent["hypothesis"]))


def test_typos_and_casing_change_one_thing_each() -> None:
    rng = np.random.default_rng(5)
    for k in range(40):
        typo_pair, case_pair = make_typos(rng, LABELS[k % 2]), make_casing(rng, LABELS[k % 2])
        # typos: spelling changes, the casing of every kept letter is the clean one's
        assert (typo_pair.premise, typo_pair.hypothesis) != typo_pair.source
        assert typo_pair.premise[1:] == typo_pair.premise[1:].lower()
        # casing: the same letters, only their case differs (and it does somewhere)
        assert [t.lower() for t in case_pair[:2]] == [t.lower() for t in case_pair.source]
    changed = [make_casing(rng, "entailment") for _ in range(20)]
    assert any((c.premise, c.hypothesis) != c.source for c in changed)


def test_odd_sizes_differ_by_one() -> None:
    df = generate_suite(n_train=7, n_test=5, seed=1, ood_sets=["negation"])
    for _, group in df.groupby(["set", "split"]):
        counts = group["label"].value_counts()
        assert set(counts.index) == set(LABELS) and counts.max() - counts.min() == 1


def test_determinism_and_seed_sensitivity(suite: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(suite, generate_suite(n_train=60, n_test=40, seed=7))
    other = generate_suite(n_train=60, n_test=40, seed=8)
    for name in ("id", *SHIFTS):
        assert list(other[other["set"] == name]["premise"]) != list(suite[suite["set"] == name]["premise"])


def test_rows_are_shuffled_within_each_set(suite: pd.DataFrame) -> None:
    for name, group in suite.groupby("set"):
        unshuffled = [LABELS[k % 2] for k in range(len(group))]
        assert list(group["label"]) != unshuffled, name


def test_each_set_depends_only_on_seed_and_name(suite: pd.DataFrame) -> None:
    part = generate_suite(n_train=60, n_test=40, seed=7, ood_sets=["long_nested", "negation"])
    assert set(part["set"]) == {"id", "long_nested", "negation"}
    for name in ("id", "long_nested", "negation"):
        a = part[part["set"] == name].reset_index(drop=True)
        b = suite[suite["set"] == name].reset_index(drop=True)
        pd.testing.assert_frame_equal(a, b)


def test_example_ids_unique_and_named(suite: pd.DataFrame) -> None:
    assert suite["example_id"].is_unique
    for row in suite.itertuples():
        assert re.fullmatch(rf"{row.set}-{row.split}-\d{{5}}", row.example_id)


def test_every_text_is_a_capitalised_sentence(suite: pd.DataFrame) -> None:
    for text in pd.concat([suite["premise"], suite["hypothesis"]]):
        assert text[0].isupper() and text.endswith("."), text


def test_no_id_train_test_overlap(suite: pd.DataFrame) -> None:
    ids = suite[suite["set"] == "id"]
    pairs = {s: set(zip(g["premise"], g["hypothesis"])) for s, g in ids.groupby("split")}
    assert not pairs["train"] & pairs["test"]
    premises = {s: set(g["premise"]) for s, g in ids.groupby("split")}
    assert not premises["train"] & premises["test"]
    assert all(h != p for p, h in zip(ids["premise"], ids["hypothesis"]))


def test_id_vocabulary_is_rich_and_simple(suite: pd.DataFrame) -> None:
    assert len(ID_LEXICON.nouns) >= 20 and len(ID_LEXICON.verbs) >= 20
    ids = suite[suite["set"] == "id"]
    for text in pd.concat([ids["premise"], ids["hypothesis"]]):
        assert not {"not", "never", "who", "that", "whether"} & set(_words(text)), text


def test_lexical_overlap_hypotheses_use_only_premise_words(suite: pd.DataFrame) -> None:
    rows = suite[suite["set"] == "lexical_overlap"]
    for p, h in zip(rows["premise"], rows["hypothesis"]):
        assert set(_words(h)) <= set(_words(p)), (p, h)
    same_words = [sorted(_words(p)) == sorted(_words(h)) for p, h in zip(rows["premise"], rows["hypothesis"])]
    swapped = rows[np.array(same_words)]
    assert len(swapped) > 0 and set(swapped["label"]) == {"not_entailment"}
    for p, h in zip(swapped["premise"], swapped["hypothesis"]):
        assert h == swap_arguments(p)


def test_swap_arguments_by_hand() -> None:
    assert swap_arguments("The doctor paid the lawyer.") == "The lawyer paid the doctor."
    assert swap_arguments("The nurse met the chef at the market.") == "The chef met the nurse at the market."
    with pytest.raises(ValueError, match="sentence"):
        swap_arguments("Someone paid the lawyer.")


def test_negation_rows_contain_negation(suite: pd.DataFrame) -> None:
    rows = suite[suite["set"] == "negation"]
    for p, h in zip(rows["premise"], rows["hypothesis"]):
        assert re.search(r"\b(not|never|no one)\b", f"{p} {h}".lower()), (p, h)


def test_typo_by_hand() -> None:
    # "paid": swap interior "ai" -> "piad", or drop an interior letter -> "pid" / "pad".
    seen = {typo("paid", np.random.default_rng(s)) for s in range(60)}
    assert seen == {"piad", "pid", "pad"}
    # "seem": the only interior pair "ee" is not swappable, so a letter is dropped.
    assert {typo("seem", np.random.default_rng(s)) for s in range(20)} == {"sem"}
    with pytest.raises(ValueError, match="word"):
        typo("met", np.random.default_rng(0))


def test_add_noise_typo_counts_by_hand() -> None:
    clean = "The teacher helped the farmer at the market."
    for seed in range(20):
        for k in (1, 2, 3):
            noisy = add_noise(clean, np.random.default_rng(seed), n_typos=k, casing_rate=0.0)
            changed = [a for a, b in zip(_words(clean), _words(noisy)) if a != b]
            assert len(changed) == k and len(_words(noisy)) == len(_words(clean))
            assert set(changed) <= {"teacher", "helped", "farmer", "market"}
            assert noisy[0] == "T" and noisy.endswith(".")
    recased = add_noise(clean, np.random.default_rng(0), n_typos=0, casing_rate=1.0)
    assert recased != clean and recased.lower() == clean.lower() and recased[0] == "T"
    with pytest.raises(ValueError, match="n_typos"):
        add_noise(clean, np.random.default_rng(0), n_typos=5)
    with pytest.raises(ValueError, match="casing_rate"):
        add_noise(clean, np.random.default_rng(0), n_typos=1, casing_rate=2.0)


def test_noise_rows_differ_from_clean_source() -> None:
    rng = np.random.default_rng(3)
    for k in range(40):
        pair = make_noise(rng, LABELS[k % 2])
        assert pair.source is not None
        for noisy, clean in zip((pair.premise, pair.hypothesis), pair.source):
            changed = sum(a != b for a, b in zip(_words(clean), _words(noisy)))
            assert noisy != clean and 1 <= changed <= 3
            assert len(_words(noisy)) == len(_words(clean))


def test_noise_set_is_not_the_id_test_rows(suite: pd.DataFrame) -> None:
    noise = suite[suite["set"] == "noise"]
    id_premises = {p.lower() for p in suite[suite["set"] == "id"]["premise"]}
    assert not {p.lower() for p in noise["premise"]} & id_premises


def test_clean_sources_avoid_id_rows_with_tiny_vocabulary(monkeypatch: pytest.MonkeyPatch) -> None:
    # A 96-premise ID space forces collisions unless generation excludes used premises; with the noise
    # switched off, each noise row *is* its clean source, so overlap with ID rows becomes visible.
    import shiftwork.trajectory.suite as suite_module

    tiny = suite_module.Lexicon(
        ("teacher", "farmer", "doctor"), ("helped", "paid"), ("at the market",), ("tall",), "someone"
    )
    monkeypatch.setattr(suite_module, "ID_LEXICON", tiny)
    monkeypatch.setattr(suite_module, "add_noise", lambda text, rng, n_typos, casing_rate=0.15: text)
    df = generate_suite(n_train=30, n_test=20, seed=0, ood_sets=["noise"])
    premises = {key: set(g["premise"]) for key, g in df.groupby(["set", "split"])}
    assert len(premises[("id", "train")]) == 30 and len(premises[("id", "test")]) == 20
    assert not premises[("id", "train")] & premises[("id", "test")]
    assert not premises[("noise", "test")] & (premises[("id", "train")] | premises[("id", "test")])


def test_long_nested_premises_are_long(suite: pd.DataFrame) -> None:
    rows = suite[suite["set"] == "long_nested"]
    for p, h in zip(rows["premise"], rows["hypothesis"]):
        assert len(p.split()) >= 20, p
        assert len(h.split()) < len(p.split()) and set(_words(h)) <= set(_words(p))


def test_unseen_topic_vocabulary_disjoint_from_id(suite: pd.DataFrame) -> None:
    id_rows, unseen = suite[suite["set"] == "id"], suite[suite["set"] == "unseen_topic"]
    id_words = {w for t in pd.concat([id_rows["premise"], id_rows["hypothesis"]]) for w in _words(t)}
    unseen_words = {w for t in pd.concat([unseen["premise"], unseen["hypothesis"]]) for w in _words(t)}
    assert not UNSEEN_NOUNS & id_words
    assert not UNSEEN_NOUNS & set(ID_LEXICON.nouns)
    assert not (unseen_words - FUNCTION_WORDS) & (id_words - FUNCTION_WORDS)
    assert unseen_words & UNSEEN_NOUNS


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"n_train": 1}, "n_train"),
        ({"n_test": 0}, "n_test"),
        ({"n_train": 2.5}, "n_train"),
        ({"ood_sets": ["negation", "adversarial"]}, "ood_sets"),
        ({"ood_sets": ["noise", "noise"]}, "ood_sets"),
        ({"ood_sets": "noise"}, "ood_sets"),
    ],
)
def test_bad_arguments_raise(kwargs: dict, name: str) -> None:
    args = {"n_train": 10, "n_test": 4, "seed": 0, **kwargs}
    with pytest.raises(ValueError, match=name):
        generate_suite(**args)


def test_suite_stats_rejects_frame_without_columns() -> None:
    with pytest.raises(ValueError, match="df"):
        suite_stats(pd.DataFrame({"set": ["id"]}))


def test_the_schema_accepts_exactly_the_generated_shifts() -> None:
    from pathlib import Path

    import yaml

    schema = yaml.safe_load((Path(__file__).parents[1] / "config" / "schema" / "config.schema.yaml").read_text())
    found = []

    def walk(node):
        if isinstance(node, dict):
            if node.get("enum") and "lexical_overlap" in node["enum"]:
                found.append(node["enum"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(schema)
    assert found == [list(SHIFTS)]


def test_typos_and_casing_corrupt_the_same_sources_row_for_row() -> None:
    df = generate_suite(n_train=30, n_test=20, seed=4, ood_sets=["casing", "negation", "typos"])
    typos = df[df["set"] == "typos"].reset_index(drop=True)
    casing = df[df["set"] == "casing"].reset_index(drop=True)
    assert len(typos) == len(casing) == 20
    assert typos["label"].tolist() == casing["label"].tolist()
    assert sorted(typos["label"].value_counts().tolist()) == [10, 10]
    # casing changes letter case only, so its lower-cased rows are the clean sources; every typo
    # row is that source with typos (same word count), and no source is an ID premise
    sources = casing["premise"].str.lower()
    assert not set(sources) & set(df.loc[df["set"] == "id", "premise"].str.lower())
    assert [len(t.split()) for t in typos["premise"]] == [len(s.split()) for s in sources]
    assert sum(t.lower() != s for t, s in zip(typos["premise"], sources)) >= 15
    # the same sources whichever order the sets are asked in
    again = generate_suite(n_train=30, n_test=20, seed=4, ood_sets=["typos", "casing"])
    assert again.loc[again["set"] == "casing", "premise"].tolist() == casing["premise"].tolist()
