"""MIB's own task data (the mib-bench datasets: IOI, MCQA, arithmetic, ARC) read from a local download.

MIB (Mueller et al. 2025, "MIB: A Mechanistic Interpretability Benchmark") evaluates circuits on its Hugging Face
datasets through ``HFEAPDataset`` (hannamw/MIB-circuit-track ``MIB_circuit_track/dataset.py``, commit b759df3).
This module turns a local copy of one of them into this package's examples (:class:`~.tasks.Example`) with the
same prompts, counterfactual and answer pair as MIB's ``__getitem__``, so the logit difference certified here is
MIB's ``logit_diff``:

============================  ======================  ==========================  ===============================
MIB task                      counterfactual column   answer (clean)              distractor
============================  ======================  ==========================  ===============================
``ioi``                       ``s2_io_flip_counterfactual``  ``" " + metadata.indirect_object``  ``" " + metadata.subject``
``mcqa``, ``arc_easy``,       ``symbol_counterfactual``  ``choices.label[answerKey]``  the counterfactual's
``arc_challenge``                                                                 ``choices.label[answerKey]``
``arithmetic_addition``,      ``random_counterfactual``  ``str(label)``               ``str(random_counterfactual.label)``
``arithmetic_subtraction``
============================  ======================  ==========================  ===============================

The clean prompt is ``prompt``, the corrupted one the counterfactual's ``prompt``. MCQA and ARC answer with the
choice letter as written (no leading space: MIB tokenises ``label`` as is), arithmetic with the number's digits.
As MIB's ``filter_dataset`` does, arithmetic keeps the rows of its operator (``+`` addition, ``-`` subtraction) whose
counterfactual and its prompt are present. MIB drops rows whose answer is several tokens; this package refuses
them instead, row by row (:func:`~.task_checks.check_tokens`, as for a task file): a dropped row would silently change
the dataset a certificate is about.

**On-disk formats** (:func:`read_split`): what ``datasets`` writes or downloads, under one folder:

- ``Dataset(Dict).save_to_disk(DIR)``: ``DIR/<split>/data-*.arrow`` (Arrow IPC streams; ``dataset_dict.json``);
- a hub download (``huggingface-cli download mib-bench/ioi --repo-type dataset --local-dir DIR``): Parquet files
  ``<split>-*.parquet`` or JSON / JSON-lines ``<split>*.json(l)`` anywhere below ``DIR``; MCQA's config folder
  ``4_answer_choices`` (the config MIB loads) is preferred when present;
- the ``datasets`` cache: ``<name>-<split>*.arrow``.

**Splits.** MIB's splits are kept: by default ``train`` -> train, ``validation`` -> validation and ``test`` ->
id_test (there is no ood_test). ``splits=`` picks another mapping (e.g. ``{"id_test": "validation"}`` when the
download holds no ``test``, MIB's ``run_evaluation.py`` default split being ``validation``). Example ids are
``<task>-<MIB split>-<row:05d>`` (0-based row of the split), so a reported example can be found in MIB's data.
"""

from __future__ import annotations

import json
import logging
import numbers
import os
import re
from pathlib import Path
from typing import Any, Mapping

from certified_circuits.analysis.mib_constants import MIB_TASKS
from certified_circuits.language.task_checks import check_tokens
from certified_circuits.language.tasks import SPLITS, Example

log = logging.getLogger(__name__)

#: the counterfactual column of each task (``dataset.py``: IOI's ``s2_io_flip_counterfactual``, MCQA's and ARC's
#: default ``symbol_counterfactual``, arithmetic's ``random_counterfactual``)
COUNTERFACTUAL: dict[str, str] = {
    "ioi": "s2_io_flip_counterfactual", "mcqa": "symbol_counterfactual", "arc_easy": "symbol_counterfactual",
    "arc_challenge": "symbol_counterfactual", "arithmetic_addition": "random_counterfactual",
    "arithmetic_subtraction": "random_counterfactual",
}
#: MCQA's dataset config (``load_dataset(url, '4_answer_choices')``)
MCQA_CONFIG = "4_answer_choices"
#: MIB split -> this package's split, by default
DEFAULT_SPLITS: dict[str, str] = {"train": "train", "validation": "validation", "id_test": "test"}
#: the marker files of a MIB download folder (:func:`is_mib_dataset`)
_DATA_SUFFIXES = (".arrow", ".parquet", ".json", ".jsonl")


class MIBDataError(ValueError):
    """A MIB dataset folder cannot be read (the message names the folder, the row or split and the fix)."""


