"""docs/architecture.md says what is true: its layer table names exactly the package's modules, and every path of
section 4 ("Where to add things") exists.

The layer table (section 1) has one row per layer: ``| `layer` | `module`, `module`, ... | job | may import |``.
A module named in a layer row is ``src/certified_circuits/<layer>/<module>.py`` or a package
``src/certified_circuits/<layer>/<module>/``; a module of a subpackage is named with a dot (``tracking.records``).
``api.py`` and ``commands.py`` are layers that are one module each. ``__init__.py`` and ``__main__.py`` are a
package's plumbing and need no row entry.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers.paths import ROOT

DOC = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "src" / "certified_circuits"

#: a backticked name of the modules column: ``name`` or ``package.name``
MODULE_NAME = re.compile(r"`([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*)`")


def _section(number: int) -> str:
    text = DOC.read_text(encoding="utf-8")
    start = re.search(rf"^## {number}\. .*$", text, flags=re.MULTILINE)
    assert start, f"docs/architecture.md has no section {number}"
    end = re.search(r"^## ", text[start.end():], flags=re.MULTILINE)
    return text[start.end(): start.end() + end.start() if end else len(text)]


def _table_rows(section: str) -> list[list[str]]:
    """Cells of every body row of the section's first Markdown table (header and rule rows dropped)."""
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in rows[2:]]


def layer_modules() -> dict[str, list[str]]:
    """{layer: module names of its modules column} of the layer table."""
    layers: dict[str, list[str]] = {}
    for cells in _table_rows(_section(1)):
        layer = cells[0].strip("`")
        if layer.endswith(".py"):  # a layer that is one module (api.py, commands.py)
            layers[layer] = []
            continue
        # parenthesised notes of the modules column ("`eap_graph` (EAP-IG Graph JSON)") are not module names,
        # except for the dotted names of a subpackage's modules
        names = MODULE_NAME.findall(cells[1])
        layers[layer] = names
    return layers


def _module_path(layer: str, name: str) -> Path | None:
    base = PACKAGE / layer / Path(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def package_modules() -> set[str]:
    """Every module of the package as ``layer:dotted.name`` (``api.py`` as itself), dunder files left out."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE)
        if path.name.startswith("__"):
            if path.name == "__init__.py" and len(relative.parts) > 2:  # a subpackage counts as a module too
                found.add(f"{relative.parts[0]}:{'.'.join(relative.parts[1:-1])}")
            continue
        if len(relative.parts) == 1:
            found.add(relative.name)
            continue
        found.add(f"{relative.parts[0]}:{'.'.join(relative.with_suffix('').parts[1:])}")
    return found


def test_the_layer_table_has_every_layer_of_the_package() -> None:
    layers = layer_modules()
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    modules = {p.name for p in PACKAGE.glob("*.py") if not p.name.startswith("__")}
    assert packages | modules == set(layers), "a layer row is missing or names no package"


def test_every_module_the_layer_table_names_exists() -> None:
    missing = [f"{layer}/{name}" for layer, names in layer_modules().items() for name in names
               if _module_path(layer, name) is None]
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"
    assert (PACKAGE / "api.py").is_file()


def test_every_module_of_the_package_is_in_the_layer_table() -> None:
    layers = layer_modules()
    named = {layer for layer in layers if layer.endswith(".py")} | {
        f"{layer}:{name}" for layer, names in layers.items() for name in names
    }
    unnamed = sorted(package_modules() - named)
    assert not unnamed, (f"modules missing from the layer table of docs/architecture.md (add each to its layer's row "
                         f"with its job): {unnamed}")


def _section_4_paths() -> list[str]:
    paths = []
    for token in re.findall(r"`([^`\s]+)`", _section(4)):
        if re.fullmatch(r"[\w./-]+", token) and ("/" in token or re.search(r"\.(py|ya?ml|smk|md)$", token)):
            paths.append(token)
    return paths


def test_section_4_names_paths() -> None:
    paths = _section_4_paths()
    assert "vision/networks/families.py" in paths and "pipeline/layout.py" in paths and "config.schema.yaml" in paths


@pytest.mark.parametrize("path", _section_4_paths())
def test_every_path_of_section_4_exists(path: str) -> None:
    """A path is of the checkout (``tests/...``, ``rules/...``, ``config.schema.yaml``) or of the package
    (``vision/networks/families.py``, ``reports/``)."""
    assert (ROOT / path).exists() or (PACKAGE / path).exists(), f"section 4 names {path}, which does not exist"


def test_the_table_parser_reads_the_rows_it_should() -> None:
    layers = layer_modules()
    assert "setting" in layers["core"] and "devices" in layers["core"]
    assert "tracking.records" in layers["pipeline"]
    assert "certify" not in " ".join(layers["cli"])  # `certify-scores` is a stage, not a module
