"""ImageNet-C defocus blur against reference properties (Hendrycks & Dietterich 2019)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from certified_circuits.vision.data.corruption import DEFOCUS_PARAMS, defocus_blur, disk_kernel, scale_for_size


@pytest.mark.parametrize("scale", ["cifar", "tin", "imagenet"])
@pytest.mark.parametrize("severity", [1, 2, 3])
def test_kernel_sums_to_one_and_is_symmetric(scale, severity):
    k = disk_kernel(*DEFOCUS_PARAMS[scale][severity - 1])
    assert k.shape == (17, 17)
    assert k.sum() == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_allclose(k, k.T, atol=1e-7)
    np.testing.assert_allclose(k, k[::-1, ::-1], atol=1e-7)


def test_cifar_severity2_kernel_is_the_3x3_gaussian_of_sigma_half():
    # radius 0.4 keeps only the centre pixel; the alias blur is cv2's 3-tap Gaussian with sigma 0.5
    k = disk_kernel(0.4, 0.5)
    g = np.exp(-np.array([1.0, 0.0, 1.0]) / (2 * 0.25))
    g /= g.sum()
    np.testing.assert_allclose(k[7:10, 7:10], np.outer(g, g), rtol=1e-6)
    assert k.sum() - k[7:10, 7:10].sum() == pytest.approx(0.0, abs=1e-7)


def test_imagenet_severity2_disk_support():
    k = disk_kernel(4.0, 0.5)
    # radius-4 disk has 49 lattice points; the 3x3 alias blur spreads mass by at most one pixel
    assert (k > 1e-6).sum() > 49
    assert k[8, 8] == pytest.approx(k[8, 9], rel=0.05)  # flat interior
    assert k[8, 0] == 0 and k[8, 14] < 1e-6


def test_blur_matches_reference_correlation(rng):
    img = rng.integers(0, 256, size=(2, 40, 40, 3), dtype=np.uint8)
    out = defocus_blur(img, severity=2, scale="imagenet")
    k = disk_kernel(4.0, 0.5).astype(np.float64)
    for n in range(2):
        for c in range(3):
            ref = ndimage.correlate(img[n, :, :, c] / 255.0, k, mode="mirror")  # = cv2 BORDER_REFLECT_101
            ref = (np.clip(ref, 0, 1) * 255).astype(np.uint8)
            assert np.abs(out[n, :, :, c].astype(int) - ref.astype(int)).max() <= 1


def test_more_blur_at_higher_severity(rng):
    img = rng.integers(0, 256, size=(1, 64, 64, 3), dtype=np.uint8)
    energy = []
    for s in range(1, 6):
        b = defocus_blur(img, severity=s, scale="imagenet").astype(float)
        energy.append(np.abs(np.diff(b, axis=2)).mean())
    assert all(a > b for a, b in zip(energy, energy[1:])), energy
    cifar = [np.abs(np.diff(defocus_blur(img, s, "cifar").astype(float), axis=2)).mean() for s in range(1, 6)]
    assert all(a >= b for a, b in zip(cifar, cifar[1:])), cifar


def test_constant_image_is_unchanged():
    img = np.full((32, 32, 3), 123, dtype=np.uint8)
    out = defocus_blur(img, severity=2)
    assert out.shape == img.shape and out.dtype == np.uint8
    assert np.abs(out.astype(int) - 123).max() <= 1


def test_scale_choice_and_errors():
    assert scale_for_size(32) == "cifar" and scale_for_size(64) == "tin" and scale_for_size(224) == "imagenet"
    with pytest.raises(ValueError, match="severity"):
        defocus_blur(np.zeros((1, 32, 32, 3), np.uint8), severity=6)
    with pytest.raises(ValueError, match=r"\[N, H, W, 3\]"):
        defocus_blur(np.zeros((1, 32, 32), np.uint8))
    with pytest.raises(ValueError, match="too small"):
        defocus_blur(np.zeros((1, 4, 4, 3), np.uint8), scale="imagenet")
