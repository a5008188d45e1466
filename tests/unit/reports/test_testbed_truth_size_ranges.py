"""Issue 61, class 1: the truth-size and equal-footing readers (``report-stability --truth-size`` and
``--truth-size-equal``, ``report-hypotheses``) check every share in [0, 1] and every count an integer >= 0 where the
table enters, naming the file, the column and the row (an empty cell only where the producer documents one); the
command exits 2 with one line, no traceback, nothing written. Valid tables are still read."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest

from certified_circuits.cli.main import main
from certified_circuits.reports.testbed import read_truth_size_equal_table, read_truth_size_table
from tests.helpers.truth_size_tables import certificate

def _stability(tmp_path: Path) -> Path:
    from certified_circuits.reports.testbed import STABILITY_SHOWN

    row = {"experiment": "world", "concept": "a", "scorer": "relevance", "setting": "s", "k_target": 0.1,
           "resamples": 20, **{column: 0.1 for column in STABILITY_SHOWN}}
    path = tmp_path / "stability.csv"
    pd.DataFrame([row]).to_csv(path, index=False)
    return path


def _truth_size(tmp_path: Path, column: str | None = None, value: object = None, name: str = "ts.csv") -> Path:
    table = pd.DataFrame(certificate("a"))
    if column is not None:
        table[column] = table[column].astype(object)
        table.loc[1, column] = value
    path = tmp_path / name
    table.to_csv(path, index=False)
    return path


def _equal(tmp_path: Path, column: str | None = None, value: object = None) -> Path:
    numbers = {"values": 3, "change_share_live": 0.1, "change_share_all": 0.05, "flip_share_live": 0.0,
               "flip_share_all": 0.0, "baseline_change_share_live": math.nan, "baseline_change_share_all": math.nan,
               "abstain_share_live": 0.2, "abstain_share_all": 0.1, "size_d": 3, "abstain_d": 2,
               "in_precision_d": 1.0, "in_precision_mean": 0.9, "n_live": 10, "n_components": 20, "n_true": 4,
               "n_grey": 0, "resamples": 20, "inner_resamples": 20}
    rows = [{"experiment": "world", "concept": "a", "scorer": "relevance", "setting": "s", "method": m, **numbers}
            for m in ("certified", "matched")]
    table = pd.DataFrame(rows)
    if column is not None:
        table[column] = table[column].astype(object)
        table.loc[1, column] = value
    path = tmp_path / "eq.csv"
    table.to_csv(path, index=False)
    return path


def test_valid_tables_are_read(tmp_path: Path) -> None:
    assert len(read_truth_size_table(_truth_size(tmp_path))) == 4
    assert len(read_truth_size_table(_truth_size(tmp_path, "precision", ""))) == 4  # an empty circuit: no precision
    assert len(read_truth_size_equal_table(_equal(tmp_path))) == 2
    assert len(read_truth_size_equal_table(_equal(tmp_path, "flip_share_live", ""))) == 2  # a two-valued row


@pytest.mark.parametrize(("column", "value", "wanted"), [
    ("precision", 1.5, "a share in [0, 1]"), ("precision", "inf", "a share in [0, 1]"),
    ("recall", -0.1, "a share in [0, 1]"), ("baseline_precision", 2, "a share in [0, 1]"),
    ("certified_flip_share", 7, "a share in [0, 1]"), ("abstain_share", "-inf", "a share in [0, 1]"),
    ("baseline_change_share", "", "a share in [0, 1]"), ("baseline_jaccard_mean", 1.01, "a share in [0, 1]"),
    ("size", -3, "a count (a whole number >= 0)"), ("size", 2.5, "a count (a whole number >= 0)"),
    ("n_true", "inf", "a count (a whole number >= 0)"), ("n_grey", "", "a count (a whole number >= 0)"),
])  # fmt: skip
def test_a_truth_size_number_out_of_range_is_refused_by_file_column_and_row(tmp_path: Path, column: str,
                                                                           value: object, wanted: str) -> None:
    path = _truth_size(tmp_path, column, value)
    with pytest.raises(ValueError, match=rf"{path} \(--truth-size\): column '{column}' holds .* \(row 3\), not "
                                         + re.escape(wanted)):
        read_truth_size_table(path)


@pytest.mark.parametrize(("column", "value"), [
    ("change_share_live", 1.5), ("flip_share_all", -1), ("abstain_share_live", "inf"), ("in_precision_d", 3),
    ("size_d", -1), ("abstain_d", 0.5), ("n_live", ""), ("resamples", "inf"), ("values", -2),
])  # fmt: skip
def test_an_equal_footing_number_out_of_range_is_refused(tmp_path: Path, column: str, value: object) -> None:
    path = _equal(tmp_path, column, value)
    with pytest.raises(ValueError, match=rf"{path} \(--truth-size-equal\): column '{column}' holds .* \(row 3\)"):
        read_truth_size_equal_table(path)


@pytest.mark.parametrize(("option", "column", "value"), [
    ("--truth-size", "precision", 1.5), ("--truth-size", "certified_flip_share", 7), ("--truth-size", "size", -3),
    ("--truth-size-equal", "flip_share_live", 7),
])  # fmt: skip
def test_report_stability_refuses_it_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture, option: str,
                                                 column: str, value: object) -> None:
    stability = _stability(tmp_path)
    path = _truth_size(tmp_path, column, value) if option == "--truth-size" else _equal(tmp_path, column, value)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as caught:
        main(["report-stability", "--inputs", str(stability), option, str(path), "--out-dir", str(out)])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "Traceback" not in err
    assert f"error: {path} ({option}): column '{column}'" in err
    assert not out.exists()  # every table is read before the first is written


def test_report_stability_still_accepts_valid_tables(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(["report-stability", "--inputs", str(_stability(tmp_path)), "--truth-size", str(_truth_size(tmp_path)),
                 "--out-dir", str(out)]) == 0
    assert len(pd.read_csv(out / "truth_size.csv")) == 4
