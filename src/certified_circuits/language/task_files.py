"""Language tasks from a user's own files (``language.task_files: {name: path}``).

A task file is a CSV or JSON-lines file with one prompt pair a row and the columns

- ``clean``: the clean prompt; the model should continue it with ``answer``;
- ``corrupted``: the corrupted prompt; it must tokenise to as many tokens as ``clean`` (EAP-IG patches
  activations position by position);
- ``answer`` and ``distractor``: the two continuations whose logit difference is the metric; each must
  be **one token** under the model's tokenizer;
- optional ``split``: ``train``, ``validation``, ``id_test`` or ``ood_test``;
- optional ``id``: a unique name of the row (default ``<task>-<line>``, see below).

Other columns are ignored. A CSV file (comma-separated, UTF-8, header on line 1; quote values that hold
commas)::

    clean,corrupted,answer,distractor,split
    "Then, Mary and John went home. John gave a drink to","Then, Anna and Paul went home. Paul gave a drink to", Mary, John,train
    "When Tom and Sue left, Sue gave a book to","When Ann and Bob left, Bob gave a book to", Tom, Sue,id_test

A JSONL file (one JSON object a line; every value a string)::

    {"clean": "Then, Mary and John went home. John gave a drink to", "answer": " Mary", "distractor": " John",
     "corrupted": "Then, Anna and Paul went home. Paul gave a drink to"}

(shown on two lines here; in the file each object is on one line).

**Tokenisation.** Values are kept exactly as written (the ``csv`` module, which does not strip
spaces): the answer and the distractor are tokenised as written, so for a byte-level BPE such as GPT-2's
the word after a space is ``" Mary"`` with its leading space (write ``, Mary,`` in a CSV file or
``" Mary"`` in JSON), a different token from ``"Mary"``.

**Splits.** With a ``split`` column, every row names its split and the file's assignment is used as
written (``ood_test`` may be empty or absent). Without one (or with a ``split`` column left empty on
every row), the rows are shuffled with ``numpy.random.default_rng([seed, zlib.crc32(task)])`` (the run
seed and the task name, so two tasks of one run get independent shuffles) and split 60/20/20:
``n_train = round(0.6 n)``, ``n_validation = round(0.2 n)``, ``n_id_test = n - n_train -
n_validation`` (for an integer ``n`` the products are never a tie, so the rounding direction never
matters: n = 10 gives 6/2/2, n = 7 gives 4/1/2, n = 4 gives 2/1/1), and there is no ``ood_test``. Rows
keep their file order within each split. ``train``, ``validation`` and ``id_test`` must each hold a
row (so a file without a ``split`` column needs at least 4 rows).

**Ids.** Example ids are the ``id`` column when given (unique), else ``f"{task}-{line:05d}"`` with the
row's 1-based line number in the file (the CSV header is line 1): an id names its row whatever split the
row is assigned to, and a reported example can be found in the file.

The workflow checks every task file (columns, values, splits and, with the model's tokenizer,
single-token answers and equal prompt lengths) before any job runs; every error names the file, the row
and the fix. This module imports neither torch nor transformers.
"""

from __future__ import annotations

import csv
import difflib
import json
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from certified_circuits.analysis.mib_constants import MIB_TASKS
from certified_circuits.language import mib_data
from certified_circuits.language.task_checks import TaskFileError, check_tokens
from certified_circuits.language.tasks import SPLITS, Example
from certified_circuits.language.tokenizer import PromptTokenizer

#: Columns every task file must have.
TASK_FILE_COLUMNS: tuple[str, ...] = ("clean", "corrupted", "answer", "distractor")
#: Columns a task file may have.
OPTIONAL_COLUMNS: tuple[str, ...] = ("split", "id")
#: Accepted file suffixes (case-insensitive).
TASK_FILE_SUFFIXES: tuple[str, ...] = (".csv", ".jsonl")
#: Splits that must hold at least one row (``ood_test`` is optional).
REQUIRED_SPLITS: tuple[str, ...] = ("train", "validation", "id_test")

_COLUMNS_HINT = (f"the columns are {', '.join(TASK_FILE_COLUMNS)} (required) and "
                 f"{', '.join(OPTIONAL_COLUMNS)} (optional)")


@dataclass(frozen=True)
class TaskRow:
    """One row of a task file, values exactly as written.

    Attributes:
        row: 1-based line number of the row in the file (the CSV header is line 1; for a CSV value that
            spans lines, the line the row starts on).
        id: the ``id`` value, else ``f"{task}-{row:05d}"``.
        split: the ``split`` value, or None when the file has no split column or the cell is empty.
    """

    row: int
    id: str
    clean: str
    corrupted: str
    answer: str
    distractor: str
    split: str | None = None


