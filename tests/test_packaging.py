"""Packaging invariants: the conda environment mirrors pyproject.toml, the README opens with its two
commands, CI calls the README's test command."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _pyproject_pins() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = project["dependencies"] + project["optional-dependencies"]["test"]
    pins = {}
    for spec in specs:
        name, version = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([0-9A-Za-z.]+)", spec).groups()
        pins[name.lower()] = version
    return pins


def test_every_dependency_is_pinned_and_mirrored_in_the_conda_environment() -> None:
    env = yaml.safe_load((ROOT / "envs" / "certified-circuits.yaml").read_text())
    pip_block = next(item["pip"] for item in env["dependencies"] if isinstance(item, dict))
    conda_pins = dict(spec.lower().split("==") for spec in pip_block)
    assert conda_pins == _pyproject_pins()
    assert "python=3.11" in env["dependencies"]


def test_readme_opens_with_the_two_commands_and_ci_runs_the_test_one() -> None:
    readme = (ROOT / "README.md").read_text().splitlines()
    commands = [line.strip() for line in readme if line.strip().startswith("make ")][:2]
    assert commands == ["make reproduce", "make test"]
    first_code = next(i for i, line in enumerate(readme) if line.startswith("```"))
    assert all(not line.startswith("#") or i == 0 for i, line in enumerate(readme[:first_code]))
    assert "make test" in (ROOT / ".ci" / "run").read_text()
