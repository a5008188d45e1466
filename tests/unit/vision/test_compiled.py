"""The marked world and the compiled marked ResNet (issue 50): marks drawn over unchanged scenes, cue values dealt
from a balanced deck, detectors that fire on their marks only, logits and gradient x activation in closed form, a
truth with no grey zone, the whole-circuit checks on the truth as written, and the baseline's sample-dependence."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
import torch

from certified_circuits.cli import vision as vcli
from certified_circuits.cli.stages import InputError
from certified_circuits.vision.data.marks import BADGE_MARKS, CODES, balanced_values, check_marks
from certified_circuits.vision.data.world import WorldConfig, build_world, load_split, make_split
from certified_circuits.vision.networks.checkpoints import load_world_model
from certified_circuits.vision.networks.compiled import (
    CompiledSpec,
    channel_roles,
    compile_marked_resnet,
    compile_spec,
    detector_error,
    truth_components,
)
from certified_circuits.vision.networks.loading import load_model
from certified_circuits.vision.networks.models import world_model_from_net

#: a small marked world: 3 classes, 16 px, 2 attributes x 4 values (8 cue codes per class)
MARKED = dict(seed=5, n_classes=3, image_size=16, cue_attributes=2, cue_values=4, n_train_per_class=1000,
              n_concept_per_class=50, n_test_per_class=30, n_ood_per_class=4, n_pool_per_class=4,
              n_anomaly_pool=6, n_counterfactual=6)
MARGINS = (0.02, 0.08, 0.14, 0.2)


def run(*argv) -> int:
    p = argparse.ArgumentParser(prog="certified-circuits")
    vcli.STAGES.register(p.add_subparsers(dest="cmd"))
    args = p.parse_args([str(a) for a in argv])
    return args.func(args)


def grey_level(images: np.ndarray) -> np.ndarray:
    """Each image's mean pixel over rows, columns and colours, in [0, 1]."""
    return images.reshape(len(images), -1).mean(axis=1) / 255.0


@pytest.fixture(scope="module")
def marked(tmp_path_factory):
    """The small marked world on disk (train, concept, id_test) and its compiled model (seed 1)."""
    w = tmp_path_factory.mktemp("marked") / "world"
    build_world(WorldConfig(**MARKED), w, ("train", "concept", "id_test"), progress=False)
    model = w.parent / "model.pt"
    assert run("vision-compile", "--world", w, "--seed", 1, "--out-model", model, "--out-metrics",
               w.parent / "compile.json", "--margins", *MARGINS) == 0
    return w, model


def test_marks_leave_the_scene_and_deal_cues_from_a_balanced_deck():
    plain = make_split(WorldConfig(**{**MARKED, "cue_attributes": 0}), "id_test")
    split = make_split(WorldConfig(**MARKED), "id_test")
    changed = (plain["images"] != split["images"]).any(axis=-1).sum(axis=(1, 2))
    marks = BADGE_MARKS + 1 + MARKED["cue_attributes"]
    assert changed.max() <= 4 * marks and (plain["labels"] == split["labels"]).all()  # only the 2 x 2 marks differ
    assert split["mark_slots"].shape == (90, marks) and (np.sort(split["mark_slots"], 1)[:, 1:] != np.sort(
        split["mark_slots"], 1)[:, :-1]).all()  # distinct slots
    assert (split["stray"] != split["labels"]).all() and split["cues"].min() == 0 and split["cues"].max() == 3
    # the deck: 1,000 class images hold each value exactly 250 times; 50 of them a hypergeometric count
    rng = np.random.default_rng(0)
    labels = np.repeat([0, 1], [1000, 50])
    values = balanced_values(rng, labels, 2, 4)
    assert [np.bincount(values[labels == 0, a], minlength=4).tolist() for a in range(2)] == [[250] * 4] * 2
    small = np.bincount(values[labels == 1, 0], minlength=4)
    assert small.sum() == 50 and small.tolist() != [13, 13, 12, 12] and small.tolist() != [12, 12, 13, 13]


