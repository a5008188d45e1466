"""Shared fixtures for the engine tests, and the process settings every test process shares."""

from __future__ import annotations

import numpy as np
import pytest

from certified_circuits.core.devices import pin_cpu_code_paths

pin_cpu_code_paths()  # before torch runs anything: the CLI's CPU code paths in the test process too


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20260521)
