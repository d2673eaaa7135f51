import hashlib

import pandas as pd

from shiftwork.stability.variants.build import build_variants
from shiftwork.stability.variants.register import apply_register
from shiftwork.tables import write_table

PROMPTS = pd.DataFrame(
    {
        "dataset": ["toy", "toy"],
        "prompt_id": ["t1", "t2"],
        "prompt": ["What is the boiling point of water at sea level?", "List three uses of copper."],
    }
)
SETTINGS = {
    "register": {"enabled": True, "strengths": [-10, 4], "positions": ["prefix", "global"]},
    "noise": {"enabled": True, "positions": ["suffix"], "spacing": [2, 5], "punctuation": [3], "casing": [0.5]},
    "structural": {"enabled": True, "lengths": [2], "form": True},
}
REWRITES = pd.DataFrame(
    {
        "prompt_id": ["t1", "t1"],
        "kind": ["length", "form"],
        "strength": [2.0, 1.0],
        "rewrite": ["Long version of t1.", "Tell me the boiling point of water at sea level."],
    }
)


def test_counts_and_columns():
    t = build_variants(PROMPTS, SETTINGS, seed=0, rewrites=REWRITES)
    # per prompt: 1 baseline + 2x2 register + 4 noise (+ 2 structural for t1 only)
    assert (t["prompt_id"] == "t1").sum() == 1 + 4 + 4 + 2
    assert (t["prompt_id"] == "t2").sum() == 1 + 4 + 4
    assert t["variant_id"].is_unique
    assert list(t.columns[:3]) == ["dataset", "prompt_id", "variant_id"]
    base = t[t["family"] == "baseline"]
    assert (base["text"] == base["original"]).all() and (base["strength"] == 0).all()
    reg = t[
        (t["prompt_id"] == "t2") & (t["family"] == "register") & (t["strength"] == -10) & (t["position"] == "global")
    ]
    assert reg["text"].item() == apply_register("List three uses of copper.", -10, "global")
    spacing5 = t[(t["prompt_id"] == "t1") & (t["kind"] == "spacing") & (t["strength"] == 5)]["text"].item()
    assert spacing5.count(" ") == PROMPTS["prompt"][0].count(" ") + 5
    form = t[(t["family"] == "structural") & (t["kind"] == "form")]
    assert form["text"].item().startswith("Tell me")


def test_disabled_families_are_left_out():
    settings = {**SETTINGS, "noise": {**SETTINGS["noise"], "enabled": False}, "structural": {"enabled": False}}
    t = build_variants(PROMPTS, settings, seed=0, rewrites=REWRITES)
    assert set(t["family"]) == {"baseline", "register"}


def test_same_seed_gives_identical_parquet_bytes(tmp_path):
    def digest_for(seed, name):
        path = write_table(build_variants(PROMPTS, SETTINGS, seed, REWRITES), tmp_path / name, {"seed": seed})
        return hashlib.sha256(path.read_bytes()).hexdigest()

    assert digest_for(7, "a.parquet") == digest_for(7, "b.parquet")
    assert digest_for(7, "c.parquet") != digest_for(8, "d.parquet")
