"""Image files: reading one as RGB, and the ImageNet evaluation resize-and-crop.

The one place both the image-folder loaders (:mod:`certified_circuits.vision.data.image_sets`) and the ImageNet
preparation stages (:mod:`certified_circuits.vision.data.imagenet`) read images from, so neither imports the other.
"""

from __future__ import annotations

from pathlib import Path


def read_rgb(path: Path | str):
    """An image file as an RGB PIL image; a truncated, empty or non-image file raises ValueError naming it."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            return image.convert("RGB")
    except (UnidentifiedImageError, OSError, SyntaxError) as exc:
        raise ValueError(f"{path}: not a readable image ({exc}); replace or delete the file") from exc


def resize_crop(img, resize: int, crop: int):
    """Resize the shorter side to ``resize`` (bilinear), then centre-crop ``crop x crop``: the ImageNet
    evaluation transform (256 -> 224) that torchvision's weights expect.

    Args:
        img: a PIL image.
        resize: the shorter side after resizing, in pixels.
        crop: the side of the centre crop, in pixels.

    Returns:
        The cropped PIL image.
    """
    from PIL import Image

    w, h = img.size
    s = resize / min(w, h)
    img = img.resize((max(crop, round(w * s)), max(crop, round(h * s))), Image.BILINEAR)
    w, h = img.size
    left, top = (w - crop) // 2, (h - crop) // 2
    return img.crop((left, top, left + crop, top + crop))
