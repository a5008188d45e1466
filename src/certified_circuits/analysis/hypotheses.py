"""The testbed's hypotheses H1-H3 (docs/embedded_default.md), over model seeds from the workflow's truth-size tables
(``report-hypotheses``, :func:`truth_size_hypotheses`): the project's one test of them.

**Over model seeds, at equal size** (issue 50, the test of the fair testbed). Each seed's ``testbed/truth_size.csv``
(:func:`certified_circuits.analysis.size_matched.truth_size_rows`: per certificate, i.e. experiment x concept x scorer
x setting, certified IN of ``m`` components against the baseline's top-``m``, IN + abstain against the baseline's
top-``|IN + abstain|``, and the certificate's stability at the truth's size) is checked (:func:`check_truth_size`),
then H1-H3 are tested per experiment by :func:`certified_circuits.analysis.seed_tests.seed_hypothesis_table`: the
unit is the model seed (concepts and settings averaged within a seed), the test the exact one-sided sign-flip test,
Holm within each hypothesis, "untestable at n=..." where the smallest p the test can reach at that n is >= 0.05.

The noise sweep's older test (pairs over concept x seed x setting, a paired Wilcoxon test, circuits of different
sizes) is that finished experiment's own historical analysis, ``experiments/noise_sweep_wilcoxon.py``; it reuses the
table checks below.

Refuse, never re-count (issue 53): every table is checked before any seed mean is formed (:func:`check_truth_size`,
built on :func:`check_filled`, :func:`check_unique` and :func:`check_counts`): an empty cell in a key column (it would
drop the row), a row given twice (it would be counted twice) and counts that contradict each other
(``n_true != tp + fn``, or a concept whose ``n_true`` or ``n_components`` differs between its rows: either would move
the truth's size; a certificate whose rows disagree on its stability).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from certified_circuits.analysis.seed_tests import COLUMNS as SEED_TEST_COLUMNS
from certified_circuits.analysis.seed_tests import TESTS, seed_hypothesis_table
from certified_circuits.storage.tables import check_share_column, require_columns

#: what to do when a table is refused
TABLE_FIX = "rerun the stage that wrote it (report-recovery, report-stability) rather than editing it"


def _shown(value: object) -> str:
    """A cell for a message, as written (``0.5``, not ``np.float64(0.5)``)."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def _first_row(bad: np.ndarray) -> int:
    """The first flagged row as the file counts it (the header is row 1)."""
    return int(np.flatnonzero(bad)[0]) + 2


def check_filled(table: pd.DataFrame, columns: Sequence[str], where: str, fix: str = TABLE_FIX) -> None:
    """Refuse an empty cell in a column a pair is formed on (it would silently drop its row from every pair).

    Args:
        table: the table as read (rows in file order).
        columns: the columns every row must fill.
        where: the file (and option), for the message.
        fix: the end of the message.

    Raises:
        ValueError: ``"<where>: column 'k_target' is empty in row 3 (2 rows): ..."``, or a missing column.
    """
    require_columns(table, columns, where)
    for column in columns:
        empty = table[column].isna().to_numpy()
        if empty.any():
            raise ValueError(f"{where}: column {column!r} is empty in row {_first_row(empty)} ({int(empty.sum())} "
                             f"rows): every row is paired on {', '.join(columns)} and would drop out; {fix}")


def check_unique(table: pd.DataFrame, columns: Sequence[str], where: str, fix: str = TABLE_FIX) -> None:
    """Refuse two rows with one key (a row given twice would be counted as two pairs, or one silently kept).

    Raises:
        ValueError: ``"<where>: row 7 repeats row 2 (experiment 'w', ...): ..."``.
    """
    repeated = table.duplicated(subset=list(columns), keep=False).to_numpy()
    if repeated.any():
        first = int(np.flatnonzero(repeated)[0])
        key = table.iloc[first][list(columns)]
        again = np.flatnonzero(repeated & (table[list(columns)] == key).all(axis=1).to_numpy())[1]
        shown = ", ".join(f"{c} {_shown(v)}" for c, v in key.items())
        raise ValueError(f"{where}: row {int(again) + 2} repeats row {first + 2} ({shown}): each pair is counted "
                         f"once; {fix}")


