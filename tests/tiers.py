"""Test tiers: which stage each test runs in, worked out from its code at collection.

A test is marked ``workflow`` when it, a fixture it uses, or a test helper it calls builds a
``python -m snakemake`` command, ``model`` when it uses a fixture that prepares a packaged
model (:data:`MODEL_FIXTURES`) or names a loader of one, and ``browser`` when it starts the
test browser (:data:`NAMES`); the tests of :data:`LINT_MODULES` are ``lint``. The search follows the
code objects of test code (``tests/``) only: library code is not read. What it cannot see (a
library function that starts Snakemake or loads a packaged model) is caught at run time in the
unit stage by :func:`guard`, which fails the test with the marker it needs.

Every collected test falls in exactly one of :data:`STAGES` (:func:`stage`); ``pytest --stage
NAME`` runs one. The ``simulation`` marker is put on by hand: a test that simulates hundreds of
null or planted runs to measure a false-positive rate needs no model, but takes tens of seconds.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Iterable
from pathlib import Path

TESTS = Path(__file__).resolve().parent

#: the stages `make test-all` runs, in order: cheap checks first, then ever slower ones
STAGES = ("lint", "unit", "simulation", "model", "workflow", "slurm", "browser")

#: session fixtures that prepare a packaged model (the GGUF SmolLM2: about 30 s)
MODEL_FIXTURES = frozenset({"prepared_smollm"})
#: names whose use in test code needs a marker: a packaged model, a browser
NAMES = {"prepared_smollm": "model", "Encoder": "model", "browser": "browser"}
#: modules whose tests are the lint stage: style, Snakemake's linter, dry runs of the DAG
LINT_MODULES = frozenset({"test_lint"})


def _is_test_code(obj: object) -> bool:
    code = getattr(obj, "__code__", None)
    return code is not None and Path(code.co_filename).resolve().parent == TESTS


def _codes(code: types.CodeType) -> Iterable[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _strings(consts: Iterable[object]) -> Iterable[str]:
    for const in consts:
        if isinstance(const, str):
            yield const
        elif isinstance(const, tuple | frozenset):  # a list of constants is stored as one tuple
            yield from _strings(const)


def _starts_snakemake(code: types.CodeType) -> bool:
    consts = list(_strings(code.co_consts))
    return any(a == "-m" and b == "snakemake" for a, b in zip(consts, consts[1:], strict=False))


def reach(func: Callable) -> set[str]:
    """The markers that ``func`` and the test code it calls need."""
    seen: set[int] = set()
    found: set[str] = set()
    todo = [func]
    while todo:
        f = inspect.unwrap(todo.pop())
        if id(f) in seen or not _is_test_code(f):
            continue
        seen.add(id(f))
        glb = getattr(f, "__globals__", {})
        for code in _codes(f.__code__):
            if _starts_snakemake(code):
                found.add("workflow")
            params = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
            found.update(NAMES[n] for n in (*code.co_names, *params) if n in NAMES)
            todo.extend(glb[n] for n in code.co_names if callable(glb.get(n)))
    return found


def markers_for(item) -> set[str]:
    """The tier markers a collected test gets from its code and its fixtures."""
    found: set[str] = set()
    module = item.module.__name__ if getattr(item, "module", None) else ""
    if module in LINT_MODULES:
        found.add("lint")
    if MODEL_FIXTURES & set(item.fixturenames):
        found.add("model")
    funcs = [item.function]
    info = getattr(item, "_fixtureinfo", None)
    for name in item.fixturenames:
        for fdef in info.name2fixturedefs.get(name, ()) if info else ():
            funcs.append(fdef.func)
    for func in funcs:
        found |= reach(func)
    return found


def stage(markers: set[str]) -> str:
    """The one stage of a test with these markers: the slowest thing it needs decides (a
    workflow test that also loads a model is a workflow test; a SLURM test runs Snakemake)."""
    for name, needs in (
        ("browser", {"browser"}),
        ("slurm", {"slurm"}),
        ("lint", {"lint", "network"}),
        ("workflow", {"workflow"}),
        ("model", {"model"}),
        ("simulation", {"simulation"}),
    ):
        if markers & needs:
            return name
    return "unit"


class TierError(AssertionError):
    """A test in the unit stage did what only a marked test may do."""


def guard(monkeypatch, nodeid: str) -> None:
    """In the unit stage, make starting Snakemake or loading a packaged model fail the test,
    naming the marker that moves it to its stage."""
    import subprocess

    real_popen = subprocess.Popen.__init__

    def popen(self, args, *a, **k):
        words = [str(x) for x in (args if isinstance(args, list | tuple) else [args])]
        if any(w == "snakemake" or w.endswith("/snakemake") for w in words):
            raise TierError(f"{nodeid} starts Snakemake: mark it @pytest.mark.workflow")
        return real_popen(self, args, *a, **k)

    monkeypatch.setattr(subprocess.Popen, "__init__", popen)

    from shiftwork import encoders
    from shiftwork.models import sources

    real_gguf = sources.locate_gguf_package

    def gguf(name, source, workdir):
        try:  # a package that is not installed fails as it would anyway
            sources.module_dir(name, source["module"], source.get("package"))
        except sources.ModelSourceError:
            return real_gguf(name, source, workdir)
        raise TierError(f"{nodeid} prepares the packaged model {name!r}: mark it @pytest.mark.model")

    def encoder(self, name, *a, **k):
        raise TierError(f"{nodeid} loads the packaged encoder {name!r}: mark it @pytest.mark.model")

    # sources.locate calls locate_gguf_package through the module, so every caller meets this
    monkeypatch.setattr(sources, "locate_gguf_package", gguf)
    monkeypatch.setattr(encoders.Encoder, "__init__", encoder)
