"""API keys never leak and the API response cache never holds an error: the key check before any
request (and at the run's start), redaction of every form of a key, short excerpts of reply
bodies, and the check of a reply before it is cached (shiftwork.inference.api). No server: the
client's transport is an ``httpx.MockTransport``."""

import json
import logging
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from shiftwork.config import ConfigError, api_key_errors, check_config, require_api_keys
from shiftwork.inference.api import (
    ApiClient,
    ApiError,
    ApiSettings,
    ResponseCache,
    excerpt,
    key_problem,
    redact,
    reply_problem,
    request_key,
)
from shiftwork.logs import log_to

KEY = "sk-live-Zq8Xv2Lm9Rt4Wp7Ny3Bc"
KEY_ENV = "SHIFTWORK_TEST_API_KEY"
BASE = "http://api.test/v1"
WHERE = "model 'm' (smol at http://api.test/v1)"
URL = f"{BASE}/chat/completions"
OK = {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}], "usage": {"completion_tokens": 1}}
RATE_LIMITED = {"error": {"message": f"Rate limit reached for key {KEY}", "code": "rate_limit"}}
MESSAGES = [{"role": "user", "content": "q"}]


def _leaks(text: str) -> list[str]:
    """Every run of 8 characters of the key found in ``text``."""
    return [KEY[i : i + 8] for i in range(len(KEY) - 7) if KEY[i : i + 8] in text]


def _settings(**extra) -> ApiSettings:
    source = {"kind": "openai_compatible", "base_url": BASE, "model": "smol", "api_key_env": KEY_ENV}
    return ApiSettings.from_source("m", source | {"requests_per_minute": 0} | extra)


def _client(monkeypatch, replies, cache_dir=None, **extra):
    """A client whose transport answers with ``replies`` in turn (each a function of nothing that
    returns an ``httpx.Response`` or raises); the last answers every later request."""
    monkeypatch.setenv(KEY_ENV, KEY)
    seen, sleeps = [], []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return replies[min(len(seen) - 1, len(replies) - 1)]()

    client = ApiClient(_settings(**extra), cache_dir, transport=httpx.MockTransport(handler), sleep=sleeps.append)
    return client, seen, sleeps


def _json(status: int, body):
    return lambda: httpx.Response(status, json=body)


def _text(status: int, text: str):
    return lambda: httpx.Response(status, text=text)


# ---------------------------------------------------------------- the key itself


LINE_END = (
    "holds whitespace or a control character ({} at its end; a line ending from a .env file?); "
    "set it to the key alone, without spaces, quotes or line endings"
)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (KEY + "\r", LINE_END.format("'\\r'")),
        (KEY + "\r\n", LINE_END.format("'\\r'")),
        (KEY + "\n", LINE_END.format("'\\n'")),
        (
            " " + KEY,
            "holds whitespace or a control character (' ' at its start); "
            "set it to the key alone, without spaces, quotes or line endings",
        ),
        (
            KEY[:10] + "\t" + KEY[10:],
            "holds whitespace or a control character ('\\t' inside it); "
            "set it to the key alone, without spaces, quotes or line endings",
        ),
        (
            KEY[:10] + "\u200b" + KEY[10:],
            "holds whitespace or a control character (U+200B inside it); "
            "set it to the key alone, without spaces, quotes or line endings",
        ),
        (
            KEY + "\u2013",
            "holds a character that is not printable ASCII (U+2013 at its end); "
            "set it to the key alone, as the provider shows it",
        ),
    ],
)
def test_a_key_that_a_header_cannot_carry_is_refused_before_any_request(monkeypatch, value, problem):
    monkeypatch.setenv(KEY_ENV, value)
    sent = []
    with pytest.raises(ApiError) as err:
        ApiClient(_settings(), transport=httpx.MockTransport(sent.append))
    assert str(err.value) == f"{WHERE}: API key variable '{KEY_ENV}' {problem} (models.m.source.api_key_env)"
    assert sent == [] and _leaks(str(err.value)) == []


def test_a_printable_key_has_no_problem():
    assert key_problem(KEY_ENV, KEY) is None
    assert key_problem(KEY_ENV, "!~") is None


def _with_api_model(cfg: dict) -> dict:
    source = {"kind": "openai_compatible", "model": "gpt-x", "base_url": "https://h/v1", "api_key_env": KEY_ENV}
    cfg["models"]["gpt-x"] = {"chat": True, "source": source}
    cfg["stability"]["models"] = ["gpt-x"]
    return cfg


