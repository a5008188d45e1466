"""Batched masked evaluation equals a per-mask loop; the tidy table's numbers by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from certified_circuits.analysis.evaluation import read_sufficiency
from certified_circuits.analysis.paired_tests import OUTCOME_COLUMN, decode_outcomes
from certified_circuits.vision.data.image_sets import ImageSet
from certified_circuits.vision.evaluate import (COLUMNS, evaluate_class, negative_sample, predictions_under_masks,
                                                )


def make_set(n: int, labels: np.ndarray, seed: int = 0) -> ImageSet:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, 32, 32, generator=g)
    return ImageSet(labels=labels, ids=np.array([f"img{i}" for i in range(n)]),
                    loader=lambda idx, model: x[torch.as_tensor(idx)], source="synthetic")


def loop_predictions(model, x: torch.Tensor, masks: np.ndarray) -> np.ndarray:
    """Reference: one plain forward per mask with hooks that zero the non-circuit channels."""
    out = []
    for m in masks:
        parts = np.split(m, np.cumsum(model.widths)[:-1])
        handles = []
        for name, keep in zip(model.hook_names, parts):
            k = torch.as_tensor(keep, dtype=torch.float32).view(1, -1, 1, 1)
            handles.append(model.net.get_submodule(name).register_forward_hook(lambda _m, _i, o, k=k: o * k))
        with torch.no_grad():
            out.append(model.net(x).argmax(1).numpy())
        for h in handles:
            h.remove()
    return np.stack(out)


def test_batched_equals_loop(tiny_model, rng):
    iset = make_set(9, rng.integers(0, 4, 9))
    masks = rng.uniform(size=(11, tiny_model.n_vertices)) < 0.5
    masks[0] = True
    idx = np.arange(9)
    ref = loop_predictions(tiny_model, iset.load(idx, tiny_model), masks)
    for max_batch in (4096, 20, 3):  # all masks at once, mask chunks, one image per pass
        got = predictions_under_masks(tiny_model, iset, idx, masks, max_batch=max_batch)
        np.testing.assert_array_equal(got, ref)


def test_evaluate_class_table(tiny_model, rng, tmp_path):
    labels = np.repeat(np.arange(4), 6)
    iset = make_set(24, labels, seed=1)
    k_grid = np.array([0.25, 0.5, 1.0])
    groups = tiny_model.groups().numpy()
    base = np.stack([rng.uniform(size=tiny_model.n_vertices) < k for k in k_grid])
    base[-1] = True
    cert = base & (rng.uniform(size=base.shape) < 0.7)
    masks = {"baseline": base, "certified": cert, "majority": base.copy()}
    df = evaluate_class(tiny_model, {"id": iset, "empty": make_set(3, np.zeros(3, int) + 3)}, 1, masks, k_grid, groups,
                        experiment="t", concept="b", n_negatives=10, seed=0, progress=False)
    assert list(df.columns) == COLUMNS
    assert set(df.eval_set) == {"id", "empty"} or set(df.eval_set) == {"id"}
    df = df[df.eval_set == "id"]
    assert len(df) == 1 + 3 * 3
    neg = negative_sample(labels, 1, 10, 0, "id")
    assert len(neg) == 10 and (labels[neg] != 1).all()
    np.testing.assert_array_equal(neg, negative_sample(labels, 1, 10, 0, "id"))
    pos = np.flatnonzero(labels == 1)
    x = iset.load(np.concatenate([pos, neg]), tiny_model)
    for method, m in masks.items():
        ref = loop_predictions(tiny_model, x, m) == 1
        rows = df[df.method == method].sort_values("k_target")
        np.testing.assert_allclose(rows.accuracy, ref[:, :6].mean(1))
        np.testing.assert_allclose(rows.false_positive_rate, ref[:, 6:].mean(1))
        np.testing.assert_allclose(rows.balanced_accuracy, (ref[:, :6].mean(1) + 1 - ref[:, 6:].mean(1)) / 2)
        # per-example outcomes: positives correct when labelled 1, negatives when not
        outcomes = np.stack([decode_outcomes(t) for t in rows[OUTCOME_COLUMN]])
        np.testing.assert_array_equal(outcomes, np.hstack([ref[:, :6], ~ref[:, 6:]]))
        keff = [np.mean([m[i][groups == g].mean() for g in range(4)]) for i in range(3)]
        np.testing.assert_allclose(rows.k_effective, keff)
    full = df[df.method == "full"].iloc[0]
    with torch.no_grad():
        pf = tiny_model.net(x).argmax(1).numpy() == 1
    assert full.accuracy == pytest.approx(pf[:6].mean()) and full.n_images == 6 and full.n_negatives == 10
    # the all-ones circuit at K = 1 equals the full model
    top = df[(df.method == "baseline") & (df.k_target == 1.0)].iloc[0]
    assert top.accuracy == full.accuracy and top.false_positive_rate == full.false_positive_rate
    from certified_circuits.storage.atomic import write_csv

    out = write_csv(tmp_path / "t" / "eval.csv", df)
    pd.testing.assert_frame_equal(pd.read_csv(out, dtype={OUTCOME_COLUMN: str}), df.reset_index(drop=True),
                                  check_dtype=False)
    assert read_sufficiency([out])[OUTCOME_COLUMN].str.len().eq(16).all()  # leading zeros survive the CSV


def test_mask_width_mismatch_is_explained(tiny_model):
    iset = make_set(2, np.array([0, 1]))
    with pytest.raises(ValueError, match="vertices"):
        evaluate_class(tiny_model, {"id": iset}, 0, {"baseline": np.ones((1, 5), bool)}, np.array([1.0]),
                       np.zeros(5, int), experiment="t", concept="a", progress=False)


def test_mean_ablation_keeps_kept_channels_and_fills_removed_ones(tiny_model, rng):
    from certified_circuits.vision.networks.hooks import masked_logits, reference_activations

    x = tiny_model.normalize(torch.from_numpy(rng.integers(0, 256, (6, 32, 32, 3), dtype=np.uint8)))
    reference = tiny_model.normalize(torch.from_numpy(rng.integers(0, 256, (10, 32, 32, 3), dtype=np.uint8)))
    fill = reference_activations(tiny_model, reference, batch_size=3)
    assert fill[-1].ndim == 3 and fill[-1].shape[0] == 8  # layer4 map [C, H, W] of one image
    keep_all = torch.ones(1, tiny_model.n_vertices)
    with torch.no_grad():
        plain = tiny_model.net(x)
    torch.testing.assert_close(masked_logits(tiny_model, x, keep_all, fill)[0], plain)
    # removing everything: every image sees the reference mean at layer4, so all logits are equal
    # to the classifier applied to that mean map
    removed = masked_logits(tiny_model, x, torch.zeros(1, tiny_model.n_vertices), fill)[0]
    expected = tiny_model.net.fc(fill[-1].mean(dim=(1, 2)))
    torch.testing.assert_close(removed, expected.expand_as(removed))
    # zero ablation of everything gives the classifier's bias instead
    zeroed = masked_logits(tiny_model, x, torch.zeros(1, tiny_model.n_vertices))[0]
    torch.testing.assert_close(zeroed, tiny_model.net.fc.bias.expand_as(zeroed))
