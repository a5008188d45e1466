"""The one CSV reader and the one K parser (storage/tables.py; issues 45 and 53): a bad file is refused by kind
(empty, not UTF-8, unparsable, a missing column, header only, a ragged row with its line), text columns stay text,
``require_columns`` names every missing column, ``parse_k_column`` reads shares and percent signs in the column's unit
and refuses a value outside its range with the file, row and column, and one file given by two spellings is refused
(never counted twice). Each message names the file and ends with the fix."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from certified_circuits.storage.tables import check_distinct_files, parse_k_column, read_csv_table, require_columns

FIX = "rerun the stage"
WRITER_FIX = "rerun the stage that writes it"


# ------------------------------------------------------------------------------ the one K parser


def test_parse_k_column_reads_shares_and_percent_signs_in_the_columns_unit() -> None:
    table = pd.DataFrame({"k": ["0.25", " 1 ", "100%", "50%", "0.5%"]})
    assert parse_k_column(table, "k", "t.csv", FIX)["k"].tolist() == [0.25, 1.0, 1.0, 0.5, 0.005]
    percent = pd.DataFrame({"k": [25.0, 100.0]})
    assert parse_k_column(percent, "k", "t.csv", FIX, unit="percent")["k"].tolist() == [25.0, 100.0]
    mixed = pd.DataFrame({"k": ["25", "100%"]})
    assert parse_k_column(mixed, "k", "t.csv", FIX, unit="percent")["k"].tolist() == [25.0, 100.0]
    empty = pd.DataFrame({"k": [0.1, np.nan]})
    assert parse_k_column(empty, "k", "t.csv", FIX, allow_missing=True)["k"].iloc[0] == 0.1
    assert table["k"].tolist()[2] == "100%"  # the caller's table is not changed


@pytest.mark.parametrize("values, unit, shown", [
    ([0.5, 1.5], "share", "holds 1.5 (row 3), not a K in (0, 1]"),
    ([0.5, np.inf], "share", "holds inf (row 3), not a K in (0, 1]"),
    ([0.5, -np.inf], "share", "holds -inf (row 3), not a K in (0, 1]"),
    ([0.0, 0.5], "share", "holds 0.0 (row 2), not a K in (0, 1]"),
    ([-0.1], "share", "holds -0.1 (row 2), not a K in (0, 1]"),
    (["0.5", "half"], "share", "holds 'half' (row 3), not a K in (0, 1]"),
    (["150%"], "share", "holds '150%' (row 2), not a K in (0, 1]"),
    ([0.5, np.nan], "share", "holds an empty cell (row 3), not a K in (0, 1]"),
    ([True, False], "share", "holds True (row 2), not a K in (0, 1]"),
    ([50, 101], "percent", "holds 101 (row 3), not a K in (0, 100] (a percentage of the components)"),
])
def test_parse_k_column_refuses_a_value_outside_its_range_with_file_row_and_column(values: list, unit: str,
                                                                                   shown: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_k_column(pd.DataFrame({"k_target": values}), "k_target", "t.csv (--x)", FIX, unit=unit)
    message = str(caught.value)
    assert message.startswith(f"t.csv (--x): column 'k_target' {shown}") and message.endswith(f"; {FIX}")


def test_parse_k_column_counts_the_bad_rows_and_refuses_a_missing_column_or_unknown_unit() -> None:
    with pytest.raises(ValueError, match=r"holds 2.0 \(row 2\), not a K in \(0, 1\].*; 3 rows are bad; " + FIX):
        parse_k_column(pd.DataFrame({"k": [2.0, 0.5, 3.0, 4.0]}), "k", "t.csv", FIX)
    with pytest.raises(ValueError, match=r"t.csv is missing column\(s\) 'k'; it has 'j'"):
        parse_k_column(pd.DataFrame({"j": [0.5]}), "k", "t.csv", FIX)
    with pytest.raises(ValueError, match=r"unit 'fraction' is not a K unit: use one of \['percent', 'share'\]"):
        parse_k_column(pd.DataFrame({"k": [0.5]}), "k", "t.csv", FIX, unit="fraction")


# ------------------------------------------------------------------------------ ragged rows and files given twice


@pytest.mark.parametrize("content, problem", [
    ("a,b,c\n1,2,3,4\n5,6,7,8\n", "line 2 has 4 fields, the header 3"),  # pandas would make column a the index
    ("a,b,c\n1,2,3\n5,6\n", "line 3 has 2 fields, the header 3"),  # pandas would pad c with NaN
    ("a,b,c\n1,2,3\n\n5,6\n", "line 4 has 2 fields, the header 3"),  # a blank line is skipped, not ragged
])
def test_read_csv_table_refuses_a_ragged_row_with_its_line(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "t.csv"
    path.write_text(content)
    with pytest.raises(ValueError) as caught:
        read_csv_table(path, f"{path} (--x)", ["a"], FIX)
    assert str(caught.value) == (f"{path} (--x): not a readable CSV table (a ragged row: {problem}; a row with a field "
                                 f"too many or too few would be read shifted or padded); {FIX}")


def test_read_csv_table_keeps_empty_cells_quoted_commas_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text('a,b,c\n1,,3\n\n"x,y",2,\n')
    table = read_csv_table(path, "t", ["a", "b", "c"], FIX)
    assert table["a"].tolist() == ["1", "x,y"] and table["b"].iloc[1] == 2 and np.isnan(table["c"].iloc[1])


def test_check_distinct_files_refuses_one_file_by_two_spellings(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text("a\n1\n")
    (tmp_path / "link.csv").symlink_to(path)
    os.link(path, tmp_path / "hard.csv")  # a hard link is the same file by another name (storage.paths.file_identity)
    (tmp_path / "copy.csv").write_text("a\n1\n")
    check_distinct_files([path, tmp_path / "b.csv"], "--selected")  # two files: no error
    check_distinct_files([path, tmp_path / "copy.csv"], "--selected")  # same content, two files: no error
    for twice in (str(tmp_path / "." / "a.csv"), str(tmp_path / "link.csv"), str(tmp_path / "hard.csv")):
        with pytest.raises(ValueError) as caught:
            check_distinct_files([path, twice], "--selected")
        assert str(caught.value) == (f"{twice} (--selected) is given twice (also as {path}): its rows would be "
                                     "counted twice; pass each file once")


# ------------------------------------------------------------------------------ each kind of bad file, require_columns


@pytest.mark.parametrize("content, problem", [
    (b"", "t.csv (--x): not a readable CSV table (No columns to parse from file); " + WRITER_FIX),
    ("concept,k\n\xe9t\xe9,1\n".encode("latin-1"), "t.csv (--x): not a readable CSV table (not UTF-8 text: line 2: "
                                                   "invalid continuation byte); " + WRITER_FIX),
    (b'concept,k\n"a,1\n', "t.csv (--x): not a readable CSV table (Error tokenizing data."),
    (b"concept,j\na,1\n", "t.csv (--x) is missing column(s) 'k'; it has 'concept', 'j'; " + WRITER_FIX),
    (b"concept,k\n", "t.csv (--x) holds no rows (header only); " + WRITER_FIX),
])
def test_read_csv_table_refuses_each_kind_of_bad_file_by_name(tmp_path: Path, content: bytes, problem: str) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(content)
    with pytest.raises(ValueError) as caught:
        read_csv_table(path, f"{path} (--x)", ["concept", "k"], WRITER_FIX)
    assert str(caught.value).startswith(f"{tmp_path}/") and problem in str(caught.value)


def test_read_csv_table_names_a_missing_file_and_keeps_text_columns_as_text(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"nope.csv \(--x\) does not exist; " + WRITER_FIX):
        read_csv_table(tmp_path / "nope.csv", f"{tmp_path / 'nope.csv'} (--x)", [], WRITER_FIX)
    path = tmp_path / "t.csv"
    path.write_text("concept,k\n007,0.5\n010,1\n")
    table = read_csv_table(path, "t", ["concept", "k"], WRITER_FIX, {"concept": str})
    assert table["concept"].tolist() == ["007", "010"] and table["k"].tolist() == [0.5, 1.0]
    path.write_text("concept,k\n")
    assert len(read_csv_table(path, "t", ["k"], WRITER_FIX, allow_empty=True)) == 0  # the caller says what empty means
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="t.csv: not a readable curves CSV"):
        read_csv_table(path, "t.csv", [], WRITER_FIX, kind="curves CSV")


def test_require_columns_names_every_missing_column_and_refuses_a_non_table() -> None:
    table = pd.DataFrame({"a": [1], "b": [2]})
    require_columns(table, ["a"], "the table")  # present: no error
    with pytest.raises(ValueError, match=r"the table is missing column\(s\) 'c', 'd'; it has 'a', 'b'"):
        require_columns(table, ["a", "c", "d"], "the table")
    with pytest.raises(TypeError, match="the table must be a pandas DataFrame, got dict"):
        require_columns({"a": [1]}, ["a"], "the table")
