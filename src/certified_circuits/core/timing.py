"""Wall-clock timing shared by the runtime table and the benchmarks."""

from __future__ import annotations

import time
from typing import Callable


def best_of(call: Callable[[], object], repeats: int = 3) -> float:
    """Minimum wall-clock seconds of ``repeats`` calls (robust to a busy machine)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best