def _integers(table: pd.DataFrame, column: str, where: str, fix: str) -> np.ndarray:
    """A count column as int64, refused where a cell is not a whole number >= 0."""
    values = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~(np.isfinite(values) & (values >= 0) & (values == np.round(values)))
    if bad.any():
        raise ValueError(f"{where}: column {column!r} holds {_shown(table[column].iloc[_first_row(bad) - 2])} (row "
                         f"{_first_row(bad)}), not a count (a whole number >= 0); {fix}")
    return values.astype(np.int64)


def check_counts(recovery: pd.DataFrame, where: str, fix: str = TABLE_FIX) -> None:
    """Refuse counts that contradict each other: ``n_true`` above ``n_components``, ``n_true != tp + fn`` (where the
    table holds ``tp`` and ``fn``, as report-recovery writes them), or a concept (experiment, scorer, seed, concept)
    whose rows disagree on ``n_true`` or ``n_components``: each would move the truth's size ``n_true / n_components``,
    the K every pair is read at.

    Raises:
        ValueError: naming the file, the row, the column and both values.
    """
    n_true = _integers(recovery, "n_true", where, fix)
    n_components = _integers(recovery, "n_components", where, fix)
    above = n_true > n_components
    if above.any():
        row = _first_row(above)
        raise ValueError(f"{where}: row {row} has n_true {n_true[row - 2]} above n_components {n_components[row - 2]}"
                         f"; {fix}")
    if {"tp", "fn"} <= set(recovery.columns):
        found = _integers(recovery, "tp", where, fix) + _integers(recovery, "fn", where, fix)
        wrong = found != n_true
        if wrong.any():
            row = _first_row(wrong)
            raise ValueError(f"{where}: row {row} has n_true {n_true[row - 2]} but tp + fn = {found[row - 2]} (every "
                             f"true component is found or missed): the truth's size would move every pair's K; {fix}")
    concept = [recovery[c].to_numpy() for c in ("experiment", "scorer", "seed", "concept") if c in recovery.columns]
    for column, values in (("n_true", n_true), ("n_components", n_components)):
        found = _disagreement(values, concept)
        if found is not None:
            row, value, first = found
            raise ValueError(f"{where}: the rows of concept {recovery['concept'].iloc[row - 2]!r} disagree on "
                             f"{column} (row {row}: {value}, its first row: {first}): one concept has one truth; {fix}")


def _disagreement(values: np.ndarray, groups: list[np.ndarray]) -> tuple[int, Any, Any] | None:
    """The first row (as the file counts it) whose value differs from its group's first row's: ``(row, its value,
    the first row's value)``, or None when every group agrees."""
    first = pd.Series(values).groupby(groups, sort=False).transform("first").to_numpy()
    differs = values != first
    if not differs.any():
        return None
    row = _first_row(differs)
    return row, values[row - 2], first[row - 2]


# ------------------------------------------------------------------ over model seeds, from the truth-size tables

#: one certificate of a truth-size table; its rows (one per method) carry its stability at the truth's size
CERTIFICATE_KEYS = ("experiment", "concept", "scorer", "setting")
#: the size-matched numbers (empty where the circuit is empty: no precision, no baseline of its size)
MATCHED_SHARES = ("precision", "recall", "baseline_precision", "baseline_recall")
#: the certificate's stability (filled; the same on each of its rows)
STABILITY_SHARES = ("baseline_change_share", "certified_change_share")
#: the certificate's flags H2 filters on (True or False; the same on each of its rows)
STABILITY_FLAGS = ("can_certify_in", "certified_in_any")
#: the methods H1 and H3 test: each certificate has a row of each
TESTED_METHODS = tuple(dict.fromkeys(test[2] for test in TESTS if test[0] != "H2"))
#: columns of :func:`truth_size_hypotheses`
SEED_COLUMNS = ("experiment", *SEED_TEST_COLUMNS)


def _share_column(table: pd.DataFrame, column: str, where: str, fix: str, allow_empty: bool) -> np.ndarray:
    """A column of shares as float64, refused at the first cell that is not a number in [0, 1] (or, unless
    ``allow_empty``, is empty): :func:`~certified_circuits.storage.tables.check_share_column`."""
    return check_share_column(table[column], column, where, fix, allow_empty=allow_empty,
                              empty_why="an empty circuit has none")


