"""JSON documents read strictly: the one reader under every JSON file the stages read (ground truth, plan and
warning records).

``json.loads`` alone is lenient where a result file must not be: a key given twice keeps its last value without a
word, ``NaN`` and ``Infinity`` are accepted, a file in another encoding fails with an error that names no file,
and a document of another kind is read as if it were the one asked for. :func:`read_json_document` refuses each
of them with the file, what is wrong and the fix.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class DocumentError(ValueError):
    """A JSON document that is not what its reader expects; the message names the file and the fix."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    """``json`` object hook: a key given twice is an error (plain ``json`` silently keeps the last entry).

    Args:
        pairs: the object's (key, value) pairs in file order.

    Returns:
        The object as a dict.

    Raises:
        ValueError: naming the key.
    """
    d: dict = {}
    for key, value in pairs:
        if key in d:
            raise ValueError(f"key {key!r} is given more than once (JSON keeps only the last; remove the other)")
        d[key] = value
    return d


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (write a finite number, or null)")


def read_text(path: str | os.PathLike, fix: str) -> str:
    """A text file's content as UTF-8, refused by name when it is not UTF-8.

    Args:
        path: the file.
        fix: what to do (e.g. "rerun the stage that writes it").

    Returns:
        The text.

    Raises:
        DocumentError: the file is not UTF-8 (the byte offset and the fix named).
    """
    try:
        return Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise DocumentError(f"{path} is not UTF-8 text (byte {err.start}: {err.reason}): {fix}") from None


def read_json_document(path: str | os.PathLike, fix: str, fmt: str | None = None, what: str = "JSON file") -> dict:
    """A JSON object read strictly: UTF-8, valid JSON, no key twice, no NaN or Infinity and, with ``fmt``, the
    ``format`` field of the kind asked for (a warnings list is not plan records).

    Args:
        path: the file.
        fix: what to do when it is refused (the stage that writes the right file).
        fmt: the expected ``format`` string, or None to skip the kind check.
        what: the kind of file, in words (e.g. "ground-truth file").

    Returns:
        The top-level object.

    Raises:
        DocumentError: naming the file, the problem and the fix.
    """
    text = read_text(path, fix)
    try:
        data = json.loads(text, object_pairs_hook=unique_keys, parse_constant=_no_constant)
    except json.JSONDecodeError as err:
        raise DocumentError(f"{path} is not valid JSON (line {err.lineno}, column {err.colno}: {err.msg}): {fix}") from None
    except ValueError as err:
        raise DocumentError(f"{path}: {err}: {fix}") from None
    if not isinstance(data, dict):
        raise DocumentError(f"{path}: the top level is a JSON {type(data).__name__}, not an object: it is not a "
                            f"{what}; {fix}")
    if fmt is not None and data.get("format") != fmt:
        raise DocumentError(f"{path} is not a {what}: its format is {data.get('format')!r}, expected {fmt!r}; {fix}")
    return data
