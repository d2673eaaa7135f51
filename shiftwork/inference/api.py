"""A small client for OpenAI-compatible HTTP APIs (OpenAI, vLLM's ``vllm serve``, and the many
servers and gateways that speak the same protocol), for models the study can only observe
through their replies.

- Chat models go to ``POST {base_url}/chat/completions`` with their messages; base models to
  ``POST {base_url}/completions`` with the plain prompt. Always greedy (temperature 0, one
  choice), optionally with ``logprobs``/``top_logprobs``.
- Retries with exponential backoff on 408/409/429/5xx replies, connection errors and timeouts
  (a ``Retry-After`` header is honoured); any other 4xx fails at once.
- A rate limit (requests per minute, shared by the threads of one client) and a thread pool of
  ``max_concurrency`` requests in flight.
- A response cache keyed by the request: one JSON file per request under the caller's cache
  directory, named by the sha256 of the base URL, endpoint and the whole request body (model,
  messages or prompt, every sampling parameter) -- never the key. Files are written to a
  temporary sibling and renamed, so concurrent jobs sharing a cache never see half a file; a
  rerun of the same requests sends nothing.

The API key is read from the environment variable named by the source's ``api_key_env`` when
the client is built, sent only in the ``Authorization`` header, and removed from any error
message; it is never part of a cache key, a cache file, a table, provenance or a log line.
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
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    return key


def request_key(base_url: str, endpoint: str, body: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of everything that decides the reply (never the API key)."""
    text = json.dumps(
        {"base_url": base_url.rstrip("/"), "endpoint": endpoint, "body": body},
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
        return text.replace(self._key, "***") if self._key else text

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
            endpoint = "/chat/completions"
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
        s = self.settings
        url = s.base_url + endpoint
        last = ""
        for attempt in range(s.max_retries + 1):
            if attempt:
                self.stats.add(retries=1)
            self.limiter.wait()
            wait = None
            try:
                reply = self._http.post(url, json=body)
            except httpx.TransportError as err:  # connection refused or reset, timeouts
                last = f"{type(err).__name__}: {err}"
            else:
                if reply.status_code == 200:
                    try:
                        return reply.json()
                    except json.JSONDecodeError:
                        last = f"HTTP 200 with a body that is not JSON: {reply.text[:200]!r}"
                else:
                    last = f"HTTP {reply.status_code}: {reply.text[:500]}"
                    if reply.status_code not in RETRY_STATUS:
                        hint = ""
                        if reply.status_code == 400 and "logprob" in reply.text.lower():
                            hint = f"; if the server cannot return log-probabilities, set models.{s.name}.source.top_logprobs: 0"
                        raise ApiError(self._redact(f"{s.where}: request to {url} failed with {last}{hint}"))
                    wait = _retry_after(reply.headers.get("retry-after"))
            if attempt < s.max_retries:
                delay = min(MAX_BACKOFF_S, s.backoff_s * 2**attempt)
                delay = max(delay, wait or 0.0) + random.uniform(0, 0.1 * delay)
                LOGGER.warning(
                    "%s: attempt %d failed (%s); retrying in %.1f s", s.where, attempt + 1, self._redact(last), delay
                )
                self.sleep(delay)
        raise ApiError(
            self._redact(f"{s.where}: request to {url} failed after {s.max_retries + 1} attempts; last error: {last}")
        )

    def _one(self, endpoint: str, body: dict[str, Any]) -> dict[str, Any]:
        key = request_key(self.settings.base_url, endpoint, body)
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            self.stats.add(hits=1)
            return hit
        reply = self._post(endpoint, body)
        self.stats.add(misses=1)
        if self.cache is not None:
            self.cache.put(key, {"base_url": self.settings.base_url, "endpoint": endpoint, "body": body}, reply)
        return reply

    def replies(self, requests: Sequence[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
        """The reply body of every (endpoint, body), in order; equal requests are sent once."""
        keys = [request_key(self.settings.base_url, e, b) for e, b in requests]
        first = {k: i for i, k in reversed(list(enumerate(keys)))}
        todo = sorted(first.values())
        progress = Progress(f"{self.settings.name} requests", len(todo), "requests")
        if len(todo) <= 1 or self.settings.max_concurrency == 1:
            got = list(tracked((self._one(*requests[i]) for i in todo), progress, size=lambda _: 1))
        else:
            with ThreadPoolExecutor(max_workers=min(self.settings.max_concurrency, len(todo))) as pool:
                replies = pool.map(lambda i: self._one(*requests[i]), todo)
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
    ) -> list[ApiResult]:
        """Greedy replies to chat messages (a chat model) or plain prompts (a base model)."""
        requests = [self.body(p, max_tokens, logprobs, seed, stop) for p in prompts]
        return [parse_reply(r, self.settings.chat) for r in self.replies(requests)]

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
