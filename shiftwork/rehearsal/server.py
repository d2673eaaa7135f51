"""The API models' stand-in: vLLM's OpenAI-compatible server (as in the API tests), serving a chat
stand-in under every API model name of the configuration, with the rehearsal's key."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from shiftwork.rehearsal.config import API_KEY

# the served stand-in: a chat model of a family the API tests already serve (chatml)
SERVED = "Qwen/Qwen2.5-0.5B-Instruct"


def api_models(config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: dict(spec["source"])
        for name, spec in (config.get("models") or {}).items()
        if (spec.get("source") or {}).get("kind") == "openai_compatible"
    }


def key_env(config: Mapping[str, Any]) -> dict[str, str]:
    """The key variables the configuration names, all holding the server's key."""
    return {src["api_key_env"]: API_KEY for src in api_models(config).values() if src.get("api_key_env")}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_for(name: str) -> int:
    """The same port for every run of the rehearsal ``name`` (the API models' base URL is part of
    their jobs' parameters: a new port would rerun them), or a free one where that is taken."""
    port = 20000 + int(hashlib.sha1(name.encode()).hexdigest()[:8], 16) % 20000
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return free_port()
    return port


def command(model_dir: Path, names: list[str], port: int) -> list[str]:
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir)]
    cmd += ["--served-model-name", *names, "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32"]
    cmd += ["--max-model-len", "1024", "--enforce-eager", "--distributed-executor-backend", "uni", "--seed", "0"]
    return cmd


def server_env() -> dict[str, str]:
    return dict(os.environ) | {
        "VLLM_API_KEY": API_KEY,
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        "OMP_NUM_THREADS": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "PYTHONUNBUFFERED": "1",
    }


def start(model_dir: Path, names: list[str], log: Path, port: int | None = None, timeout: float = 300):
    """(process, base_url) once the server answers; raises with the log's tail if it does not."""
    port = port or free_port()
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        proc = subprocess.Popen(
            command(model_dir, names, port),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=server_env(),
            start_new_session=True,
        )
    base_url = f"http://127.0.0.1:{port}/v1"
    begin = time.perf_counter()
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the vLLM server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        if time.perf_counter() - begin > timeout:
            stop(proc)
            raise RuntimeError(f"the vLLM server did not answer within {timeout} s:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{base_url}/models", headers={"Authorization": f"Bearer {API_KEY}"}, timeout=2).is_success:
                return proc, base_url
        except httpx.TransportError:
            pass
        time.sleep(0.5)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
