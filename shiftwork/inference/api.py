"""A small client for OpenAI-compatible HTTP APIs (OpenAI, vLLM's ``vllm serve``, and the many
servers and gateways that speak the same protocol), for models the study can only observe
through their replies.

- Chat models go to ``POST {base_url}/chat/completions`` with their messages; base models to
  ``POST {base_url}/completions`` with the plain prompt. Always greedy (temperature 0, one
  choice), optionally with ``logprobs``/``top_logprobs``.
- Retries with exponential backoff on 408/409/429/5xx replies, connection errors, timeouts and
  HTTP 200 replies that are no completion (an ``error`` body, no ``choices``; a ``Retry-After``
  header is honoured); any other 4xx fails at once.
- A rate limit (requests per minute, shared by the threads of one client) and a thread pool of
  ``max_concurrency`` requests in flight.
- A response cache keyed by the request: one JSON file per request under the caller's cache
  directory, named by the sha256 of the base URL, endpoint and the whole request body (model,
  messages or prompt, every sampling parameter) -- never the key. Files are written to a
  temporary sibling and renamed, so concurrent jobs sharing a cache never see half a file; a
  rerun of the same requests sends nothing. Only replies that pass :func:`reply_problem` are
  written, and a cached reply that fails it is asked for again.

The API key is read from the environment variable named by the source's ``api_key_env`` when
the client is built (a key holding whitespace, a control character or anything but printable
ASCII is refused, naming the variable), sent only in the ``Authorization`` header, and removed
from any error message in every form it can take there (:func:`redact`); a server's reply body
reaches a message only as a short excerpt (:func:`excerpt`). The key is never part of a cache
key, a cache file, a table, provenance or a log line.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import tempfile
import threading
import time
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from shiftwork.logs import LOGGER
from shiftwork.progress import Progress, tracked

KIND = "openai_compatible"
DEFAULTS: dict[str, Any] = {
    "max_retries": 5,
    "requests_per_minute": 60,
    "timeout_s": 120,
    "max_concurrency": 4,
    "top_logprobs": 5,
}
RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
MAX_BACKOFF_S = 60.0
CHAT_ENDPOINT = "/chat/completions"
#: the fewest consecutive characters of a key that :func:`redact` removes wherever they appear
SECRET_PART = 8
#: the most characters of a server's reply body that go into a message or a log line
EXCERPT_CHARS = 200
MASK = "***"

Messages = Sequence[Mapping[str, str]]


class ApiError(RuntimeError):
    """A request to an API model failed; the message names the model and base URL, never the key."""


@dataclass(frozen=True)
class ApiSettings:
    """Where and how to reach one API model (``models.<name>.source`` of kind ``openai_compatible``)."""

    name: str
    base_url: str
    model: str
    api_key_env: str | None = None
    chat: bool = True
    max_retries: int = DEFAULTS["max_retries"]
    requests_per_minute: float = DEFAULTS["requests_per_minute"]
    timeout_s: float = DEFAULTS["timeout_s"]
    max_concurrency: int = DEFAULTS["max_concurrency"]
    top_logprobs: int = DEFAULTS["top_logprobs"]
    backoff_s: float = 1.0

    @classmethod
    def from_source(cls, name: str, source: Mapping[str, Any], chat: bool = True, **overrides: Any) -> ApiSettings:
        if source.get("kind") != KIND:
            raise ValueError(f"model '{name}': source kind is {source.get('kind')!r}, not '{KIND}'")
        for key in ("base_url", "model"):
            if not source.get(key):
                raise ValueError(f"config key 'models.{name}.source.{key}': required for kind '{KIND}'")
        values = {k: source.get(k, v) for k, v in DEFAULTS.items()} | overrides
        return cls(
            name=name,
            base_url=str(source["base_url"]).rstrip("/"),
            model=str(source["model"]),
            api_key_env=source.get("api_key_env"),
            chat=chat,
            **values,
        )

    @property
    def where(self) -> str:
        return f"model '{self.name}' ({self.model} at {self.base_url})"

    def public(self) -> dict[str, Any]:
        """The settings as recorded in provenance: the name of the key's variable, not the key."""
        return {
            "kind": KIND,
            "base_url": self.base_url,
            "model": self.model,
            "api_key_env": self.api_key_env,
            "chat": self.chat,
            "top_logprobs": self.top_logprobs,
        }


