"""No exact ties decided by index in the compiled marked ResNet (issue 59, vision/networks/compiled.py): among the live
channels of each layer (the top-K groups), the dataset-mean signed relevance of D_c and of bootstrap resamples of it
has no two equal values, so the top-K's lower-index rule never decides a membership. The distractors' jitter
magnitudes (``jitter_spread``) separate the distractors; the cue codes' gains (``cue_gain_spread``) separate two cue
chains whose cues have the same count in the sample, which tie exactly with the one gain of the older models."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
import torch

from certified_circuits.analysis.stability import bootstrap_indices
from certified_circuits.vision.data.world import WorldConfig, make_split
from certified_circuits.vision.networks.compiled import CompiledSpec, channel_roles, compile_marked_resnet, \
    compile_spec
from certified_circuits.vision.networks.planted import STAGES
from certified_circuits.vision.networks.models import world_model_from_net
from certified_circuits.vision.scoring.scorers import score_batch

#: a small marked world: 3 classes, 16 px, 2 attributes x 4 values, |D_c| = 50 (the testbed's), 200 train images per
#: class for the mean grey level
WORLD = dict(seed=5, n_classes=3, image_size=16, cue_attributes=2, cue_values=4, n_train_per_class=200,
             n_concept_per_class=50, n_test_per_class=2, n_ood_per_class=4, n_pool_per_class=4, n_anomaly_pool=6,
             n_counterfactual=6)
RESAMPLES = 5


def compiled(**spread) -> tuple[CompiledSpec, dict, list[np.ndarray]]:
    """The model of the default spec (or with ``jitter_spread`` / ``cue_gain_spread``), its D_c per class and their
    per-image relevance."""
    torch.set_num_threads(1)
    cfg = WorldConfig(**WORLD)
    train, concept = make_split(cfg, "train"), make_split(cfg, "concept")
    spec = compile_spec(CompiledSpec(3, 2, 4, 8, (0.02, 0.08, 0.14, 0.2), 0.3, 1.0, 1.0,
                                     float(train["images"].mean() / 255), 16, 1, **spread))
    model = world_model_from_net(compile_marked_resnet(spec), cfg.class_names(), 16)
    relevance = []
    for c in range(3):
        rows = np.flatnonzero(concept["labels"] == c)
        scores, _ = score_batch(model, model.normalize(torch.from_numpy(concept["images"][rows])), c)
        relevance.append(scores["relevance"].numpy().astype(np.float64))
    return spec, concept, relevance


@pytest.fixture(scope="module")
def default_model():
    return compiled()


def samples(n: int) -> list[np.ndarray]:
    """D itself and RESAMPLES bootstrap resamples of it (seed 0, as the testbed draws them)."""
    return [np.arange(n), *bootstrap_indices(n, RESAMPLES, 0)]


def tied_pairs(spec: CompiledSpec, relevance: np.ndarray, rows: np.ndarray) -> list[tuple[int, str, str]]:
    """(layer, role, role) of every two live channels of a layer whose mean relevance over ``rows`` is exactly
    equal (live: non-zero relevance on some image of D)."""
    roles = np.array(channel_roles(spec)).reshape(4, spec.width)
    live = (relevance != 0).any(axis=0).reshape(4, spec.width)
    mean = relevance[rows].mean(axis=0).reshape(4, spec.width)
    out = []
    for layer in range(4):
        values, names = mean[layer, live[layer]], roles[layer, live[layer]]
        same = np.triu(values[:, None] == values[None, :], k=1)
        out += [(layer, str(names[i]), str(names[j])) for i, j in zip(*np.nonzero(same))]
    return out


def cue_count(concept: dict, c: int, rows: np.ndarray, role: str) -> int | None:
    """The count in the sample of the cue of ``role`` when it is one of class c's cue chains, else None."""
    kind, *ids = role.split()
    if kind != "cue" or int(ids[0]) != c:
        return None
    g = int(ids[1])
    return int((concept["cues"][concept["labels"] == c][rows, g // 4] == g % 4).sum())


def test_no_two_live_channels_ever_tie(default_model):
    """On D_c and each resample, for every class and layer: no exact tie among the live channels at all, though some
    cue chains of a class have the same count in the sample (with one gain they would tie: the next test)."""
    spec, concept, relevance = default_model
    equal_counts = 0
    for c in range(3):
        assert (relevance[c] != 0).any(axis=0).sum() == 4 * (1 + 8 + 8)  # live: badge, 8 cue chains, 8 distractors
        for b, rows in enumerate(samples(len(relevance[c]))):
            assert tied_pairs(spec, relevance[c], rows) == [], f"class {c}, sample {b}"
            counts = [cue_count(concept, c, rows, f"cue {c} {g}") for g in range(8)]
            equal_counts += len(counts) - len(set(counts))
    assert equal_counts > 0  # the data do tie: the gains, not luck, keep the cue chains apart


def test_one_cue_gain_ties_the_cue_chains_of_equal_count(default_model):
    """``cue_gain_spread = 0`` (the one gain A of the models before the cue gains): cue chains of a class with the same
    count in the sample tie, and nothing else does; the default's spread is what removes them."""
    spec, concept, _ = default_model
    old, _, relevance = compiled(cue_gain_spread=0.0)
    assert old.cue_gains().tolist() == [1.0] * 8 and spec.cue_gains().min() == 1.0 and spec.cue_gains().max() < 2.0
    tied = 0
    for c in range(3):
        for b, rows in enumerate(samples(len(relevance[c]))):
            pairs = tied_pairs(old, relevance[c], rows)
            for layer, a, z in pairs:
                ka, kz = cue_count(concept, c, rows, a), cue_count(concept, c, rows, z)
                assert ka is not None and ka == kz, f"class {c}, sample {b}, layer{layer + 1}: {a} ties {z}"
            tied += len(pairs)
    assert tied == 56  # over 3 classes x 6 samples x 4 layers (the rest of the equal counts differ by rounding)


def test_cue_gains_never_coincide_on_any_count():
    """``A_g k = A_g' k'`` has no solution with g != g', k, k' in 1..1000, for every G = 2..24 (the float64 gains and
    their float32 copies, in exact rationals); at k, k' <= 50 any two differ by more than 1e-5 relative. A round
    spacing would tie: 0.05 gives 160 x 33 = 165 x 32 at G = 8."""
    from fractions import Fraction

    for G in range(2, 25):  # noqa: N806
        gains = CompiledSpec(2, 1, G, 1, (0.1,) * 4, 0.0, 1.0, 1.0, 0.5, 16, 0).cue_gains()
        for exact in (gains, gains.astype(np.float32)):
            values = {Fraction(float(a)) * k for a in exact for k in range(1, 1001)}
            assert len(values) == G * 1000, G
        products = np.sort((gains[:, None] * np.arange(1, 51)).ravel())
        assert (np.diff(products) / products[1:]).min() > 1e-5, G
    round_spacing = CompiledSpec(2, 2, 4, 1, (0.1,) * 4, 0.0, 1.0, 1.0, 0.5, 16, 0, cue_gain_spread=0.05).cue_gains()
    assert round_spacing[0] * 33 == round_spacing[5] * 32


def test_distractors_rank_by_their_jitter_and_the_samples_grey_level(default_model):
    """On every sample the distractors' order is that of ``s_i (lbar_D - lbar)``: D decides which comes first."""
    spec, concept, relevance = default_model
    signs = spec.jitter_signs()
    assert len(np.unique(signs)) == spec.distractors and np.abs(signs).max() == 1.0
    roles = np.array(channel_roles(spec)).reshape(4, spec.width)
    grey = concept["images"].reshape(len(concept["labels"]), -1).mean(axis=1) / 255.0
    order = [f"distractor {i}" for i in range(spec.distractors)]
    darker = lighter = 0
    for c in range(3):
        for rows in samples(len(relevance[c])):
            shift = grey[concept["labels"] == c][rows].mean() - spec.luminance
            darker, lighter = darker + (shift < 0), lighter + (shift > 0)
            mean = relevance[c][rows].mean(axis=0).reshape(4, spec.width)
            for layer in range(4):
                got = [mean[layer, roles[layer] == name][0] for name in order]
                assert list(np.argsort(got)) == list(np.argsort(signs * shift)), (c, layer)
    assert darker and lighter  # both orders occur


def test_spread_zero_is_the_tied_model_before_issue_59_and_old_metas_load_with_it(default_model):
    from certified_circuits.cli import vision as vcli
    from certified_circuits.vision.networks.compiled import DEFAULT_CUE_GAIN_SPREAD, DEFAULT_JITTER_SPREAD

    spec, concept, _ = default_model
    old, _, relevance = compiled(jitter_spread=0.0)
    assert old.jitter_signs().tolist() == [1.0, -1.0] * 4
    tied = tied_pairs(old, relevance[0], np.arange(50))
    assert sum(a.startswith("distractor") for _, a, _ in tied) >= 4 * 8  # two tied groups of 4 per layer
    meta = spec.to_dict()
    assert meta["jitter_spread"] == DEFAULT_JITTER_SPREAD and CompiledSpec.from_dict(meta) == spec
    assert meta["cue_gain_spread"] == DEFAULT_CUE_GAIN_SPREAD
    meta.pop("cue_gain_spread")  # a checkpoint written before the cue gains
    assert CompiledSpec.from_dict(meta).cue_gain_spread == 0.0 and CompiledSpec.from_dict(meta).jitter_spread > 0
    meta.pop("jitter_spread")  # a checkpoint written before issue 59
    legacy = CompiledSpec.from_dict(meta)
    assert legacy.jitter_spread == 0.0 and legacy.cue_gain_spread == 0.0
    # the old model bit for bit: spread 0 is one gain A on every cue chain (the fc weight positions x A of before),
    # and the cue gains touch nothing but fc
    one_gain = compile_marked_resnet(CompiledSpec.from_dict({**spec.to_dict(), "cue_gain_spread": 0.0})).state_dict()
    gained = compile_marked_resnet(spec).state_dict()
    assert [k for k in gained if not torch.equal(gained[k], one_gain[k])] == ["fc.weight"]
    fc = one_gain["fc.weight"].numpy()
    names = np.array(channel_roles(spec)).reshape(4, spec.width)[len(STAGES) - 1]
    cue = np.char.startswith(names, "cue ")
    assert (fc[:, cue][fc[:, cue] != 0] == np.float32(spec.positions()[3] * spec.cue_gain)).all()
    for name, bad in (("jitter_spread", 1.0), ("jitter_spread", -0.1), ("cue_gain_spread", 1.0),
                      ("cue_gain_spread", -0.1)):
        with pytest.raises(ValueError, match=rf"{name} must be in \[0, 1\)"):
            CompiledSpec(**{**spec.to_dict(), "margins": spec.margins, "layout": (), name: bad})
    p = argparse.ArgumentParser()
    vcli.STAGES.register(p.add_subparsers(dest="cmd"))
    args = p.parse_args(["vision-compile", "--world", "w", "--out-model", "m.pt", "--out-metrics", "m.json"])
    assert args.jitter_spread == DEFAULT_JITTER_SPREAD and args.cue_gain_spread == DEFAULT_CUE_GAIN_SPREAD
    args = p.parse_args(["vision-compile", "--world", "w", "--out-model", "m.pt", "--out-metrics", "m.json",
                         "--cue-gain-spread", "0"])
    assert args.cue_gain_spread == 0.0
