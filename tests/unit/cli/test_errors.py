"""Bad input to a stage ends in `certified-circuits <stage>: error: ...` naming the file, exit code 2,
no traceback: damaged images, weights and HDF5 files, words outside the vocabulary, values out of range."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # subprocess runs of the CLI on damaged inputs (5-20 s each)

BIN = Path(sys.executable).parent


def run(*argv: object) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "certified-circuits"), *map(str, argv)], capture_output=True, text=True, timeout=300)


def assert_clean_error(done: subprocess.CompletedProcess, *needles: str) -> None:
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    for needle in needles:
        assert needle in done.stderr, (needle, done.stderr[-2000:])


@pytest.fixture(scope="module")
def imagenet_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from PIL import Image

    root = tmp_path_factory.mktemp("imagenet")
    wnids = ["n01440764", "n01443537"]
    (root / "LOC_synset_mapping.txt").write_text(  # 1,000 lines, one per logit of the head
        "".join(f"{w} class {i}\n" for i, w in enumerate(wnids + [f"n{90000000 + i:08d}" for i in range(1000 - len(wnids))])))
    rng = np.random.default_rng(0)
    for w in wnids:
        (root / "val" / w).mkdir(parents=True)
        Image.fromarray(rng.integers(0, 256, (40, 40, 3), dtype=np.uint8)).save(root / "val" / w / "0.JPEG")
    return root


@pytest.mark.parametrize("damage", ["empty", "truncated"])
def test_damaged_jpeg_names_the_file(imagenet_tree: Path, tmp_path: Path, damage: str) -> None:
    import shutil

    tree = tmp_path / "tree"
    shutil.copytree(imagenet_tree, tree)
    image = tree / "val" / "n01440764" / "0.JPEG"
    image.write_bytes(b"" if damage == "empty" else image.read_bytes()[:200])
    weights = tmp_path / "r50.pth"
    import torch

    from certified_circuits.vision.networks.classifiers import build_paper_model

    torch.save(build_paper_model("resnet50", pretrained=False).net.state_dict(), weights)
    done = run("vision-attribute", "--model", "resnet50", "--weights", weights, "--class-index",
               tree / "LOC_synset_mapping.txt", "--data", tree / "val", "--concept", "n01440764", "--device", "cpu",
               "--out", tmp_path / "a.h5")
    assert_clean_error(done, "0.JPEG", "not a readable image")
    assert not (tmp_path / "a.h5").exists()


def test_corrupt_weights_file_names_the_file(imagenet_tree: Path, tmp_path: Path) -> None:
    weights = tmp_path / "broken.pth"
    weights.write_bytes(b"\x80\x04not really a checkpoint")
    done = run("vision-attribute", "--model", "resnet50", "--weights", weights, "--class-index",
               imagenet_tree / "LOC_synset_mapping.txt", "--data", imagenet_tree / "val", "--concept", "n01440764",
               "--out", tmp_path / "a.h5")
    assert_clean_error(done, "broken.pth", "weights")


def test_unavailable_cuda_is_a_clear_error(imagenet_tree: Path, tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    weights = tmp_path / "r.pth"
    weights.write_bytes(b"x")
    done = run("vision-attribute", "--model", "resnet50", "--weights", weights, "--class-index",
               imagenet_tree / "LOC_synset_mapping.txt", "--data", imagenet_tree / "val", "--concept", "n01440764",
               "--device", "cuda", "--out", tmp_path / "a.h5")
    assert_clean_error(done, "CUDA is not available")


def test_corrupt_language_weights_and_out_of_vocabulary_words(tmp_path: Path) -> None:
    from certified_circuits.language.models import save_embedded
    from certified_circuits.language.tasks import generate_examples, write_jsonl
    from certified_circuits.language.train import TrainConfig, train_embedded

    model, tokenizer, _ = train_embedded(TrainConfig(n_layer=1, n_head=2, n_embd=16, steps=1), [])
    model_dir = tmp_path / "model"
    save_embedded(model, tokenizer, model_dir)
    examples = generate_examples("ioi", "train", 3, seed=0)
    examples[0] = examples[0].__class__(**{**examples[0].__dict__, "clean": examples[0].clean + " Zyzzyva"})
    write_jsonl(tmp_path / "train.jsonl", examples)
    done = run("language-attribute", "--model", "embedded", "--model-path", model_dir, "--task", "ioi", "--split",
               "train", "--examples", tmp_path / "train.jsonl", "--out", tmp_path / "a.h5")
    assert_clean_error(done, "Zyzzyva", "vocabulary")
    weights = next(model_dir.glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:100])
    write_jsonl(tmp_path / "ok.jsonl", generate_examples("ioi", "train", 3, seed=0))
    done = run("language-attribute", "--model", "embedded", "--model-path", model_dir, "--task", "ioi", "--split",
               "train", "--examples", tmp_path / "ok.jsonl", "--out", tmp_path / "a.h5")
    assert_clean_error(done, str(model_dir), "corrupt")


def test_certify_rejects_a_corrupt_votes_file(tmp_path: Path) -> None:
    votes = tmp_path / "votes.h5"
    votes.write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(300))
    done = run("certify", "--votes", votes, "--tau", "0.9", "--out", tmp_path / "c.h5")
    assert_clean_error(done, "votes.h5", "rerun")
