"""What a path names: one file whatever its spelling, so inputs and outputs are told apart by what they are."""

from __future__ import annotations

from pathlib import Path


def file_identity(path: str | Path) -> tuple:
    """What one file is, whatever its spelling: ``(st_dev, st_ino)`` of an existing file (a symlink, a hard link and
    ``./a.csv`` are the file they name), else its resolved path (an output not written yet)."""
    try:
        info = Path(path).stat()
    except OSError:
        return ("path", str(Path(path).resolve()))
    return ("file", info.st_dev, info.st_ino)
