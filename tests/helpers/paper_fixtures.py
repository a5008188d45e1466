"""Builders of a paper-shaped fixture tree: what `configs/paper.yaml` reads, small and random.

:func:`build_paper_tree` writes, under one root, everything the paper half of the workflow needs, in
the real layouts and formats (docs/paper_scale.md, "Where to get the weights and data"), so the paper path runs with its real loading code:

- ``LOC_synset_mapping.txt``: 1,000 unique wnid lines (ResNet-50's head has 1,000 classes);
- ``val/<wnid>/*.JPEG``: three classes x one or two small noise JPEGs (the loader resizes them to 256 px and crops
  224 px, the IMAGENET1K_V1 preprocessing, so every image costs a 224 px ResNet-50 pass whatever its file size);
- ``imagenet-a/``, ``imagenet-o/``, ``imagenet-c/defocus_blur/2/``, ``ood-cv/wnid/``: the same layout,
  each lacking a certified class (the real ImageNet-A/O hold 200 of the 1,000; OOD-CV 6);
- ``resnet50.pth``: ``torchvision.models.resnet50(weights=None).state_dict()`` under a fixed seed;
- ``gpt2/``: a random ``GPT2LMHeadModel`` (2 layers, 4 heads, 64 dims) saved with ``save_pretrained``
  and, beside it, a GPT-2-style byte-level BPE tokenizer trained with the ``tokenizers`` library on
  the task prompts, in which every name, object, place and year is one token with its leading space
  (as in GPT-2), saved in the Hugging Face format so ``AutoTokenizer.from_pretrained(dir)`` loads it.

Run as a script to build a tree for a manual run with configs/paper_fixture.yaml:

    python tests/helpers/paper_fixtures.py paper_fixture_data
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_CONFIG = ROOT / "configs" / "paper_fixture.yaml"
#: the prefix of every path configs/paper_fixture.yaml reads from the tree
DATA_PREFIX = "paper_fixture_data"

#: val: {class index (into the 1,000-line class index): number of images}. configs/paper_fixture.yaml's class draw
#: (n_classes 2, class_seed 0) picks 409 and 817 of the three folders; each holds concept_size (2) images, the
#: undrawn class 1 one image: it keeps the draw a choice among folders and is the others' negative on id. Every
#: image is evaluated under every distinct circuit of every vision_evaluate job (issue 51: the evaluations are the
#: run's largest cost), so the tree holds no image the checks do not need.
VAL = {1: 1, 409: 2, 817: 2}
CERTIFIED_CLASSES = (409, 817)
#: eval set -> (folder under the root, {class index: number of images}); absent classes mimic the real
#: sets' missing ones (ImageNet-A/O hold 200 of the 1,000 classes): each set lacks one certified class, whose
#: evaluation on it is skipped. Every set holds >= 2 images (rediscovery_min_images) of one certified class, so each
#: has a re-discovered circuit (Fig. IoU), and an image of another class, its negative (balanced accuracy).
OOD_SETS = {
    "imagenet_a": ("imagenet-a", {1: 1, 409: 2}),
    "imagenet_o": ("imagenet-o", {1: 1, 817: 2}),
    "imagenet_c": ("imagenet-c/defocus_blur/2", {1: 1, 817: 2}),
    "ood_cv": ("ood-cv/wnid", {409: 2, 817: 1}),
}
IMAGE_SIZE = (40, 30)  # width, height: tiny files; the paper loader resizes (256) and centre-crops (224)
SEED = 0
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def wnid(index: int) -> str:
    """A deterministic, unique WordNet-id-shaped name of class ``index`` (nXXXXXXXX)."""
    return f"n{1440764 + 7919 * index:08d}"


def write_class_index(path: Path, n_classes: int = 1000) -> list[str]:
    wnids = [wnid(i) for i in range(n_classes)]
    path.write_text("".join(f"{w} fixture class {i}\n" for i, w in enumerate(wnids)))
    return wnids


def write_images(root: Path, counts: dict[int, int], seed: int, odd: bool = False) -> None:
    """``root/<wnid>/<wnid>_<i>.JPEG`` noise images: {class index: number of images}.

    ``odd``: the last image of every class is one of the real sets' exceptions instead: a greyscale
    JPEG (ImageNet val has some) in the 1st, 3rd, ... class, a portrait PNG (ImageNet-A/C hold PNGs) in the others."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    width, height = IMAGE_SIZE
    for position, (index, n) in enumerate(counts.items()):
        folder = root / wnid(index)
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(n):
            pixels = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
            image, name = Image.fromarray(pixels), f"{wnid(index)}_{i}.JPEG"
            if odd and i == n - 1 and n > 1:
                grey = position % 2 == 0
                image = image.convert("L") if grey else image.transpose(Image.Transpose.ROTATE_90)
                name = name if grey else f"{wnid(index)}_{i}.png"
            image.save(folder / name, **({"quality": 90} if name.endswith(".JPEG") else {}))


def write_resnet50(path: Path, seed: int = SEED) -> Path:
    """Random-weight torchvision ResNet-50 as a plain state-dict file (the IMAGENET1K_V1 file's format)."""
    import torch
    import torchvision

    torch.manual_seed(seed)
    torch.save(torchvision.models.resnet50(weights=None).state_dict(), path)
    return path


