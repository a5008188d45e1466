"""The layer rules of docs/architecture.md, checked on every import of every module (parsed, not run).

- each layer imports only the layers the table allows (function-level imports included);
- no module imports a private name (``_x``) of another module of the package;
- the import graph has no cycle: at module level, and with the imports made inside functions too (only
  ``if TYPE_CHECKING:`` blocks, which never run, are left out of the cycle check).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "src" / "certified_circuits"
ROOT = "certified_circuits"

#: layer -> the layers it may import (its own included). ``certified_circuits`` itself (the root: version,
#: process start, the public API) is importable from everywhere for its metadata.
ALLOWED: dict[str, set[str]] = {
    "core": {"core"},
    "commands": {"core", "commands"},
    "api": {"core", "storage"},
    "storage": {"core", "storage"},
    "analysis": {"core", "storage", "analysis", "commands"},
    "reports": {"core", "storage", "analysis", "vision", "language", "reports", "commands"},
    "vision": {"core", "storage", "analysis", "vision", "commands"},
    "language": {"core", "storage", "analysis", "language", "commands"},
    "pipeline": {"core", "storage", "analysis", "reports", "vision", "language", "pipeline", "api", "commands"},
    "cli": {"core", "storage", "analysis", "reports", "vision", "language", "pipeline", "cli", "api", "commands"},
    "__init__": {"core", "api"},
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path, top_level_only: bool = False) -> list[tuple[str, list[str], int]]:
    """(imported module, imported names, line) for every import of the package in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    if top_level_only:  # module level includes `if TYPE_CHECKING:` blocks? no: they do not run
        nodes = [n for n in nodes if isinstance(n, (ast.Import, ast.ImportFrom))]
    out = []
    for node in nodes:
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names if a.name.split(".")[0] == ROOT]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.split(".")[0] == ROOT:
            out.append((node.module, [a.name for a in node.names], node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.level:
            out.append(("<relative>", [], node.lineno))
    return out


MODULES = _modules()


def _target(module: str, names: list[str]) -> list[str]:
    """The package modules an import statement loads (``from pkg import mod`` loads ``pkg.mod``)."""
    targets = []
    for name in names or [""]:
        sub = f"{module}.{name}" if name else module
        targets.append(sub if sub in MODULES else module)
    return targets


@pytest.mark.parametrize("module", sorted(MODULES))
def test_each_module_imports_only_the_layers_below_it(module: str) -> None:
    layer = _layer(module)
    allowed = ALLOWED[layer]
    bad = []
    for imported, names, line in _imports(MODULES[module]):
        assert imported != "<relative>", f"{module}:{line}: use absolute imports"
        for target in _target(imported, names):
            if target == ROOT:
                continue  # the root's metadata (__version__, PROCESS_START)
            if _layer(target) not in allowed:
                bad.append(f"line {line}: {target}")
    assert not bad, f"{module} (layer {layer}) may import only {sorted(allowed)}: {bad}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_private_name_crosses_a_module(module: str) -> None:
    bad = [
        f"line {line}: {imported}.{name}"
        for imported, names, line in _imports(MODULES[module])
        for name in names
        if name.startswith("_") and not name.startswith("__") and imported != module
    ]
    assert not bad, f"{module} imports private names of other modules: {bad} (make them public or move them)"


def _is_type_checking(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``): a block that never runs."""
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def _runtime_imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(imported module, imported names, line) for every import of the package that can run: at module level and
    inside functions and classes, but not in an ``if TYPE_CHECKING:`` block (its ``else`` counts)."""
    out: list[tuple[str, list[str], int]] = []

    def visit(node: ast.AST) -> None:
        if _is_type_checking(node):
            for child in node.orelse:  # type: ignore[attr-defined]
                visit(child)
            return
        if isinstance(node, ast.Import):
            out.extend((a.name, [], node.lineno) for a in node.names if a.name.split(".")[0] == ROOT)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.split(".")[0] == ROOT:
            out.append((node.module, [a.name for a in node.names], node.lineno))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return out


#: (importer, imported) edges left out of the cycle check, each with its reason. Empty: the one function-level
#: cycle there was (language.mib_data <-> language.task_files, over check_tokens) was fixed by moving the check to
#: language.task_checks, which both import (issue 43).
CYCLE_WHITELIST: dict[tuple[str, str], str] = {}


def _import_graph(top_level_only: bool) -> dict[str, set[str]]:
    """module -> the package modules it imports (module level only, or every import that can run)."""
    graph = {}
    for m, p in MODULES.items():
        found = _imports(p, top_level_only=True) if top_level_only else _runtime_imports(p)
        graph[m] = {
            t for imported, names, _ in found for t in _target(imported, names)
            if t in MODULES and t != m and (m, t) not in CYCLE_WHITELIST
        }  # fmt: skip
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (``[a, b, ..., a]``), or None."""
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return trail[trail.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt, trail + [nxt])
                if found:
                    return found
        state[node] = 2
        return None

    for module in sorted(graph):
        if module not in state:
            found = visit(module, [module])
            if found:
                return found
    return None


def test_the_module_level_import_graph_has_no_cycle() -> None:
    cycle = _cycle(_import_graph(top_level_only=True))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_cycle_through_imports_inside_functions() -> None:
    """A function-level import (``def f(): from x import y``) that closes a cycle is a cycle all the same: it
    only defers the failure to the first call. Every import that can run counts (TYPE_CHECKING blocks do not)."""
    cycle = _cycle(_import_graph(top_level_only=False))
    assert cycle is None, "import cycle (function-level imports included): " + " -> ".join(cycle or [])
    for importer, imported in CYCLE_WHITELIST:
        assert importer in MODULES and imported in MODULES, f"stale whitelist entry {(importer, imported)}"


def test_function_level_imports_are_found_and_type_checking_ones_are_not(tmp_path: Path) -> None:
    fake = tmp_path / "fake.py"
    fake.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from certified_circuits.core.setting import Setting\n"
        "def f():\n    from certified_circuits.language.task_files import load_task_file\n"
        "class C:\n    def g(self):\n        import certified_circuits.core.planning\n"
    )
    assert [(m, n) for m, n, _ in _runtime_imports(fake)] == [
        ("certified_circuits.language.task_files", ["load_task_file"]),
        ("certified_circuits.core.planning", []),
    ]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_rules_catch_a_violation(tmp_path: Path) -> None:
    """The checks themselves: an upward import and a private import in a fake module are found."""
    fake = tmp_path / "fake.py"
    fake.write_text(
        "from certified_circuits.pipeline.layout import Layout\nfrom certified_circuits.core.smoothing import _numpy\n"
    )
    found = _imports(fake)
    assert [(m, n) for m, n, _ in found] == [
        ("certified_circuits.pipeline.layout", ["Layout"]),
        ("certified_circuits.core.smoothing", ["_numpy"]),
    ]
    assert _layer(_target(*found[0][:2])[0]) not in ALLOWED["core"]


def test_the_engine_does_not_name_the_command_line() -> None:
    """core/ is the paper's algorithm: no module of it writes the shell command that runs it (``bin/certified-circuits``,
    owned by :mod:`certified_circuits.commands`) or imports ``COMMAND`` or the commands module."""
    bad = []
    for module, path in MODULES.items():
        if _layer(module) != "core":
            continue
        if "bin/certified-circuits" in path.read_text():
            bad.append(f"{module}: names bin/certified-circuits")
        for imported, names, line in _imports(path):
            if "COMMAND" in names or "commands" in names or imported == f"{ROOT}.commands":
                bad.append(f"{module}:{line}: imports {imported} {names}")
    assert not bad, f"the engine names the command line (write commands in certified_circuits.commands): {bad}"
