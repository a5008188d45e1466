"""The checkout's folders and files the tests use, and the environment's executables (``snakemake`` and
``certified-circuits`` beside the interpreter that runs pytest)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SCHEMA = ROOT / "config.schema.yaml"
SMOKE = ROOT / "configs" / "smoke.yaml"
CUSTOM = ROOT / "configs" / "custom.yaml"
PAPER = ROOT / "configs" / "paper.yaml"
TESTBED_SMOKE = ROOT / "configs" / "testbed_smoke.yaml"
#: the unit tests' fixture files (recorded dry runs, legacy result files, reference tables), shared by every room
UNIT_DATA = ROOT / "tests" / "unit" / "data"
