"""Issue 28, item 3: every file and folder the workflow writes gets the mode the process umask gives a plain
``open()`` (0o666 & ~umask) or ``mkdir`` (0o777 & ~umask), not tempfile's private 0600 / 0700; and an output
path that is an existing folder is refused by name (issue 28, item 6)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd
import pytest

from certified_circuits.storage.atomic import (
    atomic_dir,
    atomic_path,
    current_umask,
    write_csv,
    write_json,
    write_npz,
    write_text,
)


@pytest.fixture(params=[0o022, 0o027, 0o077])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    previous = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_umask_is_read_without_changing_it(umask: int) -> None:
    assert current_umask() == umask
    assert current_umask() == umask


def test_atomic_files_and_folders_get_the_umask_mode(tmp_path: Path, umask: int) -> None:
    with atomic_path(tmp_path / "deep" / "a.bin") as tmp:
        tmp.write_bytes(b"x")
    assert mode(tmp_path / "deep" / "a.bin") == 0o666 & ~umask
    assert mode(tmp_path / "deep") == 0o777 & ~umask
    with atomic_dir(tmp_path / "model") as tmp:
        (tmp / "weights.bin").write_bytes(b"x")
        (tmp / "sub").mkdir()
    assert mode(tmp_path / "model") == 0o777 & ~umask
    assert mode(tmp_path / "model" / "weights.bin") == 0o666 & ~umask
    with atomic_dir(tmp_path / "model") as tmp:  # replacing an existing folder
        (tmp / "weights.bin").write_bytes(b"y")
    assert mode(tmp_path / "model") == 0o777 & ~umask
    for path in (write_text(tmp_path / "t.txt", "x"), write_json(tmp_path / "j.json", {"a": 1}),
                 write_csv(tmp_path / "c.csv", pd.DataFrame({"a": [1]})),
                 write_npz(tmp_path / "n.npz", {"a": np.zeros(2)})):
        assert mode(path) == 0o666 & ~umask, path


def test_a_writer_that_replaces_its_temporary_file_still_gets_the_umask_mode(tmp_path: Path, umask: int) -> None:
    with atomic_path(tmp_path / "a.bin") as tmp:
        tmp.unlink()
        fd = os.open(tmp, os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(fd)
    assert mode(tmp_path / "a.bin") == 0o666 & ~umask


def test_hdf5_writers_get_the_umask_mode(tmp_path: Path, umask: int) -> None:
    from certified_circuits.core.certification import certify_votes
    from certified_circuits.core.smoothing import compute_votes
    from certified_circuits.storage.store import write_attributions, write_certificates, write_votes

    rng = np.random.default_rng(0)
    scores = rng.normal(size=(6, 8))
    attributions = write_attributions(tmp_path / "attributions" / "c0.h5", scores={"relevance": scores},
                                      groups=np.zeros(8, dtype=np.int32), names=[f"u{i}" for i in range(8)],
                                      example_ids=[f"e{i}" for i in range(6)], attrs={"concept": "c0"})
    votes = compute_votes(scores, np.zeros(8, dtype=np.int32), [0.5], p_del=0.5, n0=5, n=20, seed=0)
    written = [attributions, write_votes(tmp_path / "votes.h5", votes),
               write_certificates(tmp_path / "certificates.h5", certify_votes(votes, 0.6, 0.1))]
    for path in written:
        assert mode(Path(path)) == 0o666 & ~umask, path
    assert mode(tmp_path / "attributions") == 0o777 & ~umask


def test_figures_get_the_umask_mode(tmp_path: Path, umask: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from certified_circuits.reports.figures import save_figure

    figure = Figure()
    figure.add_subplot().plot([0, 1], [1, 0])
    for path in save_figure(figure, tmp_path / "figures" / "curve"):
        assert mode(path) == 0o666 & ~umask, path


def test_an_output_path_that_is_a_folder_is_refused_before_writing(tmp_path: Path) -> None:
    (tmp_path / "votes.h5").mkdir()
    with pytest.raises(IsADirectoryError, match=r"votes.h5: the output path is an existing folder; give a file name"):
        with atomic_path(tmp_path / "votes.h5"):
            raise AssertionError("no work may start")


# ------------------------------------------------------------------------------------------------------------
# Model weights written by ``save_pretrained`` follow the umask like every other output (issue 35, item 6e):
# safetensors writes ``model.safetensors`` 0600 whatever the umask; the embedded language model's folder
# (``language/model``, written by ``language-train`` through ``atomic_dir``) gets ``0o666 & ~umask`` for each file
# and ``0o777 & ~umask`` for each folder.


def test_a_private_file_a_library_writes_in_an_atomic_folder_follows_the_umask(tmp_path: Path, umask: int) -> None:
    with atomic_dir(tmp_path / "model") as tmp:
        (tmp / "sub").mkdir(mode=0o700)
        fd = os.open(tmp / "sub" / "weights.bin", os.O_WRONLY | os.O_CREAT, 0o600)  # as safetensors does
        os.close(fd)
    assert mode(tmp_path / "model") == 0o777 & ~umask
    assert mode(tmp_path / "model" / "sub") == 0o777 & ~umask
    assert mode(tmp_path / "model" / "sub" / "weights.bin") == 0o666 & ~umask


def test_save_pretrained_weights_follow_the_umask(tmp_path: Path, umask: int) -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("safetensors")
    from transformers import GPT2LMHeadModel

    from certified_circuits.language.models import VOCAB_FILE, save_embedded, tiny_config
    from certified_circuits.language.tokenizer import PAD, WordTokenizer

    model = GPT2LMHeadModel(tiny_config(8, n_layer=1, n_head=2, n_embd=8, n_positions=8))
    tok = WordTokenizer([PAD, "a", "b", "c", "d", "e", "f", "g"])
    out = tmp_path / "language" / "model"
    with atomic_dir(out) as tmp:  # as language-train writes it
        save_embedded(model, tok, tmp)
    weights = out / "model.safetensors"
    assert weights.is_file()
    assert mode(weights) == 0o666 & ~umask, oct(mode(weights))
    assert mode(out / "config.json") == 0o666 & ~umask and mode(out / VOCAB_FILE) == 0o666 & ~umask
    assert mode(out) == 0o777 & ~umask
    direct = tmp_path / "direct"  # save_embedded on its own, into a folder it was given
    direct.mkdir()
    os.chmod(direct, 0o750)
    save_embedded(model, tok, direct)
    assert mode(direct / "model.safetensors") == 0o666 & ~umask
    assert mode(direct) == 0o750  # a folder it was given keeps its own mode
