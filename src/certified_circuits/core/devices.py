"""One device setting for every stage that runs a model, and batch sizes chosen from free device memory.

``--device``: ``auto`` = CUDA when available, else CPU; ``cpu``; ``cuda`` / ``cuda:N`` (an error naming the
fix when CUDA is absent). Every tensor a stage creates is created on the device of the data it combines
with.

Batch sizes: a batched stage (masked evaluation, patched evaluation, vote counting on a device) estimates
the bytes one item of its batch needs (one (mask, image) pair, one patched (mask, prompt) pair, one
deletion mask) and asks :func:`batch_from_memory` how many fit:

    batch = clamp(floor(fraction * budget / bytes_per_item), floor, cap)

with ``budget`` the free memory of the CUDA device (``torch.cuda.mem_get_info``), or on the CPU
``min(CPU_BUDGET_BYTES, available RAM)``: larger CPU batches run no faster (the working set leaves the
cache) and the CPU is shared by parallel jobs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:  # pragma: no cover
    import torch

log = logging.getLogger(__name__)

#: Upper bound of the memory a batched CPU stage plans for (bytes). Parallel jobs share the machine's RAM,
#: and CPU throughput stops growing long before this size (measured: masked evaluation on the 2-core
#: machine peaks at a few hundred MB per batch).
CPU_BUDGET_BYTES = 1 << 30

#: Available RAM assumed when the operating system cannot report it.
FALLBACK_AVAILABLE_BYTES = 4 << 30


#: CPU code paths pinned for every process (``os.environ`` defaults; a value the user set wins)
CPU_CODE_PATHS = {"MKL_CBWR": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}


def pin_cpu_code_paths() -> None:
    """Ask MKL and torch's ATen for their AVX2 kernels on every x86 CPU, so that an AVX-512 machine
    rounds as an AVX2 one does.

    MKL and ATen pick their kernels by the CPU's instruction set, and the kernels sum in different
    orders: on another CPU the same run gives floats that differ in the last digits, and training
    amplifies that. ``MKL_CBWR=AVX2`` (MKL's conditional numerical reproducibility),
    ``ATEN_CPU_CAPABILITY=avx2`` and ``ONEDNN_MAX_CPU_ISA=AVX2`` select the same code paths on any CPU
    with AVX2. Both are read when the
    library first runs a kernel, so this must run before the first tensor operation of the process;
    values already in the environment are kept.
    """
    for key, value in CPU_CODE_PATHS.items():
        os.environ.setdefault(key, value)


@contextlib.contextmanager
def training_kernels() -> Iterator[None]:
    """Train with torch's native CPU convolutions instead of oneDNN's (CUDA is unaffected).

    Measured: with torch 2.14.1 on an AVX2-only AMD EPYC, oneDNN's convolution *weight-gradient*
    kernel corrupts the heap (glibc aborts with "corrupted double-linked list" in the first training
    step of the world ResNet). Only training computes weight gradients (the attribution scorers turn
    them off), so only training needs this; inference keeps oneDNN, which is much faster.
    """
    import torch

    with torch.backends.mkldnn.flags(enabled=False):
        yield


def configure_torch(threads: int) -> None:
    """Pin what makes a model stage reproducible on one machine, once, before any tensor is made.

    - ``torch.set_num_threads(threads)`` (default 1 in every stage): on a shared 2-core machine OpenMP
      threads spinning against other jobs made a training step 15x slower than single-threaded
      (measured), and a fixed thread count fixes the order of CPU reductions;
    - ``torch.use_deterministic_algorithms(True, warn_only=True)``: deterministic kernels wherever torch
      has them; an op without one warns (stderr) instead of stopping a paper run on a GPU;
    - ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` unless set, which deterministic cuBLAS requires on CUDA >= 10.2;
    - training runs without oneDNN (:func:`training_kernels`); inference keeps it (it is 5x faster than
      torch's native deterministic convolutions on a ResNet-50 batch, measured).

    It calls :func:`pin_cpu_code_paths` too, which only takes effect in a process that has not yet run
    a tensor operation (the CLI calls it first thing). What this cannot pin: results on another BLAS
    build or on a GPU; tests/helpers/artifacts.py states the tolerance the golden tables allow.
    """
    pin_cpu_code_paths()
    import torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.set_num_threads(max(1, int(threads)))
    torch.use_deterministic_algorithms(True, warn_only=True)


def resolve_device(name: "str | torch.device") -> "torch.device":
    """``auto`` | ``cpu`` | ``cuda`` | ``cuda:N`` -> ``torch.device``; a clear error when CUDA is absent.

    The device a process resolves is logged once (``device: cuda:0 (NVIDIA H200)``, ``device: cpu``), so that a
    job's log file says where its model ran.

    Raises:
        ValueError: an unknown name, ``cuda`` on a machine without CUDA, or ``cuda:N`` beyond the
            number of CUDA devices; the message names the fix.
    """
    return _announced(_resolve(str(name)))


_ANNOUNCED: set[str] = set()  # devices this process has logged


def _announced(device: "torch.device") -> "torch.device":
    if str(device) not in _ANNOUNCED:
        _ANNOUNCED.add(str(device))
        if device.type == "cuda":
            import torch

            try:
                name = torch.cuda.get_device_name(device)
            except (RuntimeError, AssertionError):  # a driver that answers is_available() but not the name
                name = "unnamed CUDA device"
            log.info("device: %s (%s)", device, name)
        else:
            log.info("device: %s", device)
    return device


def _resolve(name: str) -> "torch.device":
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not re.fullmatch(r"cpu|cuda(:[0-9]+)?", name):
        raise ValueError(f"--device {name!r}: use auto, cpu, cuda or cuda:N")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(f"--device {name}: CUDA is not available on this machine; use --device auto or cpu")
        device = torch.device(name)
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise ValueError(
                f"--device {name}: this machine has {count} CUDA device(s) (cuda:0..cuda:{count - 1}); "
                f"use --device cuda or one of those"
            )
        return device
    return torch.device(name)


#: A file every Linux machine with an NVIDIA driver has: without it there is no CUDA, and :func:`cuda_available`
#: answers without importing torch (a votes job then starts in half a second instead of three).
NVIDIA_DRIVER_FILE = "/proc/driver/nvidia/version"


def cuda_available() -> bool:
    """``torch.cuda.is_available()``, without importing torch in a process that has not imported it yet on a
    machine without an NVIDIA driver (:data:`NVIDIA_DRIVER_FILE`): there the answer is False."""
    if "torch" not in sys.modules and not os.path.exists(NVIDIA_DRIVER_FILE):
        return False
    import torch

    return bool(torch.cuda.is_available())


def vote_device(scores: Any = None, device: "str | torch.device | None" = None) -> "torch.device | None":
    """Where votes are counted and which backend counts them: a ``torch.device`` (torch counts there) or
    ``None`` (numpy counts, on the CPU). The one device policy of vote counting: the ``votes`` stage
    (``--device``), :func:`certified_circuits.core.smoothing.vote_counts` / ``compute_votes``, the public API and
    the runtime table all ask this function.

    ``device``:

    - ``None``: follow the data. Torch on the scores' device when ``scores`` is a torch tensor on an
      accelerator; numpy otherwise (numpy arrays, CPU tensors, no scores).
    - ``"auto"``: torch on CUDA (``cuda``, the current CUDA device) when :func:`cuda_available`, else numpy.
    - ``"cpu"``: numpy. On a CPU numpy's exact path is the reference and faster than torch's.
    - ``"cuda"``, ``"cuda:i"``: torch on that CUDA device (via :func:`resolve_device`).
    - a ``torch.device``: torch on exactly that device, the CPU included (``torch.device("cpu")`` runs
      torch's path on the CPU; the tests compare it with numpy's).

    Numpy and torch at float64 give identical counts; torch at float32 may differ at near-ties (see
    ``vote_counts``). Without CUDA, ``"cpu"``, ``"auto"`` and ``None`` with numpy scores import no torch.

    Raises:
        ValueError: any other name, ``cuda``/``cuda:i`` when CUDA is absent, or ``i`` beyond the device count;
            the message names the fix.
    """
    torch = sys.modules.get("torch")
    if device is None:
        if torch is not None and isinstance(scores, torch.Tensor) and scores.device.type != "cpu":
            return scores.device
        return None
    if torch is not None and isinstance(device, torch.device):
        return resolve_device(device)
    name = str(device)
    if name == "cpu":
        return None
    if name == "auto":
        return resolve_device("cuda") if cuda_available() else None
    return resolve_device(name)


def available_cpu_bytes() -> int:
    """Available RAM in bytes (psutil, else ``sysconf`` free pages, else :data:`FALLBACK_AVAILABLE_BYTES`)."""
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # psutil missing or unsupported platform
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return FALLBACK_AVAILABLE_BYTES


def free_device_bytes(device: "str | torch.device") -> int:
    """Memory a batched stage may plan with on ``device``, in bytes (before ``fraction``).

    CUDA: the free memory ``torch.cuda.mem_get_info(device)[0]`` (what other processes and this one's
    cache leave). CPU: ``min(CPU_BUDGET_BYTES, available RAM)``.
    """
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    if device.type == "cpu":
        return min(CPU_BUDGET_BYTES, available_cpu_bytes())
    raise ValueError(f"device {device}: batch sizing knows cpu and cuda devices only; use --device auto, cpu or cuda")


def batch_from_memory(
    device: "str | torch.device", bytes_per_item: float, *, cap: int, floor: int = 1, fraction: float = 0.5
) -> int:
    """Items per batch that fit in ``fraction`` of the device's free memory.

    ``clamp(floor(fraction * free_device_bytes(device) / bytes_per_item), floor, cap)``.

    Args:
        device: where the batch runs.
        bytes_per_item: estimated peak bytes one item of the batch needs (> 0).
        cap: never more than this many (e.g. the number of items there are); >= ``floor``.
        floor: never fewer than this many, even when memory looks short (>= 1).
        fraction: share of the free memory the batch may use, in (0, 1]; the rest is headroom for
            estimation error, allocator fragmentation and other tensors.
    """
    if not bytes_per_item > 0:
        raise ValueError(f"bytes_per_item={bytes_per_item!r} is invalid: expected a positive number of bytes")
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction={fraction!r} is invalid: the share of free memory must lie in (0, 1]")
    if isinstance(floor, bool) or int(floor) != floor or floor < 1:
        raise ValueError(f"floor={floor!r} is invalid: expected an integer >= 1")
    if isinstance(cap, bool) or int(cap) != cap or cap < floor:
        raise ValueError(f"cap={cap!r} is invalid: expected an integer >= floor ({floor})")
    fit = int(fraction * free_device_bytes(device) // bytes_per_item)
    return int(max(floor, min(cap, fit)))