def test_the_run_start_check_refuses_a_key_with_a_line_ending(default_config, root, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    config = check_config(_with_api_model(default_config), root=root)  # a clean key passes
    assert api_key_errors(config) == []
    monkeypatch.setenv(KEY_ENV, KEY + "\r")
    line = f"config key 'models.gpt-x.source': model 'gpt-x': API key variable '{KEY_ENV}' " + LINE_END.format("'\\r'")
    assert api_key_errors(config) == [line]
    with pytest.raises(ConfigError) as err:
        require_api_keys(config)
    assert str(err.value) == f"API keys missing or unusable:\n  - {line}"
    with pytest.raises(ConfigError) as err:
        check_config(config, root=root)
    assert line in str(err.value) and _leaks(str(err.value)) == []


# ---------------------------------------------------------------- redaction


def test_redact_removes_the_raw_key():
    assert redact(f"key {KEY} and again {KEY}.", KEY) == "key *** and again ***."
    assert redact(f"key {KEY}", None) == f"key {KEY}" and redact(f"key {KEY}", "") == f"key {KEY}"


def test_redact_removes_the_repr_of_a_key_with_a_line_ending():
    key = KEY + "\r"
    header = f"Illegal header value {('Bearer ' + key).encode()!r}"
    assert header == f"Illegal header value b'Bearer {KEY}\\r'"  # the form the old error showed
    assert redact(header, key) == "Illegal header value b'Bearer ***'"
    assert redact(f"got {key!r}", key) == "got '***'"


def test_redact_removes_the_json_and_backslash_escaped_key():
    key = 'ab/cd"ef\\gh-1234567890'
    body = json.dumps({"key": key})
    assert body == '{"key": "ab/cd\\"ef\\\\gh-1234567890"}'
    assert redact(body, key) == '{"key": "***"}'
    assert redact(body.replace("/", "\\/"), key) == '{"key": "***"}'  # encoders that escape '/'
    assert redact(json.dumps({"key": "é" + KEY}), "é" + KEY) == '{"key": "***"}'  # \u00e9
    assert redact(ascii("é" + KEY), "é" + KEY) == "'***'"


def test_redact_removes_the_url_quoted_key():
    key = "ab+cd/ef==Zq8Xv2Lm"
    assert redact(f"GET /v1?key={quote(key, safe='')} failed", key) == "GET /v1?key=*** failed"


def test_redact_removes_any_eight_characters_of_the_key_and_no_fewer():
    assert redact(f"invalid api key: {KEY[:23]}", KEY) == "invalid api key: ***"
    assert redact(f"[{KEY[5:13]}]", KEY) == "[***]"
    assert redact(f"[{KEY[5:12]}]", KEY) == f"[{KEY[5:12]}]"  # seven characters are no key
    assert redact(f"{KEY[-9:]} then {KEY[:8]}", KEY) == "*** then ***"


def test_an_excerpt_is_short_one_line_and_redacted_before_the_cut():
    body = '{"error": "bad key ' + KEY[:23] + '"}\n' + "x" * 300
    assert excerpt(body, KEY) == '{"error": "bad key ***"} ' + "x" * 175 + "..."
    assert excerpt("a\r\n  b", KEY) == "a b"
    # the key straddles the cut: what is left of it before the cut is removed too
    assert excerpt("y" * 190 + KEY + "z" * 50, KEY) == "y" * 190 + "***" + "z" * 7 + "..."


# ---------------------------------------------------------------- messages and logs


def test_an_echoed_key_prefix_and_a_long_body_stay_out_of_messages_and_logs(monkeypatch, tmp_path):
    body = f"internal error for key {KEY[:23]}\n" + "trace line\n" * 200
    client, seen, _ = _client(monkeypatch, [_text(500, body)], max_retries=1)
    with pytest.raises(ApiError) as err, log_to(tmp_path / "job.log"):  # the log gets the traceback
        client.generate([MESSAGES], 4)
    shown = "internal error for key *** " + ("trace line " * 20)[:173] + "..."  # 200 characters
    assert str(err.value) == f"{WHERE}: request to {URL} failed after 2 attempts; last error: HTTP 500: {shown}"
    log = (tmp_path / "job.log").read_text()
    assert f"attempt 1 failed (HTTP 500: {shown}); retrying in" in log
    assert f"ApiError: {err.value}" in log
    # 15 whole lines of the body in each excerpt: the warning's and the error's
    assert len(seen) == 2 and _leaks(log) == [] and log.count("trace line") == 30


def test_a_refused_request_names_the_status_without_the_cut_key(monkeypatch):
    client, seen, sleeps = _client(monkeypatch, [_text(401, f"invalid api key: {KEY[:23]}")])
    with pytest.raises(ApiError) as err:
        client.generate([MESSAGES], 4)
    assert str(err.value) == f"{WHERE}: request to {URL} failed with HTTP 401: invalid api key: ***"
    assert len(seen) == 1 and sleeps == []


def test_a_transport_error_that_shows_the_header_is_redacted(monkeypatch, caplog):
    def refuse():
        raise httpx.LocalProtocolError(f"Illegal header value {('Bearer ' + KEY).encode()!r}")

    client, seen, _ = _client(monkeypatch, [refuse], max_retries=1)
    with caplog.at_level(logging.WARNING, logger="shiftwork"), pytest.raises(ApiError) as err:
        client.generate([MESSAGES], 4)
    assert str(err.value).endswith("last error: LocalProtocolError: Illegal header value b'Bearer ***'")
    assert "attempt 1 failed (LocalProtocolError: Illegal header value b'Bearer ***')" in caplog.text
    assert _leaks(caplog.text) == [] and len(seen) == 2


# ---------------------------------------------------------------- the reply check and the cache


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (OK, None),
        (RATE_LIMITED, f"an error body: Rate limit reached for key {KEY} (code rate_limit)"),
        ({"error": "overloaded"}, "an error body: overloaded"),
        ({"error": {"code": 500}}, 'an error body: {"code": 500}'),
        ({"error": None} | OK, None),
        ({"choices": []}, "an empty 'choices' list"),
        ({"object": "x", "id": 1}, "no 'choices' in its body (keys ['id', 'object'])"),
        ([OK], "a JSON list as its body, not an object"),
        (
            {"choices": [{"message": "ok"}]},
            "a choice that cannot be read (AttributeError: 'str' object has no attribute 'get')",
        ),
    ],
)
def test_reply_problem_by_hand(body, problem):
    assert reply_problem(body, chat=True) == problem


