"""Concept world: determinism, split semantics, storage."""

from __future__ import annotations

import json

import numpy as np
import pytest

from certified_circuits.vision.data.world import (NOVEL_SHAPES, WorldConfig, build_world, load_split, make_split,
                                             sample_scenes, render, shape_mask)


def test_world_is_deterministic(tiny_cfg):
    a = make_split(tiny_cfg, "train")
    b = make_split(tiny_cfg, "train")
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    c = make_split(WorldConfig(**{**tiny_cfg.__dict__, "seed": 4}), "train")
    assert not np.array_equal(a["images"], c["images"])
    # splits are independent streams
    assert not np.array_equal(make_split(tiny_cfg, "concept")["images"][:5], a["images"][:5])


def test_split_semantics(tiny_cfg):
    tr = make_split(tiny_cfg, "train")
    assert tr["images"].shape == (48, 32, 32, 3) and tr["images"].dtype == np.uint8
    assert np.bincount(tr["labels"]).tolist() == [12] * 4
    big = make_split(WorldConfig(seed=1, n_classes=4, n_train_per_class=500), "train")
    rate = (big["habitat"] == big["labels"]).mean()
    # own habitat with p = 0.8, plus 1/4 of the remaining 0.2 by chance
    assert abs(rate - (0.8 + 0.2 / 4)) < 0.03
    cs = make_split(tiny_cfg, "context_shift")
    assert (cs["habitat"] != cs["labels"]).all()
    co, te = make_split(tiny_cfg, "corruption"), make_split(tiny_cfg, "id_test")
    np.testing.assert_array_equal(co["labels"], te["labels"])
    assert not np.array_equal(co["images"], te["images"])
    an = make_split(tiny_cfg, "anomaly_pool")
    assert (an["labels"] == -1).all() and an["shape"].max() < len(NOVEL_SHAPES)


def test_counterfactual_pairs_change_one_cue(tiny_cfg):
    cf = make_split(tiny_cfg, "counterfactual")
    base, hab, shp = cf["images"], cf["images_habitat_swap"], cf["images_shape_swap"]
    assert base.shape == hab.shape == shp.shape
    assert (base != hab).any(axis=(1, 2, 3)).all() and (base != shp).any(axis=(1, 2, 3)).all()


def test_shapes_are_distinct_and_nonempty():
    g = np.linspace(-1.2, 1.2, 64)
    u, v = np.meshgrid(g, g)
    masks = {n: shape_mask(n, u, v) for n in ["circle", "square", "triangle", "plus", "star", "ring", "hexagon",
                                                   "crescent", "bar", "ell", *NOVEL_SHAPES]}
    for n, m in masks.items():
        assert 0.05 < m.mean() < 0.8, n
    names = list(masks)
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            assert (masks[names[i]] != masks[names[j]]).mean() > 0.02, (names[i], names[j])
    with pytest.raises(ValueError, match="unknown shape"):
        shape_mask("blob", u, v)


def test_render_shape_pixels_have_the_shape_colour():
    cfg = WorldConfig()
    rng = np.random.default_rng(0)
    sc = sample_scenes(rng, np.array([0]), np.array([0]), cfg)
    sc = sc.replace(cx=np.array([0.5], np.float32), cy=np.array([0.5], np.float32), radius=np.array([0.3], np.float32))
    img = render(sc, cfg)[0]
    np.testing.assert_allclose(img[16, 16] / 255.0, sc.color[0], atol=0.01)


def test_build_and_load(tmp_path, tiny_cfg):
    paths = build_world(tiny_cfg, tmp_path / "w", splits=("concept", "id_test"), progress=False)
    meta = json.loads(paths["meta"].read_text())
    assert meta["class_names"] == ["circle", "square", "triangle", "plus"]
    d = load_split(paths["concept"])
    assert d["images"].shape[0] == 24 and list(d["class_names"]) == meta["class_names"]
    assert not list((tmp_path / "w").glob(".*tmp"))
    with pytest.raises(FileNotFoundError, match="vision-world"):
        load_split(tmp_path / "w" / "train.npz")
    np.savez(tmp_path / "bad.npz", x=np.zeros(3))
    with pytest.raises(ValueError, match="not a concept-world split"):
        load_split(tmp_path / "bad.npz")


