"""The shape of the package's code: short functions, one meaning per function name, and imports
inside functions only where the import must wait (torch and the model libraries, which load
slowly and must come after a GPU job's device claim)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "shiftwork"
MAX_LINES = 80
# what may be imported inside a function: torch and the model libraries (a GPU job's step imports
# them only after its device claim), and the analysis libraries that take as long as torch to
# import (pingouin, statsmodels; matplotlib less so), which thousands of evaluation jobs would
# otherwise load for nothing; and any shiftwork module importing one of these at its top level
DEFERRED = {"torch", "transformers", "vllm", "peft", "trl", "bert_score", "datasets", "tokenizers", "accelerate"}
DEFERRED |= {"huggingface_hub", "pingouin", "statsmodels", "matplotlib", "gguf"}
SHARED_NAMES = {"main"}  # each command-line module's entry point


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_trees() -> dict[str, ast.Module]:
    return {module_name(p): ast.parse(p.read_text()) for p in sorted(PACKAGE.rglob("*.py"))}


def long_functions(tree: ast.Module, limit: int = MAX_LINES) -> list[tuple[str, int]]:
    """(name, lines) of every function or method longer than ``limit`` lines."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = node.end_lineno - node.lineno + 1
            if lines > limit:
                out.append((node.name, lines))
    return out


def top_level_imports(tree: ast.Module) -> set[str]:
    """The modules a module imports outside its functions (``from a import b`` counts ``a`` and ``a.b``)."""
    found: set[str] = set()
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        stack.extend(ast.iter_child_nodes(node))
    return found


def function_imports(tree: ast.Module, modules: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
    """(function, module) of every absolute import inside a function; a name imported from a
    package counts as the submodule of that name where ``modules`` has one."""
    out = []
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    out.extend((fn.name, a.name) for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    for alias in node.names:
                        sub = f"{node.module}.{alias.name}"
                        out.append((fn.name, sub if sub in modules else node.module))
    return sorted(set(out))


def deferred_modules(trees: dict[str, ast.Module]) -> set[str]:
    """The package modules that import a :data:`DEFERRED` library at their top level, directly or
    through another package module."""
    direct = {name: top_level_imports(tree) for name, tree in trees.items()}
    heavy = {n for n, found in direct.items() if {m.split(".")[0] for m in found} & DEFERRED}
    grew = True
    while grew:
        grew = False
        for name, found in direct.items():
            if name not in heavy and found & heavy:
                heavy.add(name)
                grew = True
    return heavy


def may_wait(module: str, heavy: set[str]) -> bool:
    return module.split(".")[0] in DEFERRED or module in heavy


def test_long_functions_are_found():
    body = "\n".join(f"    x{i} = {i}" for i in range(90))
    tree = ast.parse(f"def short():\n    pass\n\ndef long():\n{body}\n")
    assert long_functions(tree) == [("long", 91)]


def test_deferred_modules_follow_top_level_imports_only():
    trees = {
        "shiftwork.a": ast.parse("import torch\n"),
        "shiftwork.b": ast.parse("from shiftwork.a import f\n"),
        "shiftwork.c": ast.parse("def f():\n    from shiftwork.a import f\n    from shiftwork import d, e\n"),
        "shiftwork.d": ast.parse("import pandas\n"),
    }
    assert deferred_modules(trees) == {"shiftwork.a", "shiftwork.b"}
    found = function_imports(trees["shiftwork.c"], frozenset(trees))
    assert found == [("f", "shiftwork"), ("f", "shiftwork.a"), ("f", "shiftwork.d")]


def test_no_function_is_longer_than_the_limit():
    found = []
    for path in sorted([*PACKAGE.rglob("*.py"), *(ROOT / "scripts").glob("*.py")]):
        found += [
            f"{path.relative_to(ROOT)}: {name} ({n} lines)" for name, n in long_functions(ast.parse(path.read_text()))
        ]
    if found:
        pytest.fail(f"functions over {MAX_LINES} lines:\n" + "\n".join(found))


def test_one_meaning_per_function_name():
    where: dict[str, list[str]] = {}
    for name, tree in package_trees().items():
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_"):
                where.setdefault(node.name, []).append(name)
    twice = {n: ms for n, ms in where.items() if len(ms) > 1 and n not in SHARED_NAMES}
    if twice:
        pytest.fail(
            "function names defined in more than one module: " + "; ".join(f"{n}: {ms}" for n, ms in twice.items())
        )


def test_imports_inside_functions_only_where_they_must_wait():
    trees = package_trees()
    heavy = deferred_modules(trees)
    found = [
        f"{name}.{fn}: {module}"
        for name, tree in trees.items()
        for fn, module in function_imports(tree, frozenset(trees))
        if not may_wait(module, heavy)
    ]
    if found:
        pytest.fail(
            "imports inside functions of modules that load quickly (move them to the top):\n" + "\n".join(found)
        )
