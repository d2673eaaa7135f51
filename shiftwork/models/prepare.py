"""Materialise a registered model once as a local Hugging Face directory (safetensors)."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from shiftwork.models.checkpoint_source import is_checkpoint, load_located_checkpoint, unresolved
from shiftwork.models.sources import Located, ModelSourceError, hub_errors, hub_help, locate
from shiftwork.models.weights import (  # noqa: F401 (the prepared folder's record, also named here)
    INFO_FILE,
    check_weights,
    file_digest,
    read_info,
    rebuild_model_hint,
    safetensors_problem,
    weight_digest,
    weight_files,
    weights_problem,
)


def preparation(spec: Mapping[str, Any]) -> dict[str, Any]:
    """What a prepared model depends on: its source, and whether it is a chat model. A
    ``checkpoint`` source must have been completed by the workflow
    (:func:`shiftwork.models.checkpoint_source.with_origin`): its config, checkpoints and base
    model are part of what it depends on."""
    if is_checkpoint(spec["source"]) and (problem := unresolved(spec["source"])):
        raise ModelSourceError(problem)
    made = {"source": dict(spec["source"]), "chat": bool(spec.get("chat"))}
    if spec["source"].get("kind") == "gguf_package":
        # the tokenizer honours the GGUF's special-token flags (shiftwork.models.gguf_tokens);
        # a model prepared before that goes to a folder of its own and is not reused
        made["tokenizer"] = "gguf-special-tokens"
    return made


def source_key(spec: Mapping[str, Any]) -> str:
    """The folder a model is prepared into, under ``results/models/<name>/``: its source kind and
    12 hex digits of a digest of :func:`preparation`. Each source gets its own folder, so a
    changed (or mistyped) source never overwrites a working model, and going back to the old
    source finds it, and everything built from it, where it was."""
    text = json.dumps(preparation(spec), sort_keys=True, default=str)
    return f"{spec['source']['kind']}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def prepared_dir(name: str, spec: Mapping[str, Any], results: str | os.PathLike = "results") -> Path:
    return Path(results) / "models" / name / source_key(spec)


def _load(name: str, loc: Located, source: Mapping[str, Any]):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if loc.base is not None:
        return load_located_checkpoint(name, loc)
    if loc.scratch:
        from shiftwork.models.scratch import scratch_model

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
        if loc.gguf_file:
            from shiftwork.models.gguf_tokens import honour_flags, special_token_flags

            gguf = Path(loc.path) / loc.gguf_file
            honour_flags(tok, special_token_flags(gguf), str(gguf))
        # a GGUF is de-quantized to float32 (its quantized blocks have no float type of their own);
        # hub and local weights keep the type they are stored in (bfloat16 is half of float32)
        dtype = torch.float32 if loc.gguf_file else "auto"
        model = AutoModelForCausalLM.from_pretrained(loc.path, dtype=dtype, **kwargs)
    except Exception as err:  # safetensors, GGUF and hub clients raise many types
        if source.get("kind") == "hub" and isinstance(err, hub_errors()):
            raise ModelSourceError(hub_help(name, source["id"], err)) from None
        where = f"{loc.path}/{loc.gguf_file}" if loc.gguf_file else loc.path
        raise ModelSourceError(f"model '{name}': cannot load {where} ({type(err).__name__}: {err})") from err
    return model, tok


def prepare_folder(name: str, spec: Mapping[str, Any], out_dir: str | os.PathLike) -> dict[str, Any]:
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
        files = weight_files(tmp)
        info = {
            "name": name,
            **preparation(spec),
            "model_type": model.config.model_type,
            "n_parameters": int(sum(p.numel() for p in model.parameters())),
            "dtype": str(model.dtype).removeprefix("torch."),
            "weight_files": files,
            "weight_digest": weight_digest(tmp, files),
            **({"checkpoint": loc.path} if loc.base is not None else {}),
            "prepare_seconds": round(time.perf_counter() - start, 2),
        }
        (tmp / INFO_FILE).write_text(json.dumps(info, indent=2, sort_keys=True))
        # swap the complete directory in: until here a previous model at out_dir is untouched
        old = out_dir.with_name(f".{out_dir.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        if out_dir.exists():
            os.replace(out_dir, old)
        os.replace(tmp, out_dir)
        shutil.rmtree(old, ignore_errors=True)
        return info
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    # `python -m shiftwork.models.prepare NAME [CONFIG]`: the record of model NAME, the target
    # that makes Snakemake prepare it (used by the Makefile's bench targets)
    import sys

    import yaml

    config = yaml.safe_load(Path(sys.argv[2] if len(sys.argv) > 2 else "config/config.yaml").read_text())
    print(prepared_dir(sys.argv[1], config["models"][sys.argv[1]]) / INFO_FILE)
