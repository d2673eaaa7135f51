"""The generate job's step (shiftwork.stability.steps.generate_responses) on small tables."""

import numpy as np
import pandas as pd
import pytest

from shiftwork.inference.formatting import model_input
from shiftwork.inference.generation import generate_all
from shiftwork.inference.probe import layer_cosines, probe_batches
from shiftwork.models.loading import load_prepared
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
            str(path), str(tmp_path / "no-model"), "m", *map(str, outs), max_new_tokens=4, batch_size=2, dtype="auto"
        )
    assert not any(p.exists() for p in outs)


@pytest.mark.model
def test_probes_use_the_baseline_response_and_state(tmp_path, prepared_smollm):
    path = write_table(_variants([VAR, BASE, SAME]), tmp_path / "filtered.parquet")
    g_path, p_path = tmp_path / "g.parquet", tmp_path / "p.parquet"
    stats = generate_responses(
        str(path),
        str(prepared_smollm),
        "smol",
        str(g_path),
        str(p_path),
        max_new_tokens=8,
        batch_size=2,
        dtype="float32",
        store_hidden=True,
    )
    gens = pd.read_parquet(g_path).set_index("variant_id")
    probes = pd.read_parquet(p_path).set_index("variant_id")
    assert stats["rows"] == 3 and stats["unique_inputs"] == 2
    assert read_provenance(p_path)["step"] == "probe" and read_provenance(g_path)["step"] == "generate"

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
