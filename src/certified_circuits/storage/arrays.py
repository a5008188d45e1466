"""Reading ``.npy`` and ``.npz`` files with the project's own diagnosis, never numpy's (issue 35).

``numpy.load(path, allow_pickle=False)`` on a damaged file, a pickle, or an archive that holds Python objects
answers "This file contains pickled (object) data. If you trust the file you can load it unsafely": the wrong
diagnosis (the file is usually truncated or not numpy's at all) and advice to run code from a file. Every
``.npy`` / ``.npz`` input of the project (score files of ``certify-scores``, their groups, the world's splits)
is read here instead: a file that cannot be read raises :class:`ArrayFileError` naming the file, what is wrong
with it (truncated or damaged, not a numpy file, a pickle, an array of Python objects) and how to regenerate
it. Pickles are never loaded.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np

#: the first bytes of a .npy file and of a zip archive (.npz)
NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"


class ArrayFileError(ValueError):
    """A ``.npy`` / ``.npz`` file that cannot be read as numeric arrays; the message names the file, the
    problem and how to regenerate it.

    Attributes:
        path: the file.
        problem: what is wrong with it, in words (``"it is empty (0 bytes)"``).
        fix: how to regenerate it.
    """

    def __init__(self, path: Path, problem: str, fix: str) -> None:
        super().__init__(f"{path}: cannot be read as numeric arrays: {problem}. {fix}")
        self.path, self.problem, self.fix = path, problem, fix


def _what_it_is(path: Path) -> str:
    """What a file that numpy could not read looks like, from its first bytes."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(8)
    except OSError as exc:
        return f"it cannot be opened ({exc.strerror or type(exc).__name__})"
    if not head:
        return "it is empty (0 bytes)"
    if head.startswith(NPY_MAGIC):
        if _npy_holds_objects(path):
            return "it holds Python objects (dtype object), not numbers or strings (such arrays are pickles and are never loaded)"
        return "it is a .npy file that is truncated or damaged"
    if head.startswith(ZIP_MAGIC) or head.startswith(b"PK"):
        return "it is a zip archive (.npz) that is truncated or damaged"
    if head[:1] == b"\x80":
        return "it is a Python pickle, not a numpy array file (pickles are never loaded: they can run code)"
    return "it is not a numpy file (it starts with neither the .npy nor the .npz signature)"


def _npy_holds_objects(path: Path) -> bool:
    """Whether a .npy file's header declares an object dtype (read without loading the data)."""
    from numpy.lib import format as npy_format

    try:
        with open(path, "rb") as handle:
            version = npy_format.read_magic(handle)
            header = npy_format.read_array_header_1_0 if version == (1, 0) else npy_format.read_array_header_2_0
            _, _, dtype = header(handle)
    except (ValueError, OSError, EOFError):
        return False
    return bool(dtype.hasobject)


def _fail(path: Path, problem: str, fix: str) -> ArrayFileError:
    return ArrayFileError(path, problem, fix)


def _numeric(array: np.ndarray, name: str, path: Path, fix: str) -> np.ndarray:
    if array.dtype.hasobject:
        raise _fail(path, f"{name} holds Python objects (dtype object), not numbers or strings "
                          "(such arrays are pickles and are never loaded)", fix)
    return array


def _load(path: Path, fix: str) -> Any:
    """``np.load`` without pickles: an array or an open ``NpzFile``; the project's own message for a missing or
    unreadable file (never numpy's advice to load it unsafely)."""
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist. {fix}")
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile):
        raise _fail(path, _what_it_is(path), fix) from None


def read_npy(path: Path | str, fix: str) -> np.ndarray:
    """The array of a ``.npy`` file.

    Args:
        path: the file.
        fix: how to regenerate it (a sentence, e.g. ``"Write it with numpy.save(PATH, scores)."``).

    Returns:
        The array (never an object array).

    Raises:
        ArrayFileError: the file is truncated, damaged, empty, a pickle, an ``.npz`` archive or an object array.
        FileNotFoundError: it does not exist.
    """
    path = Path(path)
    loaded = _load(path, fix)
    if isinstance(loaded, np.lib.npyio.NpzFile):
        loaded.close()
        raise _fail(path, "it is an .npz archive (several arrays), not a single .npy array", fix)
    return _numeric(loaded, "the array", path, fix)


def read_npz(path: Path | str, fix: str, names: tuple[str, ...] | None = None) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` archive, read now (a damaged member is found here, not later).

    Args:
        path: the archive.
        fix: how to regenerate it (a sentence).
        names: read only these members (those present); None reads every member.

    Returns:
        Member name -> array (no object arrays).

    Raises:
        ArrayFileError: the archive is truncated, damaged, empty, a pickle, a bare ``.npy`` array, or a member
            holds Python objects.
        FileNotFoundError: it does not exist.
    """
    path = Path(path)
    loaded = _load(path, fix)
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise _fail(path, "it holds one array (a .npy file), not an .npz archive of named arrays", fix)
    arrays: dict[str, np.ndarray] = {}
    with loaded as archive:
        for name in archive.files if names is None else [n for n in names if n in archive.files]:
            try:
                arrays[name] = archive[name]
            except ValueError as exc:
                if "allow_pickle" in str(exc) or "pickle" in str(exc):
                    raise _fail(path, f"array '{name}' holds Python objects (dtype object), not numbers or strings "
                                      "(such arrays are pickles and are never loaded)", fix) from None
                raise _fail(path, f"array '{name}' is truncated or damaged", fix) from None
            except (OSError, EOFError, zipfile.BadZipFile, KeyError):
                raise _fail(path, f"array '{name}' is truncated or damaged (the zip archive is incomplete)", fix) \
                    from None
            _numeric(arrays[name], f"array '{name}'", path, fix)
    return arrays