# ---------------------------------------------------------------------------------------------- reading
def read_task_file(path: str | os.PathLike, task: str) -> list[TaskRow]:
    """Read and validate the rows of a task file (no tokenizer needed).

    Args:
        path: a ``.csv`` or ``.jsonl`` file (see the module docstring for the format).
        task: the task name (``language.task_files`` key), used in default ids.

    Returns:
        the rows in file order.

    Raises:
        FileNotFoundError: the file does not exist.
        TaskFileError: unknown suffix, empty file, missing column, empty value, malformed line, unknown
            split name or duplicate id; the message names the file, the row and the fix.
    """
    p = Path(path)
    if not task or not isinstance(task, str):
        raise TaskFileError(f"task file {p}: the task needs a non-empty name (the language.task_files key)")
    if p.is_dir():
        raise IsADirectoryError(f"task file {p} (task {task!r}) is a folder, not a file: give the .csv or .jsonl "
                                f"file inside it under language.task_files (a folder of MIB's own data is read for a "
                                f"task named after MIB's: ioi, mcqa, arithmetic_addition, arithmetic_subtraction, "
                                f"arc_easy, arc_challenge)")
    if not p.is_file():
        raise FileNotFoundError(f"task file {p} (task {task!r}) does not exist: check the path under "
                                f"language.task_files (relative paths are relative to the working directory)")
    suffix = p.suffix.lower()
    if suffix not in TASK_FILE_SUFFIXES:
        raise TaskFileError(f"task file {p} has the suffix {p.suffix or '(none)'!r}; a task file is CSV or JSON "
                            f"lines: name it with one of {', '.join(TASK_FILE_SUFFIXES)}")
    try:
        records = _csv_records(p) if suffix == ".csv" else _jsonl_records(p)
    except UnicodeDecodeError as err:
        raise TaskFileError(f"task file {p} is not UTF-8 text ({err}): save it with UTF-8 encoding") from err
    if not records:
        raise TaskFileError(f"task file {p} has no rows: write one prompt pair a row ({_COLUMNS_HINT})")
    rows = [_make_row(p, task, line, values) for line, values in records]
    seen: dict[str, int] = {}
    for r in rows:
        if r.id in seen:
            raise TaskFileError(f"{p}:{r.row}: id {r.id!r} is also the id of row {seen[r.id]}; ids must be "
                                f"unique: rename one (or leave the id cell empty for the default {task}-<line>)")
        seen[r.id] = r.row
    return drop_duplicate_rows(rows, p)


def _prompt(row: TaskRow) -> tuple[str, str, str, str]:
    return (row.clean, row.corrupted, row.answer, row.distractor)


def drop_duplicate_rows(rows: Sequence[TaskRow], path: str | os.PathLike) -> list[TaskRow]:
    """Rows without repeats: a row equal to an earlier one (clean, corrupted, answer, distractor) is dropped
    with a warning naming both rows, so one prompt never lands in two splits (train and test would share it).

    One clean prompt with several corrupted prompts (or answers) is kept: a dataset may pair a prompt with
    several corruptions. :func:`assign_splits` keeps such rows in one split.

    Raises:
        TaskFileError: repeats that name different splits (the file puts one prompt in two splits).
    """
    first: dict[tuple[str, str, str, str], TaskRow] = {}
    kept, dropped = [], []
    for r in rows:
        earlier = first.get(_prompt(r))
        if earlier is not None:
            if (earlier.split or r.split) and earlier.split != r.split:
                raise TaskFileError(f"{path}:{r.row}: this row repeats row {earlier.row} but names split "
                                    f"{r.split or '(empty)'} where row {earlier.row} names {earlier.split or '(empty)'}: "
                                    f"one prompt in two splits leaks between training and test; delete one row")
            dropped.append((r.row, earlier.row))
            continue
        first[_prompt(r)] = r
        kept.append(r)
    if dropped:
        import logging

        pairs = ", ".join(f"{row} (repeats {earlier})" for row, earlier in dropped[:10])
        more = f" and {len(dropped) - 10} more" if len(dropped) > 10 else ""
        logging.getLogger(__name__).warning(
            "task file %s: dropped %d duplicate row(s), so no prompt is in two splits: line %s%s",
            path, len(dropped), pairs, more)
    return kept


