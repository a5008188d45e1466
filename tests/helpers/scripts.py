"""Import a script of the repository (an experiment or a benchmark) as a module, for the tests that call its
functions or its ``main`` in-process."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_script(relative: str) -> ModuleType:
    """The script ``relative`` (e.g. ``"experiments/noise_sweep.py"``) as a module registered under its stem (its
    dataclasses look their module up while it loads); its folder is on ``sys.path``, so a script that imports a
    sibling script (fair_testbed imports noise_sweep) finds it."""
    path = ROOT / relative
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
