"""Issue 53, ``report-hypotheses``: refuse, never re-count. A results folder given twice (any spelling), a seed whose
stability table is missing while another seed has one, a table that is unreadable, a K outside (0, 1], an empty cell
in a column the pairs are formed on, a row given twice and a row whose n_true disagrees with tp + fn (or with its
concept's other rows) are each refused with the file and the column or row, exit 2, no traceback, before any output;
valid folders still run, and the Markdown names exactly the seeds, folders and pairs used."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from certified_circuits.analysis.hypotheses import check_counts, check_filled, check_unique, hypothesis_table
from certified_circuits.cli.main import main

#: certified-in precision of concepts a-e at the truth's size K 0.2 (baseline 0.5 everywhere)
CERTIFIED = (0.9, 0.8, 0.85, 0.9, 0.7)


def _recovery() -> pd.DataFrame:
    """One seed's recovery.csv: 5 concepts at K 0.2 (the truth's size: 2 of 10) and 0.5, three methods, one
    setting; tp + fn = n_true = 2 in every row."""
    rows = []
    for i, concept in enumerate("abcde"):
        for k in (0.2, 0.5):
            for method, precision, recall in (("certified_in", CERTIFIED[i], 0.5), ("baseline", 0.5, 0.5),
                                              ("certified_in_abstain", 0.3, 0.6)):
                rows.append(dict(experiment="world", scorer="relevance", concept=concept, setting="s", method=method,
                                 k_target=k, tp=1, fp=1, fn=1, tn=7, precision=precision, recall=recall, n_true=2,
                                 n_components=10))
    return pd.DataFrame(rows)


def _auroc() -> pd.DataFrame:
    return pd.DataFrame([dict(experiment="world", scorer="relevance", concept=c, setting="s", method="certified_in",
                              auroc=0.5, k_target=0.2, at_selected_setting=True) for c in "abcde"])


def _stability() -> pd.DataFrame:
    return pd.DataFrame([dict(experiment="world", concept=c, scorer="relevance", setting="s", k_target=k,
                              baseline_change_share=0.02 + 0.01 * i, certified_flip_share=0.0)
                         for i, c in enumerate("abcde") for k in (0.2, 0.5)])


def _folders(tmp_path: Path, seeds=(0, 1), stability=(0, 1)) -> list[Path]:
    folders = []
    for seed in seeds:
        folder = tmp_path / f"s{seed}" / "testbed"
        folder.mkdir(parents=True)
        _recovery().to_csv(folder / "recovery.csv", index=False)
        _auroc().to_csv(folder / "recovery_auroc.csv", index=False)
        if seed in stability:
            _stability().to_csv(folder / "stability.csv", index=False)
        folders.append(folder)
    return folders


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


def test_valid_folders_run_and_the_markdown_names_the_seeds_and_pairs(tmp_path: Path) -> None:
    s0, s1 = _folders(tmp_path)
    out = tmp_path / "out"
    assert main(_run([("0", s0), ("1", s1)], out)) == 0
    table = pd.read_csv(out / "hypotheses.csv").set_index("hypothesis")
    assert list(table.index) == ["H1a", "H1b", "H2", "H3"]
    # 5 concepts x 2 seeds, every certified precision above the baseline's 0.5: every difference is positive, so W+
    # is the largest sum the ranks allow and the one-sided p is 1 / 2^10
    assert table.loc["H1a", "n_pairs"] == 10 and table.loc["H1a", "n_dropped"] == 0
    assert table.loc["H1a", "pvalue"] == pytest.approx(1 / 2**10, rel=1e-9)
    assert table.loc["H2", "n_pairs"] == 10 and table.loc["H2", "seeds"] == "0 1"
    text = (out / "hypotheses.md").read_text()
    assert f"Model seeds given (2): 0: {s0}; 1: {s1}. H2 from every seed's stability.csv." in text
    assert "| H1a | world | relevance |" in text


def test_no_stability_table_anywhere_leaves_h2_out_and_says_so(tmp_path: Path) -> None:
    s0, s1 = _folders(tmp_path, stability=())
    out = tmp_path / "out"
    assert main(_run([("0", s0), ("1", s1)], out)) == 0
    assert list(pd.read_csv(out / "hypotheses.csv")["hypothesis"]) == ["H1a", "H1b", "H3"]
    assert "H2 left out: no seed's folder holds stability.csv" in (out / "hypotheses.md").read_text()


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


def test_a_seed_lacking_the_stability_table_others_have_is_refused(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    s0, s1, s2 = _folders(tmp_path, seeds=(0, 1, 2), stability=(0, 2))
    out = tmp_path / "out"
    err = _refused(capsys, _run([("0", s0), ("1", s1), ("2", s2)], out), out)
    assert f"error: {s1 / 'stability.csv'} (--run 1) does not exist, while the folders of seeds [0, 2] hold one" in err


@pytest.mark.parametrize("name", ["recovery.csv", "recovery_auroc.csv"])
def test_a_missing_recovery_table_is_refused_by_name(tmp_path: Path, capsys: pytest.CaptureFixture, name: str) -> None:
    s0, s1 = _folders(tmp_path)
    (s1 / name).unlink()
    out = tmp_path / "out"
    err = _refused(capsys, _run([("0", s0), ("1", s1)], out), out)
    assert f"error: {s1 / name} (--run 1) does not exist; pass the testbed folder of a finished run" in err


@pytest.mark.parametrize("name, content, message", [
    ("stability.csv", b"experiment,concept\n\xff\xfe\n", "stability.csv (--run 1): not a readable CSV table (not UTF-8"),
    ("stability.csv", b"", "stability.csv (--run 1): not a readable CSV table (No columns to parse from file)"),
    ("recovery.csv", b"experiment,scorer\nworld,relevance,extra\n", "recovery.csv (--run 1): not a readable CSV "
                                                                    "table (a ragged row: line 2 has 3 fields"),
])  # fmt: skip
def test_an_unreadable_table_is_refused_by_name(tmp_path: Path, capsys: pytest.CaptureFixture, name: str,
                                                content: bytes, message: str) -> None:
    s0, s1 = _folders(tmp_path)
    (s1 / name).write_bytes(content)
    out = tmp_path / "out"
    err = _refused(capsys, _run([("0", s0), ("1", s1)], out), out)
    assert f"{s1 / name[: -len('.csv')]}" in err and message in err


@pytest.mark.parametrize("name, column, row, value, message", [
    ("recovery.csv", "k_target", 3, np.nan, "column 'k_target' holds an empty cell (row 3), not a K in (0, 1]"),
    ("recovery.csv", "k_target", 3, 1.5, "column 'k_target' holds 1.5 (row 3), not a K in (0, 1]"),
    ("recovery.csv", "setting", 4, np.nan, "column 'setting' is empty in row 4 (1 rows): every row is paired on"),
    ("recovery.csv", "concept", 2, np.nan, "column 'concept' is empty in row 2 (1 rows)"),
    ("recovery.csv", "method", 5, np.nan, "column 'method' is empty in row 5 (1 rows)"),
    ("recovery.csv", "n_true", 3, 3, "row 3 has n_true 3 but tp + fn = 2 (every true component is found or missed)"),
    ("recovery.csv", "n_true", 3, 2.5, "column 'n_true' holds 2.5 (row 3), not a count (a whole number >= 0)"),
    ("recovery.csv", "n_true", 3, 11, "row 3 has n_true 11 above n_components 10"),
    ("recovery_auroc.csv", "k_target", 2, "inf", "column 'k_target' holds inf (row 2), not a K in (0, 1]"),
    ("recovery_auroc.csv", "scorer", 3, np.nan, "column 'scorer' is empty in row 3 (1 rows)"),
    ("stability.csv", "k_target", 2, np.nan, "row 2 has no 'k_target' (1 rows lack it)"),
    ("stability.csv", "k_target", 3, 0.0, "column 'k_target' holds 0.0 (row 3), not a K in (0, 1]"),
    ("stability.csv", "setting", 2, np.nan, "row 2 has no 'setting' (1 rows lack it)"),
    ("stability.csv", "certified_flip_share", 2, "none", "column 'certified_flip_share' holds 'none' (row 2), not a "
                                                         "number"),
])  # fmt: skip
def test_a_bad_cell_is_refused_with_file_row_and_column(tmp_path: Path, capsys: pytest.CaptureFixture, name: str,
                                                        column: str, row: int, value, message: str) -> None:
    s0, s1 = _folders(tmp_path)
    table = pd.read_csv(s1 / name, dtype={column: object})
    table.loc[row - 2, column] = value
    table.to_csv(s1 / name, index=False)
    out = tmp_path / "out"
    err = _refused(capsys, _run([("0", s0), ("1", s1)], out), out)
    assert f"error: {s1 / name} (--run 1): {message}" in err


def test_a_row_given_twice_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    s0, s1 = _folders(tmp_path)
    table = pd.read_csv(s1 / "recovery.csv")
    pd.concat([table, table.iloc[[4]]]).to_csv(s1 / "recovery.csv", index=False)  # row 6 again, as row 32
    out = tmp_path / "out"
    err = _refused(capsys, _run([("0", s0), ("1", s1)], out), out)
    assert (f"error: {s1 / 'recovery.csv'} (--run 1): row 32 repeats row 6 (experiment 'world', scorer 'relevance', "
            "concept 'a', setting 's', method 'baseline', k_target 0.5): each pair is counted once") in err


# ------------------------------------------------------------------------------ the checks, on tables


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
    check_counts(_recovery().assign(seed=0), "t.csv", "fix")  # the valid table passes
    check_counts(_recovery().drop(columns=["tp", "fn"]), "t.csv", "fix")  # no counts to compare: n_true only


def test_the_library_refuses_what_the_stage_refuses() -> None:
    recovery = _recovery()
    recovery.loc[2, "k_target"] = np.nan
    with pytest.raises(ValueError, match=r"^the recovery table: column 'k_target' is empty in row 4 \(1 rows\)"):
        hypothesis_table(recovery)
    stability = pd.concat([_stability(), _stability().iloc[[0]]], ignore_index=True)
    with pytest.raises(ValueError, match=r"^the stability table: row 12 repeats row 2 \(experiment 'world'"):
        hypothesis_table(_recovery(), stability)
    with pytest.raises(ValueError, match="t.csv is missing column"):
        check_filled(pd.DataFrame({"a": [1]}), ["b"], "t.csv")
    check_unique(pd.DataFrame({"a": [1, 2]}), ["a"], "t.csv")  # distinct rows pass


def test_a_pair_the_other_table_lacks_is_counted_dropped() -> None:
    stability = _stability()
    stability = stability[stability["concept"] != "e"]  # concept e has no stability row: H2 drops it, by count
    auroc = _auroc()
    auroc.loc[0, "k_target"] = np.nan  # concept a has no selected K: H1b drops it
    table = hypothesis_table(_recovery(), stability, auroc).set_index("hypothesis")
    assert table.loc["H2", "n_pairs"] == 4 and table.loc["H2", "n_dropped"] == 1
    assert table.loc["H1b", "n_pairs"] == 4 and table.loc["H1b", "n_dropped"] == 1
    assert table.loc["H1b", "certified"] == pytest.approx(np.mean(CERTIFIED[1:]), abs=1e-12)
