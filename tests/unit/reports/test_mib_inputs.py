"""``report-mib`` checks its inputs before writing anything (reports/mib_submission.py, cli/mib.py). Issue 45: a model
or method name with an underscore, a bad task name, a later task's missing file and a table that is not a selected
table are refused by option, exit 2, nothing written. Issue 53: a vision run's files are refused by name (it ended in
``KeyError: 'n_layers'``), and ``graph_shape`` reads a language file's shape and refuses a damaged one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from certified_circuits.cli.main import main
from certified_circuits.reports.mib_submission import LANGUAGE_FILES, graph_shape


# ------------------------------------------------------------------------------ report-mib checks every option first


def _report_mib(tmp_path: Path, capsys: pytest.CaptureFixture, *argv: str) -> str:
    from certified_circuits.cli.main import main

    with pytest.raises(SystemExit) as caught:
        main(["report-mib", *argv, "--out-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "Traceback" not in err
    assert not (tmp_path / "out").exists()  # nothing written
    return err


def _files(tmp_path: Path) -> list[str]:
    files = []
    for name in ("attr.h5", "votes.h5", "certs.h5"):
        (tmp_path / name).write_bytes(b"x" * 8)
        files.append(str(tmp_path / name))
    return files


@pytest.mark.parametrize("option, value", [("--model-name", "my_model"), ("--method", "my_method")])
def test_report_mib_refuses_a_name_with_an_underscore(tmp_path: Path, capsys: pytest.CaptureFixture, option: str,
                                                       value: str) -> None:
    argv = ["--model-name", "gpt2", "--circuit", "ioi", *_files(tmp_path)]
    argv += [option, value]
    err = _report_mib(tmp_path, capsys, *argv)
    assert f"{option} {value!r}: MIB's folders are" in err and "use '-'" in err


def test_report_mib_refuses_a_bad_task_name_by_option(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    err = _report_mib(tmp_path, capsys, "--model-name", "gpt2", "--circuit", "io i", *_files(tmp_path))
    assert "--circuit io i: task name 'io i' may hold only letters, digits, _ and -" in err


def test_report_mib_checks_the_last_tasks_files_before_writing_the_first(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture) -> None:
    import numpy as np

    import certified_circuits as cc
    from certified_circuits.core.setting import Setting

    scores = np.random.default_rng(0).normal(size=(20, 6))
    setting = Setting(p_del=0.8, n0=20, n=100, tau=0.7, alpha=0.05)
    certificate = str(cc.certify_scores(scores, np.zeros(6, int), [0.5, 1.0], setting).save(tmp_path / "c.h5"))
    attr = _files(tmp_path)[0]
    err = _report_mib(tmp_path, capsys, "--model-name", "gpt2", "--circuit", "ioi", attr, certificate, certificate,
                      "--circuit", "mcqa", str(tmp_path / "missing.h5"), certificate, certificate)
    assert "--circuit mcqa: " in err and "missing.h5 does not exist" in err


@pytest.mark.parametrize("text, problem", [
    ("concept,k\nioi,0.1\n", " is missing column(s) 'certified_setting'"),
    ("concept,certified_setting\n", " holds no rows (header only)"),
    ("concept,certified_setting\n\xe9t\xe9,x\n", ": not a readable selected table (not UTF-8 text: line 2: "),
])
def test_report_mib_refuses_a_selected_table_that_is_not_one(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                             text: str, problem: str) -> None:
    selected = tmp_path / "selected.csv"
    selected.write_bytes(text.encode("latin-1"))
    err = _report_mib(tmp_path, capsys, "--model-name", "gpt2", "--circuit", "ioi", *_files(tmp_path),
                      "--selected", str(selected))
    assert f"selected.csv (--selected){problem}" in err and "report-sufficiency --select-on" in err


# ------------------------------------------------------------------------------ report-mib on a vision run


def _vision_run(tmp_path: Path) -> list[str]:
    """A vision run's attribution file (channels, no EAP graph: no n_layers / n_heads) and its certificate."""
    import certified_circuits as cc
    from certified_circuits.core.setting import Setting
    from certified_circuits.storage.store import write_attributions

    scores = np.random.default_rng(0).normal(size=(20, 6))
    attr = write_attributions(tmp_path / "circle.h5", {"relevance": scores}, np.zeros(6, int),
                              [f"layer1.{i}" for i in range(6)], [str(i) for i in range(20)],
                              {"concept": "circle", "experiment": "world", "model": "world_resnet"})
    setting = Setting(p_del=0.8, n0=20, n=100, tau=0.7, alpha=0.05)
    certificate = cc.certify_scores(scores, np.zeros(6, int), [0.5, 1.0], setting).save(tmp_path / "c.h5")
    return [str(attr), str(certificate), str(certificate)]


def test_report_mib_refuses_a_vision_runs_files_by_name(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    files = _vision_run(tmp_path)
    with pytest.raises(SystemExit) as caught:
        main(["report-mib", "--model-name", "gpt2", "--circuit", "circle", *files, "--out-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "Traceback" not in err and "KeyError" not in err
    assert (f"{files[0]} (--circuit circle) is not a language run's attribution file (its model: 'world_resnet'): it "
            "records no n_layers or n_heads, the shape of the EAP graph whose edges MIB evaluates") in err
    assert LANGUAGE_FILES in err and not (tmp_path / "out").exists()


def test_graph_shape_reads_a_language_files_shape_and_refuses_a_damaged_one() -> None:
    assert graph_shape({"n_layers": 12, "n_heads": np.int64(12)}, "a.h5") == (12, 12)
    with pytest.raises(ValueError, match=r"^a.h5 is not a language run's attribution file: it records no n_heads, "):
        graph_shape({"n_layers": 2}, "a.h5")
    for value in (0, -1, 2.5, "12", True):
        with pytest.raises(ValueError, match=rf"^a.h5: attribute n_layers is {value!r}, not an integer >= 1"):
            graph_shape({"n_layers": value, "n_heads": 4}, "a.h5")
