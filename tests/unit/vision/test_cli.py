"""End to end through the vision subcommands on a tiny world, with the engine's votes/certify in between."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pandas as pd
import pytest

from certified_circuits.cli import vision as vcli
from certified_circuits.vision.networks import loading

SUBCOMMANDS = ["vision-world", "vision-train", "vision-filter-ood", "vision-attribute", "vision-evaluate",
               "vision-select-classes", "vision-imagenet-c", "vision-prepare-oodcv"]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="certified-circuits")
    vcli.STAGES.register(p.add_subparsers(dest="cmd"))
    return p


def run(*argv: str) -> int:
    args = parser().parse_args([str(a) for a in argv])
    return args.func(args)


@pytest.mark.parametrize("cmd", SUBCOMMANDS)
def test_help(cmd, capsys):
    with pytest.raises(SystemExit) as e:
        parser().parse_args([cmd, "--help"])
    assert e.value.code == 0
    assert "usage" in capsys.readouterr().out


def test_end_to_end(tmp_path):
    from certified_circuits.core.certification import certify_votes
    from certified_circuits.core.smoothing import compute_votes
    from certified_circuits.storage.store import read_attributions, write_certificates, write_votes

    w = tmp_path / "world"
    assert run("vision-world", "--out", w, "--seed", 1, "--n-classes", 3, "--n-train-per-class", 16,
               "--n-concept-per-class", 8, "--n-test-per-class", 4, "--n-ood-per-class", 4, "--n-pool-per-class", 6,
               "--n-anomaly-pool", 30) == 0
    assert run("vision-train", "--world", w, "--out-model", tmp_path / "m.pt", "--out-metrics", tmp_path / "train.json",
               "--epochs", 1, "--widths", 4, 8, 8, 8, "--threads", 1) == 0
    tm = json.loads((tmp_path / "train.json").read_text())
    assert {"accuracy_id_test", "accuracy_context_shift", "accuracy_corruption"} <= set(tm)
    assert run("vision-filter-ood", "--world", w, "--checkpoint", tmp_path / "m.pt", "--out-adversarial",
               tmp_path / "adv.npz", "--out-anomaly", tmp_path / "ano.npz", "--out-metrics", tmp_path / "ood.json",
               "--min-confidence", 0.0) == 0
    om = json.loads((tmp_path / "ood.json").read_text())
    if om["n_adversarial"]:
        assert om["accuracy_adversarial"] == 0.0  # kept only where the filter model errs
    assert om["n_anomaly"] > 0 and om["accuracy_anomaly"] == 1.0  # labelled with the model's prediction

    h5 = tmp_path / "attr" / "circle.h5"
    assert run("vision-attribute", "--model", "world", "--checkpoint", tmp_path / "m.pt", "--data", w / "concept.npz",
               "--concept", "circle", "--out", h5, "--counterfactual", w / "counterfactual.npz", "--batch-size", 3,
               "--attr", "config_digest=abc") == 0
    att = read_attributions(h5)
    assert set(att.scores) == {"relevance", "activation", "rank"}
    assert att.scores["relevance"].shape == (8, 28) and att.groups.tolist() == [0] * 4 + [1] * 8 + [2] * 8 + [3] * 8
    assert att.example_ids[0] == "concept/000000" and att.names[4] == "layer2.0"
    assert att.extras["spurious_index"].shape == (28,) and att.extras["top_examples"].shape == (28, 8)
    assert ((att.extras["spurious_index"] >= 0) & (att.extras["spurious_index"] <= 1)).all()
    assert att.attrs["concept"] == "circle" and att.attrs["split"] == "concept" and att.attrs["config_digest"] == "abc"

    k_grid = np.array([0.25, 0.5, 1.0])
    votes = compute_votes(att.scores["relevance"], att.groups, k_grid, p_del=0.6, n0=20, n=50, seed=0)
    write_votes(tmp_path / "v.h5", votes)
    write_certificates(tmp_path / "c.h5", certify_votes(votes, tau=0.6, alpha=0.1))
    out = tmp_path / "eval" / "circle.csv"
    assert run("vision-evaluate", "--model", "world", "--checkpoint", tmp_path / "m.pt", "--circuits", tmp_path / "v.h5",
               tmp_path / "c.h5", "--concept", "circle", "--eval-set", f"id={w / 'concept.npz'}",
               "--eval-set", f"context_shift={w / 'context_shift.npz'}", "--eval-set", f"adversarial={tmp_path / 'adv.npz'}",
               "--out", out, "--n-negatives", 5) == 0
    df = pd.read_csv(out)
    assert {"id", "context_shift"} <= set(df.eval_set)
    idrows = df[df.eval_set == "id"]
    assert len(idrows) == 1 + 3 * 3 and set(idrows.method) == {"full", "baseline", "majority", "certified"}
    assert df.accuracy.between(0, 1).all() and df.false_positive_rate.between(0, 1).all()
    assert (idrows[idrows.method == "baseline"].k_effective.to_numpy() <= k_grid + 0.25).all()

    # issue 21: circuits of one class evaluated under another class's name are refused before any work
    votes.attrs["concept"] = "square"
    write_votes(tmp_path / "v_square.h5", votes)
    wrong = tmp_path / "eval" / "wrong.csv"
    with pytest.raises(ValueError, match=r"--concept 'circle' but .*v_square.h5 holds the circuits of 'square'"):
        run("vision-evaluate", "--model", "world", "--checkpoint", tmp_path / "m.pt", "--circuits",
            tmp_path / "v_square.h5", tmp_path / "c.h5", "--concept", "circle", "--eval-set", f"id={w / 'concept.npz'}",
            "--out", wrong)
    assert not wrong.exists()


def test_clear_errors(tmp_path, capsys):
    with pytest.raises(FileNotFoundError, match="vision-world"):
        run("vision-train", "--world", tmp_path, "--out-model", tmp_path / "m.pt", "--out-metrics", tmp_path / "x.json")
    with pytest.raises(SystemExit):  # refused where it enters: argparse names the option and the range
        run("vision-world", "--out", tmp_path / "w", "--habitat-rate", 2)
    assert "argument --habitat-rate: must be a number in [0, 1] (a probability), got 2.0" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # argparse: --eval-set expects NAME=PATH
        parser().parse_args(["vision-evaluate", "--circuits", __file__, __file__, "--concept", "c", "--eval-set",
                             "nopath", "--out", str(tmp_path / "e.csv")])
    with pytest.raises(ValueError, match="class-index"):
        run("vision-attribute", "--model", "resnet50", "--data", tmp_path, "--concept", "n01440764", "--out", tmp_path / "a.h5")


def test_select_classes_cli(tmp_path):
    for i in range(7):
        (tmp_path / "val" / f"n{i:08d}").mkdir(parents=True)
    assert run("vision-select-classes", "--data", tmp_path / "val", "--n", 3, "--seed", 1, "--out", tmp_path / "c.txt") == 0
    lines = (tmp_path / "c.txt").read_text().split()
    assert len(lines) == 3 and lines == sorted(lines)


@pytest.mark.slow
def test_paper_scale_cli_on_fake_imagenet(tmp_path):
    """ResNet-50 (random weights saved to a file) through vision-attribute and vision-evaluate on a fake
    ImageNet tree with a LOC_synset_mapping.txt: 3,840 vertices, labels via wnids."""
    import torch
    from PIL import Image

    from certified_circuits.core.certification import certify_votes
    from certified_circuits.core.smoothing import compute_votes
    from certified_circuits.storage.store import read_attributions, write_certificates, write_votes
    from certified_circuits.vision.networks.classifiers import build_paper_model

    wnids = ["n01440764", "n01443537", "n01484850"]
    (tmp_path / "LOC_synset_mapping.txt").write_text(  # 1,000 lines, one per logit of the head
        "".join(f"{w} class {i}\n" for i, w in enumerate(wnids + [f"n{90000000 + i:08d}" for i in range(1000 - len(wnids))])))
    rng = np.random.default_rng(0)
    for w in wnids:
        (tmp_path / "val" / w).mkdir(parents=True)
        for i in range(2):
            Image.fromarray(rng.integers(0, 256, (60, 80, 3), dtype=np.uint8)).save(tmp_path / "val" / w / f"{i}.JPEG")
    torch.manual_seed(0)
    torch.save(build_paper_model("resnet50", pretrained=False).net.state_dict(), tmp_path / "r50.pth")
    common = ["--model", "resnet50", "--weights", tmp_path / "r50.pth", "--class-index", tmp_path / "LOC_synset_mapping.txt"]
    # an OOD set lacking the class (ImageNet-A/O cover 200 classes) gets a valid empty file via --also
    (tmp_path / "ood" / wnids[0]).mkdir(parents=True)
    Image.fromarray(rng.integers(0, 256, (60, 80, 3), dtype=np.uint8)).save(tmp_path / "ood" / wnids[0] / "0.JPEG")
    assert run("vision-attribute", *common, "--data", tmp_path / "val", "--concept", wnids[1], "--out", tmp_path / "a.h5",
               "--also", "ood", tmp_path / "ood", tmp_path / "ood.h5") == 0
    empty = read_attributions(tmp_path / "ood.h5")
    assert empty.n_examples == 0 and empty.scores["relevance"].shape == (0, 3840) and empty.attrs["split"] == "ood"
    att = read_attributions(tmp_path / "a.h5")
    assert att.scores["relevance"].shape == (2, 3840) and att.attrs["class_index"] == 1
    assert att.example_ids == [f"{wnids[1]}/0.JPEG", f"{wnids[1]}/1.JPEG"]
    votes = compute_votes(att.scores["relevance"], att.groups, np.array([0.3, 1.0]), p_del=0.6, n0=10, n=20, seed=0)
    write_votes(tmp_path / "v.h5", votes)
    write_certificates(tmp_path / "c.h5", certify_votes(votes, tau=0.6, alpha=0.1))
    assert run("vision-evaluate", *common, "--circuits", tmp_path / "v.h5", tmp_path / "c.h5",
               "--concept", wnids[1], "--eval-set", f"id={tmp_path / 'val'}", "--n-negatives", 2,
               "--methods", "baseline", "certified", "--out", tmp_path / "e.csv") == 0
    df = pd.read_csv(tmp_path / "e.csv")
    assert len(df) == 1 + 2 * 2 and (df.n_images == 2).all() and (df.n_negatives == 2).all()
    with pytest.raises(SystemExit):  # a weights file that does not exist is rejected before any work
        run("vision-attribute", "--model", "resnet50", "--weights", tmp_path / "nowhere.pth", "--class-index",
            tmp_path / "LOC_synset_mapping.txt", "--data", tmp_path / "val", "--concept", wnids[0], "--out", tmp_path / "b.h5")


def test_batch_serves_several_classes_in_one_process(tmp_path, monkeypatch, caplog):
    """``certified-circuits batch``: the same files as one process per class, the model built once,
    every invocation checked before the first runs, and one job record holding every output."""
    from certified_circuits.cli import main as cli
    from certified_circuits.storage.store import read_attributions

    w = tmp_path / "world"
    assert run("vision-world", "--out", w, "--seed", 2, "--n-classes", 3, "--n-train-per-class", 8,
               "--n-concept-per-class", 6, "--n-test-per-class", 2, "--n-ood-per-class", 2, "--n-pool-per-class", 2,
               "--n-anomaly-pool", 4) == 0
    assert run("vision-train", "--world", w, "--out-model", tmp_path / "m.pt", "--out-metrics", tmp_path / "t.json",
               "--epochs", 1, "--widths", 4, 4, 4, 4) == 0

    def invocation(concept: str, out_dir: str) -> list[str]:
        return ["vision-attribute", "--model", "world", "--checkpoint", str(tmp_path / "m.pt"), "--data",
                str(w / "concept.npz"), "--concept", concept, "--out", str(tmp_path / out_dir / f"{concept}.h5"),
                "--also", "context_shift", str(w / "context_shift.npz"), str(tmp_path / out_dir / f"{concept}.cs.h5")]

    concepts = ["circle", "square", "triangle"]
    for concept in concepts:
        assert cli.main(invocation(concept, "single")) == 0
    loading.LOADED.clear()
    monkeypatch.setenv("CC_TRACKING_DIR", str(tmp_path / "tracking"))
    caplog.set_level("INFO")
    batch = ["batch"] + [t for i, c in enumerate(concepts) for t in ([] if i == 0 else ["::"]) + invocation(c, "batch")]
    assert cli.main(batch) == 0
    assert len(loading.LOADED) == 1
    assert sum("model already loaded" in r.message for r in caplog.records) == len(concepts) - 1
    for concept in concepts:
        for suffix in ("", ".cs"):
            one = read_attributions(tmp_path / "single" / f"{concept}{suffix}.h5")
            many = read_attributions(tmp_path / "batch" / f"{concept}{suffix}.h5")
            assert one.example_ids == many.example_ids and one.attrs["concept"] == many.attrs["concept"] == concept
            for scorer in one.scores:
                np.testing.assert_array_equal(one.scores[scorer], many.scores[scorer])
    records = list((tmp_path / "tracking" / "pending").glob("*.json"))
    assert len(records) == 1
    record = json.loads(records[0].read_text())
    assert record["stage"] == "batch" and record["params"]["concept"] == "circle :: square :: triangle"
    assert sorted(record["outputs"]) == sorted(str((tmp_path / "batch" / f"{c}{s}.h5").resolve())
                                               for c in concepts for s in ("", ".cs"))


def test_batch_checks_every_invocation_before_running_any(tmp_path, capsys):
    from certified_circuits.cli import main as cli

    good = ["vision-world", "--out", str(tmp_path / "w"), "--n-classes", "2"]
    with pytest.raises(SystemExit) as stop:
        cli.main(["batch", *good, "::", "vision-world", "--n-classes", "nine"])
    assert stop.value.code == 2 and not (tmp_path / "w").exists()
    for argv in (["batch"], ["batch", *good, "::"], ["batch", "::", *good], ["batch", "batch", *good]):
        with pytest.raises(SystemExit) as stop:
            cli.main(argv)
        assert stop.value.code == 2
        assert "batch: error:" in capsys.readouterr().err
    assert cli.split_batch(["a", "1", "::", "b"]) == [["a", "1"], ["b"]]