def test_marked_world_knobs_are_checked():
    for kwargs, words in (({"cue_attributes": 7, "cue_values": 4}, "28 cue codes"),
                          ({"cue_values": 1}, "cue_values must be >= 2"),
                          ({"n_classes": 13}, "at most 12 classes")):
        with pytest.raises(ValueError, match=words):
            check_marks(**{"n_classes": 10, "attributes": 2, "values": 4, "image_size": 16,
                           **{{"cue_attributes": "attributes", "cue_values": "values"}.get(k, k): v
                              for k, v in kwargs.items()}})
    assert len(CODES) == 24 and len(set(CODES)) == 24 and all(sorted(c).count("H") == 2 for c in CODES)


def test_compiled_spec_is_checked():
    base = dict(n_classes=3, attributes=2, values=4, distractors=8, margins=MARGINS, jitter=0.3, badge_gain=1.0,
                cue_gain=1.0, luminance=0.5, image_size=16, seed=0)
    for change, words in (({"margins": (0.0, 0.1, 0.1, 0.1)}, "margins must be 4 values in"),
                          ({"image_size": 24}, "multiple of 16"), ({"badge_gain": 0.5}, "badge_gain >= cue_gain"),
                          ({"distractors": 17}, "distractors must be in 1..16"), ({"jitter": 1.0}, "jitter must"),
                          ({"cue_gain_spread": 1.0}, "cue_gain_spread must be in")):
        with pytest.raises(ValueError, match=words):
            CompiledSpec(**{**base, **change})
    spec = compile_spec(CompiledSpec(**base))
    assert spec.width == 3 * (1 + 8) + 8 and CompiledSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    with pytest.raises(ValueError, match="compile_spec"):
        compile_marked_resnet(CompiledSpec(**base))


