"""CSV tables read strictly: the one reader under every CSV file a report or stage reads (recovery, stability,
selected, curves and faithfulness tables, and the summary's findings).

``pandas.read_csv`` alone fails in ways that name no file: a file in another encoding raises a bare
``UnicodeDecodeError``, an empty file ``EmptyDataError``, a table of another kind a ``KeyError`` far from the
read, and a header-only table silently yields no rows (a warning list that says "none" because it read nothing).
:func:`read_csv_table` refuses each of them with the file (and option), what is wrong and the fix, before any work.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd


def require_columns(table: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    """Raise ValueError naming every required column ``what`` lacks (the one column check of every table reader,
    aggregate, figure and table writer).

    Args:
        table: the table.
        columns: the columns it must hold.
        what: the table, for the message (``"stab.csv (--inputs)"``).

    Raises:
        TypeError: ``table`` is not a DataFrame.
        ValueError: naming every missing column and the columns the table has.
    """
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"{what} must be a pandas DataFrame, got {type(table).__name__}")
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(
            f"{what} is missing column(s) {', '.join(repr(c) for c in missing)}; "
            f"it has {', '.join(repr(c) for c in table.columns) or 'no columns'}"
        )


def _first_bad_byte(path: str | Path) -> str:
    """Where a file stops being UTF-8, for a message: ``"line 2: invalid continuation byte"`` (pandas' own error
    counts bytes from the start of its read buffer, not of the file)."""
    data = Path(path).read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return f"line {line}: {exc.reason}"
    return "a byte pandas could not decode"


def read_csv_table(path: str | Path, where: str, columns: Sequence[str], fix: str, dtype: dict[str, Any] | None = None,
                   *, kind: str = "CSV table", allow_empty: bool = False) -> pd.DataFrame:
    """A CSV table, checked before any work: an existing, readable UTF-8 CSV with the ``columns`` its reader needs
    and, unless ``allow_empty``, at least one row.

    Args:
        path: the CSV.
        where: the file and option, for messages (``"recovery.csv (--run)"``).
        columns: the columns the reader needs (checked by :func:`require_columns`).
        fix: what to do when refused (the end of every message).
        dtype: column types passed to :func:`pandas.read_csv` (``{"concept": str}`` keeps ``"007"`` a name).
        kind: what the file should be, for the unreadable-file message (``"not a readable curves CSV"``).
        allow_empty: accept a header-only table (its caller then says what an empty table means).

    Returns:
        The table.

    Raises:
        ValueError: ``"<where> does not exist"``, ``"<where>: not a readable <kind> (<why>)"`` (not UTF-8, not CSV,
            empty file), ``"<where> is missing column(s) ..."`` or ``"<where> holds no rows (header only)"``, each
            followed by ``fix``.
    """
    if not Path(path).is_file():
        raise ValueError(f"{where} does not exist; {fix}")
    try:
        table = pd.read_csv(path, dtype=dtype, encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{where}: not a readable {kind} (not UTF-8 text: {_first_bad_byte(path)}); {fix}") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise ValueError(f"{where}: not a readable {kind} ({str(exc).strip()}); {fix}") from None
    try:
        require_columns(table, columns, where)
    except ValueError as exc:
        raise ValueError(f"{exc}; {fix}") from None
    if table.empty and not allow_empty:
        raise ValueError(f"{where} holds no rows (header only); {fix}")
    return table
