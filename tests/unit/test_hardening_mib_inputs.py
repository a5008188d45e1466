"""Issue 53, MIB's inputs: an MCQA/ARC ``answerKey`` that is not a 0-based index of ``choices.label`` (a letter, -1,
an index past the labels) is refused with the file, the row and the key and what is accepted (it gave ``invalid
literal for int()`` naming nothing, and -1 was read as the last label); ``report-mib`` on a vision run's files is
refused by name, exit 2, before any file is written (it ended in ``KeyError: 'n_layers'``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from certified_circuits.cli.main import main
from certified_circuits.language.mib_data import MIBDataError, load_mib_task
from certified_circuits.reports.mib_submission import LANGUAGE_FILES, graph_shape


def _row(i: int, key: object = None, cf_key: object = None) -> dict:
    """One MCQA row in MIB's schema (tests/unit/language/test_mib_data.py's): labels A, B; counterfactual B, A."""
    return {"prompt": f"The {i} is red. Answer: A. red B. blue Answer:",
            "choices": {"label": ["A", "B"], "text": ["red", "blue"]}, "answerKey": i % 2 if key is None else key,
            "symbol_counterfactual": {"prompt": f"The {i} is red. Answer: B. red A. blue Answer:",
                                      "choices": {"label": ["B", "A"], "text": ["red", "blue"]},
                                      "answerKey": i % 2 if cf_key is None else cf_key}}


def _folder(tmp_path: Path, validation: list[dict]) -> Path:
    folder = tmp_path / "mcqa"
    folder.mkdir()
    for split, rows in (("train", [_row(0), _row(1)]), ("validation", validation), ("test", [_row(2)])):
        (folder / f"{split}.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return folder


# ------------------------------------------------------------------------------ answerKey


@pytest.mark.parametrize("key, cf_key, shown", [
    ("A", None, "answerKey is 'A'"),
    (-1, None, "answerKey is -1"),
    ("-1", None, "answerKey is '-1'"),
    (2, None, "answerKey is 2"),
    (1.0, None, "answerKey is 1.0"),
    (True, None, "answerKey is True"),
    (None, "B", "symbol_counterfactual.answerKey is 'B'"),
])
def test_an_answer_key_that_is_not_an_index_of_the_labels_is_refused_by_file_row_and_key(
        tmp_path: Path, key: object, cf_key: object, shown: str) -> None:
    folder = _folder(tmp_path, [_row(0), _row(1, key, cf_key)])
    labels = "['B', 'A']" if shown.startswith("symbol") else "['A', 'B']"
    prefix = "symbol_counterfactual." if shown.startswith("symbol") else ""
    with pytest.raises(MIBDataError) as caught:
        load_mib_task(folder, "mcqa")
    assert str(caught.value) == (
        f"{folder / 'validation.jsonl'}:2 (validation split): {shown}; MIB reads it as the 0-based index of the "
        f"answer in {prefix}choices.label {labels}, so it is an integer from 0 to 1: is this MIB's dataset of the "
        "task (ARC's original files give a letter)? download MIB's split again")


def test_a_valid_answer_key_reads_its_label_as_an_integer_or_its_digits(tmp_path: Path) -> None:
    folder = _folder(tmp_path, [_row(0, 1, 0), _row(1, "0", " 1 ")])
    examples = load_mib_task(folder, "mcqa")["validation"]
    assert [(e.answer, e.distractor) for e in examples] == [("B", "B"), ("A", "A")]


def test_labels_that_are_not_a_list_are_named(tmp_path: Path) -> None:
    row = _row(0)
    row["choices"]["label"] = "AB"
    folder = _folder(tmp_path, [row])
    with pytest.raises(MIBDataError, match=r"validation.jsonl:1 \(validation split\): choices.label is 'AB', not a "
                                           r"list of the choices' labels"):
        load_mib_task(folder, "mcqa")


def test_language_task_file_refuses_a_letter_answer_key_with_exit_2(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture) -> None:
    from tests.helpers.family_fixtures import save_family

    model = save_family("gpt2", tmp_path / "model")
    folder = _folder(tmp_path, [_row(0, "A")])
    with pytest.raises(SystemExit) as caught:
        main(["language-task-file", "--task", "mcqa", "--file", str(folder), "--model-path", str(model),
              "--out-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "Traceback" not in err and "invalid literal" not in err
    assert f"{folder / 'validation.jsonl'}:1 (validation split): answerKey is 'A'; MIB reads it as the 0-based" in err
    assert not (tmp_path / "out").exists()


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
