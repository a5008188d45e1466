"""Training the embedded world model and filtering the natural-adversarial / anomaly OOD sets.

Training (``vision-train``): a small torchvision ResNet (``models.world_resnet``) on the world's
``train`` split, AdamW + one-cycle schedule, seeded (data order and initialisation), CPU.

Filtration (``vision-filter-ood``) mirrors how the paper's OOD sets were built (App. A.1):
ImageNet-A keeps natural images that a ResNet *misclassifies*; ImageNet-O keeps images of
categories outside the label set that a ResNet *confidently* assigns to an ImageNet class. Here the
filter model is the trained world model (or any other checkpoint passed in, e.g. one trained with
another seed, to mimic the paper's filter-with-ResNet-50 / evaluate-ResNet-101 setting).
"""

from __future__ import annotations

import time

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from certified_circuits.core.devices import training_kernels
from certified_circuits.vision.networks.architectures import WORLD_BLOCKS, WORLD_WIDTHS
from certified_circuits.vision.networks.models import VisionModel, world_model_from_net, world_resnet
from certified_circuits.vision.networks.planted import PlantedSpec, apply_masks, planted_widths


def _batches(n: int, bs: int):
    for s in range(0, n, bs):
        yield slice(s, min(n, s + bs))


@torch.no_grad()
@torch.no_grad()
def predict(model: VisionModel, images: np.ndarray, batch_size: int = 512) -> np.ndarray:
    """Softmax probabilities float32 [N, n_classes] of the (unmasked) model on uint8 images, computed
    on the model's device and returned on the host."""
    model.net.eval()
    out = []
    for sl in _batches(len(images), batch_size):
        x = model.normalize(torch.from_numpy(np.ascontiguousarray(images[sl])).to(model.device))
        out.append(torch.softmax(model.net(x), 1).cpu())
    if not out:
        return np.zeros((0, len(model.class_names)), np.float32)
    return torch.cat(out).numpy()


def train_world_model(
    images: np.ndarray, labels: np.ndarray, class_names: list[str], *, seed: int = 0, epochs: int = 10,
    batch_size: int = 128, lr: float = 3e-3, weight_decay: float = 5e-4,
    widths: tuple[int, ...] = WORLD_WIDTHS, blocks: tuple[int, ...] = WORLD_BLOCKS,
    stem_stride: int = 2, flip: bool = True, channel_dropout: float = 0.0, channel_dropout_mode: str = "mask",
    nonneg_classifier: bool = False, planted: PlantedSpec | None = None, progress: bool = True,
) -> tuple[VisionModel, dict]:
    """Train the world ResNet; returns the model (eval mode) and a small training log.

    ``channel_dropout`` / ``channel_dropout_mode``: channel dropout at every block output during
    training (0: off; see :class:`~.models.WorldResNet`).
    It makes sub-sets of each block's channels sufficient for the class (see docs/calibration.md); the
    trained model's eval-mode forward pass carries no dropout.

    ``nonneg_classifier``: keep the classifier weights non-negative (projected gradient descent). The
    logits are ``z_k = b_k + sum_j W_kj * abar_j`` with ``abar_j >= 0`` the spatial mean of layer4
    channel j (a ReLU output); with the constraint ``W >= 0`` (enforced as ``W <- |W|`` at
    initialisation and ``W <- max(W, 0)`` after every optimiser step) every layer4 channel is evidence
    *for* classes only, so zero-ablating a layer4 channel can never raise a logit: the layer4 channels
    cannot inhibit a class, and a circuit that removes them cannot disinhibit it (docs/calibration.md,
    third round). The bias ``b`` and all other parameters are unconstrained; the architecture, the
    state dict and the eval-mode forward pass are unchanged.

    ``planted``: train the planted world ResNet (:mod:`~.networks.planted`): ``widths`` must be
    ``planted_widths(planted)`` and the block masks are enforced by projection, ``W <- W * mask`` at
    initialisation and after every optimiser step, so every masked weight of the result is exactly 0 and
    class c's logit depends only on its own and the shared channels."""
    if images.ndim != 4 or images.dtype != np.uint8:
        raise ValueError(f"training images must be uint8 [N, H, W, 3], got {images.dtype} {images.shape}")
    if len(images) != len(labels) or len(images) == 0:
        raise ValueError(f"need as many labels as images (> 0), got {len(images)} images and {len(labels)} labels")
    if planted is not None:
        if planted.n_classes != len(class_names):
            raise ValueError(f"planted spec has {planted.n_classes} classes but the training data has {len(class_names)}")
        if tuple(widths) != planted_widths(planted):
            raise ValueError(f"widths {tuple(widths)} contradict the planted spec, which needs {planted_widths(planted)} "
                             f"(n_classes * own + shared per stage): leave the widths to the spec")
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    net = world_resnet(len(class_names), widths, blocks, stem_stride, channel_dropout, channel_dropout_mode)
    if nonneg_classifier:
        with torch.no_grad():
            net.fc.weight.abs_()
    if planted is not None:
        apply_masks(net, planted, tuple(blocks))
    model = world_model_from_net(net, class_names, images.shape[1])
    x_all = model.normalize(torch.from_numpy(images))
    y_all = torch.from_numpy(labels.astype(np.int64))
    n = len(x_all)
    steps = epochs * ((n + batch_size - 1) // batch_size)
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.25)
    loss_fn = nn.CrossEntropyLoss()
    t0 = time.perf_counter()
    log = {"epochs": epochs, "seed": seed, "channel_dropout": float(channel_dropout),
           "channel_dropout_mode": channel_dropout_mode, "nonneg_classifier": bool(nonneg_classifier), "loss": []}
    if planted is not None:
        log["planted"] = planted.to_dict()
    bar = tqdm(total=steps, desc="vision-train", disable=not progress)
    for _ in range(epochs):
        net.train()
        perm = torch.randperm(n, generator=gen)
        tot, cnt = 0.0, 0
        for sl in _batches(n, batch_size):
            idx = perm[sl]
            xb, yb = x_all[idx], y_all[idx]
            if flip:  # random horizontal flips (shapes and habitats are flip-invariant classes)
                f = torch.rand(len(idx), generator=gen) < 0.5
                xb = torch.where(f.view(-1, 1, 1, 1), xb.flip(3), xb)
            with training_kernels():  # oneDNN's weight-gradient kernel crashed here on an AVX2-only CPU
                loss = loss_fn(net(xb), yb)
                opt.zero_grad(set_to_none=True)
                loss.backward()
            opt.step()
            if nonneg_classifier:  # projection onto W >= 0
                with torch.no_grad():
                    net.fc.weight.clamp_(min=0.0)
            if planted is not None:  # projection onto the planted block structure
                apply_masks(net, planted, tuple(blocks))
            sched.step()
            tot += float(loss.detach()) * len(idx)
            cnt += len(idx)
            bar.update(1)
        log["loss"].append(tot / cnt)
        bar.set_postfix(loss=f"{tot / cnt:.3f}")
    bar.close()
    net.eval()
    log["train_seconds"] = time.perf_counter() - t0
    return model, log


