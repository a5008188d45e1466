"""Issue 61, item 6: every output a job records is recorded under its final name. The compiled language model's
``vocab.json`` was written inside the atomic folder's temporary name (save_embedded -> WordTokenizer.save ->
write_text) and the job recorded it there: "output .../.model.XXXX.cc-tmp/vocab.json does not exist; not logged"."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from certified_circuits.language.compiled import compile_model
from certified_circuits.language.models import VOCAB_FILE, load_embedded, save_embedded
from certified_circuits.pipeline.tracking.records import output_files
from certified_circuits.storage.atomic import TEMP_MARK, atomic_dir, forget_written, write_text, written_paths


@pytest.fixture(scope="module")
def compiled():
    model, tok, _ = compile_model("induction", 0)
    return model, tok


def _files_under(folder: Path) -> set[Path]:
    return {p.resolve() for p in folder.rglob("*") if p.is_file()}


def test_a_model_saved_into_an_atomic_folder_is_recorded_under_its_final_names(compiled, tmp_path, caplog):
    model, tok = compiled
    out = tmp_path / "results" / "language" / "model"
    forget_written()
    with atomic_dir(out) as tmp:  # as language-train writes it
        save_embedded(model, tok, tmp)
    recorded = written_paths()
    assert recorded and all(path.exists() for path in recorded), recorded
    assert not any(TEMP_MARK in part for path in recorded for part in path.parts), recorded
    assert (out / VOCAB_FILE).resolve() in recorded and out.resolve() in recorded
    with caplog.at_level(logging.WARNING, logger="certified_circuits"):
        logged = output_files(recorded)  # what the job's MLflow run holds
    assert "not logged" not in caplog.text
    assert {path.resolve() for path, _ in logged} == _files_under(out)  # every file on disk, nothing else
    assert all(path.is_file() for path, _ in logged)
    assert load_embedded(out, with_bridge=False).tokenizer.vocab == tok.vocab


def test_replacing_a_model_folder_records_the_new_files_under_the_final_names(compiled, tmp_path):
    model, tok = compiled
    out = tmp_path / "model"
    for _ in range(2):
        forget_written()
        with atomic_dir(out) as tmp:
            save_embedded(model, tok, tmp)
        assert all(path.exists() and TEMP_MARK not in str(path) for path in written_paths())
    assert {path.resolve() for path, _ in output_files(written_paths())} == _files_under(out)


def test_a_failed_atomic_folder_records_nothing_it_wrote(tmp_path):
    forget_written()
    kept = write_text(tmp_path / "before.txt", "kept")
    with pytest.raises(RuntimeError):
        with atomic_dir(tmp_path / "model") as tmp:
            write_text(tmp / "vocab.json", "{}")
            raise RuntimeError("the job failed")
    assert written_paths() == [kept.resolve()] and not (tmp_path / "model").exists()


def test_a_model_saved_into_a_plain_folder_records_its_vocabulary(compiled, tmp_path):
    model, tok = compiled
    forget_written()
    save_embedded(model, tok, tmp_path / "plain")
    assert written_paths() == [(tmp_path / "plain" / VOCAB_FILE).resolve()]
