"""Materialise a registered model once as a local Hugging Face directory (safetensors)."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, Mapping

from .sources import Located, ModelSourceError, hub_help, locate

INFO_FILE = "shiftwork.json"


def file_digest(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def weight_digest(model_dir: Path) -> str:
    """sha256 over the directory's safetensors files, in name order."""
    h = hashlib.sha256()
    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        raise ModelSourceError(f"{model_dir} holds no .safetensors file")
    for f in files:
        h.update(f.name.encode())
        h.update(file_digest(f).encode())
    return h.hexdigest()


def _load(name: str, loc: Located, source: Mapping[str, Any]):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if loc.scratch:
        from .scratch import scratch_model

        try:
            return scratch_model({k: v for k, v in source.items() if k != "kind"})
        except ValueError as err:
            raise ModelSourceError(f"model '{name}': {err}") from err
    kwargs: dict[str, Any] = {}
    if loc.gguf_file:
        kwargs["gguf_file"] = loc.gguf_file
    if loc.revision:
        kwargs["revision"] = loc.revision
    try:
        tok = AutoTokenizer.from_pretrained(loc.path, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(loc.path, dtype=torch.float32, **kwargs)
    except OSError as err:
        if source.get("kind") == "hub":
            raise ModelSourceError(hub_help(name, source["id"]) + f" [{err}]") from err
        raise
    return model, tok


def prepare_model(name: str, spec: Mapping[str, Any], out_dir: str | os.PathLike) -> dict[str, Any]:
    """Write model ``name`` to ``out_dir`` (config, safetensors weights, tokenizer and a
    ``shiftwork.json`` record). The directory appears only once complete."""
    from transformers import AutoModelForCausalLM

    out_dir = Path(out_dir)
    tmp = out_dir.with_name(f".{out_dir.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    work = out_dir.with_name(f".{out_dir.name}.src")
    start = time.perf_counter()
    try:
        loc = locate(name, spec["source"], work)
        model, tok = _load(name, loc, spec["source"])
        if loc.gguf_file:
            # a GGUF-loaded model refuses save_pretrained; a fresh model of the same config does
            # not. The weights are de-quantized, so the GGUF quantization record must not follow
            # them (it would mark the saved float weights as quantized and block training).
            config = copy.deepcopy(model.config)
            if hasattr(config, "quantization_config"):
                del config.quantization_config
            fresh = AutoModelForCausalLM.from_config(config)
            missing, unexpected = fresh.load_state_dict(model.state_dict(), strict=False)
            if unexpected or [m for m in missing if "lm_head" not in m]:
                raise ModelSourceError(
                    f"model '{name}': weights from {loc.gguf_file} do not fit its config "
                    f"(missing {missing[:3]}, unexpected {unexpected[:3]})"
                )
            if missing:
                fresh.tie_weights()
            model = fresh
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        info = {
            "name": name,
            "source": dict(spec["source"]),
            "chat": bool(spec.get("chat")),
            "model_type": model.config.model_type,
            "n_parameters": int(sum(p.numel() for p in model.parameters())),
            "weight_digest": weight_digest(tmp),
            "prepare_seconds": round(time.perf_counter() - start, 2),
        }
        (tmp / INFO_FILE).write_text(json.dumps(info, indent=2, sort_keys=True))
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
        return info
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


def read_info(model_dir: str | os.PathLike) -> dict[str, Any]:
    path = Path(model_dir) / INFO_FILE
    if not path.exists():
        raise ModelSourceError(f"{model_dir} is not a prepared model (no {INFO_FILE}); run prepare_model")
    return json.loads(path.read_text())
