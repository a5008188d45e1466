"""A damaged or pickled .npz / .npy gets the project's own message (issue 35, item 6a).

numpy's answer to such a file is "This file contains pickled (object) data. If you trust the file you can
load it unsafely": the wrong diagnosis, and advice to run code from a file. ``certify-scores`` and the world's
splits name the file, say what is wrong with it and how to write it again, and never load a pickle.
"""

from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

from certified_circuits.cli.main import main
from certified_circuits.storage.arrays import ArrayFileError, read_npy, read_npz

#: words of numpy's advice that must never reach a user
NUMPY_ADVICE = ("unsafely", "allow_pickle", "If you trust", "pickle.load")


def _scores() -> np.ndarray:
    return np.random.default_rng(0).normal(size=(6, 5))


def damaged(tmp_path: Path, case: str) -> tuple[Path, str]:
    """A file of the kind ``case`` and what the message must say is wrong with it."""
    if case == "truncated-npz":
        good = tmp_path / "good.npz"
        np.savez(good, scores=_scores())
        path = tmp_path / "s.npz"
        path.write_bytes(good.read_bytes()[:200])
        return path, "it is a zip archive (.npz) that is truncated or damaged"
    if case == "pickled-npz":  # a pickled numpy array under an .npz name: numpy's "load it unsafely" case
        path = tmp_path / "s.npz"
        path.write_bytes(pickle.dumps(_scores()))
        return path, "it is a Python pickle, not a numpy array file"
    if case == "object-member-npz":
        path = tmp_path / "s.npz"
        np.savez(path, scores=np.array([{"a": 1}, None], dtype=object))
        return path, "array 'scores' holds Python objects (dtype object)"
    if case == "random-bytes-npz":
        path = tmp_path / "s.npz"
        path.write_bytes(bytes(range(7, 250)) * 8)
        return path, "it is not a numpy file (it starts with neither the .npy nor the .npz signature)"
    if case == "truncated-npy":
        buffer = io.BytesIO()
        np.save(buffer, _scores())
        path = tmp_path / "s.npy"
        path.write_bytes(buffer.getvalue()[:100])
        return path, "it is a .npy file that is truncated or damaged"
    if case == "object-npy":
        path = tmp_path / "s.npy"
        np.save(path, np.array([object(), 1], dtype=object), allow_pickle=True)
        return path, "it holds Python objects (dtype object), not numbers or strings"
    assert case == "npz-as-npy"
    path = tmp_path / "s.npy"
    with zipfile.ZipFile(path, "w"):
        pass
    return path, "it is an .npz archive (several arrays), not a single .npy array"


CASES = ["truncated-npz", "pickled-npz", "object-member-npz", "random-bytes-npz", "truncated-npy", "object-npy",
         "npz-as-npy"]


@pytest.mark.parametrize("case", CASES)
def test_certify_scores_names_a_damaged_file_and_how_to_write_it_again(case: str, tmp_path: Path, capsys) -> None:
    path, problem = damaged(tmp_path, case)
    out = tmp_path / "cert.h5"
    with pytest.raises(SystemExit) as stop:
        main(["certify-scores", "--scores", str(path), "--out", str(out)])
    assert stop.value.code == 2 and not out.exists()
    err = capsys.readouterr().err
    assert f"{path}: cannot be read as numeric arrays: {problem}" in err, err
    assert ("numpy.savez(PATH, scores=S" if path.suffix == ".npz" else "numpy.save(PATH, scores)") in err
    assert not any(words in err for words in NUMPY_ADVICE), err
    assert "Traceback" not in err


def test_a_pickle_is_never_loaded(tmp_path: Path) -> None:
    class Boom:
        def __reduce__(self):
            return (Path.touch, (tmp_path / "ran",))

    path = tmp_path / "evil.npy"
    path.write_bytes(pickle.dumps(Boom()))
    with pytest.raises(ArrayFileError, match="is a Python pickle"):
        read_npy(path, "Write it again.")
    assert not (tmp_path / "ran").exists()


def test_a_good_archive_reads_as_its_arrays(tmp_path: Path) -> None:
    np.savez(tmp_path / "s.npz", scores=_scores(), names=np.array(["a", "b", "c", "d", "e"]))
    arrays = read_npz(tmp_path / "s.npz", "Write it again.")
    assert sorted(arrays) == ["names", "scores"] and arrays["scores"].shape == (6, 5)
    assert list(arrays["names"]) == ["a", "b", "c", "d", "e"]


def test_a_damaged_world_split_says_how_to_rebuild_it(tmp_path: Path) -> None:
    from certified_circuits.vision.data.world import load_split

    path = tmp_path / "world" / "concept.npz"
    path.parent.mkdir()
    path.write_bytes(pickle.dumps(np.zeros(3)))
    with pytest.raises(ValueError) as caught:
        load_split(path)
    message = str(caught.value)
    assert message.startswith(f"{path} is not a concept-world split (.npz written by vision-world): it is a Python "
                              "pickle")
    assert f"bin/certified-circuits vision-world --out {path.parent}" in message
    assert not any(words in message for words in NUMPY_ADVICE)
