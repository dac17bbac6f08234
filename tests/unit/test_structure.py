"""The package's shape, read from its source: which layer may import which, and how large a
module or a function may grow. A change that breaks a rule fails here, with the offending line,
instead of being found in a review months later."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_llmperf"
#: Lowest first: a module may import from its own layer and the layers below, never above.
LAYERS = (
    {"core"},
    {"errors", "files", "engines", "sim"},
    {"profiles", "profile_fields", "secrets", "settings", "topology"},
    {"load", "servers", "golden", "render", "history"},
    {"selection", "preflight", "plan", "progress", "session"},
    {"fixtures"},
    {"plugin", "__main__", "scaffold", "merge"},
)
#: Rules the layers alone do not say: renderers take what they need, not the options.
FORBIDDEN = {("render", "settings"), ("sim", "engines"), ("engines", "profiles")}
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
#: A function may be longer when its docstring says why.
LONGER_ON_PURPOSE = "Longer than 80 lines:"


def part(module: str) -> str:
    """``pytest_llmperf.golden.store`` → ``golden`` (the package's top-level part)."""
    return module.split(".")[1] if module.count(".") else ""


def layer(name: str) -> int:
    found = [i for i, names in enumerate(LAYERS) if name in names]
    assert found, f"{name} is in no layer: add it to LAYERS"
    return found[0]


def is_module(name: str) -> bool:
    """Whether ``pytest_llmperf.NAME`` is a module or package (not ``__version__``)."""
    return (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file()


def sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "scaffold/perf_suites" not in p.as_posix())


def runtime_imports(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, module) of every import of this package, in functions too, except those under
    ``if TYPE_CHECKING:`` (annotations only)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            found += [(node.lineno, n) for n in names if n.startswith("pytest_llmperf.")][:1]
        elif isinstance(node, ast.Import):
            found += [
                (node.lineno, a.name) for a in node.names if a.name.startswith("pytest_llmperf.")
            ]
    return found


@pytest.mark.parametrize("path", sources(), ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_a_module_imports_only_from_its_layer_and_below(path):
    own = part(
        "pytest_llmperf." + path.relative_to(PACKAGE).with_suffix("").as_posix().replace("/", ".")
    )
    if own in ("", "__init__"):
        return
    for line, module in runtime_imports(ast.parse(path.read_text())):
        other = part(module)
        if other in ("", "__init__", own) or not is_module(other):
            continue
        assert layer(other) <= layer(own), f"{path.name}:{line} imports {module} from a layer above"
        assert (own, other) not in FORBIDDEN, f"{path.name}:{line}: {own} must not import {other}"


def test_modules_and_functions_stay_readable():
    too_long = []
    for path in sources():
        text = path.read_text()
        name = path.relative_to(PACKAGE).as_posix()
        if text.count("\n") > MAX_MODULE_LINES:
            too_long.append(f"{name}: {text.count(chr(10))} lines (at most {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                why = LONGER_ON_PURPOSE in (ast.get_docstring(node) or "")
                if lines > MAX_FUNCTION_LINES and not why:
                    too_long.append(f"{name}:{node.lineno} {node.name}: {lines} lines")
    assert not too_long, "\n".join(too_long)


def test_no_module_outside_engines_tests_an_engine_by_name():
    names = ("sglang", "sim", "llamacpp", "command", "remote")
    found = []
    for path in sources():
        if path.parent.name in ("engines", "sim"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare) and "engine" in ast.unparse(node.left):
                compared = [ast.unparse(c) for c in node.comparators]
                if any(n in c for c in compared for n in names):
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "\n".join(found)
