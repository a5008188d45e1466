"""Issue 53: the last K readers on bare ``pd.read_csv`` / ``float()`` read their K columns through the one parser
(storage/tables.parse_k_column, read_k_table): report-graphs' selected table, the explorer's default K (selected and
operating-points tables), its attack, recovery and sufficiency tables, report-mib-faithfulness' inputs and
report-model-seeds' peaks/selected tables. A K outside (0, 1] in each reader's file is refused with the file, the row
and the column before anything is written; a valid file (``100%`` the whole model) still reads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from certified_circuits.storage.tables import read_k_table

FIX = "rerun it"


def _k_error(where: Path | str, column: str, shown: str, row: int) -> str:
    return f"{where}: column '{column}' holds {shown} (row {row}), not a K in (0, 1]"


def test_read_k_table_reads_then_parses_each_k_column(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("concept,a_k,b_k\n007,0.5,\n008,100%,0.25\n")
    table = read_k_table(path, "t.csv (--x)", ["concept"], FIX, {"a_k": False, "b_k": True}, {"concept": str})
    assert table["concept"].tolist() == ["007", "008"] and table["a_k"].tolist() == [0.5, 1.0]
    assert np.isnan(table["b_k"].iloc[0]) and table["b_k"].iloc[1] == 0.25
    with pytest.raises(ValueError, match=r"^t.csv \(--x\): column 'b_k' holds an empty cell \(row 2\)"):
        read_k_table(path, "t.csv (--x)", ["concept"], FIX, {"b_k": False})
    with pytest.raises(ValueError, match=r"^t.csv \(--x\) is missing column\(s\) 'c_k'"):
        read_k_table(path, "t.csv (--x)", [], FIX, {"c_k": False})


# ------------------------------------------------------------------------------ report-graphs (language_graphs.py)


def _selected_file(tmp_path: Path, certified: str) -> Path:
    path = tmp_path / "selected_cacc_raw.csv"
    columns = ["concept", *[f"{m}_{c}" for m in ("baseline", "majority", "certified") for c in ("setting", "k_target")]]
    path.write_text(",".join(columns) + "\nioi,s,0.1,s,0.1,s,0.1\n" + f"induction,s,0.2,s,0.2,s,{certified}\n")
    return path


@pytest.mark.parametrize("certified, shown", [("1.5", "'1.5'"), ("inf", "'inf'"), ("0", "'0'"), ("120%", "'120%'")])
def test_report_graphs_refuses_a_selected_k_outside_the_unit_interval(tmp_path: Path, certified: str,
                                                                      shown: str) -> None:
    from certified_circuits.reports.language_graphs import write_task_graphs
    from certified_circuits.storage.tables import read_csv_table

    path = _selected_file(tmp_path, certified)
    selected = read_csv_table(path, "x", ["concept"], FIX, {"concept": str, "certified_k_target": str})
    where = f"{path} (--selected)"
    with pytest.raises(ValueError) as caught:  # refused before the attribution file (absent here) is read
        write_task_graphs(tmp_path / "graphs", "ioi", tmp_path / "none.h5", [], selected, where)
    assert str(caught.value).startswith(_k_error(where, "certified_k_target", shown, 3))
    assert not (tmp_path / "graphs").exists()


def test_report_graphs_refuses_a_task_whose_k_is_empty(tmp_path: Path) -> None:
    from certified_circuits.reports.language_graphs import write_task_graphs
    from certified_circuits.storage.tables import read_csv_table

    path = _selected_file(tmp_path, "")
    selected = read_csv_table(path, "x", ["concept"], FIX, {"concept": str})
    with pytest.raises(ValueError, match=rf"^{path} \(--selected\): task 'induction' \(row 3\) has no "
                                         r"certified_k_target: the selection chose no K for it"):
        write_task_graphs(tmp_path / "graphs", "induction", tmp_path / "none.h5", [], selected, f"{path} (--selected)")
    with pytest.raises(RuntimeError, match="none.h5: file not found"):  # the other task's row is valid: it goes on to read its attributions
        write_task_graphs(tmp_path / "graphs", "ioi", tmp_path / "none.h5", [], selected, f"{path} (--selected)")


def test_report_graphs_refuses_a_selected_table_that_is_not_one_before_reading_any_circuit(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from certified_circuits.cli.main import main

    selected = tmp_path / "selected.csv"
    selected.write_text("concept,baseline_setting\ninduction,s\n")
    missing = str(tmp_path / "missing.h5")  # never opened: the table is refused first
    with pytest.raises(SystemExit) as caught:
        main(["report-graphs", "--circuit", "x", "induction", missing, missing, missing, "--selected", str(selected),
              "--out-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "Traceback" not in err
    assert (f"{selected} (--selected) is missing column(s) 'baseline_k_target', 'majority_setting', "
            f"'majority_k_target', 'certified_setting', 'certified_k_target'") in err
    assert "report-sufficiency --select-on" in err and not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------ the explorer


def test_the_explorers_default_k_reads_its_tables_with_the_one_parser(tmp_path: Path) -> None:
    from certified_circuits.reports.explorer_data import operating_k, operating_k_name

    grid = np.array([0.1, 0.5, 1.0])
    points = tmp_path / "operating_points.csv"
    points.write_text("scorer,eval_set,criterion,k_target\nrelevance,id_test,certified_peak,100%\n")
    assert operating_k(tmp_path, None, "relevance", grid) == 1.0  # '100%' is the whole model, not a word
    points.write_text("scorer,eval_set,criterion,k_target\nrelevance,ood,certified_peak,0.1\n"
                      "relevance,id_test,certified_peak,2\n")
    with pytest.raises(ValueError) as caught:
        operating_k(tmp_path, None, "relevance", grid)
    assert str(caught.value).startswith(_k_error(points, "k_target", "2.0", 3))
    selected = tmp_path / "selected_cacc_raw.csv"  # read first: its K is chosen on held-out data
    selected.write_text("concept,certified_k_target,certified_setting\nioi,,s\ninduction,-0.5,s\n")
    with pytest.raises(ValueError) as caught:
        operating_k_name(tmp_path, "ioi", None)
    assert str(caught.value).startswith(_k_error(selected, "certified_k_target", "-0.5", 3))
    selected.write_text("concept,certified_k_target,certified_setting\nioi,,s\ninduction,0.5,s\n")
    points.write_text("scorer,eval_set,criterion,k_target\nrelevance,id_test,certified_peak,0.1\n")
    assert operating_k(tmp_path, "induction", None, grid) == 0.5
    assert operating_k(tmp_path, "ioi", None, grid) == 0.1  # no K chosen for ioi: the operating points' peak


def test_the_explorers_attack_and_recovery_lines_refuse_a_bad_k(tmp_path: Path) -> None:
    from certified_circuits.reports.explorer import attack_html, recovery_html

    (tmp_path / "attack").mkdir()
    raw = tmp_path / "attack" / "attack_raw.csv"
    raw.write_text("concept,edit,mode,trial,r_edits,within_radius,k_target,baseline_flip_share,certified_flip_share,"
                   "abstain_share\ncircle,remove,random,0,1,True,0.5,0.1,0.0,0.0\n"
                   "circle,remove,random,1,1,True,1.5,0.1,0.0,0.0\n")
    with pytest.raises(ValueError) as caught:
        attack_html(tmp_path, "circle")
    assert str(caught.value).startswith(_k_error(raw, "k_target", "1.5", 3))
    raw.write_text("edit,mode,r_multiple,k_target\n")  # the attack stage's empty table (too few pool examples)
    assert attack_html(tmp_path, "circle") == "<p>No attack on this concept (it has too few pool examples).</p>"
    (tmp_path / "testbed").mkdir()
    auroc = tmp_path / "testbed" / "recovery_auroc.csv"
    auroc.write_text("concept,method,auroc,precision,recall,at_selected_setting,k_target\n"
                     "circle,baseline,0.9,0.5,0.5,True,\ncircle,certified_in,0.8,1.0,0.4,True,inf\n")
    with pytest.raises(ValueError) as caught:
        recovery_html(tmp_path)
    assert str(caught.value).startswith(_k_error(auroc, "k_target", "inf", 3))
    auroc.write_text("concept,method,auroc,precision,recall,at_selected_setting,k_target\n"
                     "circle,baseline,0.9,0.5,0.5,True,\ncircle,certified_in,0.8,1.0,0.4,True,0.25\n")
    text = recovery_html(tmp_path)  # no K for the baseline (an empty cell): no 'nan%' in the line
    assert "baseline AUROC 0.900, precision 0.50 / recall 0.50;" in text and "nan" not in text
    assert "certified in AUROC 0.800, precision 1.00 / recall 0.40 at K 25%" in text


def test_the_explorer_refuses_a_sufficiency_k_outside_the_unit_interval(tmp_path: Path) -> None:
    from certified_circuits.reports.explorer import build_explorer
    from certified_circuits.reports.explorer_data import Experiment

    tables = tmp_path / "tables"
    tables.mkdir()
    curves = tables / "sufficiency.csv"
    curves.write_text("concept,method,k_target,k_effective,cacc\ncircle,baseline,0.5,0.5,0.9\n"
                      "circle,baseline,10,1.0,0.9\n")  # a percentage in a share column
    with pytest.raises(ValueError) as caught:
        build_explorer(tmp_path / "explorer", [Experiment("vision", "world", tables)], [])
    assert str(caught.value).startswith(_k_error(curves, "k_target", "10.0", 3))
    assert not (tmp_path / "explorer").exists()


# ------------------------------------------------------------------------------ report-mib-faithfulness


def _mib_rows(k: str) -> str:
    return ("experiment,concept,eval_set,method,ranking,k_target,m,m_empty,m_full\n"
            f"lang,ioi,test,baseline,signed,0.5,0.4,0.0,1.0\nlang,ioi,test,baseline,signed,{k},0.9,0.0,1.0\n")


@pytest.mark.parametrize("k, shown", [("1.5", "1.5"), ("100", "100.0"), ("nan", "an empty cell")])
def test_report_mib_faithfulness_refuses_a_k_outside_the_unit_interval(tmp_path: Path, k: str, shown: str) -> None:
    from certified_circuits.reports.mib_faithfulness import mib_faithfulness_report

    path = tmp_path / "mib.csv"
    path.write_text(_mib_rows(k))
    with pytest.raises(ValueError) as caught:
        mib_faithfulness_report([path], tmp_path / "out")
    assert str(caught.value).startswith(_k_error(f"{path} (--inputs)", "k_target", shown, 3))
    assert not (tmp_path / "out").exists()


def test_report_mib_faithfulness_refuses_a_file_given_twice(tmp_path: Path) -> None:
    from certified_circuits.reports.mib_faithfulness import mib_faithfulness_report

    path = tmp_path / "mib.csv"
    path.write_text(_mib_rows("1.0"))
    with pytest.raises(ValueError, match=r"\(--inputs\) is given twice .*: its rows would be counted twice"):
        mib_faithfulness_report([path, tmp_path / "." / "mib.csv"], tmp_path / "out")
    with pytest.raises(ValueError, match="no MIB-grid evaluation tables given"):
        mib_faithfulness_report([], tmp_path / "out")


# ------------------------------------------------------------------------------ report-model-seeds (paper.py)


def test_report_model_seeds_refuses_a_k_target_outside_the_unit_interval(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture) -> None:
    from certified_circuits.cli.main import main

    runs = []
    for seed, k in enumerate(("0.3", "100%", "1.3")):
        path = tmp_path / f"s{seed}.csv"
        path.write_text("experiment,scorer,eval_set,full,baseline,baseline_k,baseline_k_target,certified,certified_k,"
                        f"certified_k_target\nworld,relevance,id_test,0.9,0.7,0.5,0.5,0.8,0.3,{k}\n")
        runs += ["--run", str(seed), str(path)]
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as caught:
        main(["report-model-seeds", *runs, "--name", "t", "--out-dir", str(out)])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "Traceback" not in err
    assert _k_error(f"{tmp_path / 's2.csv'} (--run 2, a peaks_* or selected_* table of report-sufficiency)",
                    "certified_k_target", "1.3", 2) in err
    assert not out.exists()
    assert main(["report-model-seeds", *runs[:6], "--name", "t", "--out-dir", str(out)]) == 0  # '100%' reads as 1


def test_report_model_seeds_refuses_a_ragged_faithfulness_table(tmp_path: Path) -> None:
    from certified_circuits.reports.paper import model_seeds_faithfulness

    path = tmp_path / "faithfulness.csv"
    path.write_text("experiment,eval_set,method,cpr,cmd\nworld,id_test,baseline,0.5,0.2,0.1\n")
    with pytest.raises(ValueError, match=rf"^{path} \(--run 0, a faithfulness.csv\): not a readable CSV table \(a "
                                         r"ragged row: line 2 has 6 fields, the header 5"):
        model_seeds_faithfulness({"0": [path]}, tmp_path / "out", "t")
