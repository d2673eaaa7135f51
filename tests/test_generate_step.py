"""The generate job's step (shiftwork.stability.steps.generate_responses) on small tables."""

import numpy as np
import pandas as pd
import pytest

from shiftwork.inference.formatting import model_input
from shiftwork.inference.generation import generate_all
from shiftwork.inference.probe import layer_cosines, probe_batches
from shiftwork.models.loading import load_prepared
from shiftwork.stability.jobs import GenerateJob
from shiftwork.stability.steps import generate_responses
from shiftwork.tables import read_provenance, write_table


def _variants(rows):
    cols = ["dataset", "prompt_id", "variant_id", "text", "family", "kind", "position", "strength"]
    return pd.DataFrame([dict(zip(cols, r)) for r in rows])


BASE = ("d", "p1", "p1|baseline", "What is the capital of Italy?", "baseline", "none", "none", 0.0)
VAR = ("d", "p1", "p1|noise", "what is the capital of italy?", "noise", "casing", "global", 0.3)
SAME = ("d", "p1", "p1|same", "What is the capital of Italy?", "noise", "spacing", "prefix", 1.0)


@pytest.mark.parametrize(
    "rows, message",
    [
        ([VAR], r"no baseline row for prompts \['p1'\]"),
        ([BASE, BASE[:2] + ("p1|baseline2",) + BASE[3:], VAR], r"more than one baseline row for prompts \['p1'\]"),
    ],
)
def test_missing_or_doubled_baselines_fail_before_the_model_loads(tmp_path, rows, message):
    path = write_table(_variants(rows), tmp_path / "filtered.parquet")
    outs = [tmp_path / "g.parquet", tmp_path / "p.parquet"]
    with pytest.raises(ValueError, match=message):
        generate_responses(
            str(path),
            str(tmp_path / "no-model"),
            "m",
            *map(str, outs),
            GenerateJob(max_new_tokens=4, batch_size=2, dtype="auto"),
        )
    assert not any(p.exists() for p in outs)


@pytest.mark.model
@pytest.mark.parametrize("engine", ["vllm", "transformers"])
def test_probes_use_the_baseline_response_and_state(tmp_path, prepared_smollm, engine, caplog):
    caplog.set_level("INFO", logger="shiftwork")
    path = write_table(_variants([VAR, BASE, SAME]), tmp_path / "filtered.parquet")
    g_path, p_path = tmp_path / "g.parquet", tmp_path / "p.parquet"
    stats = generate_responses(
        str(path),
        str(prepared_smollm),
        "smol",
        str(g_path),
        str(p_path),
        GenerateJob(max_new_tokens=8, batch_size=2, dtype="float32", engine=engine, store_hidden=True),
    )
    gens = pd.read_parquet(g_path).set_index("variant_id")
    probes = pd.read_parquet(p_path).set_index("variant_id")
    assert stats["rows"] == 3 and stats["unique_inputs"] == 2
    assert read_provenance(p_path)["step"] == "probe" and read_provenance(g_path)["step"] == "generate"
    assert read_provenance(g_path)["settings"]["engine"] == engine
    # each engine counts the prompts it has answered into the log, then each probe pass its rows
    for done in ("generate: 0/2 prompts (0.0%)", "generate: 2/2 prompts (100.0%) done in"):
        assert done in caplog.text
    for done in ("probe baselines: 1/1 rows (100.0%) done in", "probe variants: 1/1 rows (100.0%) done in"):
        assert done in caplog.text

    lm = load_prepared(prepared_smollm, "float32", device="cpu")
    x0, xv = (model_input(lm.tokenizer, t, lm.chat) for t in (BASE[3], VAR[3]))
    r0, rv = (g.response for g in generate_all(lm, [x0, xv], max_new_tokens=8, batch_size=1))
    assert gens.loc["p1|baseline", "response"] == gens.loc["p1|same", "response"] == r0
    assert gens.loc["p1|noise", "response"] == rv
    (p0,) = next(probe_batches(lm, [x0], [r0], batch_size=1))
    (pv,) = next(probe_batches(lm, [xv], [r0], batch_size=1))  # the variant is probed with r_0, not its own response
    assert probes.loc["p1|noise", "logprob"] == pytest.approx(pv.logprob, abs=1e-3)
    assert (
        probes.loc["p1|baseline", "logprob"] == probes.loc["p1|same", "logprob"] == pytest.approx(p0.logprob, abs=1e-3)
    )
    assert np.allclose(
        probes.loc["p1|noise", "act_cos_layers"], layer_cosines(pv.last_hidden, p0.last_hidden), atol=1e-5
    )
    assert list(probes.loc["p1|same", "act_cos_layers"]) == [1.0] * len(p0.last_hidden)
    assert np.allclose(np.stack(probes.loc["p1|noise", "hidden_last"]), pv.last_hidden, atol=1e-4)


def test_phase_seconds_follow_the_engine_order():
    from shiftwork.stability.steps import phase_seconds

    vllm = {"start": 0.0, "engine_ready": 15.0, "generated": 25.0, "model_loaded": 26.0, "probed": 40.0}
    assert phase_seconds(vllm) == {"engine_start_s": 15.0, "generate_s": 10.0, "model_load_s": 1.0, "probe_s": 14.0}
    plain = {"start": 0.0, "model_loaded": 1.0, "generated": 31.0, "probed": 45.0}
    assert phase_seconds(plain) == {"model_load_s": 1.0, "generate_s": 30.0, "probe_s": 14.0}


@pytest.mark.model
def test_one_job_over_two_datasets_writes_each_its_tables(tmp_path, prepared_smollm):
    """Both datasets use prompt id p1; each table gets its own rows, probed with its own r_0, and
    they equal what a job over that dataset alone writes."""
    other = [("e",) + r[1:3] + (t,) + r[4:] for r, t in ((BASE, "Name a prime number."), (VAR, "name a PRIME number."))]
    paths = [write_table(_variants(rows), tmp_path / f"f{i}.parquet") for i, rows in enumerate([[BASE, VAR], other])]
    outs = [[tmp_path / f"{kind}{i}.parquet" for i in range(2)] for kind in ("g", "p")]
    job = GenerateJob(max_new_tokens=6, batch_size=2, dtype="float32", engine="transformers")
    generate_responses(list(map(str, paths)), str(prepared_smollm), "smol", *[list(map(str, o)) for o in outs], job)
    for i, path in enumerate(paths):
        alone = [tmp_path / f"alone_{kind}{i}.parquet" for kind in ("g", "p")]
        generate_responses(str(path), str(prepared_smollm), "smol", *map(str, alone), job)
        for together, single in zip((outs[0][i], outs[1][i]), alone):
            pd.testing.assert_frame_equal(
                pd.read_parquet(together).drop(columns="act_cos_layers", errors="ignore"),
                pd.read_parquet(single).drop(columns="act_cos_layers", errors="ignore"),
                atol=1e-4,
            )
        assert set(pd.read_parquet(outs[0][i])["dataset"]) == {"de"[i]}
