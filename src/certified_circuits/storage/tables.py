"""CSV tables read strictly: the one reader under every CSV file a report or stage reads (recovery, stability,
selected, curves and faithfulness tables, and the summary's findings).

``pandas.read_csv`` alone fails in ways that name no file: a file in another encoding raises a bare
``UnicodeDecodeError``, an empty file ``EmptyDataError``, a table of another kind a ``KeyError`` far from the
read, a header-only table silently yields no rows (a warning list that says "none" because it read nothing), and a
ragged row is read as something else (one field too many in the first row makes the first column the index and
shifts every value one column left; a row with a field too few is padded with NaN). :func:`read_csv_table` refuses
each of them with the file (and option), what is wrong and the fix, before any work.

A K column (a circuit's size as a share of the components, or as a percentage) is read by one parser,
:func:`parse_k_column`, wherever a table is read: a value outside the column's range, a word or an infinity is
refused with the file, the row and the column, never flagged or averaged as if it were a K.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from certified_circuits.storage.paths import file_identity


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


def _ragged_line(path: str | Path) -> str:
    """The first line whose number of fields is not the header's, for a message (``"line 3 has 4 fields, the header
    3"``), or ``""`` when every line has the header's (blank lines, which pandas skips, are not counted).

    The widths come from :mod:`csv` (the quoting pandas uses) in one pass, ``map(len, reader)`` into one array; the
    line is the record's number, exact unless a quoted cell spans lines (the tables this project writes have none).
    """
    with open(path, newline="", encoding="utf-8") as handle:
        widths = np.fromiter(map(len, csv.reader(handle)), dtype=np.int64)
    if widths.size < 2:
        return ""
    bad = np.flatnonzero((widths[1:] != widths[0]) & (widths[1:] > 0))
    if not bad.size:
        return ""
    line = int(bad[0]) + 2
    return f"line {line} has {int(widths[line - 1])} fields, the header {int(widths[0])}"


def check_share_column(raw: pd.Series, column: str, where: str, fix: str, *, allow_empty: bool,
                       empty_why: str = "it has none there") -> np.ndarray:
    """A column of shares as float64, refused at the first cell that is not a number in [0, 1] (a word, inf, 1.5)
    or, unless ``allow_empty``, is empty: the one share check of the table readers.

    Args:
        raw: the column as read; column, where, fix: for the message (``where`` names the file and option).
        allow_empty: whether an empty cell (NaN) is allowed; empty_why: why, for the message.

    Raises:
        ValueError: ``"<where>: column '<c>' holds <cell> (row <r>), not a share in [0, 1][ (or empty: <why>)];
            <fix>"`` (the header is row 1).
    """
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    empty = raw.isna().to_numpy()
    bad = ~empty & ~((values >= 0) & (values <= 1))  # a word is NaN here: refused
    if not allow_empty:
        bad |= empty
    if bad.any():
        index = int(np.flatnonzero(bad)[0])
        value = raw.iloc[index]
        shown = "an empty cell" if empty[index] else repr(value.item() if isinstance(value, np.generic) else value)
        also = f" (or empty: {empty_why})" if allow_empty else ""
        raise ValueError(f"{where}: column {column!r} holds {shown} (row {index + 2}), not a share in [0, 1]{also}; "
                         f"{fix}")
    return values


def check_distinct_files(paths: Iterable[str | Path], option: str) -> None:
    """Refuse a file given twice to one option, by any spelling (``a.csv``, ``./a.csv``, a symlink or a hard link to
    it: :func:`~certified_circuits.storage.paths.file_identity`): a report that reads it twice would count its rows twice.

    Args:
        paths: the option's files.
        option: the option, for the message (``"--selected"``).

    Raises:
        ValueError: ``"<path> (<option>) is given twice (also as <first spelling>) ...; pass each file once"``.
    """
    seen: dict[tuple, str | Path] = {}
    for path in paths:
        key = file_identity(path)
        if key in seen:
            raise ValueError(f"{path} ({option}) is given twice (also as {seen[key]}): its rows would be counted twice; "
                             "pass each file once")
        seen[key] = path


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
            empty file, a ragged row: the line and its number of fields), ``"<where> is missing column(s) ..."`` or
            ``"<where> holds no rows (header only)"``, each followed by ``fix``.
    """
    if not Path(path).is_file():
        raise ValueError(f"{where} does not exist; {fix}")
    try:
        table = pd.read_csv(path, dtype=dtype, encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{where}: not a readable {kind} (not UTF-8 text: {_first_bad_byte(path)}); {fix}") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise ValueError(f"{where}: not a readable {kind} ({str(exc).strip()}); {fix}") from None
    ragged = _ragged_line(path)
    if ragged:
        raise ValueError(f"{where}: not a readable {kind} (a ragged row: {ragged}; a row with a field too many or too "
                         f"few would be read shifted or padded); {fix}")
    try:
        require_columns(table, columns, where)
    except ValueError as exc:
        raise ValueError(f"{exc}; {fix}") from None
    if table.empty and not allow_empty:
        raise ValueError(f"{where} holds no rows (header only); {fix}")
    return table


#: the units a K column states, with the range of its values (a K of 0 keeps no component and is on no grid)
K_UNITS = {"share": 1.0, "percent": 100.0}


def parse_k_column(table: pd.DataFrame, column: str, where: str, fix: str, *,
                   unit: Literal["share", "percent"] = "share", allow_missing: bool = False,
                   allow_zero: bool = False) -> pd.DataFrame:
    """The one parser of a K column of a table read from a file: every value a number in the column's unit, a share
    of the components ``K`` in (0, 1] (``unit="share"``: the ``*_k_target``, ``k_target`` and ``*_k`` columns the
    reports write) or a percentage ``100 K`` in (0, 100] (``unit="percent"``). A value written with a ``%`` sign is a
    percentage whatever the column's unit and is converted to it (``"100%"`` in a share column is 1.0, the whole
    model; ``"50%"`` in a percent column is 50.0), so a hand-written ``100%`` is read as the whole model, never as no K.

    Args:
        table: the table (as read: numbers, or text where a cell is not a number).
        column: the K column.
        where: the file and option, for messages (``"selected.csv (--selected)"``).
        fix: what to do when refused (the end of every message).
        unit: the column's unit: ``"share"`` (range (0, 1]) or ``"percent"`` (range (0, 100]).
        allow_missing: accept empty cells (read as NaN: no K, e.g. a recovery row read at no K).
        allow_zero: accept 0 (an *effective* K, the share a circuit keeps: 0 for an empty circuit; the ``*_k``
            columns of the peak and selected tables), so the range is [0, 1].

    Returns:
        A copy of ``table`` whose ``column`` is float64 in the column's unit.

    Raises:
        ValueError: ``"<where>: column 'k_target' holds 1.5 (row 3), not a K in (0, 1] (...); <fix>"`` for the
            first bad value (a word, an infinity, a value outside the range, an empty cell unless
            ``allow_missing``), its row counted as the file's lines are (the header is row 1); a column that is
            missing or an unknown unit.
    """
    if unit not in K_UNITS:
        raise ValueError(f"unit {unit!r} is not a K unit: use one of {sorted(K_UNITS)}")
    require_columns(table, [column], where)
    top = K_UNITS[unit]
    raw = table[column]
    if pd.api.types.is_numeric_dtype(raw) and not pd.api.types.is_bool_dtype(raw):
        values = raw.to_numpy(dtype=np.float64)  # numbers as read: no round trip through text
    else:  # text somewhere in the column: each cell parsed, "50%" as a percentage
        text = raw.astype("string").str.strip()
        percent = text.str.endswith("%").fillna(False).to_numpy(dtype=bool)
        numbers = pd.to_numeric(text.str.rstrip("%"), errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        values = np.where(percent, numbers * (top / 100.0), numbers)
    missing = raw.isna().to_numpy()
    low_ok = values >= 0 if allow_zero else values > 0
    bad = ~missing & ~(low_ok & (values <= top))  # a word or an infinity is NaN or outside: refused
    if not allow_missing:
        bad |= missing
    rows = np.flatnonzero(bad)
    if rows.size:
        first = int(rows[0])
        cell = raw.iloc[first]
        shown = "an empty cell" if missing[first] else repr(cell.item() if hasattr(cell, "item") else cell)
        low = "[0" if allow_zero else "(0"
        words = (f"in {low}, 1] (a share of the components: the whole model is 1, or '100%')" if unit == "share" else
                 f"in {low}, 100] (a percentage of the components)")
        raise ValueError(f"{where}: column {column!r} holds {shown} (row {first + 2}), not a K {words}"
                         f"{f'; {rows.size} rows are bad' if rows.size > 1 else ''}; {fix}")
    out = table.copy()
    out[column] = values
    return out


def read_k_table(path: str | Path, where: str, columns: Sequence[str], fix: str, k_columns: Mapping[str, bool],
                 dtype: dict[str, Any] | None = None, *, kind: str = "CSV table", allow_empty: bool = False,
                 unit: Literal["share", "percent"] = "share") -> pd.DataFrame:
    """A CSV table with K columns: :func:`read_csv_table`, then each K column through :func:`parse_k_column` (the
    one reader of a table a report reads a K from).

    Args:
        path, where, columns, fix, dtype, kind, allow_empty: as :func:`read_csv_table` (the K columns are required
            too).
        k_columns: ``{column: an empty cell (no K) allowed}``.
        unit: the K columns' unit (:data:`K_UNITS`).

    Returns:
        The table, each K column float64 in its unit.

    Raises:
        ValueError: as :func:`read_csv_table` and :func:`parse_k_column` (file, row and column named).
    """
    table = read_csv_table(path, where, [*columns, *[c for c in k_columns if c not in columns]], fix, dtype,
                           kind=kind, allow_empty=allow_empty)
    for column, allow_missing in k_columns.items():
        table = parse_k_column(table, column, where, fix, unit=unit, allow_missing=allow_missing)
    return table
