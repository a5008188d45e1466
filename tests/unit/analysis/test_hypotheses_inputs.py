"""Issue 53, ``report-hypotheses``: refuse, never re-count. A seed that is not a decimal integer or is given twice,
more seeds than the exact test enumerates, a results folder given twice (any spelling), a seed whose truth-size
table is missing or unreadable, an empty key cell, a share outside [0, 1], a flag that is not True/False, a row given
twice, counts that disagree (a concept's truth, a certificate's stability between its rows), a certificate without a
tested method's row and seeds whose tables hold different certificates are each refused with the file and the column
or row, exit 2, no traceback, before any output; the library checks (also used by the noise sweep's own
test, experiments/noise_sweep_wilcoxon.py) refuse what the stage refuses."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from certified_circuits.analysis.hypotheses import (
    check_counts,
    check_filled,
    check_truth_size,
    check_unique,
)
from certified_circuits.cli.main import main
from tests.helpers.truth_size_tables import certificate, write_seed

#: the fix of a refused table's content (reports/testbed.py TRUTH_SIZE_FIX)
FIX = "rerun the stability stage with --out-truth-size"


def _rows(concepts: str = "ab") -> list[dict]:
    return [row for c in concepts for row in certificate(c)]


def _folders(tmp_path: Path, seeds=(0, 1)) -> list[Path]:
    return [write_seed(tmp_path / f"s{seed}" / "testbed", _rows()) for seed in seeds]


def _run(runs: list[tuple[str, Path]], out: Path) -> list[str]:
    return ["report-hypotheses", *[x for seed, folder in runs for x in ("--run", seed, str(folder))],
            "--out-dir", str(out)]


def _refused(capsys: pytest.CaptureFixture, argv: list[str], out: Path) -> str:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "Traceback" not in err
    assert not out.exists()  # refused before anything is written
    return err


def test_valid_folders_run(tmp_path: Path) -> None:
    s0, s1 = _folders(tmp_path)
    out = tmp_path / "out"
    assert main(_run([("0", s0), ("1", s1)], out)) == 0
    table = pd.read_csv(out / "hypotheses.csv")
    assert list(table["hypothesis"]) == ["H1", "H1", "H2", "H3"] and set(table["status"]) == {"untestable at n=2"}


@pytest.mark.parametrize("bad", [["--run", "01", "A"], ["--run", "0", "A", "--run", "0", "B"], ["--run", "x", "A"]])
def test_a_bad_or_repeated_seed_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture, bad: list[str]) -> None:
    s0, s1 = _folders(tmp_path)
    argv = [str({"A": s0, "B": s1}.get(x, x)) for x in bad]
    out = tmp_path / "out"
    err = _refused(capsys, ["report-hypotheses", *argv, "--out-dir", str(out)], out)
    assert "the seed must be a decimal integer without leading zeros, each seed once" in err


def test_more_seeds_than_the_exact_test_enumerates_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "out"
    err = _refused(capsys, _run([(str(seed), tmp_path / f"s{seed}") for seed in range(21)], out), out)
    assert ("error: --run is given 21 times: the exact sign-flip test enumerates all 2^n sign vectors of n model "
            "seeds, n <= 20; pass at most 20 seeds") in err


@pytest.mark.parametrize("spelling", ["dot", "slash", "link"])
def test_a_folder_given_twice_is_refused_by_any_spelling(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                         spelling: str) -> None:
    (s0,) = _folders(tmp_path, seeds=(0,))
    again = {"dot": s0.parent / "." / s0.name, "slash": Path(f"{s0}/"), "link": tmp_path / "link"}[spelling]
    if spelling == "link":
        again.symlink_to(s0)
    out = tmp_path / "out"
    err = _refused(capsys, _run([("0", s0), ("1", again), ("2", s0)], out), out)
    assert f"{again} (--run) is given twice (also as {s0}): its rows would be counted twice; pass each file once" in err


def test_a_missing_truth_size_table_is_refused_by_name(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    s0, s1 = _folders(tmp_path)
    (s1 / "truth_size.csv").unlink()
    out = tmp_path / "out"
    err = _refused(capsys, _run([("0", s0), ("1", s1)], out), out)
    assert (f"error: {s1 / 'truth_size.csv'} (--run 1) does not exist; pass the testbed folder of a finished run "
            "whose testbed ran its stability jobs (tables/<experiment>/testbed with truth_size.csv; "
            "testbed.resamples > 0)") in err


@pytest.mark.parametrize("content, message", [
    (b"experiment,concept\n\xff\xfe\n", "not a readable CSV table (not UTF-8"),
    (b"", "not a readable CSV table (No columns to parse from file)"),
    (b"experiment,scorer\nworld,relevance,extra\n", "not a readable CSV table (a ragged row: line 2 has 3 fields"),
    (b"experiment,concept\nworld,a\n", "is missing column"),
])  # fmt: skip
def test_an_unreadable_table_is_refused_by_name(tmp_path: Path, capsys: pytest.CaptureFixture, content: bytes,
                                                message: str) -> None:
    s0, s1 = _folders(tmp_path)
    (s1 / "truth_size.csv").write_bytes(content)
    out = tmp_path / "out"
    err = _refused(capsys, _run([("0", s0), ("1", s1)], out), out)
    assert f"error: {s1 / 'truth_size.csv'} (--run 1)" in err and message in err and FIX in err


@pytest.mark.parametrize("column, row, value, message", [
    ("concept", 3, np.nan, "row 3 has no 'concept' (1 rows lack it)"),
    ("method", 5, np.nan, "row 5 has no 'method' (1 rows lack it)"),
    ("precision", 3, "none", "column 'precision' holds 'none' (row 3), not a number"),
    ("precision", 3, 1.5, "column 'precision' holds 1.5 (row 3), not a share in [0, 1] (or empty: an empty circuit "
                          "has none)"),
    ("baseline_recall", 4, -0.1, "column 'baseline_recall' holds -0.1 (row 4), not a share in [0, 1]"),
    ("certified_change_share", 2, np.nan, "column 'certified_change_share' holds an empty cell (row 2), not a share "
                                          "in [0, 1];"),
    ("can_certify_in", 2, "yes", "column 'can_certify_in' holds 'yes' (row 2), not True or False"),
    ("certified_in_any", 6, np.nan, "column 'certified_in_any' holds an empty cell (row 6), not True or False"),
    ("n_true", 3, 2.5, "column 'n_true' holds 2.5 (row 3), not a count (a whole number >= 0)"),
    ("n_true", 3, 30, "row 3 has n_true 30 above n_components 20"),
    ("n_true", 3, 5, "the rows of concept 'a' disagree on n_true (row 3: 5, its first row: 4): one concept has one "
                     "truth"),
    ("certified_change_share", 4, 0.2, "the rows of certificate (experiment 'world', concept 'a', scorer "
                                       "'relevance', setting 's') disagree on certified_change_share (row 4: 0.2, "
                                       "its first row: 0.01): a certificate has one stability"),
    ("certified_in_any", 7, False, "the rows of certificate (experiment 'world', concept 'b', scorer 'relevance', "
                                   "setting 's') disagree on certified_in_any (row 7: False, its first row: True)"),
])  # fmt: skip
def test_a_bad_cell_is_refused_with_file_row_and_column(tmp_path: Path, capsys: pytest.CaptureFixture, column: str,
                                                        row: int, value, message: str) -> None:
    s0, s1 = _folders(tmp_path)
    table = pd.read_csv(s1 / "truth_size.csv", dtype={column: object})
    table.loc[row - 2, column] = value
    table.to_csv(s1 / "truth_size.csv", index=False)
    out = tmp_path / "out"
    err = _refused(capsys, _run([("0", s0), ("1", s1)], out), out)
    assert f"error: {s1 / 'truth_size.csv'} (--run 1): {message}" in err and FIX in err


def test_a_row_given_twice_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    s0, s1 = _folders(tmp_path)
    table = pd.read_csv(s1 / "truth_size.csv")
    pd.concat([table, table.iloc[[2]]]).to_csv(s1 / "truth_size.csv", index=False)  # row 4 again, as row 10
    out = tmp_path / "out"
    err = _refused(capsys, _run([("0", s0), ("1", s1)], out), out)
    assert (f"error: {s1 / 'truth_size.csv'} (--run 1): row 10 repeats row 4 (experiment 'world', concept 'a', "
            "scorer 'relevance', setting 's', method 'certified_in_abstain'): each pair is counted once") in err


def test_a_certificate_without_a_tested_methods_row_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    s0, s1 = _folders(tmp_path)
    table = pd.read_csv(s1 / "truth_size.csv")
    table[~((table["concept"] == "b") & (table["method"] == "certified_in"))].to_csv(s1 / "truth_size.csv",
                                                                                      index=False)
    out = tmp_path / "out"
    err = _refused(capsys, _run([("0", s0), ("1", s1)], out), out)
    assert (f"error: {s1 / 'truth_size.csv'} (--run 1): the certificate of row 6 (experiment 'world', concept 'b', "
            "scorer 'relevance', setting 's') has no 'certified_in' row") in err


@pytest.mark.parametrize("which, message", [
    ("fewer", "holds no rows of the certificate (experiment 'world', concept 'b', scorer 'relevance', setting 's') "
              "that seed 0's table holds"),
    ("more", "holds the certificate (experiment 'world', concept 'c', scorer 'relevance', setting 's') that seed 0's "
             "table lacks"),
])  # fmt: skip
def test_seeds_whose_tables_hold_different_certificates_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                                     which: str, message: str) -> None:
    s0, s1 = _folders(tmp_path)
    write_seed(s1, _rows("a" if which == "fewer" else "abc"))
    out = tmp_path / "out"
    err = _refused(capsys, _run([("0", s0), ("1", s1)], out), out)
    assert f"error: {s1 / 'truth_size.csv'} (--run 1): {message}: each seed's mean is over the same concepts" in err


# ------------------------------------------------------------------------------ the checks, on tables


def test_check_truth_size_parses_flags_and_refuses_what_the_stage_refuses() -> None:
    table = pd.DataFrame(_rows()).astype({"can_certify_in": str, "certified_in_any": str})  # 'True' / 'False'
    table.loc[table["concept"] == "b", "certified_in_any"] = "False"
    checked = check_truth_size(table, "t.csv", "fix")
    assert checked["certified_in_any"].tolist() == [True] * 4 + [False] * 4  # 'False' is false, not a non-empty str
    table.loc[0, "precision"] = 2.0
    with pytest.raises(ValueError, match=r"^t.csv: column 'precision' holds 2.0 \(row 2\), not a share in \[0, 1\]"):
        check_truth_size(table, "t.csv", "fix")
    with pytest.raises(ValueError, match="t.csv is missing column"):
        check_truth_size(table.drop(columns="certified_in_any"), "t.csv", "fix")


def _recovery() -> pd.DataFrame:
    """One seed's recovery.csv: 5 concepts at K 0.2 (the truth's size: 2 of 10) and 0.5, three methods, one
    setting; tp + fn = n_true = 2 in every row."""
    rows = []
    for i, concept in enumerate("abcde"):
        for k in (0.2, 0.5):
            for method, precision, recall in (("certified_in", 0.7 + 0.05 * i, 0.5), ("baseline", 0.5, 0.5),
                                              ("certified_in_abstain", 0.3, 0.6)):
                rows.append(dict(experiment="world", scorer="relevance", concept=concept, setting="s", method=method,
                                 k_target=k, tp=1, fp=1, fn=1, tn=7, precision=precision, recall=recall, n_true=2,
                                 n_components=10))
    return pd.DataFrame(rows)


def test_a_concept_whose_rows_disagree_on_its_truth_is_refused() -> None:
    table = _recovery().assign(seed=0)
    table.loc[7, ["n_true", "tp"]] = [3, 2]  # tp + fn = 3 agrees with the row, not with concept b's other rows
    with pytest.raises(ValueError, match=r"^t.csv: the rows of concept 'b' disagree on n_true \(row 9: 3, its first "
                                         r"row: 2\): one concept has one truth; fix$"):
        check_counts(table, "t.csv", "fix")
    table = _recovery().assign(seed=0)
    table.loc[0, "n_components"] = 12
    with pytest.raises(ValueError, match=r"concept 'a' disagree on n_components \(row 3: 10, its first row: 12\)"):
        check_counts(table, "t.csv", "fix")
    table = _recovery().assign(seed=0)
    table.loc[1, "n_true"] = 3
    with pytest.raises(ValueError, match=r"row 3 has n_true 3 but tp \+ fn = 2"):
        check_counts(table, "t.csv", "fix")
    check_counts(_recovery().assign(seed=0), "t.csv", "fix")  # the valid table passes
    check_counts(_recovery().drop(columns=["tp", "fn"]), "t.csv", "fix")  # no counts to compare: n_true only


def test_the_key_checks_name_a_missing_column_and_pass_distinct_rows() -> None:
    with pytest.raises(ValueError, match="t.csv is missing column"):
        check_filled(pd.DataFrame({"a": [1]}), ["b"], "t.csv")
    check_unique(pd.DataFrame({"a": [1, 2]}), ["a"], "t.csv")  # distinct rows pass