def read_api_key(settings: ApiSettings) -> str | None:
    """The key from the environment variable ``settings.api_key_env`` (None when no variable is
    named: a local server without authentication); fails naming the variable, not a value."""
    if not settings.api_key_env:
        return None
    key = os.environ.get(settings.api_key_env)
    if not key:
        raise ApiError(
            f"{settings.where}: environment variable '{settings.api_key_env}' "
            f"(models.{settings.name}.source.api_key_env) is not set"
        )
    if problem := key_problem(settings.api_key_env, key):
        raise ApiError(f"{settings.where}: {problem} (models.{settings.name}.source.api_key_env)")
    return key


def key_problem(env: str, key: str) -> str | None:
    """Why the key held by variable ``env`` cannot go into an HTTP header (None when it can): it
    holds whitespace or a control character, or a character that is not printable ASCII. The
    message names the variable and the offending character's kind and place, never the key."""
    bad = [i for i, ch in enumerate(key) if not "!" <= ch <= "~"]
    if not bad:
        return None
    ch = key[bad[0]]
    if bad == list(range(len(key) - len(bad), len(key))):
        place = "at its end"
    elif bad == list(range(len(bad))):
        place = "at its start"
    else:
        place = "inside it"
    shown = repr(ch) if ch.isascii() else f"U+{ord(ch):04X}"
    if ch.isspace() or unicodedata.category(ch).startswith("C"):
        hint = "; a line ending from a .env file?" if ch in "\r\n" else ""
        return (
            f"API key variable '{env}' holds whitespace or a control character ({shown} {place}{hint}); "
            "set it to the key alone, without spaces, quotes or line endings"
        )
    return (
        f"API key variable '{env}' holds a character that is not printable ASCII ({shown} {place}); "
        "set it to the key alone, as the provider shows it"
    )


def secret_forms(secret: str) -> set[str]:
    """The ways ``secret`` can be written into a message: as it is, as ``repr()`` and ``ascii()``
    show it (of the text and of its UTF-8 bytes), JSON-escaped (with and without ``\\u``
    escapes, and with ``/`` escaped), backslash-escaped and URL-quoted."""
    forms = {
        secret,
        repr(secret)[1:-1],
        ascii(secret)[1:-1],
        repr(secret.encode("utf-8"))[2:-1],
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        secret.encode("unicode_escape").decode("ascii"),
        quote(secret, safe=""),
    }
    forms |= {f.replace("/", "\\/") for f in forms}
    return {f for f in forms if f}


def redact(text: str, secret: str | None) -> str:
    """``text`` with every form of ``secret`` (:func:`secret_forms`) replaced by ``***``: the
    whole of it, and any run of :data:`SECRET_PART` or more consecutive characters of it (what
    is left of a key a server cut off). A secret shorter than that is removed where it appears
    whole."""
    if not secret:
        return text
    hidden = [False] * len(text)
    for form in secret_forms(secret):
        n = min(SECRET_PART, len(form))
        parts = {form[i : i + n] for i in range(len(form) - n + 1)}
        for i in range(len(text) - n + 1):
            if text[i : i + n] in parts:
                hidden[i : i + n] = [True] * n
    out = []
    for i, ch in enumerate(text):
        if not hidden[i]:
            out.append(ch)
        elif i == 0 or not hidden[i - 1]:
            out.append(MASK)
    return "".join(out)


def excerpt(text: str, secret: str | None, limit: int = EXCERPT_CHARS) -> str:
    """A server's reply body as it may appear in a message or a log line: on one line, at most
    ``limit`` characters (then ``...``), redacted before it is cut (so that what the cut leaves
    of a key is no clue) and again after."""
    flat = " ".join(redact(text, secret).split())
    if len(flat) > limit:
        flat = flat[:limit] + "..."
    return redact(flat, secret)


def request_key(base_url: str, endpoint: str, body: Mapping[str, Any], draw: str | None = None) -> str:
    """sha256 of the canonical JSON of everything that decides the reply (never the API key). A
    ``draw`` tag (not sent) makes the same request a separate one, cached on its own: a fresh
    draw of a reply an API may not give twice alike; without it the key is as it always was."""
    request: dict[str, Any] = {"base_url": base_url.rstrip("/"), "endpoint": endpoint, "body": body}
    if draw is not None:
        request["draw"] = str(draw)
    text = json.dumps(
        request,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ResponseCache:
    """One JSON file per request, ``<dir>/<key[:2]>/<key>.json``, holding the request and the
    server's reply. Writes go to a temporary file in the same folder and are renamed into place,
    so two jobs writing the same request leave one whole file. An unreadable file is a miss."""

    def __init__(self, directory: str | os.PathLike):
        self.dir = Path(directory)

    def path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            with open(self.path(key), encoding="utf-8") as fh:
                record = json.load(fh)
        except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
            return None
        return record.get("response") if isinstance(record, dict) else None

    def put(self, key: str, request: Mapping[str, Any], response: Mapping[str, Any]) -> None:
        target = self.path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{key}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"key": key, "request": request, "response": response}, fh, ensure_ascii=False)
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


