"""Atomic outputs: every file or folder a stage writes appears complete or not at all.

One mechanism serves every writer of the project: write under a temporary name in the destination
folder (same filesystem, so the final ``os.replace`` is atomic), then rename onto the real name. An
interrupted job therefore never leaves a half-written output that a resumed workflow would mistake for
a finished one. Temporary names start with ``.`` and contain ``.cc-tmp``: :func:`remove_stale_temporaries`
clears the ones a killed process left behind (a SIGKILL runs no ``finally``), and the workflow calls it
when it starts.

Permissions: an output gets the mode a plain ``open()`` or ``mkdir`` of this process would give it
(``0o666 & ~umask`` for a file, ``0o777 & ~umask`` for a folder), not the private 0600/0700 of
:mod:`tempfile`'s names, so colleagues read results as the umask allows.

Writers here: :func:`atomic_path` (any file), :func:`atomic_dir` (a folder, e.g. a Hugging Face model
directory), and the conveniences :func:`write_text`, :func:`write_json`, :func:`write_csv`,
:func:`write_npz`. HDF5 writers in :mod:`certified_circuits.storage.store` use :func:`atomic_path`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import pandas as pd

TEMP_MARK = ".cc-tmp"

#: the modes of a plain open() and mkdir() before the umask
FILE_MODE = 0o666
DIR_MODE = 0o777

#: every path this process has completed, in order: the job's outputs (see :func:`written_paths`)
_WRITTEN: list[Path] = []


def forget_written() -> None:
    """Start a new record of written paths (the CLI calls this before each stage it runs)."""
    _WRITTEN.clear()


def written_paths() -> list[Path]:
    """Files and folders this process has written atomically so far, each once, in order.

    The CLI hands these to the MLflow job record, so a job's run holds exactly the outputs the job
    wrote: nothing of another job's, and nothing it forgot to declare.
    """
    return list(dict.fromkeys(_WRITTEN))


def current_umask() -> int:
    """This process's umask, read without changing it where Linux shows it (/proc), else set and restored."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):  # pragma: no cover - not Linux
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def follow_umask(folder: str | os.PathLike, itself: bool = True) -> Path:
    """Give every file under ``folder`` the mode a plain ``open()`` gets (``0o666 & ~umask``) and every folder the
    mode of ``mkdir`` (``0o777 & ~umask``), like every other output: for libraries that write private files
    whatever the umask (safetensors writes ``model.safetensors`` 0600). Symbolic links are left alone.

    Args:
        folder: the folder.
        itself: also set the folder's own mode (False: only what is inside it, e.g. a folder the caller was given).

    Returns:
        ``folder``.
    """
    folder = Path(folder)
    umask = current_umask()
    if itself:
        os.chmod(folder, DIR_MODE & ~umask)
    for root, dirnames, filenames in os.walk(folder):
        for name in dirnames:
            if not os.path.islink(os.path.join(root, name)):
                os.chmod(os.path.join(root, name), DIR_MODE & ~umask)
        for name in filenames:
            if not os.path.islink(os.path.join(root, name)):
                os.chmod(os.path.join(root, name), FILE_MODE & ~umask)
    return folder


def _refuse_folder(path: Path) -> None:
    if path.is_dir():
        raise IsADirectoryError(f"{path}: the output path is an existing folder; give a file name (e.g. {path}/out"
                                f"{path.suffix or '.h5'}) or remove the folder")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary file path beside ``path``; rename it onto ``path`` only if the block succeeds.

    The temporary file is removed if the block raises. The suffix of ``path`` is kept, so writers that
    look at the extension (``np.savez``, matplotlib, pandas) behave as they would on the real name.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _refuse_folder(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=f"{TEMP_MARK}{path.suffix}", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, FILE_MODE & ~current_umask())  # the writer may have replaced the file: set it last
        os.replace(tmp_path, path)
        _WRITTEN.append(path.resolve())
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty temporary folder beside ``path``; swap it in for ``path`` if the block succeeds.

    An existing ``path`` is moved aside first and deleted after the swap, so readers see either the old
    complete folder or the new complete folder.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=TEMP_MARK, dir=path.parent))
    inside = tmp.resolve()
    try:
        yield tmp
        follow_umask(tmp)  # the folder and what library writers put in it (safetensors: 0600)
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old.", suffix=TEMP_MARK, dir=path.parent))
            os.replace(path, old / path.name)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
        _rename_written(inside, path.resolve())  # files written inside it are outputs under their final names
        _WRITTEN.append(path.resolve())
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
            _rename_written(inside, None)  # the block failed: what it wrote inside is gone, and no output


def _rename_written(old: Path, new: Path | None) -> None:
    """Record every written path under folder ``old`` under folder ``new`` instead (``None``: forget them): an
    atomic folder's files are written under its temporary name and must be recorded under the final one."""
    kept = []
    for written in _WRITTEN:
        if written != old and old not in written.parents:
            kept.append(written)
        elif new is not None:
            kept.append(new / written.relative_to(old))
    _WRITTEN[:] = kept


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) atomically; returns the path."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_json(path: str | os.PathLike, value: Any, sort_keys: bool = False) -> Path:
    """Write ``value`` as indented JSON atomically (keys in the mapping's order, or sorted: ``sort_keys``); returns
    the path. The project's one JSON writer."""
    return write_text(path, json.dumps(value, indent=2, sort_keys=sort_keys) + "\n")


def write_csv(path: str | os.PathLike, frame: "pd.DataFrame") -> Path:
    """Write a data frame as CSV (no index) atomically; returns the path."""
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)
    return Path(path)


def write_npz(path: str | os.PathLike, arrays: dict[str, "np.ndarray"], compressed: bool = True) -> Path:
    """Write arrays to an ``.npz`` atomically; returns the path."""
    import numpy as np

    with atomic_path(path) as tmp:
        with open(tmp, "wb") as handle:
            members: dict[str, Any] = dict(arrays)  # numpy's stubs type **kwds as its allow_pickle flag
            (np.savez_compressed if compressed else np.savez)(handle, **members)
    return Path(path)


def remove_stale_temporaries(root: str | os.PathLike) -> int:
    """Delete temporary files and folders that killed writers left under ``root``; returns how many.

    Only call this when no writer is running under ``root`` (the workflow does it in ``onstart``, while
    it holds Snakemake's lock on the results folder).
    """
    root = Path(root)
    if not root.is_dir():
        return 0
    removed = 0
    for entry in sorted(root.rglob(f".*{TEMP_MARK}*"), key=lambda p: len(p.parts), reverse=True):
        if not entry.exists():
            continue
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        removed += 1
    return removed
