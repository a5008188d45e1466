"""Wall-clock timing shared by the runtime table (vision/runtime.py) and the benchmarks (benchmarks/).

A measurement helper, not part of the paper's algorithm: it lives in ``analysis``, which both may import
(docs/architecture.md, section 1), not in the engine (``core``).
"""

from __future__ import annotations

import time
from typing import Callable


def best_of(call: Callable[[], object], repeats: int = 3) -> float:
    """Minimum wall-clock seconds of ``repeats`` calls (robust to a busy machine).

    Args:
        call: what to time (called with no arguments; its result is discarded).
        repeats: how many calls (>= 1).

    Returns:
        The fastest call's seconds (``time.perf_counter``).
    """
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best
