"""Parameter checks shared by every stage.

Each check raises :class:`ValueError` naming the parameter, the value received and what is allowed,
so that a bad config stops a run before any work is done.
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np


def check_tau(tau: float) -> float:
    """Confidence threshold tau of Eq. (smoothed-a): must lie in [0.5, 1)."""
    tau = float(tau)
    if not (0.5 <= tau < 1.0) or math.isnan(tau):
        raise ValueError(f"tau={tau!r} is invalid: the confidence threshold must satisfy 0.5 <= tau < 1")
    return tau


def check_p_del(p_del: float) -> float:
    """Deletion probability of RS-Del smoothing: must lie in (0, 1)."""
    p_del = float(p_del)
    if not (0.0 < p_del < 1.0):
        raise ValueError(f"p_del={p_del!r} is invalid: the deletion probability must satisfy 0 < p_del < 1")
    return p_del


def check_alpha(alpha: float) -> float:
    """Family-wise failure probability: must lie in (0, 1)."""
    alpha = float(alpha)
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"alpha={alpha!r} is invalid: the failure probability must satisfy 0 < alpha < 1")
    return alpha


def check_count(name: str, value: int, minimum: int = 1) -> int:
    """A sample count (n, n0) or size: an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name}={value!r} is invalid: expected an integer >= {minimum}")
    if value < minimum:
        raise ValueError(f"{name}={value!r} is invalid: expected an integer >= {minimum}")
    return int(value)


def check_k_grid(k_grid: Iterable[float]) -> np.ndarray:
    """Top-K fractions: a non-empty 1-D array with every value in (0, 1]."""
    k = np.atleast_1d(np.asarray(k_grid, dtype=np.float64))
    if k.ndim != 1 or k.size == 0:
        raise ValueError(f"k_grid={k_grid!r} is invalid: expected a non-empty list of fractions in (0, 1]")
    bad = k[~((k > 0.0) & (k <= 1.0))]
    if bad.size:
        raise ValueError(f"k_grid contains {bad.tolist()}: every K is a fraction of components and must lie in (0, 1]")
    return k


def check_correction(correction: str) -> str:
    """Family-wise error correction: 'bonferroni' (the paper's) or 'holm'."""
    allowed = ("bonferroni", "holm")
    if correction not in allowed:
        raise ValueError(f"correction={correction!r} is invalid: choose one of {allowed}")
    return correction
