"""Which code made a table: the checkout's commit and, per ``shiftwork`` file a job imported, a
digest of its source.

A file's digest is taken over its syntax tree with docstrings left out, so an edit of a comment,
a docstring or the layout does not count as a change of code, while any change to what the code
does (or to a string or number in it) does. A file that does not parse is digested as bytes.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
CHECKOUT = PACKAGE.parent


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return tree


@functools.cache
def source_digest(path: Path) -> str | None:
    """sha256 (first 16 hex characters) of the code in ``path`` (comments, docstrings and layout
    left out); None when the file is gone."""
    try:
        text = path.read_bytes()
    except OSError:
        return None
    try:
        payload = ast.dump(_without_docstrings(ast.parse(text))).encode()
    except (SyntaxError, ValueError):
        payload = text
    return hashlib.sha256(payload).hexdigest()[:16]


def loaded_files(extra: tuple[Path, ...] = ()) -> dict[str, str | None]:
    """{path relative to the checkout: :func:`source_digest`} for every ``shiftwork`` module this
    process has imported, plus ``extra`` files of the checkout (a job's script)."""
    paths = set(extra)
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if (name == "shiftwork" or name.startswith("shiftwork.")) and file:
            paths.add(Path(file).resolve())
    return {str(p.relative_to(CHECKOUT)): source_digest(p) for p in sorted(paths) if p.is_relative_to(CHECKOUT)}


#: the git command (after ``git -C DIR``) that lists a checkout's uncommitted changes: tracked
#: files only, and not the results pages that `make publish` and `make option-effects` write
#: (writing one must not mark the next command's record as made by changed code)
CHANGED_FILES: tuple[str, ...] = ("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)docs/results")


@functools.lru_cache(maxsize=1)
def checkout_state() -> dict[str, str | bool | None]:
    """The checkout's commit, and whether its tracked files differ from it (None for both when
    the code does not sit in a git checkout, e.g. an installed package)."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(CHECKOUT), *args], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD") if (CHECKOUT / ".git").exists() else None
    if commit is None:
        return {"commit": None, "dirty": None}
    status = git(*CHANGED_FILES)
    return {"commit": commit.strip(), "dirty": None if status is None else bool(status.strip())}


def changed_files(recorded: dict[str, str | None]) -> list[str]:
    """The files of a recorded :func:`loaded_files` whose code differs now (or that are gone)."""
    return [name for name, was in sorted(recorded.items()) if source_digest((CHECKOUT / name).resolve()) != was]