def _csv_records(p: Path) -> list[tuple[int, dict[str, object]]]:
    """(start line, {column: value}) for each non-blank CSV record; header errors raise."""
    out: list[tuple[int, dict[str, object]]] = []
    csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))  # long prompts are valid CSV (default: 131,072)
    with open(p, encoding="utf-8-sig", newline="") as fh:
        reader = csv.reader(fh)
        try:
            header = next(reader, None)
            while header == []:  # blank lines before the header
                header = next(reader, None)
        except csv.Error as err:
            raise TaskFileError(f"{p}:{reader.line_num}: not valid CSV ({err}): quote values that hold commas, "
                                f"quotes or line breaks") from err
        if header is None:
            raise TaskFileError(f"task file {p} is empty: write a header line ({_COLUMNS_HINT}) and one prompt "
                                f"pair a row")
        header_line = reader.line_num
        columns = [h.strip() for h in header]
        dup = sorted({c for c in columns if c and columns.count(c) > 1})
        if dup:
            raise TaskFileError(f"{p}:{header_line}: the header names the column(s) {dup} twice; name each "
                                f"column once ({_COLUMNS_HINT})")
        missing = [c for c in TASK_FILE_COLUMNS if c not in columns]
        if missing:
            hint = ""
            if len(columns) == 1 and any(sep in header[0] for sep in (";", "\t", "|")):
                hint = "; the header is one column: separate the columns with commas, not ';', '|' or tabs"
            raise TaskFileError(f"{p}:{header_line} (header): missing column(s) {missing}; found {columns}. "
                                f"Fix the header: {_COLUMNS_HINT}{hint}")
        prev_end = header_line
        while True:
            try:
                record = next(reader, None)
            except csv.Error as err:
                raise TaskFileError(f"{p}:{prev_end + 1}: not valid CSV ({err}): quote values that hold commas, "
                                    f"quotes or line breaks, and double quotes inside quoted values") from err
            if record is None:
                break
            start, prev_end = prev_end + 1, reader.line_num
            if record == []:
                continue  # blank line
            if len(record) != len(columns):
                raise TaskFileError(f"{p}:{start}: the row has {len(record)} values but the header has "
                                    f"{len(columns)} columns {columns}: quote values that hold commas "
                                    f'(e.g. "Then, Mary and John ...") and give every column a value')
            out.append((start, dict(zip(columns, record))))
    return out


def _jsonl_records(p: Path) -> list[tuple[int, dict[str, object]]]:
    """(line number, object) for each non-blank JSON line; malformed lines raise."""
    out: list[tuple[int, dict[str, object]]] = []
    with open(p, encoding="utf-8-sig") as fh:
        for i, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise TaskFileError(f"{p}:{i}: not valid JSON ({err.msg}, column {err.colno}): write one JSON "
                                    f"object a line, e.g. " + '{"clean": "...", "corrupted": "...", '
                                    '"answer": " Mary", "distractor": " John"}') from err
            if not isinstance(obj, dict):
                raise TaskFileError(f"{p}:{i}: the line is a JSON {type(obj).__name__}, not an object: write one "
                                    f"JSON object a line with the keys {', '.join(TASK_FILE_COLUMNS)}")
            missing = [c for c in TASK_FILE_COLUMNS if c not in obj]
            if missing:
                raise TaskFileError(f"{p}:{i}: missing key(s) {missing}; found {sorted(obj)}. Every line needs "
                                    f"the keys {', '.join(TASK_FILE_COLUMNS)} (optional: "
                                    f"{', '.join(OPTIONAL_COLUMNS)})")
            out.append((i, obj))
    return out


