"""The concept world's shapes and fills: inside-tests and fill tones on a shape's local coordinates (u, v) in roughly
[-1, 1], vectorised (:mod:`certified_circuits.vision.data.world` renders them)."""

from __future__ import annotations

import numpy as np

CLASS_SHAPES: tuple[str, ...] = (
    "circle", "square", "triangle", "plus", "star", "ring", "hexagon", "crescent", "bar", "ell",
)
NOVEL_SHAPES: tuple[str, ...] = (
    "frame", "hollow_triangle", "tee", "two_dots", "chevron", "oval", "rectangle", "target",
)
#: fill patterns of the compositional world (``n_fills > 0``), drawn in the shape's local coordinates
FILLS: tuple[str, ...] = ("solid", "hstripes", "vstripes", "dots", "checker", "diagonal")


def _polygon(u: np.ndarray, v: np.ndarray, n: int, r: float = 1.0) -> np.ndarray:
    """Inside a regular n-gon of circumradius r (one vertex pointing up)."""
    ang = np.arctan2(u, -v)
    sector = 2 * np.pi / n
    local = (ang % sector) - sector / 2
    apothem = r * np.cos(np.pi / n)
    return np.hypot(u, v) * np.cos(local) <= apothem


def shape_mask(name: str, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Boolean inside-mask of shape ``name`` at local coordinates (u, v)."""
    r = np.hypot(u, v)
    if name == "circle":
        return r <= 0.95
    if name == "square":
        return np.maximum(np.abs(u), np.abs(v)) <= 0.78
    if name == "triangle":
        return _polygon(u, v + 0.15, 3, 1.05)
    if name == "plus":
        return ((np.abs(u) <= 0.3) & (np.abs(v) <= 0.95)) | ((np.abs(v) <= 0.3) & (np.abs(u) <= 0.95))
    if name == "star":
        phi = np.arctan2(v, u)
        return r <= 0.42 + 0.58 * ((np.cos(5 * phi) + 1) / 2) ** 2
    if name == "ring":
        return (r <= 0.95) & (r >= 0.55)
    if name == "hexagon":
        return _polygon(u, v, 6, 0.95)
    if name == "crescent":
        return (r <= 0.95) & (np.hypot(u - 0.45, v) >= 0.78)
    if name == "bar":
        return (np.abs(u) <= 0.95) & (np.abs(v) <= 0.32)
    if name == "ell":
        return ((u >= -0.85) & (u <= -0.3) & (np.abs(v) <= 0.9)) | (
            (u >= -0.85) & (u <= 0.85) & (v >= 0.35) & (v <= 0.9)
        )
    # novel shapes (anomaly set only)
    if name == "frame":
        m = np.maximum(np.abs(u), np.abs(v))
        return (m <= 0.85) & (m >= 0.55)
    if name == "hollow_triangle":
        return _polygon(u, v + 0.15, 3, 1.05) & ~_polygon(u, v + 0.15, 3, 0.55)
    if name == "tee":
        return ((np.abs(u) <= 0.9) & (v >= -0.9) & (v <= -0.45)) | ((np.abs(u) <= 0.25) & (v >= -0.9) & (v <= 0.9))
    if name == "two_dots":
        return (np.hypot(u - 0.5, v) <= 0.38) | (np.hypot(u + 0.5, v) <= 0.38)
    if name == "chevron":
        return (np.abs(v - 0.6 * np.abs(u)) <= 0.25) & (np.abs(u) <= 0.9)
    if name == "oval":
        return (u / 0.95) ** 2 + (v / 0.6) ** 2 <= 1
    if name == "rectangle":
        return (np.abs(u) <= 0.9) & (np.abs(v) <= 0.55)
    if name == "target":
        return ((r <= 0.95) & (r >= 0.7)) | (r <= 0.3)
    raise ValueError(f"unknown shape {name!r}; known: {CLASS_SHAPES + NOVEL_SHAPES}")


def fill_pattern(name: str, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Tone in {0, 1} of fill ``name`` at local coordinates (u, v) (period 0.7 of the shape radius)."""
    p = 0.7
    if name == "solid":
        return np.ones_like(u)
    if name == "hstripes":
        return (np.floor(v / (p / 2)) % 2).astype(np.float32)
    if name == "vstripes":
        return (np.floor(u / (p / 2)) % 2).astype(np.float32)
    if name == "dots":
        return (np.hypot((u % p) - p / 2, (v % p) - p / 2) >= 0.2).astype(np.float32)
    if name == "checker":
        return ((np.floor(u / (p / 2)) + np.floor(v / (p / 2))) % 2).astype(np.float32)
    if name == "diagonal":
        return (np.floor((u + v) / (p / 2)) % 2).astype(np.float32)
    raise ValueError(f"unknown fill {name!r}; known: {FILLS}")