def test_detectors_logits_and_relevance_in_closed_form(marked):
    from certified_circuits.vision.scoring.scorers import score_batch

    w, ckpt = marked
    model = load_model("world", checkpoint=ckpt)  # a world checkpoint: the CLI's loader reads it
    spec = CompiledSpec.from_dict(model.meta["compiled"])
    test, train = load_split(w / "id_test.npz"), load_split(w / "train.npz")
    labels = test["labels"].astype(np.int64)
    marks = {k: test[k] for k in ("mark_slots", "stray", "cues")}
    assert detector_error(model.net, spec, test["images"], labels, marks) < 1e-4
    x = model.normalize(torch.from_numpy(test["images"]))
    with torch.no_grad():
        z = model.net(x).numpy()
    # logit c reads 2 badge marks (B = 1) and 2 cue marks, code g at A_g = 1 + 0.0715 g / 8 (vision-compile's
    # default cue gain spread); the stray mark's class reads B; the distractors add the same to every logit
    gains = 1 + 0.0715 * np.arange(8) / 8
    assert spec.cue_gain_spread == 0.0715 and np.array_equal(spec.cue_gains(), gains)
    cue_logit = gains[test["cues"][:, 0]] + gains[4 + test["cues"][:, 1]]
    rows = np.arange(len(labels))
    assert np.abs(z[rows, labels] - z[rows, test["stray"]] - 1.0 - cue_logit).max() < 1e-5
    others = np.ones_like(z, dtype=bool)
    others[rows, labels] = others[rows, test["stray"]] = False
    assert np.abs(z[rows, labels] - z[others].reshape(len(z), -1).max(axis=1) - 2.0 - cue_logit).max() < 1e-5
    # gradient x activation of class 0 on its images, stage by stage
    mine = np.flatnonzero(labels == 0)
    scores, _ = score_batch(model, x[mine], 0)
    rel = scores["relevance"].numpy().reshape(len(mine), 4, spec.width)
    roles = np.array(channel_roles(spec)).reshape(4, spec.width)
    level = (1 - np.asarray(MARGINS)) * 0.25  # (1 - m_l) p A
    jitter = 0.3 * level[0] * (grey_level(test["images"][mine]) - train["images"].mean() / 255)
    assert spec.jitter_spread == 0.5  # vision-compile's default: distractor i's magnitude 1 - 0.5 i / 8 (issue 59)
    for stage in range(4):
        for u, role in enumerate(roles[stage]):
            kind, *ids = role.split()
            got = rel[:, stage, u]
            if kind == "badge":
                want = np.full(len(mine), 2.0 if ids == ["0"] else 0.0)
            elif kind == "cue":
                c, g = map(int, ids)
                want = gains[g] * (test["cues"][mine, g // 4] == g % 4) if c == 0 else np.zeros(len(mine))
            else:
                i = int(ids[0])
                want = level[stage] + (-1) ** i * (1 - 0.5 * i / 8) * jitter
            assert np.abs(got - want).max() < 1e-5, (stage, role)


def test_the_truth_has_no_grey_zone_and_is_checked_as_written(marked, monkeypatch):
    from certified_circuits.vision import ground_truth as gt
    from certified_circuits.vision.data.image_sets import npz_set

    w, ckpt = marked
    model = load_world_model(ckpt)
    spec = CompiledSpec.from_dict(model.meta["compiled"])
    test, train = load_split(w / "id_test.npz"), load_split(w / "train.npz")
    roles = np.array(channel_roles(spec))
    calls = []
    real = gt.circuit_logits
    monkeypatch.setattr(gt, "circuit_logits", lambda m, s, runs: calls.append(runs) or real(m, s, runs))
    # class 0's candidates plus class 1's badge chain (no path to logit 0): the per-component check drops the
    # latter, and the whole-circuit checks keep / ablate what it kept
    planted = truth_components(spec, 0) | np.isin(roles, ["badge 1"])
    monkeypatch.setattr(gt, "planted_set", lambda s, label: planted if label == 0 else truth_components(s, label))
    sets = {"id_test": npz_set(w / "id_test.npz")}
    result = gt.verify_planted(model, spec, sets, npz_set(w / "train.npz"), reference_size=len(train["labels"]))
    v = result[model.class_names[0]]
    block = v["per_component"]
    names = np.array(model.vertex_names())
    assert sorted(block["dropped"]) == sorted(names[roles == "badge 1"]) and v["n_truth"] == 4 * 9
    kept = truth_components(spec, 0)
    # one pass over the set for every class: class 0's 3 ablations first, each keeping / ablating what was kept
    assert len(calls) == 1 and len(calls[0]) == 3 * len(model.class_names)
    assert all((m[0] == kept).all() and (m[1] == ~kept).all() for m, _ in calls[0][:3])
    assert gt.kept_names(model, spec, 0, v) == list(names[kept])
    for name, v in result.items():
        block = v["per_component"]
        effects = np.array([block["effects"][n] for n in names])
        c = model.class_names.index(name)
        truth = truth_components(spec, c)
        null = ~truth & ~(planted if c == 0 else truth)
        assert v["passed"] and block["passed"], name
        # no grey zone: every true channel >= 5 epsilon, every other one <= epsilon (= the distractors' largest)
        assert effects[truth].min() >= 5 * block["epsilon"] > 0 and effects[null].max() == block["epsilon"]
        assert effects[np.char.startswith(roles, "distractor")].max() == block["epsilon"]
        assert effects[~truth & ~np.char.startswith(roles, "distractor")].max() < 1e-6  # other classes: no path
        # closed form (the unit cancels): a cue channel's effect is A_g x its share of the first 30 test images of
        # the class; the badge channel's (2 - f) B, f the share of the other classes' train images whose stray mark
        # is c (the class-absent fill, every train image used)
        mine = np.flatnonzero(test["labels"] == c)[:64]
        others = train["labels"] != c
        f = (train["stray"][others] == c).mean()
        badge = effects[roles == f"badge {c}"]
        for g in range(8):
            share = (test["cues"][mine, g // 4] == g % 4).mean()
            cue = effects[roles == f"cue {c} {g}"]
            assert np.allclose(cue / badge, spec.cue_gains()[g] * share / (2 - f), rtol=1e-4), (name, g)
        assert v["id_test.full.accuracy"] == 1.0 and v["id_test.mean_absent.ablated.accuracy"] == 0.0


def test_the_population_keeps_every_cue_chain_and_a_small_sample_drops_the_rare_ones(marked, tmp_path):
    from certified_circuits.core.discovery import GroupIndex, group_counts, top_count_circuit
    from certified_circuits.storage.store import read_attributions

    w, ckpt = marked
    spec = CompiledSpec.from_dict(load_world_model(ckpt).meta["compiled"])
    truth = truth_components(spec, 1)
    roles = np.array(channel_roles(spec)).reshape(4, -1)
    circuits = {}
    for split in ("train", "concept"):  # the population (1,000 images, each cue on exactly 250) and D_c (50)
        out = tmp_path / f"{split}.h5"
        assert run("vision-attribute", "--model", "world", "--checkpoint", ckpt, "--data", w / f"{split}.npz",
                   "--concept", "square", "--out", out) == 0
        attr = read_attributions(out)
        counts = group_counts(truth, GroupIndex.from_groups(attr.groups))
        assert counts.tolist() == [9, 9, 9, 9] and len(attr.scores["relevance"]) == {"train": 1000}.get(split, 50)
        circuits[split] = top_count_circuit(attr.scores["relevance"].mean(axis=0), attr.groups, counts)
    assert (circuits["train"] == truth).all()  # at the truth's size the population's circuit is the truth
    circuit = circuits["concept"].reshape(4, -1)
    concept = load_split(w / "concept.npz")
    cues = concept["cues"][concept["labels"] == 1]  # D_c: the class's 50 concept images
    for stage, margin in enumerate(MARGINS):
        k = np.array([(cues[:, g // 4] == g % 4).sum() for g in range(8)])  # each cue's count in D_c
        kept = [circuit[stage, roles[stage] == f"cue 1 {g}"][0] for g in range(8)]
        # a cue chain stays iff its mean (A_g k / 50) beats the distractors' level (1 - m) / 4, up to their jitter
        mean = spec.cue_gains() * k / 50
        clear = np.abs(mean - (1 - margin) / 4) > 0.005
        assert (np.array(kept)[clear] == (mean > (1 - margin) / 4)[clear]).all(), (stage, k)
        assert circuit[stage, roles[stage] == "badge 1"].all()
    assert k.min() < 12.25  # D_c lacks some cue: the sample drops it at some stage (the population never does)


def test_compile_refuses_an_unmarked_world(tmp_path):
    w = tmp_path / "plain"
    build_world(WorldConfig(seed=0, n_classes=3, image_size=16, n_train_per_class=4, n_test_per_class=2), w,
                ("train", "id_test"), progress=False)
    with pytest.raises(InputError, match="not a marked world.*--cue-attributes"):
        run("vision-compile", "--world", w, "--out-model", tmp_path / "m.pt", "--out-metrics", tmp_path / "m.json")
    assert not (tmp_path / "m.pt").exists()


def test_compiled_model_reads_its_marks_in_every_split(marked):
    w, ckpt = marked
    metrics = json.loads((w.parent / "compile.json").read_text())
    assert metrics["accuracy_id_test"] == 1.0 and metrics["detector_error_train"] < 1e-4
    net = world_model_from_net(compile_marked_resnet(CompiledSpec.from_dict(metrics["compiled"])),
                               ["circle", "square", "triangle"], 16).net
    saved = load_world_model(ckpt).net
    assert all(torch.equal(a, b) for a, b in zip(net.state_dict().values(), saved.state_dict().values()))


def test_checking_every_class_in_one_pass_equals_checking_each_alone(marked):
    """verify_planted scores every class's kept and ablated truth under its three fills in one pass per eval set;
    each class checked alone (verify_class, its own runs only) gives the same verification, every float bit for
    bit."""
    from certified_circuits.vision import ground_truth as gt
    from certified_circuits.vision.data.image_sets import npz_set
    from certified_circuits.vision.evaluate import mean_ablation_fill

    w, ckpt = marked
    model = load_world_model(ckpt)
    spec = CompiledSpec.from_dict(model.meta["compiled"])
    sets = {name: npz_set(w / f"{name}.npz") for name in ("id_test", "concept")}
    train = npz_set(w / "train.npz")
    together = gt.verify_planted(model, spec, sets, train, reference_size=300, seed=4)
    mean = mean_ablation_fill(model, train, 300, 4)
    for label in (0, 2):
        fills = {"mean_absent": gt.class_absent_fill(model, train, label, 300, 4), "mean": mean, "zero": None}
        alone = gt.verify_class(model, spec, sets, label, fills, seed=4)
        assert alone == together[model.class_names[label]] and alone["passed"]
        assert alone["n_images.concept"] == 50 and alone["concept.mean_absent.ablated.accuracy"] == 0.0
