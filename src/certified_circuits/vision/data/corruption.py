"""Defocus blur, the ImageNet-C corruption used for the paper's corruption shift.

Reimplements ``defocus_blur`` from Hendrycks & Dietterich (2019, "Benchmarking neural network
robustness to common corruptions"; paper App. A.1 uses severity 2): a normalised disk kernel,
anti-aliased with a small Gaussian ("alias blur"), correlated with every colour channel using
OpenCV's default border (reflect-101), then clipped and truncated to uint8 as the reference
``make_imagenet_c.py`` / ``make_cifar_c.py`` scripts do.

Parameters per image scale (radius, alias_blur), severities 1..5, from the reference scripts:
CIFAR-10-C (32 px), Tiny-ImageNet-C (64 px) and ImageNet-C (224 px).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

DEFOCUS_PARAMS: dict[str, list[tuple[float, float]]] = {
    "cifar": [(0.3, 0.4), (0.4, 0.5), (0.5, 0.6), (1.0, 0.2), (1.5, 0.1)],
    "tin": [(0.5, 0.6), (1.0, 0.1), (1.5, 0.1), (2.5, 0.01), (3.0, 0.1)],
    "imagenet": [(3.0, 0.1), (4.0, 0.5), (6.0, 0.5), (8.0, 0.5), (10.0, 0.5)],
}


def scale_for_size(size: int) -> str:
    """Parameter set for an image side length: CIFAR-C below 64 px, Tiny-ImageNet-C below 128 px,
    ImageNet-C otherwise (the paper's 224 px images)."""
    if size < 64:
        return "cifar"
    if size < 128:
        return "tin"
    return "imagenet"


def _gaussian_1d(ksize: int, sigma: float) -> np.ndarray:
    """``cv2.getGaussianKernel(ksize, sigma)`` for sigma > 0 (float64, sums to one)."""
    x = np.arange(ksize, dtype=np.float64) - (ksize - 1) / 2.0
    g = np.exp(-(x**2) / (2.0 * sigma**2))
    return g / g.sum()


def _reflect101(a: np.ndarray, pad: int) -> np.ndarray:
    return np.pad(a, pad, mode="reflect")  # numpy "reflect" excludes the edge == OpenCV REFLECT_101


def disk_kernel(radius: float, alias_blur: float) -> np.ndarray:
    """The ImageNet-C ``disk`` kernel: a normalised aliased disk on a 17x17 grid (or
    (2r+1)^2 for r > 8), smoothed by a 3x3 (5x5 for r > 8) Gaussian with sigma = alias_blur.

    Returns float32 [k, k]; it sums to one up to float error whenever the disk does not touch the
    grid border (all ImageNet-C / CIFAR-C severities except ImageNet-C 4-5 at the very edge)."""
    if radius <= 0 or alias_blur <= 0:
        raise ValueError(f"disk_kernel needs radius > 0 and alias_blur > 0, got {radius}, {alias_blur}")
    if radius <= 8:
        grid = np.arange(-8, 9)
        ksize = 3
    else:
        r = int(radius)
        grid = np.arange(-r, r + 1)
        ksize = 5
    xx, yy = np.meshgrid(grid, grid)
    aliased = ((xx**2 + yy**2) <= radius**2).astype(np.float32)
    aliased /= aliased.sum()
    g = _gaussian_1d(ksize, alias_blur)
    pad = ksize // 2
    padded = _reflect101(aliased.astype(np.float64), pad)
    # separable Gaussian with reflect-101 border, as cv2.GaussianBlur
    rows = sum(g[i] * padded[:, i : i + aliased.shape[1]] for i in range(ksize))
    out = sum(g[i] * rows[i : i + aliased.shape[0], :] for i in range(ksize))
    return np.asarray(out, dtype=np.float32)


def _support(kernel: np.ndarray) -> np.ndarray:
    """Crop a centred symmetric kernel to its non-zero support (exact: zero taps add nothing, and the
    reflect padding of the remaining taps is unchanged). CIFAR-C kernels shrink from 17x17 to 3x3."""
    nz = np.argwhere(kernel != 0)
    c = kernel.shape[0] // 2
    r = int(np.abs(nz - c).max()) if len(nz) else 0
    return kernel[c - r : c + r + 1, c - r : c + r + 1]


def defocus_blur(images: np.ndarray, severity: int = 2, scale: str | None = None) -> np.ndarray:
    """Apply ImageNet-C defocus blur to a batch of uint8 images.

    images: uint8 [N, H, W, 3] (or a single [H, W, 3] image); severity 1..5; scale one of
    ``DEFOCUS_PARAMS`` (default: chosen from the image size by :func:`scale_for_size`).
    Returns uint8 of the same shape. Vectorised: one depthwise convolution for the whole batch.
    """
    arr = np.asarray(images)
    single = arr.ndim == 3
    if single:
        arr = arr[None]
    if arr.ndim != 4 or arr.shape[-1] != 3:
        raise ValueError(f"defocus_blur expects uint8 images [N, H, W, 3], got shape {arr.shape}")
    if not 1 <= severity <= 5:
        raise ValueError(f"severity must be in 1..5, got {severity}")
    scale = scale or scale_for_size(min(arr.shape[1], arr.shape[2]))
    if scale not in DEFOCUS_PARAMS:
        raise ValueError(f"unknown defocus scale {scale!r}; choose one of {sorted(DEFOCUS_PARAMS)}")
    radius, alias = DEFOCUS_PARAMS[scale][severity - 1]
    kernel = torch.from_numpy(_support(disk_kernel(radius, alias))).double()
    k = kernel.shape[0]
    pad = k // 2
    if min(arr.shape[1], arr.shape[2]) <= pad:
        raise ValueError(
            f"images of {arr.shape[1]}x{arr.shape[2]} px are too small for the {k}x{k} defocus kernel "
            f"(reflect padding needs > {pad} px per side)"
        )
    x = torch.from_numpy(arr.astype(np.float64) / 255.0).permute(0, 3, 1, 2)  # N,3,H,W
    x = F.pad(x, (pad, pad, pad, pad), mode="reflect")
    weight = kernel.expand(3, 1, k, k)
    y = F.conv2d(x, weight, groups=3)  # correlation, as cv2.filter2D
    y = (y.clamp(0.0, 1.0) * 255.0).permute(0, 2, 3, 1).numpy()
    out = y.astype(np.uint8)  # np.uint8(...) truncation, as the reference scripts
    return out[0] if single else out
