"""Paper-scale loaders on tiny fake ImageFolder trees."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from certified_circuits.vision.data.image_sets import open_set
from certified_circuits.vision.data.folders import DatasetLayoutError, list_class_images
from certified_circuits.vision.data.imagenet import (generate_imagenet_c, imagenet_c_dir,
                                                list_classes, load_wnid_index, prepare_oodcv, select_classes)
from certified_circuits.vision.networks.models import VisionModel

WNIDS = ["n01440764", "n01443537", "n01484850", "n01491361", "n01494475"]


def write_tree(root, wnids, n, size=(40, 30), seed=0):
    rng = np.random.default_rng(seed)
    for w in wnids:
        (root / w).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)).save(root / w / f"{w}_{i}.JPEG")


@pytest.fixture()
def synset(tmp_path):
    p = tmp_path / "LOC_synset_mapping.txt"
    p.write_text("".join(f"{w} name {i}\n" for i, w in enumerate(WNIDS)))
    return p


def fake_model(size=24):
    return VisionModel(net=torch.nn.Identity(), arch="fake", hook_names=[], block_names=[], widths=[], channel_dim=1,
                       expand_at=("", "output"), class_names=WNIDS, image_size=size, mean=(0.5,) * 3, std=(0.25,) * 3)


def test_wnid_index(synset, tmp_path):
    idx = load_wnid_index(synset)
    assert idx["n01484850"] == 2 and len(idx) == 5
    assert load_wnid_index(tmp_path) == idx  # folder holding the file
    with pytest.raises(DatasetLayoutError, match="LOC_synset_mapping.txt"):
        load_wnid_index(tmp_path / "nowhere")
    bad = tmp_path / "bad.txt"
    bad.write_text("tench\ngoldfish\n")
    with pytest.raises(DatasetLayoutError, match="not a wnid mapping"):
        load_wnid_index(bad)


def test_folder_set_labels_and_loading(synset, tmp_path):
    root = tmp_path / "val"
    write_tree(root, WNIDS[1:4], 3)
    iset = open_set(root, load_wnid_index(synset))
    assert iset.labels.tolist() == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert iset.ids[0] == "n01443537/n01443537_0.JPEG"
    x = iset.load(np.array([0, 4]), fake_model(24))
    assert x.shape == (2, 3, 24, 24) and x.dtype == torch.float32
    sub = open_set(root, load_wnid_index(synset), names=[WNIDS[2]], limit_per_class=2)
    assert sub.labels.tolist() == [2, 2]
    with pytest.raises(ValueError, match="image folder: pass the class index"):
        open_set(root)


def test_layout_errors(synset, tmp_path):
    root = tmp_path / "val"
    write_tree(root, WNIDS[:1], 2)
    with pytest.raises(DatasetLayoutError, match="class folder .*n01443537 is missing"):
        list_class_images(root, WNIDS[1])
    with pytest.raises(DatasetLayoutError, match="fewer than the 5 required"):
        list_class_images(root, WNIDS[0], min_images=5)
    with pytest.raises(DatasetLayoutError, match="does not exist"):
        list_classes(tmp_path / "missing")
    (tmp_path / "flat").mkdir()
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tmp_path / "flat" / "a.JPEG")
    with pytest.raises(DatasetLayoutError, match="no WordNet-id folders"):
        list_classes(tmp_path / "flat")
    write_tree(root, ["n09999999"], 1)
    with pytest.raises(DatasetLayoutError, match=r"class folders \['n09999999'\] under .* are not in the class index"):
        open_set(root, load_wnid_index(synset))
    with pytest.raises(FileNotFoundError, match=".npz split or a ROOT/<class>/"):
        open_set(tmp_path / "nothing")


def test_select_classes_is_seeded():
    wnids = [f"n{i:08d}" for i in range(1000)]
    a = select_classes(wnids, 100, seed=0)
    assert len(a) == 100 == len(set(a)) and a == sorted(a)
    assert a == select_classes(list(reversed(wnids)), 100, seed=0)
    assert a != select_classes(wnids, 100, seed=1)
    with pytest.raises(ValueError, match="cannot select"):
        select_classes(wnids[:5], 6)


def test_generate_imagenet_c(tmp_path):
    val = tmp_path / "val"
    write_tree(val, WNIDS[:2], 2, size=(60, 50))
    out = generate_imagenet_c(val, tmp_path / "c", WNIDS[:2], severity=2, progress=False)
    assert out == imagenet_c_dir(tmp_path / "c", 2) and out.parts[-2:] == ("defocus_blur", "2")
    files = sorted((out / WNIDS[0]).iterdir())
    assert len(files) == 2 and Image.open(files[0]).size == (224, 224)
    assert not list(out.glob(".*"))


def test_prepare_oodcv(tmp_path):
    src = tmp_path / "oodcv"
    write_tree(src, ["car", "boat"], 2)
    out = prepare_oodcv(src, tmp_path / "prepared", {"car": "n02814533"})
    assert len(list((out / "n02814533").iterdir())) == 2 and not (out / "boat").exists()
    with pytest.raises(DatasetLayoutError, match="category folder"):
        prepare_oodcv(src, tmp_path / "p2", {"bus": "n02924116"})
