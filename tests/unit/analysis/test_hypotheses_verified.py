"""Issue 61, class 3: ``report-hypotheses`` refuses, by file and concept, a seed whose truth failed verification
(``truth_verified`` False: the producer's mark) unless ``--include-unverified`` says to include it; then
hypotheses.md names the concepts it included. Exit 2, one line, no traceback, nothing written; verified seeds (and
older tables without the column) are still accepted."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from certified_circuits.analysis.hypotheses import check_verified
from certified_circuits.cli.main import main
from tests.helpers.truth_size_tables import certificate, write_seed


def _seed(tmp_path: Path, seed: int, failed: str = "", flag: object = False) -> Path:
    rows = [row for concept in "ab" for row in certificate(concept)]
    for row in rows:
        if row["concept"] in failed:
            row["truth_verified"] = flag
    return write_seed(tmp_path / f"s{seed}" / "testbed", rows)


def _argv(s0: Path, s1: Path, out: Path, *extra: str) -> list[str]:
    return ["report-hypotheses", "--run", "0", str(s0), "--run", "1", str(s1), "--out-dir", str(out), *extra]


@pytest.mark.parametrize(("failed", "every"), [("ab", "every row"), ("b", "1 concept(s)")])
def test_a_seed_whose_truth_failed_is_refused_by_name(tmp_path: Path, capsys: pytest.CaptureFixture, failed: str,
                                                      every: str) -> None:
    s0, s1 = _seed(tmp_path, 0), _seed(tmp_path, 1, failed)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as caught:
        main(_argv(s0, s1, out))
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert f"error: {s1 / 'truth_size.csv'} (--run 1): the truth of concept(s) {', '.join(failed)} failed " \
           f"verification (truth_verified False, {every}" in err and "--include-unverified" in err
    assert not out.exists()


def test_include_unverified_includes_them_and_names_them(tmp_path: Path) -> None:
    s0, s1 = _seed(tmp_path, 0), _seed(tmp_path, 1, "b")
    out = tmp_path / "out"
    assert main(_argv(s0, s1, out, "--include-unverified")) == 0
    assert "Included by --include-unverified, though their truth failed verification: seed 1: b." in (
        out / "hypotheses.md").read_text()


def test_verified_seeds_and_tables_without_the_column_are_accepted(tmp_path: Path) -> None:
    s0, s1 = _seed(tmp_path, 0), _seed(tmp_path, 1)
    assert main(_argv(s0, s1, tmp_path / "out")) == 0
    assert "Included by" not in (tmp_path / "out" / "hypotheses.md").read_text()
    table = pd.read_csv(s1 / "truth_size.csv").drop(columns="truth_verified")
    table.to_csv(s1 / "truth_size.csv", index=False)
    assert main(_argv(s0, s1, tmp_path / "out2")) == 0


def test_a_flag_that_is_not_true_or_false_is_refused() -> None:
    table = pd.DataFrame(certificate("a")).assign(truth_verified="maybe")
    with pytest.raises(ValueError, match="f.csv: column 'truth_verified' holds 'maybe' \\(row 2\\), not True or False"):
        check_verified(table, "f.csv")
    assert check_verified(pd.DataFrame(certificate("a")), "f.csv") == []
