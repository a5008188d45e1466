"""One device setting for every stage that runs a model: ``auto`` = CUDA when available, else CPU."""

from __future__ import annotations

import re


def resolve_device(name: str):
    """``auto`` | ``cpu`` | ``cuda`` | ``cuda:N`` -> torch.device; a clear error when CUDA is absent."""
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not re.fullmatch(r"cpu|cuda(:[0-9]+)?", name):
        raise ValueError(f"--device {name!r}: use auto, cpu, cuda or cuda:N")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {name}: CUDA is not available on this machine; use --device auto or cpu")
    return torch.device(name)