def task_words() -> list[str]:
    """Every word that must be one GPT-2 token with its leading space: names, objects, places, events
    and every Greater-Than year (answers, distractors and the span's years)."""
    from certified_circuits.language.tasks import EVENTS, NAMES, OBJECTS, PLACES, year_vocabulary

    return list(NAMES) + list(OBJECTS) + list(PLACES) + list(EVENTS) + year_vocabulary()


def task_corpus(n_per_task: int = 40, seed: int = 12345) -> list[str]:
    """Prompts of every task and template family (ID and OOD), clean and corrupted."""
    from certified_circuits.language.tasks import TASKS, generate_examples

    texts = []
    for task in TASKS:
        for split in ("train", "ood_test"):
            for ex in generate_examples(task, split, n_per_task, seed):
                texts += [ex.clean, ex.corrupted]
    return texts


def build_tokenizer(out_dir: Path):
    """GPT-2-style byte-level BPE trained with `tokenizers` on the task prompts plus every task word
    (with its leading space), saved as a Hugging Face GPT-2 tokenizer; returns the HF tokenizer."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2Tokenizer

    words = task_words()
    corpus = task_corpus() + [" " + " ".join(words)] * 2
    bpe = ByteLevelBPETokenizer(add_prefix_space=False)
    bpe.train_from_iterator(corpus, vocab_size=4000, min_frequency=1, special_tokens=["<|endoftext|>"],
                            show_progress=False)
    vocab = bpe.get_vocab()
    model = json.loads(bpe.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    tok = GPT2Tokenizer(vocab=vocab, merges=merges)
    bad = [w for w in words if len(tok.encode(" " + w)) != 1]
    if bad:
        raise RuntimeError(f"fixture BPE: {len(bad)} task words are not single tokens: {bad[:10]}")
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(out_dir)
    bpe.save_model(str(out_dir))  # vocab.json + merges.txt too, as in the Hugging Face gpt2 folder
    return tok


def write_gpt2(out_dir: Path, seed: int = SEED, n_layer: int = 2, n_head: int = 4, n_embd: int = 64,
               n_positions: int = 160) -> Path:
    """Random-weight GPT-2 over the fixture BPE: ``save_pretrained`` model + tokenizer in one folder."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = build_tokenizer(out_dir)
    eos = tok.convert_tokens_to_ids("<|endoftext|>")
    config = GPT2Config(vocab_size=len(tok), n_positions=n_positions, n_embd=n_embd, n_layer=n_layer, n_head=n_head,
                        bos_token_id=eos, eos_token_id=eos)
    torch.manual_seed(seed)
    GPT2LMHeadModel(config).save_pretrained(out_dir)
    return out_dir


def build_paper_tree(root: Path) -> dict:
    """Write the fixture tree under ``root``; returns the paths and facts a config and a test need.

    Keys: root, class_index, val_root, ood_roots {eval set: folder}, weights, model_path, wnids (all
    1,000), folder_wnids (classes with val folders), certified_wnids (the classes the fixture
    config draws), counts {eval set: {wnid: images}}."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    wnids = write_class_index(root / "LOC_synset_mapping.txt")
    write_images(root / "val", VAL, seed=SEED, odd=True)
    ood_roots, counts = {}, {"id": {wnid(i): n for i, n in VAL.items()}}
    for k, (name, (folder, per_class)) in enumerate(OOD_SETS.items()):
        write_images(root / folder, per_class, seed=SEED + 1 + k, odd=True)
        ood_roots[name] = str(root / folder)
        counts[name] = {wnid(i): n for i, n in per_class.items()}
    write_resnet50(root / "resnet50.pth")
    write_gpt2(root / "gpt2")
    return {
        "root": str(root),
        "class_index": str(root / "LOC_synset_mapping.txt"),
        "val_root": str(root / "val"),
        "ood_roots": ood_roots,
        "weights": str(root / "resnet50.pth"),
        "model_path": str(root / "gpt2"),
        "wnids": wnids,
        "folder_wnids": [wnid(i) for i in VAL],
        "certified_wnids": [wnid(i) for i in CERTIFIED_CLASSES],
        "counts": counts,
    }


def fixture_override(tree: dict, results: Path, out: Path) -> Path:
    """Write configs/paper_fixture.yaml to ``out`` with its ``paper_fixture_data/`` paths pointing at
    ``tree`` (from :func:`build_paper_tree`) and ``results_dir`` set to ``results``; returns ``out``."""
    import yaml


    def place(value):
        if isinstance(value, dict):
            return {k: place(v) for k, v in value.items()}
        if isinstance(value, list):
            return [place(v) for v in value]
        if isinstance(value, str) and value.startswith(DATA_PREFIX + "/"):
            return tree["root"] + value[len(DATA_PREFIX):]
        return value

    config = place(yaml.safe_load(FIXTURE_CONFIG.read_text()))
    config["results_dir"] = str(results)
    out.write_text(yaml.safe_dump(config, sort_keys=False))
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/helpers/paper_fixtures.py ROOT")
    print(json.dumps({k: v for k, v in build_paper_tree(Path(sys.argv[1])).items() if k != "wnids"}, indent=2))