def test_a_200_with_an_error_body_is_retried_like_a_5xx_and_never_cached(monkeypatch, tmp_path, caplog):
    replies = [_json(200, RATE_LIMITED), _json(200, {"choices": []}), _json(200, {"object": "x"}), _json(200, OK)]
    client, seen, sleeps = _client(monkeypatch, replies, tmp_path / "cache", max_retries=3)
    with caplog.at_level(logging.WARNING, logger="shiftwork"):
        (result,) = client.generate([MESSAGES], 4)
    assert result.text == "ok" and len(seen) == 4
    assert client.stats.as_dict() == {"cache_hits": 0, "cache_misses": 1, "retries": 3}
    assert [int(s) for s in sleeps] == [1, 2, 4]  # the backoff of a 5xx: 1 s * 2**attempt plus jitter
    assert "attempt 1 failed (HTTP 200 with an error body: Rate limit reached for key *** (code rate_limit))" in (
        caplog.text
    )
    assert "attempt 2 failed (HTTP 200 with an empty 'choices' list)" in caplog.text
    assert "attempt 3 failed (HTTP 200 with no 'choices' in its body (keys ['object']))" in caplog.text
    files = list((tmp_path / "cache").rglob("*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["response"] == OK
    assert _leaks(caplog.text) == []


def test_an_error_body_on_every_attempt_fails_with_the_providers_message(monkeypatch, tmp_path):
    client, seen, _ = _client(monkeypatch, [_json(200, RATE_LIMITED)], tmp_path / "cache", max_retries=1)
    with pytest.raises(ApiError) as err:
        client.generate([MESSAGES], 4)
    assert str(err.value) == (
        f"{WHERE}: request to {URL} failed after 2 attempts; last error: "
        "HTTP 200 with an error body: Rate limit reached for key *** (code rate_limit)"
    )
    assert len(seen) == 2 and list(Path(tmp_path).rglob("*.json")) == []


@pytest.mark.parametrize("cached", [RATE_LIMITED, {"choices": []}, {"object": "x"}])
def test_a_cached_reply_that_fails_the_check_is_asked_for_again(monkeypatch, tmp_path, cached):
    client, seen, _ = _client(monkeypatch, [_json(200, OK)], tmp_path / "cache")
    endpoint, body = client.body(MESSAGES, 4)
    key = request_key(BASE, endpoint, body)
    ResponseCache(tmp_path / "cache").put(key, {"endpoint": endpoint, "body": body}, cached)
    (result,) = client.generate([MESSAGES], 4)
    assert result.text == "ok" and len(seen) == 1
    assert client.stats.as_dict() == {"cache_hits": 0, "cache_misses": 1, "retries": 0}
    assert ResponseCache(tmp_path / "cache").get(key) == OK
    (again,) = client.generate([MESSAGES], 4)  # now from the cache
    assert again.text == "ok" and len(seen) == 1 and client.stats.hits == 1