def _make_row(p: Path, task: str, line: int, values: Mapping[str, object]) -> TaskRow:
    text: dict[str, str] = {}
    for col in TASK_FILE_COLUMNS:
        v = values.get(col)
        if v is not None and not isinstance(v, str):
            raise TaskFileError(f"{p}:{line}: column {col!r} is {v!r}, not text; write it as a JSON string "
                                f"exactly as it is tokenised (e.g. \"{v}\" or \" {v}\")")
        if v is None or not v.strip():
            raise TaskFileError(f"{p}:{line}: column {col!r} is empty; every row needs a non-empty "
                                f"{', '.join(TASK_FILE_COLUMNS)} (fill it in or delete the row)")
        text[col] = v
    split = values.get("split")
    if split is not None and not isinstance(split, str):
        raise TaskFileError(f"{p}:{line}: split {split!r} is not text; write one of {', '.join(SPLITS)}")
    split = split.strip() if split is not None else ""
    if split and split not in SPLITS:
        close = difflib.get_close_matches(split.lower(), SPLITS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise TaskFileError(f"{p}:{line}: split {split!r} is not a split name{hint}; write one of "
                            f"{', '.join(SPLITS)}, or leave the split column out for the seeded 60/20/20 split")
    rid = values.get("id")
    if isinstance(rid, bool) or (rid is not None and not isinstance(rid, (str, int))):
        raise TaskFileError(f"{p}:{line}: id {rid!r} is not text; write a string or leave it empty")
    rid = str(rid).strip() if rid is not None else ""
    return TaskRow(row=line, id=rid or default_id(task, line), split=split or None, **text)


def default_id(task: str, row: int) -> str:
    """The id of a row without an ``id`` value: ``f"{task}-{row:05d}"`` (row = its 1-based line number)."""
    return f"{task}-{row:05d}"


# ---------------------------------------------------------------------------------------------- splits
def split_counts(n: int) -> tuple[int, int, int]:
    """(n_train, n_validation, n_id_test) of the seeded split of ``n`` rows.

    ``n_train = round(0.6 n)``, ``n_validation = round(0.2 n)`` and ``n_id_test`` the rest. Computed in
    integers (``(6n + 5) // 10`` and ``(2n + 5) // 10``); 0.6 n and 0.2 n are never a tie for an integer
    ``n``, so this equals any rounding of the exact products.
    """
    if n < 0:
        raise ValueError(f"row count {n} is negative")
    n_train = (6 * n + 5) // 10
    n_val = (2 * n + 5) // 10
    return n_train, n_val, n - n_train - n_val


def assign_splits(rows: Sequence[TaskRow], task: str, seed: int, *, path: str | os.PathLike | None = None
                  ) -> dict[str, list[Example]]:
    """Examples of each split, from the ``split`` column or the seeded 60/20/20 split.

    The seeded split permutes the distinct clean prompts (seed: ``[seed, crc32(task)]``) and gives the first
    ``round(0.6 m)`` of the ``m`` prompts to train, the next ``round(0.2 m)`` to validation and the rest to
    id_test; every row of a prompt follows it, so no clean prompt is in two splits. With distinct prompts this
    is the 60/20/20 split of the rows.

    Args:
        rows: the rows of one task file (:func:`read_task_file`).
        task: the task name (``Example.task``; with ``seed``, the shuffle's seed).
        seed: the run seed (a non-negative integer).
        path: the file (named in errors).

    Returns:
        ``{split: examples}`` with every split of :data:`~certified_circuits.language.tasks.SPLITS` as a key
        (``ood_test`` empty unless the split column assigns it); examples in file order.

    Raises:
        TaskFileError: only some rows name a split, or ``train``, ``validation`` or ``id_test`` is empty.
    """
    where = f"task file {path}" if path is not None else f"the task file of {task!r}"
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"{where}: the split seed must be a non-negative integer, not {seed!r}")
    rows = list(rows)
    named = [r for r in rows if r.split is not None]
    if named and len(named) < len(rows):
        first = next(r for r in rows if r.split is None)
        loc = f"{path}:{first.row}" if path is not None else f"{where}, row {first.row}"
        raise TaskFileError(f"{loc}: the split column is empty on this row but {len(named)} of {len(rows)} rows "
                            f"name a split; give every row a split ({', '.join(SPLITS)}) or empty the "
                            f"whole column for the seeded 60/20/20 split")
    if named:
        split_of = {r.row: str(r.split) for r in rows}
        rule = "the split column"
    else:
        # The unit of the split is a clean prompt: rows that share one (several corruptions of a prompt) go to
        # one split together. With distinct prompts, as in most files, a unit is a row.
        units = list(dict.fromkeys(r.clean for r in rows))
        n_train, n_val, _ = split_counts(len(units))
        rng = np.random.default_rng([int(seed), zlib.crc32(task.encode("utf-8"))])
        order = rng.permutation(len(units))
        split_of_unit = {}
        for rank, i in enumerate(order):
            split_of_unit[units[i]] = "train" if rank < n_train else "validation" if rank < n_train + n_val \
                else "id_test"
        split_of = {r.row: split_of_unit[r.clean] for r in rows}
        rule = (f"the seeded 60/20/20 split of {len(rows)} rows" if len(units) == len(rows) else
                f"the seeded 60/20/20 split of {len(units)} distinct clean prompts ({len(rows)} rows)")
    out: dict[str, list[Example]] = {s: [] for s in SPLITS}
    where_of: dict[str, tuple[str, int]] = {}
    for r in rows:
        s = split_of[r.row]
        if where_of.setdefault(r.clean, (s, r.row))[0] != s:  # rows not from read_task_file (which drops repeats)
            other, row = where_of[r.clean]
            raise TaskFileError(f"{where}: the clean prompt {r.clean!r} is in split {other} (row {row}) and {s} "
                                f"(row {r.row}); one prompt in two splits leaks between training and test: keep one")
        out[s].append(Example(id=r.id, task=task, split=s, clean=r.clean, corrupted=r.corrupted,
                              answer=r.answer, distractor=r.distractor))
    empty = [s for s in REQUIRED_SPLITS if not out[s]]
    if empty:
        counts = ", ".join(f"{s}={len(out[s])}" for s in (*REQUIRED_SPLITS, "ood_test"))
        fix = (f"add rows with split={empty[0]} (or empty the whole split column for the seeded 60/20/20 split)"
               if named else "add rows (the seeded split fills train, validation and id_test from 4 rows on) "
               "or add a split column that assigns every row")
        raise TaskFileError(f"{where}: split {empty[0]!r} is empty under {rule} ({counts}); train, validation "
                            f"and id_test each need a row: {fix}")
    return out


