"""Issue 53, the report stages' K columns: ``report-warnings --selected``: K ``100%`` is the whole model (never
"Warnings: none"), ``1.5`` or ``inf`` is refused (never flagged as 100%), a ragged row is refused with its line, a file
given twice is refused (never counted twice); the findings and the model seeds' stability table read their K columns
with the one parser (storage/tables.parse_k_column). Each bad input names the file, the column or line, exits 2
without a traceback; valid input still runs."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from certified_circuits.cli.main import main

HEADER = "experiment,scorer,concept,metric,selected_on,baseline_k_target,majority_k_target,certified_k_target"


# ------------------------------------------------------------------------------ report-warnings --selected


def _selected(tmp_path: Path, certified: str, name: str = "selected_cacc_raw.csv", extra: str = "") -> Path:
    path = tmp_path / name
    path.write_text(f"{HEADER}\nworld,relevance,circle,cacc,id_test,0.2,0.3,{certified}{extra}\n")
    return path


def _warnings(tmp_path: Path, *selected: Path) -> list[dict]:
    out = tmp_path / "warnings.json"
    assert main(["report-warnings", "--selected", *map(str, selected), "--out", str(out)]) == 0
    return json.loads(out.read_text())["flags"]


@pytest.mark.parametrize("certified", ["1.0", "1", "100%", " 100% "])
def test_report_warnings_flags_a_selected_k_of_the_whole_model_however_written(tmp_path: Path, certified: str) -> None:
    flags = _warnings(tmp_path, _selected(tmp_path, certified))
    assert [(f["code"], f["where"], f["concept"]) for f in flags] == [
        ("full-model-k", "world / scorer relevance / concept circle / method certified", "circle")]


def test_report_warnings_flags_nothing_below_the_whole_model(tmp_path: Path) -> None:
    assert _warnings(tmp_path, _selected(tmp_path, "0.99"), _selected(tmp_path, "50%", "other_raw.csv")) == []


@pytest.mark.parametrize("certified, shown", [
    ("1.5", "holds 1.5 (row 2)"),
    ("inf", "holds inf (row 2)"),
    ("150%", "holds '150%' (row 2)"),
    ("all", "holds 'all' (row 2)"),
    ("0", "holds 0 (row 2)"),
])
def test_report_warnings_refuses_a_selected_k_outside_the_unit_interval(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                                        certified: str, shown: str) -> None:
    path = _selected(tmp_path, certified)
    with pytest.raises(SystemExit) as caught:
        main(["report-warnings", "--selected", str(path), "--out", str(tmp_path / "warnings.json")])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "Traceback" not in err
    assert f"{path} (--selected): column 'certified_k_target' {shown}, not a K in (0, 1]" in err
    assert "pass the selected_*_raw.csv that report-sufficiency --select-on wrote" in err
    assert not (tmp_path / "warnings.json").exists()


@pytest.mark.parametrize("extra, line", [(",1.0", "line 2 has 9 fields, the header 8"),
                                         ("\nworld,relevance,circle,cacc,id_test,0.2", "line 3 has 6 fields")])
def test_report_warnings_refuses_a_ragged_selected_row(tmp_path: Path, capsys: pytest.CaptureFixture, extra: str,
                                                       line: str) -> None:
    path = _selected(tmp_path, "1.0", extra=extra)
    with pytest.raises(SystemExit) as caught:
        main(["report-warnings", "--selected", str(path), "--out", str(tmp_path / "warnings.json")])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "Traceback" not in err
    assert f"{path} (--selected): not a readable selected table (a ragged row: {line}" in err
    assert not (tmp_path / "warnings.json").exists()


@pytest.mark.parametrize("option", ["--selected", "--curves"])
def test_report_warnings_refuses_a_file_given_twice(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                    option: str) -> None:
    path = _selected(tmp_path, "1.0")
    with pytest.raises(SystemExit) as caught:
        main(["report-warnings", option, str(path), str(tmp_path / "." / path.name), "--out",
              str(tmp_path / "warnings.json")])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "Traceback" not in err
    assert f"{tmp_path / '.' / path.name} ({option}) is given twice (also as {path}): its rows would be counted " \
           "twice; pass each file once" in err
    assert not (tmp_path / "warnings.json").exists()


def test_report_warnings_refuses_a_curves_k_outside_the_unit_interval(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture) -> None:
    curves = tmp_path / "curves.csv"
    curves.write_text("experiment,eval_set,method,k_target,k_effective,cacc\nw,id,baseline,0.5,0.5,0.9\n"
                      "w,id,baseline,1.5,1.0,0.9\n")
    with pytest.raises(SystemExit) as caught:
        main(["report-warnings", "--curves", str(curves), "--out", str(tmp_path / "warnings.json")])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "Traceback" not in err
    assert f"{curves} (--curves): column 'k_target' holds 1.5 (row 3), not a K in (0, 1]" in err


# ------------------------------------------------------------------------------ the other readers of a K column


def test_the_headline_reads_its_truth_size_table_strictly(tmp_path: Path) -> None:
    from certified_circuits.reports.findings import headline

    table = tmp_path / "truth_size.csv"
    table.write_text("experiment,concept,scorer,setting,method,size,precision,recall\nw,circle,r,s,baseline,4,1,1\n")
    with pytest.raises(ValueError, match=rf"^{table} is missing column\(s\) .baseline_precision."):
        headline([table])


def test_model_seeds_stability_reads_the_recovery_table_beside_it_strictly(tmp_path: Path) -> None:
    from certified_circuits.reports.testbed import STABILITY_SHOWN, model_seeds_stability

    (tmp_path / "0").mkdir()
    stability = tmp_path / "0" / "stability.csv"
    row = {"experiment": "w", "concept": "circle", "scorer": "r", "setting": "s", "k_target": 0.5,
           **{c: 0.5 for c in STABILITY_SHOWN}}
    pd.DataFrame([row]).to_csv(stability, index=False)
    recovery = tmp_path / "0" / "recovery.csv"
    recovery.write_text("k_target,n_true,n_components\n0.5,2,10\n2,2,10\n")
    with pytest.raises(ValueError, match=rf"^{recovery} \(beside --run 0 {stability}\): column 'k_target' holds 2.0 "
                                         r"\(row 3\), not a K in \(0, 1\]"):
        model_seeds_stability({"0": [stability]}, tmp_path / "out", "w")
    recovery.write_text("k_target,n_true,n_components\n0.5,2,10\n")
    metrics = model_seeds_stability({"0": [stability]}, tmp_path / "out", "w")
    assert metrics["w_baseline_jaccard_mean"] == 0.5
    assert pd.read_csv(tmp_path / "out" / "w_model_seeds_raw.csv")["k_target"].tolist() == [0.5]
