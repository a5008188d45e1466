"""Model weights written by ``save_pretrained`` follow the umask like every other output (issue 35, item 6e).

safetensors writes ``model.safetensors`` 0600 whatever the umask; the embedded language model's folder
(``language/model``, written by ``language-train`` through :func:`certified_circuits.storage.atomic.atomic_dir`)
gets ``0o666 & ~umask`` for each file and ``0o777 & ~umask`` for each folder, the convention of
tests/unit/test_hardening_permissions.py.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterator

import pytest

from certified_circuits.storage.atomic import atomic_dir


@pytest.fixture(params=[0o022, 0o027])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    previous = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


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
