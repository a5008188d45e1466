"""World-model training is seeded; OOD filtration keeps exactly what the paper's filtrations keep."""

from __future__ import annotations

import numpy as np
import torch

from certified_circuits.vision.train import filter_adversarial, filter_anomaly, predict, train_world_model
from certified_circuits.vision.data.world import make_split


def test_training_is_deterministic(tiny_cfg):
    tr = make_split(tiny_cfg, "train")
    kw = dict(epochs=1, batch_size=16, widths=(4, 4, 4, 4), progress=False)
    a, log_a = train_world_model(tr["images"], tr["labels"], tiny_cfg.class_names(), seed=5, **kw)
    b, _ = train_world_model(tr["images"], tr["labels"], tiny_cfg.class_names(), seed=5, **kw)
    c, _ = train_world_model(tr["images"], tr["labels"], tiny_cfg.class_names(), seed=6, **kw)
    sa, sb, sc = a.net.state_dict(), b.net.state_dict(), c.net.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)
    assert len(log_a["loss"]) == 1 and not a.net.training


def test_filtration(tiny_cfg, tiny_model):
    pool = make_split(tiny_cfg, "adversarial_pool")
    prob = predict(tiny_model, pool["images"])
    pred = prob.argmax(1)
    adv = filter_adversarial(tiny_model, pool, max_per_class=3)
    wrong = np.flatnonzero(pred != pool["labels"])
    # first <= 3 misclassified images of every class, in pool order
    expect = [i for c in range(4) for i in wrong[pool["labels"][wrong] == c][:3]]
    assert sorted(adv["ids"].tolist()) == sorted(f"adversarial/{pool['ids'][i].split('/', 1)[1]}" for i in expect)
    assert (predict(tiny_model, adv["images"]).argmax(1) != adv["labels"]).all()
    ano_pool = make_split(tiny_cfg, "anomaly_pool")
    ano = filter_anomaly(tiny_model, ano_pool, max_per_class=100, min_confidence=0.3)
    p = predict(tiny_model, ano_pool["images"])
    assert len(ano["labels"]) == int((p.max(1) >= 0.3).sum())
    np.testing.assert_array_equal(ano["labels"], predict(tiny_model, ano["images"]).argmax(1))
    assert (ano["confidence"] >= 0.3).all()
    none = filter_anomaly(tiny_model, ano_pool, max_per_class=5, min_confidence=1.01)
    assert len(none["labels"]) == 0 and none["images"].shape[1:] == (32, 32, 3)
