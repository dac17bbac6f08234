"""The package's shape, read from its source: which layer may import which, that each concept
keeps its private parts to itself, that no package's modules import each other in a circle,
and that no function grows past what a reader holds in view. A change that breaks a rule fails
here, with the offending line, instead of being found in a review months later.

There is no cap on a module's size: a module holds one concept, however long (a cap made
splits that only moved lines across a file boundary). A function has one: 80 lines, unless its
docstring says why it is longer (a table that reads best whole).
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_llmperf import LAYERS as PACKAGE_LAYERS

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_llmperf"
#: Lowest first: a module may import from its own layer and the layers below, never above.
LAYERS = tuple(set(parts) for _, parts in PACKAGE_LAYERS)
#: Rules the layers alone do not say: renderers take what they need, not the options; the
#: simulated server is a program of its own and knows nothing of the plugin's engines.
FORBIDDEN = {("render", "settings"), ("sim", "engines")}
#: A profile is data: what reads it (engines, load generation, goldens, reports) sits above it.
PROFILES_IMPORT_NONE_OF = ("engines", "load", "golden", "render")
MAX_FUNCTION_LINES = 80
#: A function may be longer when its docstring says why.
LONGER_ON_PURPOSE = "Longer than 80 lines:"
ENGINE_NAMES = ("sglang", "sim", "llamacpp", "command", "remote")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part(module: str) -> str:
    """``pytest_llmperf.golden.store`` → ``golden`` (the package's top-level part)."""
    return module.split(".")[1] if module.count(".") else ""


def layer(name: str) -> int:
    found = [i for i, names in enumerate(LAYERS) if name in names]
    assert found, f"{name} is in no layer: add it to pytest_llmperf.LAYERS"
    return found[0]


def is_module(name: str) -> bool:
    """Whether ``pytest_llmperf.NAME`` is a module or package (not ``__version__``)."""
    return (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file()


def sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "scaffold/perf_suites" not in p.as_posix())


@functools.cache
def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


@functools.cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sources()}


def imports(path: Path, *, type_checking: bool = False) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every import of this package, in functions too (a lazy import
    is an import), without those under ``if TYPE_CHECKING:`` (annotations only) unless asked."""
    skipped: set[int] = set()
    for node in ast.walk(tree(path)):
        if (
            not type_checking
            and isinstance(node, ast.If)
            and "TYPE_CHECKING" in ast.unparse(node.test)
        ):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    found = []
    for node in ast.walk(tree(path)):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("pytest_llmperf"):
                found.append((node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [
                (node.lineno, a.name, []) for a in node.names if a.name.startswith("pytest_llmperf")
            ]
    return found


def imported_modules(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) of what each import brings in: ``from pkg import mod`` is ``pkg.mod``."""
    for line, module, names in imports(path):
        targets = [f"{module}.{n}" for n in names if f"{module}.{n}" in modules()]
        yield from ((line, t) for t in targets or [module])


