"""Packaging invariants: ranges in pyproject.toml, exact pins in constraints.txt, the conda environment
mirrors them, the README opens with its two commands, CI calls the README's test command."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

from tests.helpers.paths import ROOT


def _constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([0-9A-Za-z.]+)", line.strip()).groups()
            pins[name.lower()] = version
    return pins


def test_metadata_has_ranges_and_the_tested_pins_satisfy_them() -> None:
    """A library: pyproject.toml states ranges (no exact pins, no Python cap), so it installs into an
    existing GPU environment; constraints.txt holds the exact versions make and CI test with."""
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11"
    requirements = [Requirement(s) for s in project["dependencies"] + project["optional-dependencies"]["test"]]
    pins = _constraints()
    assert {r.name.lower() for r in requirements} == set(pins)
    for requirement in requirements:
        assert not any(spec.operator == "==" for spec in requirement.specifier), requirement
        assert requirement.specifier.contains(pins[requirement.name.lower()]), (requirement, pins[requirement.name.lower()])
    assert "-c constraints.txt" in (ROOT / "Makefile").read_text()


def test_conda_environment_mirrors_the_tested_pins() -> None:
    env = yaml.safe_load((ROOT / "envs" / "certified-circuits.yaml").read_text())
    pip_block = next(item["pip"] for item in env["dependencies"] if isinstance(item, dict))
    conda_pins = dict(spec.lower().split("==") for spec in pip_block)
    assert conda_pins == _constraints()
    assert "python=3.11" in env["dependencies"]


def test_readme_opens_with_the_two_commands_and_ci_runs_the_test_one() -> None:
    readme = (ROOT / "README.md").read_text().splitlines()
    commands = [line.strip() for line in readme if line.strip().startswith("make ")][:2]
    assert commands == ["make reproduce", "make test"]
    first_code = next(i for i, line in enumerate(readme) if line.startswith("```"))
    assert all(not line.startswith("#") or i == 0 for i, line in enumerate(readme[:first_code]))
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_every_non_python_file_of_the_package_is_package_data() -> None:
    """A wheel (not only an editable install) carries the explorer's style sheet and script: every file of the
    package that is not Python matches a pattern of pyproject.toml's ``tool.setuptools.package-data``."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    package = ROOT / "src" / "certified_circuits"
    files = [p for p in package.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc", ".md")
             and "__pycache__" not in p.parts]
    assert {p.name for p in files} >= {"explorer.css", "explorer.js"}
    for path in files:
        owner = ".".join(("certified_circuits",) + path.parent.relative_to(package).parts)
        matched = [
            (name, pattern) for name, patterns in data.items() for pattern in patterns
            if owner.startswith(name) and path.relative_to(ROOT / "src" / Path(*name.split("."))).match(pattern)
        ]
        assert matched, f"{path.relative_to(ROOT)} is not package data: add it to pyproject.toml"