def _flag_column(table: pd.DataFrame, column: str, where: str, fix: str) -> np.ndarray:
    """A True/False column as bool, refused at the first other cell (``.astype(bool)`` would read ``'False'`` as
    true and an empty cell as true)."""
    raw = table[column]
    if pd.api.types.is_bool_dtype(raw):
        return raw.to_numpy(dtype=bool)
    text = raw.astype("string").str.strip()
    true = (text == "True").fillna(False).to_numpy(dtype=bool)
    bad = ~(true | (text == "False").fillna(False).to_numpy(dtype=bool))
    if bad.any():
        row = _first_row(bad)
        shown = "an empty cell" if raw.isna().iloc[row - 2] else _shown(raw.iloc[row - 2])
        raise ValueError(f"{where}: column {column!r} holds {shown} (row {row}), not True or False; {fix}")
    return true


def check_truth_size(table: pd.DataFrame, where: str, fix: str = TABLE_FIX) -> pd.DataFrame:
    """One model seed's truth-size table checked before any seed mean is formed, and its numbers parsed.

    Refused: a missing column; an empty key cell (:data:`CERTIFICATE_KEYS`, ``method``); a row given twice; a share
    outside [0, 1] (the size-matched columns may be empty, the stability columns may not); a flag other than
    True/False; counts that contradict each other (:func:`check_counts`: ``n_true`` above ``n_components``, a
    concept whose rows disagree on either); a certificate whose rows disagree on its stability or flags (one
    certificate has one stability); a certificate with no row of a tested method (:data:`TESTED_METHODS`).

    Args:
        table: ``testbed/truth_size.csv`` as read (rows in file order).
        where: the file (and option), for messages.
        fix: the end of every message.

    Returns:
        A copy with the shares as float64 and the flags as bool.

    Raises:
        ValueError: naming ``where``, the row (the header is row 1), the column and the values.
    """
    keys = [*CERTIFICATE_KEYS, "method"]
    require_columns(table, [*keys, *MATCHED_SHARES, *STABILITY_SHARES, *STABILITY_FLAGS, "n_true", "n_components"],
                    where)
    check_filled(table, keys, where, fix)
    check_unique(table, keys, where, fix)
    out = table.copy()
    for column in MATCHED_SHARES:
        out[column] = _share_column(table, column, where, fix, allow_empty=True)
    for column in STABILITY_SHARES:
        out[column] = _share_column(table, column, where, fix, allow_empty=False)
    for column in STABILITY_FLAGS:
        out[column] = _flag_column(table, column, where, fix)
    check_counts(out, where, fix)
    certificate = [out[c].to_numpy() for c in CERTIFICATE_KEYS]
    for column in (*STABILITY_SHARES, *STABILITY_FLAGS):
        found = _disagreement(out[column].to_numpy(), certificate)
        if found is not None:
            row, value, first = found
            raise ValueError(f"{where}: the rows of certificate ({_certificate(out, row)}) disagree on {column} (row "
                             f"{row}: {_shown(value)}, its first row: {_shown(first)}): a certificate has one "
                             f"stability, copied on each method's row; {fix}")
    index = pd.MultiIndex.from_frame(out[list(CERTIFICATE_KEYS)])
    for method in TESTED_METHODS:
        lacking = ~index.isin(index[out["method"].to_numpy() == method])
        if lacking.any():
            row = _first_row(lacking)
            raise ValueError(f"{where}: the certificate of row {row} ({_certificate(out, row)}) has no {method!r} row:"
                             f" each certificate has a row of every method ({', '.join(TESTED_METHODS)} are tested), "
                             f"and without one its concept would silently leave that test; {fix}")
    return out