def accuracy(model: VisionModel, images: np.ndarray, labels: np.ndarray) -> float:
    """Top-1 accuracy of the unmasked model (NaN for an empty set)."""
    if len(images) == 0:
        return float("nan")
    return float((predict(model, images).argmax(1) == labels).mean())


def filter_adversarial(model: VisionModel, pool: dict[str, np.ndarray], max_per_class: int) -> dict[str, np.ndarray]:
    """Keep pool images the model misclassifies (ImageNet-A filtration), at most ``max_per_class`` per
    class, in pool order (deterministic)."""
    pred = predict(model, pool["images"]).argmax(1)
    labels = pool["labels"].astype(np.int64)
    wrong = pred != labels
    keep = _cap_per_class(np.flatnonzero(wrong), labels, max_per_class)
    return _subset(pool, keep, labels[keep], "adversarial")


def filter_anomaly(model: VisionModel, pool: dict[str, np.ndarray], max_per_class: int, min_confidence: float) -> dict[str, np.ndarray]:
    """Keep novel-shape images the model assigns to a known class with softmax >= ``min_confidence``
    (ImageNet-O filtration), labelled with that class, at most ``max_per_class`` per class."""
    prob = predict(model, pool["images"])
    pred, conf = prob.argmax(1), prob.max(1)
    keep = _cap_per_class(np.flatnonzero(conf >= min_confidence), pred, max_per_class)
    out = _subset(pool, keep, pred[keep], "anomaly")
    out["confidence"] = conf[keep].astype(np.float32)
    return out


def _cap_per_class(candidates: np.ndarray, labels: np.ndarray, cap: int) -> np.ndarray:
    keep, counts = [], {}
    for i in candidates:
        c = int(labels[i])
        if counts.get(c, 0) < cap:
            counts[c] = counts.get(c, 0) + 1
            keep.append(i)
    return np.asarray(keep, dtype=np.int64)


def _subset(pool: dict[str, np.ndarray], keep: np.ndarray, labels: np.ndarray, name: str) -> dict[str, np.ndarray]:
    n = len(pool["images"])
    out = {k: (v[keep] if (isinstance(v, np.ndarray) and v.ndim >= 1 and len(v) == n and k not in ("class_names", "shape_names")) else v)
           for k, v in pool.items()}
    out["labels"] = labels.astype(np.int16)
    out["ids"] = np.array([f"{name}/{s.split('/', 1)[-1]}" for s in pool["ids"][keep]]) if len(keep) else np.array([], dtype="<U1")
    if len(keep) == 0:
        out["images"] = pool["images"][:0]
    return out