# ---------------------------------------------------------------------------------------------- loading
def load_task_file(path: str | os.PathLike, task: str, *, seed: int, tokenizer: PromptTokenizer | None = None,
                   max_len: int | None = None) -> dict[str, list[Example]]:
    """Read a task file, assign its splits and (with a tokenizer) check its tokens.

    Args:
        path: a ``.csv`` or ``.jsonl`` task file.
        task: the task name (``Example.task``).
        seed: the run seed of the seeded split (unused when the file has a split column).
        tokenizer: the model's tokenizer; None skips the token checks.
        max_len: the model's context length (checked with a tokenizer).

    Returns:
        ``{split: examples}`` over every split of ``SPLITS`` (``ood_test`` possibly empty).

    Raises:
        FileNotFoundError, TaskFileError: see :func:`read_task_file`, :func:`assign_splits`,
            :func:`~.task_checks.check_tokens`.

    A folder of MIB's own data (:func:`~.mib_data.is_mib_dataset`) for a task named after MIB's (``ioi``,
    ``mcqa``...) is read by :func:`~.mib_data.load_mib_task` (MIB's splits and counterfactuals) and checked by the
    same :func:`~.task_checks.check_tokens`; any other folder is refused by :func:`read_task_file`.
    """
    if mib_data.is_mib_dataset(path) and task.replace("-", "_") in MIB_TASKS:
        return mib_data.load_mib_task(path, task, tokenizer=tokenizer, max_len=max_len)
    rows = read_task_file(path, task)
    splits = assign_splits(rows, task, seed, path=path)
    if tokenizer is not None:
        check_tokens([e for s in SPLITS for e in splits[s]], tokenizer, path, rows={r.id: r.row for r in rows},
                     max_len=max_len)
    return splits


def load_task_files(task_files: Mapping[str, str | os.PathLike], *, seed: int,
                    tokenizer: PromptTokenizer | None = None, max_len: int | None = None
                    ) -> dict[str, dict[str, list[Example]]]:
    """Load every task file of ``language.task_files``, reporting the problems of all files at once.

    Returns:
        ``{task: {split: examples}}`` in the mapping's order.

    Raises:
        TaskFileError: one or more files cannot be used (every file's error, one a paragraph).
    """
    out: dict[str, dict[str, list[Example]]] = {}
    errors: list[str] = []
    for task, path in task_files.items():
        try:
            out[task] = load_task_file(path, task, seed=seed, tokenizer=tokenizer, max_len=max_len)
        except (FileNotFoundError, ValueError) as err:
            errors.append(f"task {task!r}: {err}")
    if errors:
        raise TaskFileError(f"{len(errors)} of {len(task_files)} language.task_files cannot be used:\n"
                            + "\n".join(errors))
    return out


def task_file_has_ood(path: str | os.PathLike) -> bool:
    """Whether a task file assigns any row to ``ood_test`` (only a split column can: the seeded split does not).

    The workflow reads it to know a task's eval sets when it builds the job graph; the file itself is
    checked in full by :func:`load_task_file` before any job runs. A MIB dataset folder has none (MIB's splits are
    train, validation and test).
    """
    if Path(path).is_dir():  # MIB's own data (load_task_file): train, validation and test
        return False
    return any(row.split == "ood_test" for row in read_task_file(path, "task"))