class RateLimiter:
    """At most ``per_minute`` request starts per minute, evenly spaced (0 = no limit)."""

    def __init__(self, per_minute: float, clock: Callable[[], float] = time.monotonic, sleep=time.sleep):
        self.interval = 60.0 / per_minute if per_minute else 0.0
        self.clock, self.sleep = clock, sleep
        self.lock = threading.Lock()
        self.next_slot = 0.0

    def wait(self) -> None:
        if not self.interval:
            return
        with self.lock:
            now = self.clock()
            slot = max(now, self.next_slot)
            self.next_slot = slot + self.interval
        if slot > now:
            self.sleep(slot - now)


@dataclass
class ApiStats:
    hits: int = 0
    misses: int = 0
    retries: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **counts: int) -> None:
        with self.lock:
            for k, v in counts.items():
                setattr(self, k, getattr(self, k) + v)

    def as_dict(self) -> dict[str, int]:
        return {"cache_hits": self.hits, "cache_misses": self.misses, "retries": self.retries}


@dataclass
class ApiResult:
    """One greedy reply: its text, token count, whether the model ended it, and per generated
    token the chosen token's log-probability and the log-probabilities of the top candidates
    (None where the server gave none)."""

    text: str
    n_tokens: int
    finish_reason: str | None
    tokens: list[str] | None = None
    token_logprobs: list[float] | None = None
    top_logprobs: list[list[float]] | None = None

    @property
    def stopped(self) -> bool:
        return self.finish_reason == "stop"


def parse_reply(reply: Mapping[str, Any], chat: bool) -> ApiResult:
    """An :class:`ApiResult` from a chat or text completion reply body."""
    choice = reply["choices"][0]
    text = (choice.get("message") or {}).get("content") if chat else choice.get("text")
    text = text or ""
    usage = reply.get("usage") or {}
    tokens = token_lp = top = None
    lp = choice.get("logprobs")
    if chat and lp and lp.get("content") is not None:
        content = lp["content"]
        tokens = [c["token"] for c in content]
        token_lp = [float(c["logprob"]) for c in content]
        top = [[float(t["logprob"]) for t in c.get("top_logprobs") or []] for c in content]
    elif not chat and lp and lp.get("token_logprobs") is not None:
        tokens = list(lp.get("tokens") or [])
        token_lp = [float(x) for x in lp["token_logprobs"]]
        top = [[float(v) for v in (d or {}).values()] for d in lp.get("top_logprobs") or []]
    n = usage.get("completion_tokens")
    if n is None:
        n = len(token_lp) if token_lp is not None else 0
    return ApiResult(text, int(n), choice.get("finish_reason"), tokens, token_lp, top)


def reply_problem(reply: Any, chat: bool) -> str | None:
    """Why an HTTP 200 reply body is no completion (None when it is one): an ``error`` the
    provider sent (its message), no ``choices`` or an empty list of them, or a choice
    :func:`parse_reply` cannot read. The provider's text is left whole: the caller redacts and
    cuts it."""
    if not isinstance(reply, dict):
        return f"a JSON {type(reply).__name__} as its body, not an object"
    if reply.get("error"):
        return f"an error body: {provider_message(reply['error'])}"
    choices = reply.get("choices")
    if not isinstance(choices, list):
        return f"no 'choices' in its body (keys {sorted(map(str, reply))})"
    if not choices:
        return "an empty 'choices' list"
    try:
        parse_reply(reply, chat)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as err:
        return f"a choice that cannot be read ({type(err).__name__}: {err})"
    return None


def provider_message(error: Any) -> str:
    """The text of an ``error`` a provider sent: its ``message`` and ``code`` (or ``type``) when it
    is an object, the JSON of anything else."""
    if isinstance(error, str):
        return error
    if isinstance(error, dict) and error.get("message"):
        code = error.get("code") or error.get("type")
        return str(error["message"]) + (f" (code {code})" if code else "")
    return json.dumps(error, ensure_ascii=False)