def test_config_validation():
    with pytest.raises(ValueError, match="n_classes"):
        WorldConfig(n_classes=11).validate()
    with pytest.raises(ValueError, match="habitat_rate"):
        WorldConfig(habitat_rate=1.5).validate()


def test_a_file_that_is_not_a_split_is_named(tmp_path):
    """Issue 21: a random-bytes .npz got numpy's pickle advice and no file name."""
    import os

    from certified_circuits.vision.data.world import load_split

    junk = tmp_path / "junk.npz"
    junk.write_bytes(os.urandom(4096))
    with pytest.raises(ValueError, match=r"junk.npz is not a concept-world split .*vision-world") as info:
        load_split(junk)
    assert "pickle" not in str(info.value)
    np.save(tmp_path / "array.npy", np.arange(3))
    (tmp_path / "array.npy").rename(tmp_path / "array.npz")  # a .npy under an .npz name
    with pytest.raises(ValueError, match="array.npz is not a concept-world split"):
        load_split(tmp_path / "array.npz")


def test_compositional_world_shares_shapes_and_fills():
    """n_fills = 3, 6 classes: class c is (shape c // 3, fill c % 3); classes of one shape share it."""
    from certified_circuits.vision.data.world import FILLS

    cfg = WorldConfig(seed=1, n_classes=6, n_fills=3, n_concept_per_class=4, n_test_per_class=2, n_ood_per_class=2)
    assert cfg.class_names() == ["circle_solid", "circle_hstripes", "circle_vstripes", "square_solid",
                                 "square_hstripes", "square_vstripes"]
    assert cfg.n_habitats() == 10 and FILLS[:3] == ("solid", "hstripes", "vstripes")
    d = make_split(cfg, "concept")
    assert d["images"].shape == (24, 32, 32, 3) and sorted(set(d["labels"].tolist())) == list(range(6))
    # the same scene drawn with another fill changes only pixels inside the shape
    from certified_circuits.vision.data.world import render, sample_scenes

    rng = np.random.default_rng(0)
    scenes = sample_scenes(rng, np.zeros(4, int), np.zeros(4, int), cfg).replace(fill=np.zeros(4, int))
    solid = render(scenes, cfg).astype(int)
    striped = render(scenes.replace(fill=np.ones(4, int)), cfg).astype(int)
    shape_only = render(scenes.replace(fill=None), cfg).astype(int)
    assert (solid == shape_only).all()                         # solid fill = the shape-only rendering
    changed = np.abs(striped - solid).sum(-1) > 0
    assert changed.any(axis=(1, 2)).all()                      # every image shows its stripes
    # outside the shape (pixels far from every shape edge) nothing changes: the background is the same
    background = render(scenes.replace(radius=np.full(4, 1e-3, np.float32)), cfg).astype(int)
    assert (changed <= (np.abs(solid - background).sum(-1) > 0)).all()


def test_compositional_config_validation():
    with pytest.raises(ValueError, match="multiple of n_fills"):
        WorldConfig(n_classes=7, n_fills=3).validate()
    with pytest.raises(ValueError, match="n_fills"):
        WorldConfig(n_classes=14, n_fills=7).validate()
    WorldConfig(n_classes=60, n_fills=6).validate()


def test_the_shape_only_world_is_unchanged_by_the_fill_option(tiny_cfg):
    """n_fills = 0 draws no fill and renders as before: the split is a pure function of the old knobs."""
    import dataclasses

    a = make_split(tiny_cfg, "id_test")
    b = make_split(dataclasses.replace(tiny_cfg, n_fills=0), "id_test")
    assert (a["images"] == b["images"]).all() and a["class_names"].tolist() == tiny_cfg.class_names()