def label(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


@pytest.mark.parametrize("path", sources(), ids=label)
def test_a_module_imports_only_from_its_layer_and_below(path):
    own = part(module_name(path)) if module_name(path) != "pytest_llmperf" else ""
    if own == "":
        return
    for line, module in imported_modules(path):
        other = part(module)
        if other in ("", own) or not is_module(other):
            continue
        assert layer(other) <= layer(own), (
            f"{label(path)}:{line} imports {module} from a layer above"
        )
        assert (own, other) not in FORBIDDEN, f"{label(path)}:{line}: {own} must not import {other}"


def test_no_module_imports_another_modules_private_name():
    found = [
        f"{label(path)}:{line}: takes {name} from {module}"
        for path in sources()
        for line, module, names in imports(path, type_checking=True)
        for name in names
        if name.startswith("_") and not name.startswith("__")
    ]
    assert not found, "\n".join(found)


def defined_privately(path: Path) -> set[str]:
    """The private names a module defines: its functions, classes, methods and attributes."""
    names = set()
    for node in ast.walk(tree(path)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def test_no_module_uses_another_modules_private_attributes():
    """``server._tokens(...)`` from another module of the package: the method is part of that
    module's interface and deserves a public name, or the caller belongs with it."""
    owners: dict[str, set[str]] = defaultdict(set)
    for path in sources():
        for name in defined_privately(path):
            owners[name].add(label(path))
    found = []
    for path in sources():
        mine = defined_privately(path)
        for node in ast.walk(tree(path)):
            if not (isinstance(node, ast.Attribute) and node.attr in owners):
                continue
            if node.attr in mine or ast.unparse(node.value) in ("self", "cls"):
                continue
            found.append(
                f"{label(path)}:{node.lineno}: {ast.unparse(node)} is private to "
                f"{', '.join(sorted(owners[node.attr]))}"
            )
    assert not found, "\n".join(found)


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def packages() -> list[str]:
    return sorted(m for m, p in modules().items() if p.name == "__init__.py")


@pytest.mark.parametrize("package", packages())
def test_no_import_circle_inside_a_package(package):
    """Between the direct parts of a package (a subpackage counts as one part), lazy imports
    included: a circle means two modules that are one concept, or a piece in the wrong one."""

    def child(module: str) -> str | None:
        if not module.startswith(package + "."):
            return None
        return package + "." + module[len(package) + 1 :].split(".")[0]

    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in modules().items():
        mine = child(module)
        if mine is None:
            continue
        graph[mine]
        for _, target in imported_modules(path):
            other = child(target)
            if other is not None and other != mine:
                graph[mine].add(other)
    assert not circles(graph), f"import circles in {package}: {circles(graph)}"


def test_profiles_are_data_below_what_reads_them():
    found = [
        f"profiles.py:{line} imports {module}"
        for line, module, _ in imports(PACKAGE / "profiles.py", type_checking=True)
        if part(module) in PROFILES_IMPORT_NONE_OF
    ]
    assert not found, "\n".join(found)


def test_functions_stay_readable():
    too_long = []
    for path in sources():
        for node in ast.walk(tree(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                why = LONGER_ON_PURPOSE in (ast.get_docstring(node) or "")
                if lines > MAX_FUNCTION_LINES and not why:
                    too_long.append(f"{label(path)}:{node.lineno} {node.name}: {lines} lines")
    assert not too_long, "\n".join(too_long)


def names_an_engine(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Constant) and n.value in ENGINE_NAMES for n in ast.walk(node))


def test_no_module_outside_engines_tests_an_engine_by_name():
    """What an engine can do is a capability of its class (``Engine.routable``), never a
    comparison of its name, nor a set of names kept elsewhere."""
    found = []
    for path in sources():
        if path.parent.name in ("engines", "sim"):
            continue
        for node in ast.walk(tree(path)):
            if isinstance(node, ast.Compare) and "engine" in ast.unparse(node).lower():
                if any(names_an_engine(c) for c in (node.left, *node.comparators)):
                    found.append(f"{label(path)}:{node.lineno}: {ast.unparse(node)}")
            elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) > 1:
                if all(isinstance(e, ast.Constant) and e.value in ENGINE_NAMES for e in node.elts):
                    found.append(
                        f"{label(path)}:{node.lineno}: a set of engines {ast.unparse(node)}"
                    )
    assert not found, "\n".join(found)


@pytest.mark.parametrize("path", sources(), ids=label)
def test_every_module_says_what_it_holds(path):
    """The code map (docs/explanation/code-layout.md) is made of these docstrings."""
    assert (ast.get_docstring(tree(path)) or "").strip(), f"{label(path)} has no docstring"


#: The one module that reads the run's mode to decide what a run does with a point.
SETTLE = "fixtures/settle.py"
#: The run as a whole: it reads the mode to select launches, pre-flight, plan and write the run,
#: never to decide what happens to one point.
THE_RUN = ("settings", "selection", "preflight", "plan", "session", "progress", "plugin",
           "__main__", "scaffold", "merge", "bisect")  # fmt: skip


def reads_the_mode(node: ast.AST) -> bool:
    """``settings.mode``, ``settings.recording`` or the ``Mode`` enum itself."""
    if isinstance(node, ast.Attribute) and node.attr in ("mode", "recording"):
        return "settings" in ast.unparse(node.value)
    return isinstance(node, ast.Name) and node.id == "Mode"


def test_the_run_mode_decides_a_points_fate_in_the_settle_alone():
    """What a run does with a point (store it, record it, judge it) is decided by one switch,
    ``fixtures/settle.py``; no module that measures, checks, judges or renders a point reads the
    mode (the run as a whole does, to plan and write)."""
    found = [
        f"{label(path)}:{node.lineno}: {ast.unparse(node)}"
        for path in sources()
        if label(path) != SETTLE and part(module_name(path)) not in THE_RUN
        for node in ast.walk(tree(path))
        if reads_the_mode(node)
    ]
    assert not found, "\n".join(found)


#: What opening a file looks like: ``open(…)``, ``os.open(…)``, ``path.read_text()``, ….
FILE_CALLS = ("open", "read_text", "read_bytes", "write_text", "write_bytes")


def test_the_core_opens_no_file():
    """core/ is pure: what a measurement is and what it means, from values handed to it. What
    is read from disk is read above it (load/, golden/, fixtures/) and handed down."""
    found = []
    for path in sources():
        if part(module_name(path)) != "core":
            continue
        for node in ast.walk(tree(path)):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name in FILE_CALLS:
                found.append(f"{label(path)}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "\n".join(found)