def mib_task(task: str) -> str:
    """The MIB task a task name stands for: the name itself, with ``-`` read as ``_`` (MIB's folders write
    ``arithmetic-addition``).

    Raises:
        MIBDataError: not one of MIB's six tasks (listed).
    """
    name = task.replace("-", "_")
    if name not in MIB_TASKS:
        raise MIBDataError(f"task {task!r} is not one of MIB's tasks {sorted(MIB_TASKS)}: name the task after the "
                           f"MIB dataset it reads (language.task_files: {{ioi: DIR}})")
    return name


def is_mib_dataset(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a folder holding dataset files (Arrow, Parquet, JSON) rather than a task file."""
    p = Path(path)
    return p.is_dir() and any(f.suffix in _DATA_SUFFIXES for f in p.rglob("*") if f.is_file())


def _split_files(folder: Path, split: str, task: str) -> list[Path]:
    """The files of one split under ``folder`` (module docstring), in name order."""
    files = [f for f in folder.rglob("*") if f.is_file() and f.suffix in _DATA_SUFFIXES]
    if task == "mcqa" and any(MCQA_CONFIG in f.parts for f in files):
        files = [f for f in files if MCQA_CONFIG in f.relative_to(folder).parts]
    saved = [f for f in files if f.suffix == ".arrow" and f.parent.name == split
             and f.name.startswith("data-")]  # save_to_disk: DIR/<split>/data-00000-of-00001.arrow
    if saved:
        return sorted(saved)
    pattern = re.compile(rf"(^|.*[-_]){re.escape(split)}([-_.].*)?$")
    named = [f for f in files if pattern.match(f.stem) and not f.name.startswith("dataset_")
             and f.name not in ("state.json", "dataset_info.json", "dataset_dict.json")]
    in_folder = [f for f in files if f.parent.name == split and f.name not in ("state.json", "dataset_info.json")]
    return sorted(named or in_folder)


#: what to do when a MIB data file is refused
MIB_FILE_FIX = ("download the split again (MIB's datasets on the Hugging Face hub, docs/mib.md), or remove the file "
                "from the folder")


def _json_rows(f: Path) -> list[tuple[str, Any]]:
    """(place, value) of each row of a JSON array or JSON-lines file, read strictly (UTF-8, no key twice); a place
    is ``FILE:LINE`` (JSON lines, the line in the file) or ``FILE row N`` (a JSON array)."""
    from certified_circuits.storage.documents import DocumentError, read_text, unique_keys

    try:
        text = read_text(f, MIB_FILE_FIX)
    except DocumentError as err:
        raise MIBDataError(str(err)) from None
    try:
        if f.suffix == ".json" and text.lstrip().startswith("["):
            values = json.loads(text, object_pairs_hook=unique_keys)
            return [(f"{f} row {i}", v) for i, v in enumerate(values)]
    except json.JSONDecodeError as err:
        raise MIBDataError(f"{f}:{err.lineno}: not valid JSON ({err.msg}, column {err.colno}): {MIB_FILE_FIX}") from None
    except ValueError as err:
        raise MIBDataError(f"{f}: {err}: {MIB_FILE_FIX}") from None
    rows = []
    for number, line in enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), start=1):
        if not line.strip():
            continue
        try:
            rows.append((f"{f}:{number}", json.loads(line, object_pairs_hook=unique_keys)))
        except json.JSONDecodeError as err:
            raise MIBDataError(f"{f}:{number}: not a JSON line ({err.msg}, column {err.colno}): each line of a "
                               f"JSON-lines file is one row object; {MIB_FILE_FIX}") from None
        except ValueError as err:
            raise MIBDataError(f"{f}:{number}: {err}: {MIB_FILE_FIX}") from None
    return rows


def _table_rows(f: Path) -> list[tuple[str, Any]]:
    """(``FILE row N``, row) of each row of an Arrow (stream or file) or Parquet file; a damaged file is named."""
    import pyarrow as pa

    try:
        if f.suffix == ".parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(f)
        else:
            try:
                with pa.memory_map(str(f)) as source:
                    table = pa.ipc.open_stream(source).read_all()
            except pa.ArrowInvalid:
                with pa.memory_map(str(f)) as source:
                    table = pa.ipc.open_file(source).read_all()
    except (pa.ArrowException, OSError) as err:
        kind = "Parquet" if f.suffix == ".parquet" else "Arrow"
        raise MIBDataError(f"{f} is not a readable {kind} file ({str(err).strip()[:200]}): {MIB_FILE_FIX}") from None
    return [(f"{f} row {i}", row) for i, row in enumerate(table.to_pylist())]


def _read_file(f: Path) -> list[tuple[str, dict[str, Any]]]:
    """The rows of one Arrow, Parquet, JSON or JSON-lines file with their places (file and line or row), nested
    columns as dicts; every row is an object.

    Args:
        f: the file.

    Returns:
        (place, row) in file order.

    Raises:
        MIBDataError: the file is not UTF-8, not valid JSON (the line named), gives a key twice, is a damaged Arrow
            or Parquet file, or holds a row that is not an object.
    """
    rows = _table_rows(f) if f.suffix in (".parquet", ".arrow") else _json_rows(f)
    for place, row in rows:
        if not isinstance(row, dict):
            raise MIBDataError(f"{place}: a row is a JSON {type(row).__name__}, not an object with MIB's columns "
                               f"(prompt, the counterfactuals, ...): {MIB_FILE_FIX}")
    return rows


def available_splits(path: str | os.PathLike, task: str) -> list[str]:
    """The MIB splits found under ``path`` (of ``train``, ``validation``, ``test``)."""
    return [s for s in ("train", "validation", "test") if _split_files(Path(path), s, mib_task(task))]


def read_split(path: str | os.PathLike, task: str, split: str) -> list[dict[str, Any]]:
    """The rows of one MIB split, as MIB's ``load_dataset(...)[split]`` holds them.

    Args:
        path: the download folder (module docstring: save_to_disk, hub download or cache layout).
        task: a MIB task (:func:`mib_task`).
        split: ``train``, ``validation`` or ``test``.

    Returns:
        The rows in file order, nested columns (``metadata``, the counterfactuals, ``choices``) as dicts.

    Raises:
        MIBDataError: no file of that split (the splits found are listed).
    """
    return [row for _, row in split_rows(path, task, split)]


def split_rows(path: str | os.PathLike, task: str, split: str) -> list[tuple[str, dict[str, Any]]]:
    """The rows of one MIB split with their places (:func:`read_split`'s rows; a place is ``FILE:LINE`` or
    ``FILE row N``, for messages).

    Args:
        path, task, split: as :func:`read_split`.

    Returns:
        (place, row) in file order.

    Raises:
        MIBDataError: no file of that split, or a file that cannot be read (named, with its line or row).
    """
    folder = Path(path)
    files = _split_files(folder, split, mib_task(task))
    if not files:
        raise MIBDataError(f"MIB dataset {folder} (task {task}) has no {split!r} split; found "
                           f"{available_splits(folder, task) or 'no split'}: download the split or pick another one")
    return [item for f in files for item in _read_file(f)]


def _keep(task: str, row: Mapping[str, Any]) -> bool:
    """MIB's ``filter_dataset`` conditions that define the task (not the token counts, which are checked instead):
    arithmetic keeps its operator's rows with a counterfactual prompt."""
    if task.startswith("arithmetic"):
        cf = row.get("random_counterfactual")
        operator = "-" if "subtraction" in task else "+"
        return cf is not None and cf.get("prompt") is not None and row.get("operator") == operator
    return True


def _field(row: Mapping[str, Any], where: str, *keys: Any) -> Any:
    value: Any = row
    for key in keys:
        try:
            value = value[key]
        except (KeyError, IndexError, TypeError):
            path = ".".join(map(str, keys))
            raise MIBDataError(f"{where}: no {path} (MIB's dataset.py reads it): is this the MIB dataset of the "
                               f"task? columns are {sorted(row)}") from None
    return value


def _choice(row: Mapping[str, Any], where: str, prefix: str) -> str:
    """The answer of a multiple-choice row as MIB's ``HFEAPDataset`` reads it: ``choices.label[answerKey]``, where
    ``answerKey`` is the 0-based index of the answer in ``choices.label`` (an integer, or its decimal digits), so
    ``0 <= answerKey < len(choices.label)``. A letter (``"A"``: ARC's original answerKey, which MIB's files replace by
    the index) or a negative index (Python would read -1 as the last label) is refused, never guessed.

    Args:
        row: the row (or its counterfactual, a nested mapping).
        where: the row's place (file and row), for errors.
        prefix: the key path of ``row`` in the file's row, for errors (``"symbol_counterfactual."``).

    Returns:
        The label, as written.

    Raises:
        MIBDataError: naming the file and row, the key, the value and what is accepted.
    """
    labels = _field(row, where, "choices", "label")
    key = _field(row, where, "answerKey")
    text = str(key).strip()
    whole = isinstance(key, numbers.Integral) and not isinstance(key, bool)
    if not isinstance(labels, (list, tuple)) or not labels:
        raise MIBDataError(f"{where}: {prefix}choices.label is {labels!r}, not a list of the choices' labels: is this "
                           "MIB's dataset of the task? download the split again")
    if not (whole or (isinstance(key, str) and text.isdigit() and text.isascii())) or not 0 <= int(text) < len(labels):
        raise MIBDataError(f"{where}: {prefix}answerKey is {key!r}; MIB reads it as the 0-based index of the answer in "
                           f"{prefix}choices.label {list(labels)}, so it is an integer from 0 to {len(labels) - 1}: "
                           "is this MIB's dataset of the task (ARC's original files give a letter)? download MIB's "
                           "split again")
    return str(labels[int(text)])


def row_example(task: str, row: Mapping[str, Any], *, id: str, split: str, where: str = "") -> Example:
    """One MIB row as MIB's ``HFEAPDataset.__getitem__`` reads it (module docstring's table).

    Args:
        task: a MIB task.
        row: the row (nested dicts).
        id: the example's id.
        split: this package's split name.
        where: the row's place, for errors.

    Returns:
        The example: clean ``prompt``, corrupted counterfactual ``prompt``, answer and distractor as MIB tokenises
        them (the metric is their logit difference, MIB's ``logit_diff``).
    """
    task = mib_task(task)
    where = where or id
    cf_col = COUNTERFACTUAL[task]
    clean = _field(row, where, "prompt")
    corrupted = _field(row, where, cf_col, "prompt")
    if task == "ioi":
        answer = " " + str(_field(row, where, "metadata", "indirect_object"))
        distractor = " " + str(_field(row, where, "metadata", "subject"))
    elif task.startswith("arithmetic"):
        answer, distractor = str(_field(row, where, "label")), str(_field(row, where, cf_col, "label"))
    else:
        answer = _choice(row, where, "")
        distractor = _choice(_field(row, where, cf_col), where, f"{cf_col}.")
    return Example(id=id, task=task, split=split, clean=str(clean), corrupted=str(corrupted), answer=answer,
                   distractor=distractor)


def load_mib_task(path: str | os.PathLike, task: str, *, splits: Mapping[str, str] | None = None,
                  tokenizer=None, max_len: int | None = None) -> dict[str, list[Example]]:
    """A MIB download as this package's splits, checked like a task file.

    Args:
        path: the download folder.
        task: the task name: a MIB task (``ioi``, ``mcqa``, ...; :func:`mib_task`). Examples carry it as written.
        splits: ``{our split: MIB split}`` overriding :data:`DEFAULT_SPLITS` key by key (``{"id_test":
            "validation"}``); ``ood_test`` may be mapped too.
        tokenizer: the model's prompt tokenizer; None skips the token checks.
        max_len: the model's context length.

    Returns:
        ``{split: examples}`` over :data:`~.tasks.SPLITS` (unmapped splits empty).

    Raises:
        MIBDataError: a split missing, an unknown split name, a row without MIB's columns.
        TaskFileError: a row whose answer or distractor is not one token, or whose prompts differ in length
            (:func:`~.task_checks.check_tokens`; the row named ``<task>-<split>-<row>``).
    """
    name = mib_task(task)
    mapping = {**DEFAULT_SPLITS, **dict(splits or {})}
    unknown = [s for s in mapping if s not in SPLITS]
    if unknown:
        raise MIBDataError(f"splits {unknown} are not this package's splits {list(SPLITS)}")
    out: dict[str, list[Example]] = {s: [] for s in SPLITS}
    for ours, theirs in mapping.items():
        rows = split_rows(path, name, theirs)
        kept = 0
        for index, (place, row) in enumerate(rows):
            if not _keep(name, row):
                continue
            ex_id = f"{task}-{theirs}-{index:05d}"
            out[ours].append(row_example(name, row, id=ex_id, split=ours, where=f"{place} ({theirs} split)"))
            kept += 1
        log.info("MIB %s: %s split -> %s: %d of %d rows", task, theirs, ours, kept, len(rows))
        out[ours] = [Example(**{**e.__dict__, "task": task}) for e in out[ours]]
        if not out[ours]:
            raise MIBDataError(f"MIB dataset {path}: the {theirs!r} split (our {ours}) holds no row of task {task}")
    if tokenizer is not None:
        check_tokens([e for s in SPLITS for e in out[s]], tokenizer, path, max_len=max_len)
    return out


def mib_examples(path: str | os.PathLike, task: str, split: str, **kw) -> list[Example]:
    """The examples of one MIB split (the split a user picks, e.g. MIB's evaluation split ``validation``).

    Args:
        path, task: as :func:`load_mib_task`.
        split: a MIB split name.
        **kw: ``tokenizer``, ``max_len``.

    Returns:
        The split's examples, their ``split`` field the MIB split's name.
    """
    name = mib_task(task)
    rows = split_rows(path, name, split)
    examples = [Example(**{**row_example(name, row, id=f"{task}-{split}-{i:05d}", split=split, where=place).__dict__,
                           "task": task}) for i, (place, row) in enumerate(rows) if _keep(name, row)]
    if kw.get("tokenizer") is not None:
        check_tokens(examples, kw["tokenizer"], path, max_len=kw.get("max_len"))
    return examples