def check_verified(table: pd.DataFrame, where: str, include_unverified: bool = False) -> list[str]:
    """The concepts of a checked truth-size table whose truth failed verification (``truth_verified`` False, the
    producer's mark; a table without the column is taken as verified), refused unless ``include_unverified``.

    Returns:
        Those concepts (empty unless ``include_unverified``).

    Raises:
        ValueError: naming ``where``, the concepts, their first row and the option that includes them.
    """
    if "truth_verified" not in table:
        return []
    verified = _flag_column(table, "truth_verified", where, "rerun the stability stage (its truth_verified is the "
                            "ground truth's verification)")
    failed = list(dict.fromkeys(table["concept"].astype(str)[~verified]))
    if failed and not include_unverified:
        row = _first_row(~verified)
        every = "every row" if not verified.any() else f"{len(failed)} concept(s)"
        raise ValueError(f"{where}: the truth of concept(s) {', '.join(failed)} failed verification (truth_verified "
                         f"False, {every}; first at row {row}): a circuit scored against a truth that does not hold "
                         "tests nothing; pass --include-unverified to include them anyway, or pass seeds whose "
                         "truth passed")
    return failed


def _certificate(table: pd.DataFrame, row: int) -> str:
    """The certificate of a file row, for a message: ``experiment 'world', concept 'a', ...``."""
    return ", ".join(f"{c} {_shown(table[c].iloc[row - 2])}" for c in CERTIFICATE_KEYS)


def truth_size_hypotheses(tables: Mapping[int, pd.DataFrame], where: Mapping[int, str],
                          fix: str = TABLE_FIX, include_unverified: bool = False) -> pd.DataFrame:
    """H1-H3 per experiment over model seeds, from each seed's truth-size table (module docstring; the test is
    :func:`certified_circuits.analysis.seed_tests.seed_hypothesis_table`, Holm within each hypothesis of an experiment).

    Each seed's value of a (hypothesis, scorer, method) is the mean over its concepts and settings of the rows with
    both values (H1: ``precision`` against ``baseline_precision`` of ``certified_in`` and ``certified_in_abstain``;
    H3: ``recall`` against ``baseline_recall`` of ``certified_in_abstain``; H2: one row per certificate whose
    ``can_certify_in`` and ``certified_in_any`` hold, ``certified_change_share`` against ``baseline_change_share``);
    the ``d_i = c_i - b_i`` of the ``n`` seeds enter the exact sign-flip test.

    Args:
        tables: model seed -> that seed's ``testbed/truth_size.csv`` (its ``seed`` column, the certification seed,
            is replaced by the model seed; the setting's tag names the certification seed).
        where: model seed -> the file (and option) its table came from, for messages.
        fix: the end of a message about one table's content.
        include_unverified: include concepts whose truth failed verification (else refused, :func:`check_verified`).

    Returns:
        One row per experiment, hypothesis, scorer and method, columns :data:`SEED_COLUMNS`.

    Raises:
        ValueError: a table refused by :func:`check_truth_size` or :func:`check_verified`, or two seeds whose tables hold different
            certificates (a seed's mean would be over other concepts or settings), each naming the file.
    """
    seeds = [int(seed) for seed in tables]
    checked = {seed: check_truth_size(table, where[seed], fix) for seed, table in tables.items()}
    for seed, table in checked.items():
        check_verified(table, where[seed], include_unverified)
    held = {seed: list(dict.fromkeys(table[list(CERTIFICATE_KEYS)].itertuples(index=False, name=None)))
            for seed, table in checked.items()}
    first = seeds[0]
    for seed in seeds[1:]:
        for a, b, verb in ((first, seed, "holds no rows of"), (seed, first, "holds")):
            other = set(held[b])
            extra = [key for key in held[a] if key not in other]
            if extra:
                shown = ", ".join(f"{c} {_shown(v)}" for c, v in zip(CERTIFICATE_KEYS, extra[0]))
                owner = "lacks" if verb == "holds" else "holds"
                raise ValueError(f"{where[seed]}: {verb} the certificate ({shown}) that seed {first}'s table {owner}: "
                                 "each seed's mean is over the same concepts and settings; run every seed with one "
                                 "config (bin/model-seeds), or pass only seeds whose tables hold the same certificates")
    pooled = pd.concat([table.drop(columns="seed", errors="ignore").assign(seed=seed)
                        for seed, table in checked.items()], ignore_index=True)
    out = []
    for experiment, part in pooled.groupby("experiment", sort=False):
        stability = part.drop_duplicates(subset=["seed", *CERTIFICATE_KEYS])  # one row per certificate
        out.append(seed_hypothesis_table(part, stability, seeds).assign(experiment=experiment))
    return pd.concat(out, ignore_index=True)[list(SEED_COLUMNS)]