def topk_entropy(top: Sequence[float]) -> float:
    """Entropy (nats) of a next-token distribution known only by its top-k log-probabilities:
    -sum p log p over the k, plus -m log m for the remaining mass m = 1 - sum p taken as one
    token. Every tail token has p <= m, so this is a lower bound on the full entropy, exact
    when the k hold all the mass; it is tighter than leaving the tail out."""
    ps = [math.exp(lp) for lp in top if lp > -math.inf]
    h = -sum(p * math.log(p) for p in ps if p > 0)
    m = 1.0 - sum(ps)
    if m > 1e-12:
        h -= m * math.log(m)
    return h


def mean_topk_entropy(result: ApiResult) -> float:
    """Mean over the reply's tokens of :func:`topk_entropy`; NaN without top log-probabilities,
    0 for an empty reply (as the local probe scores an empty response)."""
    if result.top_logprobs is None or any(not t for t in result.top_logprobs):
        return math.nan
    if not result.top_logprobs:
        return 0.0
    return sum(topk_entropy(t) for t in result.top_logprobs) / len(result.top_logprobs)


class ApiClient:
    """Greedy completions from one API model, cached, rate-limited, retried and run in parallel.

    ``transport`` (an ``httpx`` transport) and ``sleep`` exist for tests of the retry logic."""

    def __init__(
        self,
        settings: ApiSettings,
        cache_dir: str | os.PathLike | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.settings = settings
        self._key = read_api_key(settings)
        self.cache = ResponseCache(cache_dir) if cache_dir is not None else None
        self.limiter = RateLimiter(settings.requests_per_minute)
        self.stats = ApiStats()
        self.sleep = sleep
        headers = {"Content-Type": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        self._http = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(settings.timeout_s),
            transport=transport,
            limits=httpx.Limits(max_connections=settings.max_concurrency),
        )

    def __repr__(self) -> str:
        return f"ApiClient({self.settings.where})"

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _redact(self, text: str) -> str:
        return redact(text, self._key)

    def _excerpt(self, text: str) -> str:
        return excerpt(text, self._key)

    def body(
        self,
        prompt: Messages | str,
        max_tokens: int,
        logprobs: bool = False,
        seed: int | None = None,
        stop: Sequence[str] | None = None,
    ) -> tuple[str, dict[str, Any]]:
        """(endpoint, request body) of one greedy request: chat messages or a plain prompt."""
        s = self.settings
        body: dict[str, Any] = {"model": s.model, "max_tokens": int(max_tokens), "temperature": 0.0, "n": 1}
        if s.chat:
            endpoint = CHAT_ENDPOINT
            body["messages"] = [dict(m) for m in prompt]  # type: ignore[union-attr]
            if logprobs and s.top_logprobs:
                body |= {"logprobs": True, "top_logprobs": int(s.top_logprobs)}
        else:
            endpoint = "/completions"
            body["prompt"] = str(prompt)
            if logprobs and s.top_logprobs:
                body["logprobs"] = int(s.top_logprobs)
        if seed is not None:
            body["seed"] = int(seed)
        if stop:
            body["stop"] = list(stop)
        return endpoint, body

    def _post(self, endpoint: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """The checked reply to one request (:func:`reply_problem`), retried with backoff as the
        module's notes say; every error text is redacted before it is logged or raised."""
        s = self.settings
        url = s.base_url + endpoint
        last = ""
        for attempt in range(s.max_retries + 1):
            if attempt:
                self.stats.add(retries=1)
            self.limiter.wait()
            reply, last, wait = self._attempt(url, body, endpoint == CHAT_ENDPOINT)
            if reply is not None:
                return reply
            if attempt < s.max_retries:
                self._back_off(attempt, last, wait)
        raise ApiError(
            self._redact(f"{s.where}: request to {url} failed after {s.max_retries + 1} attempts; last error: {last}")
        )

    def _attempt(
        self, url: str, body: Mapping[str, Any], chat: bool
    ) -> tuple[dict[str, Any] | None, str, float | None]:
        """One request: (the checked reply, "", None), or (None, why it failed, the server's
        ``Retry-After``) when it may be retried; raises :class:`ApiError` at once on a status
        that is not retried."""
        try:
            reply = self._http.post(url, json=body)
        except httpx.TransportError as err:  # connection refused or reset, timeouts
            return None, self._redact(f"{type(err).__name__}: {err}"), None
        if reply.status_code != 200:
            return None, self._failed_status(url, reply), _retry_after(reply.headers.get("retry-after"))
        try:
            data = reply.json()
        except ValueError:
            return None, f"HTTP 200 with a body that is not JSON: {self._excerpt(reply.text)}", None
        if problem := reply_problem(data, chat):
            return None, f"HTTP 200 with {self._excerpt(problem)}", None
        return data, "", None

    def _failed_status(self, url: str, reply: httpx.Response) -> str:
        """Why a reply with a status other than 200 failed, as a redacted excerpt; raises
        :class:`ApiError` when its status is not one that is retried."""
        s = self.settings
        last = f"HTTP {reply.status_code}: {self._excerpt(reply.text)}"
        if reply.status_code not in RETRY_STATUS:
            hint = ""
            if reply.status_code == 400 and "logprob" in reply.text.lower():
                hint = f"; if the server cannot return log-probabilities, set models.{s.name}.source.top_logprobs: 0"
            raise ApiError(self._redact(f"{s.where}: request to {url} failed with {last}{hint}"))
        return last

    def _back_off(self, attempt: int, last: str, wait: float | None) -> None:
        """Sleep before the next attempt: exponential backoff, at least the server's
        ``Retry-After``, plus up to 10 % jitter."""
        s = self.settings
        delay = min(MAX_BACKOFF_S, s.backoff_s * 2**attempt)
        delay = max(delay, wait or 0.0) + random.uniform(0, 0.1 * delay)
        LOGGER.warning(
            "%s: attempt %d failed (%s); retrying in %.1f s", s.where, attempt + 1, self._redact(last), delay
        )
        self.sleep(delay)

    def _one(self, endpoint: str, body: dict[str, Any], draw: str | None = None) -> dict[str, Any]:
        """The reply to one request (the ``draw`` of it, see :func:`request_key`): from the cache
        when a checked reply is there, else asked for and, once it passes :func:`reply_problem`,
        cached."""
        key = request_key(self.settings.base_url, endpoint, body, draw)
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            if (problem := reply_problem(hit, endpoint == CHAT_ENDPOINT)) is None:
                self.stats.add(hits=1)
                return hit
            LOGGER.info(
                "%s: cached reply %s holds %s; asking again", self.settings.where, key[:12], self._excerpt(problem)
            )
        reply = self._post(endpoint, body)
        self.stats.add(misses=1)
        if self.cache is not None:
            record = {"base_url": self.settings.base_url, "endpoint": endpoint, "body": body}
            self.cache.put(key, record | ({"draw": str(draw)} if draw is not None else {}), reply)
        return reply

    def replies(
        self, requests: Sequence[tuple[str, dict[str, Any]]], draws: Sequence[str | None] | None = None
    ) -> list[dict[str, Any]]:
        """The reply body of every (endpoint, body), in order; equal requests (of the same draw,
        see :func:`request_key`) are sent once."""
        tags = list(draws) if draws is not None else [None] * len(requests)
        if len(tags) != len(requests):
            raise ValueError(f"{len(tags)} draw tags for {len(requests)} requests")
        keys = [request_key(self.settings.base_url, e, b, d) for (e, b), d in zip(requests, tags)]
        first = {k: i for i, k in reversed(list(enumerate(keys)))}
        todo = sorted(first.values())
        progress = Progress(f"{self.settings.name} requests", len(todo), "requests")
        if len(todo) <= 1 or self.settings.max_concurrency == 1:
            got = list(tracked((self._one(*requests[i], tags[i]) for i in todo), progress, size=lambda _: 1))
        else:
            with ThreadPoolExecutor(max_workers=min(self.settings.max_concurrency, len(todo))) as pool:
                replies = pool.map(lambda i: self._one(*requests[i], tags[i]), todo)
                got = list(tracked(replies, progress, size=lambda _: 1))
        by_key = {keys[i]: r for i, r in zip(todo, got)}
        return [by_key[k] for k in keys]

    def generate(
        self,
        prompts: Sequence[Messages | str],
        max_tokens: int,
        logprobs: bool = False,
        seed: int | None = None,
        stop: Sequence[str] | None = None,
        draws: Sequence[str | None] | None = None,
    ) -> list[ApiResult]:
        """Greedy replies to chat messages (a chat model) or plain prompts (a base model); with
        ``draws``, one tag per prompt: equal prompts with different tags are separate requests."""
        requests = [self.body(p, max_tokens, logprobs, seed, stop) for p in prompts]
        return [parse_reply(r, self.settings.chat) for r in self.replies(requests, draws)]

    def report(self) -> dict[str, int]:
        counts = self.stats.as_dict()
        LOGGER.info(
            "%s: %d requests served from the cache, %d sent, %d retries",
            self.settings.where,
            counts["cache_hits"],
            counts["cache_misses"],
            counts["retries"],
        )
        return counts


def _retry_after(value: str | None) -> float | None:
    try:
        return min(MAX_BACKOFF_S, float(value)) if value else None
    except ValueError:
        return None
