import hashlib

import pandas as pd

from shiftwork.seeding import rng_for
from shiftwork.stability.variants.build import MAX_REDRAWS, build_variants, build_variants_counted
from shiftwork.stability.variants.noise import apply_noise
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


# --------------------------------------------------------------------------- unchanged variants

SHOUT = pd.DataFrame(
    {
        "dataset": ["toy"] * 3,
        "prompt_id": ["upper", "digits", "mixed"],
        "prompt": ["WHAT IS DNA", "1 + 2 = 3", "Name it"],
    }
)
CASING_ONLY = {
    "register": {"enabled": False},
    "noise": {"enabled": True, "style": "method", "positions": ["global"], "spacing": [1], "casing": [0.3]},
    "structural": {"enabled": False},
}


def test_casing_that_changes_nothing_is_dropped_and_counted():
    t, counts = build_variants_counted(SHOUT, CASING_ONLY, seed=0)
    noise = t[t["family"] == "noise"]
    assert (noise["text"] != noise["original"]).all()
    # "WHAT IS DNA" (no lower-case letter) and "1 + 2 = 3" (no letter): casing dropped, spacing kept
    assert set(noise.loc[noise["prompt_id"] != "mixed", "kind"]) == {"spacing"}
    assert counts["noise"]["dropped"] == 2
    assert counts["register"] == {"redrawn": 0, "dropped": 0}
    assert len(t) == 3 + 3 + 1  # baselines, spacing x3, casing of "mixed" only
    assert build_variants(SHOUT, CASING_ONLY, seed=0).equals(t)


def test_redraw_uses_the_same_generator_and_is_counted():
    # "Ab": method casing upper-cases max(1, floor(0.3 * 2)) = 1 of A, b; drawing A changes nothing,
    # so each draw is unchanged with chance 1/2: some variants need a redraw, a few run out of tries
    prompts = pd.DataFrame({"dataset": ["toy"] * 12, "prompt_id": [f"p{i}" for i in range(12)], "prompt": ["Ab"] * 12})
    t, counts = build_variants_counted(prompts, CASING_ONLY, seed=0)
    redrawn = dropped = 0
    for pid in prompts["prompt_id"]:
        gen = rng_for(0, "toy", pid, "casing", "global", 0.3)
        draws = [apply_noise("Ab", "casing", 0.3, "global", gen, "method") for _ in range(MAX_REDRAWS + 1)]
        if "AB" not in draws:
            dropped += 1
        elif draws[0] == "Ab":
            redrawn += 1
    assert redrawn > 0
    assert counts["noise"] == {"redrawn": redrawn, "dropped": dropped}
    casing = t[t["kind"] == "casing"]
    assert (casing["text"] == "AB").all() and len(casing) == 12 - dropped
    again = build_variants_counted(prompts, CASING_ONLY, seed=0)
    assert again[0].equals(t) and again[1] == counts


def test_region_style_and_marks_come_from_the_settings():
    settings = {
        **SETTINGS,
        "noise": {"enabled": True, "style": "region", "marks": "*", "positions": ["prefix"], "punctuation": [4]},
    }
    t = build_variants(PROMPTS, settings, seed=0)
    punct = t[t["kind"] == "punctuation"]
    for original, text in zip(punct["original"], punct["text"]):
        assert text.count("*") == 4 and text.replace("*", "") == original
        assert text.rstrip("*").endswith(original[len(original) // 3 + 1 :])  # only the first third touched


def test_make_variants_records_counts_and_gate_report_shows_them(tmp_path):
    from shiftwork.stability.gate_report import gate_markdown, gate_overview
    from shiftwork.stability.steps import make_variants
    from shiftwork.tables import read_provenance

    prompts = tmp_path / "prompts.parquet"
    write_table(SHOUT, prompts, {})
    out = tmp_path / "variants.parquet"
    make_variants(str(prompts), CASING_ONLY, 0, str(out))
    unchanged = read_provenance(out)["unchanged"]
    assert unchanged["noise"] == {"redrawn": 0, "dropped": 2}

    summary = pd.DataFrame(
        {
            "dataset": ["toy"],
            "family": ["noise"],
            "kind": ["spacing"],
            "position": ["global"],
            "strength": [1.0],
            "n": [3],
            "mean_f1": [0.9],
            "mean_gate_score": [0.5],
            "n_under": [0],
            "b": [0.2],
            "scale": ["rescaled"],
            "threshold": [0.1],
        }
    )
    dropped = pd.DataFrame(columns=["dataset", "prompt_id", "reason"])
    overview = gate_overview(summary, dropped, {"toy": 3}, {"toy": unchanged})
    row = overview.iloc[0]
    assert row["noise_unchanged_dropped"] == 2 and row["noise_unchanged_redrawn"] == 0
    assert row["register_unchanged_dropped"] == 0
    md = gate_markdown(overview, summary, dropped)
    assert "## Variants equal to their prompt" in md
    assert "| toy | 0 | 0 | 0 | 2 |" in md
    # without counts (tables written before this change) the columns read 0
    assert gate_overview(summary, dropped, {"toy": 3})["noise_unchanged_dropped"].item() == 0
