"""Circuit sufficiency with a specificity control (paper Sec. 4 "Sufficiency", Eq. cACC).

For one class c and every circuit (all K x methods baseline / majority / certified), the model runs
with every non-circuit vertex zeroed at each block output:

- ``accuracy`` (the paper's CA(C_c, D)): share of the eval set's class-c images predicted as c
  (argmax over all classes);
- ``false_positive_rate`` (beyond the paper): share of a fixed, seeded sample of the same eval set's
  *other* classes' images that the circuit labels c -- a circuit that labels everything c would
  otherwise score accuracy 1;
- ``balanced_accuracy`` = (accuracy + 1 - false_positive_rate) / 2;
- ``per_example_correct``: the outcome of every evaluated image as a 0/1 string, the class's images
  first (1 = labelled c), then the negative sample (1 = not labelled c), for the per-example paired
  tests of :mod:`certified_circuits.analysis.paired_tests`;
- ``m``, ``m_empty``, ``m_full`` (faithfulness, :mod:`certified_circuits.analysis.faithfulness`): the mean
  over the class's images of the class logit minus the mean of the other logits, for the circuit, for
  the empty circuit (every vertex ablated) and for the full model. A circuit that keeps every vertex is
  the full model, so its ``m`` is ``m_full`` itself (f = 1 exactly).

All distinct masks of a class are evaluated together: masks are a batch dimension (``hooks.masked``),
so each image passes the shared prefix once. The unmasked model is reported as method ``full``. Batches
hold as many (mask, image) pairs as fit in free device memory unless ``max_batch`` is given.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Mapping

import numpy as np
import torch
from tqdm import tqdm

from certified_circuits.core.devices import batch_from_memory
from certified_circuits.analysis.paired_tests import OUTCOME_COLUMN, encode_outcomes
from certified_circuits.vision.data.image_sets import ImageSet
from certified_circuits.vision.networks.hooks import masked_logits
from certified_circuits.vision.networks.models import VisionModel

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

COLUMNS = ["experiment", "concept", "eval_set", "method", "k_target", "k_effective", "accuracy",
           "false_positive_rate", "balanced_accuracy", "n_images", "n_negatives", OUTCOME_COLUMN,
           "m", "m_empty", "m_full"]


def class_margin(logits: torch.Tensor, label: int) -> torch.Tensor:
    """Class logit minus the mean of the other logits, [...] from logits [..., C] (faithfulness' vision m)."""
    own = logits[..., label]
    return own - (logits.sum(-1) - own) / (logits.shape[-1] - 1)


#: Live tensors of the largest layer output per (mask, image) pair at peak during a masked forward pass:
#: the layer's input and output, a residual branch's identity and the masked copy of a block output.
PAIR_SAFETY = 4


@torch.no_grad()
def bytes_per_pair(model: VisionModel) -> int:
    """Estimated peak bytes of one (mask, image) pair in a masked forward pass (no gradients).

    One probe forward of a single image at the model's resolution on its device records the bytes of
    every leaf module's output; the estimate is ``PAIR_SAFETY x`` the largest (for ResNet-101 at 224 px
    4 x 3.2 MB, for ViT-B/16 4 x the 2.4 MB MLP hidden layer).
    """
    largest = [0]

    def record(_module: torch.nn.Module, _inputs: object, out: object) -> None:
        tensors = out if isinstance(out, (tuple, list)) else (out,)
        size = sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))
        largest[0] = max(largest[0], size)

    net = model.net
    leaves = [m for m in net.modules() if next(m.children(), None) is None]
    handles = [m.register_forward_hook(record) for m in leaves]
    dtype = next(net.parameters()).dtype
    was_training = net.training
    net.eval()  # the probe must not move BatchNorm statistics
    try:
        net(torch.zeros(1, 3, model.image_size, model.image_size, dtype=dtype, device=model.device))
    finally:
        net.train(was_training)
        for h in handles:
            h.remove()
    return PAIR_SAFETY * max(largest[0], 1)


def batch_pairs(model: VisionModel, n_pairs: int, max_batch: int | None = None, per_pair: int | None = None) -> int:
    """(mask, image) pairs per forward pass: ``max_batch`` when given, else what fits in free device memory.

    ``batch_from_memory(device, per_pair, cap=n_pairs)`` with ``per_pair`` = :func:`bytes_per_pair` unless
    given: half the free GPU memory, or on the CPU half of ``min(CPU_BUDGET_BYTES, available RAM)``
    (:mod:`certified_circuits.core.devices`).
    """
    if max_batch is not None:
        if isinstance(max_batch, bool) or int(max_batch) != max_batch or max_batch < 1:
            raise ValueError(f"max_batch={max_batch!r} is invalid: expected a positive number of (mask, image) pairs "
                             f"per pass, or None to choose it from free device memory")
        return int(max_batch)
    per_pair = bytes_per_pair(model) if per_pair is None else per_pair
    return batch_from_memory(model.device, per_pair, cap=max(1, int(n_pairs)))


@torch.no_grad()
def predictions_under_masks(model: VisionModel, imageset: ImageSet, idx: np.ndarray, masks: np.ndarray,
                            max_batch: int | None = None, progress: bool = False, desc: str = "masks",
                            fill: list[torch.Tensor] | None = None, label: int | None = None):
    """Predicted class int64 [M, len(idx)] of every image under every mask (masks bool/float [M, U]);
    with ``label``, also the class margin float64 [M, len(idx)] (:func:`class_margin`) as a second result.

    Batches hold at most ``max_batch`` (mask, image) pairs (default: as many as fit in free device
    memory, :func:`batch_pairs`): ``mc = min(M, max_batch)`` masks by ``max_batch // mc`` images."""
    masks_t = torch.as_tensor(np.asarray(masks), dtype=torch.float32, device=model.device)
    m = masks_t.shape[0]
    max_batch = batch_pairs(model, m * len(idx), max_batch)
    mc = max(1, min(m, max_batch))
    b = max(1, max_batch // mc)
    out = np.empty((m, len(idx)), dtype=np.int64)
    margin = np.empty((m, len(idx)), dtype=np.float64)
    for s0 in tqdm(range(0, len(idx), b), desc=desc, disable=not progress, leave=False):
        sl = slice(s0, min(len(idx), s0 + b))
        x = imageset.load(idx[sl], model).to(model.device)
        for m0 in range(0, m, mc):
            logits = masked_logits(model, x, masks_t[m0 : m0 + mc], fill)
            out[m0 : m0 + mc, sl] = logits.argmax(-1).cpu().numpy()
            if label is not None:
                margin[m0 : m0 + mc, sl] = class_margin(logits, label).double().cpu().numpy()
    return out if label is None else (out, margin)


@torch.no_grad()
def plain_predictions(model: VisionModel, imageset: ImageSet, idx: np.ndarray, batch_size: int = 256,
                      label: int | None = None):
    """Predicted class of the unmasked model [len(idx)]; with ``label``, also its class margin."""
    logits = [model.net(imageset.load(idx[s : s + batch_size], model).to(model.device))
              for s in range(0, len(idx), batch_size)]
    pred = np.concatenate([x.argmax(1).cpu().numpy() for x in logits]) if logits else np.zeros(0, np.int64)
    if label is None:
        return pred
    margin = (np.concatenate([class_margin(x, label).double().cpu().numpy() for x in logits]) if logits
              else np.zeros(0))
    return pred, margin


def negative_sample(labels: np.ndarray, label: int, n: int, seed: int, eval_set: str) -> np.ndarray:
    """Fixed seeded sample (sorted indices) of up to ``n`` images of classes other than ``label``."""
    others = np.flatnonzero(labels != label)
    rng = np.random.default_rng(np.random.SeedSequence([seed, int(label), zlib.crc32(eval_set.encode())]))
    if len(others) <= n:
        return others
    return np.sort(rng.choice(others, size=n, replace=False))


def evaluate_class(model: VisionModel, sets: Mapping[str, ImageSet], label: int, masks: Mapping[str, np.ndarray],
                   k_grid: np.ndarray, groups: np.ndarray, *, experiment: str, concept: str, n_negatives: int = 200,
                   seed: int = 0, max_batch: int | None = None, progress: bool = True,
                   fill: list[torch.Tensor] | None = None) -> "pd.DataFrame":
    """Tidy table of accuracy / FPR / balanced accuracy for every (eval set, method, K) + ``full``.

    ``fill``: None zeroes removed channels (the paper); block-mean tensors give mean ablation.
    ``max_batch``: (mask, image) pairs per forward pass; None chooses it from free device memory
    (:func:`batch_pairs`).

    masks: {method: bool [nK, U]}; eval sets without images of the class are skipped (warned on stderr)."""
    from certified_circuits.core.discovery import effective_k

    import sys

    methods = list(masks)
    stacked = np.concatenate([np.asarray(masks[mth], dtype=bool) for mth in methods])  # [nM*nK, U]
    if stacked.shape[1] != model.n_vertices:
        raise ValueError(f"masks have {stacked.shape[1]} components but {model.arch} has {model.n_vertices} vertices: "
                         f"were the votes computed from this model's attributions?")
    # the empty circuit (every vertex ablated) is evaluated with the others: m_empty of faithfulness
    uniq, inverse = np.unique(np.vstack([stacked, np.zeros((1, stacked.shape[1]), bool)]), axis=0,
                              return_inverse=True)
    inverse = inverse.reshape(-1)
    empty_u = inverse[-1]
    every_u = np.flatnonzero(uniq.all(1))   # a circuit of every vertex is the full model (f = 1 exactly)
    keff = {mth: effective_k(np.asarray(masks[mth], dtype=bool), groups) for mth in methods}
    nk = len(k_grid)
    per_pair = bytes_per_pair(model) if max_batch is None else None  # one probe for every eval set
    rows = []
    for name, iset in tqdm(list(sets.items()), desc="vision-evaluate", disable=not progress):
        pos = np.flatnonzero(iset.labels == label)
        if len(pos) == 0:
            print(f"vision-evaluate: eval set {name!r} has no images of class {concept}; skipped", file=sys.stderr)
            continue
        neg = negative_sample(iset.labels, label, n_negatives, seed, name)
        idx = np.concatenate([pos, neg])
        pairs = batch_pairs(model, len(uniq) * len(idx), max_batch, per_pair)
        pred_u, margin_u = predictions_under_masks(model, iset, idx, uniq, pairs, progress, desc=name, fill=fill,
                                                   label=label)
        hit = pred_u == label  # [Mu, N]
        acc_u = hit[:, : len(pos)].mean(1)
        fpr_u = hit[:, len(pos) :].mean(1) if len(neg) else np.full(len(uniq), np.nan)
        full_pred, full_margin = plain_predictions(model, iset, idx, label=label)
        full = full_pred == label
        m_full = float(full_margin[: len(pos)].mean())
        m_u = margin_u[:, : len(pos)].mean(1)
        m_u[every_u] = m_full
        m_empty = float(m_u[empty_u])
        full_fpr = full[len(pos) :].mean() if len(neg) else np.nan
        positive = np.arange(len(idx)) < len(pos)
        outcomes = encode_outcomes(np.vstack([full, hit]) == positive)  # correct: c on positives, not c on negatives
        rows.append((experiment, concept, name, "full", 1.0, 1.0, full[: len(pos)].mean(), full_fpr, len(pos), len(neg),
                     outcomes[0], m_full, m_empty, m_full))
        for j, mth in enumerate(methods):
            for i in range(nk):
                u = inverse[j * nk + i]
                rows.append((experiment, concept, name, mth, float(k_grid[i]), float(keff[mth][i]), acc_u[u], fpr_u[u],
                             len(pos), len(neg), outcomes[1 + u], float(m_u[u]), m_empty, m_full))
    import pandas as pd  # only now: a vision job reaches its first batch without pandas (start-up, issue 8)

    df = pd.DataFrame(rows, columns=[c for c in COLUMNS if c != "balanced_accuracy"])
    df = df.astype({"m": float, "m_empty": float, "m_full": float})
    df["accuracy"] = df["accuracy"].astype(float)
    df["false_positive_rate"] = df["false_positive_rate"].astype(float)
    df["balanced_accuracy"] = (df["accuracy"] + 1.0 - df["false_positive_rate"]) / 2.0
    return df[COLUMNS]


def mean_ablation_fill(model: VisionModel, reference: ImageSet, size: int, seed: int) -> list[torch.Tensor]:
    """Per-channel mean activations over a seeded sample of ``size`` reference images: what removed
    channels carry under ``--ablation mean`` (zero ablation, the paper's test, needs none).

    Args:
        model: the model whose circuit vertices are filled.
        reference: the reference images (the world's train split).
        size: images to average; a size above ``len(reference)`` uses every reference image (the CLI bounds it by
            :data:`certified_circuits.cli.stages.MAX_REFERENCE_SIZE`, since the images load as one batch).
        seed: the seed of the sample (drawn without replacement, in index order).

    Returns:
        One tensor of per-channel means per circuit vertex.
    """
    from certified_circuits.vision.networks.hooks import reference_activations

    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(len(reference), size=min(len(reference), size), replace=False))
    return reference_activations(model, reference.load(pick, model).to(model.device))


def evaluate_circuits(model: VisionModel, sets: Mapping[str, ImageSet], label: int, concept: str,
                      circuits: list, *, experiment: str, methods: list[str] | None = None, ablation: str = "zero",
                      fill: list[torch.Tensor] | None = None, n_negatives: int = 100, seed: int = 0,
                      max_batch: int | None = None, progress_log=None):
    """Sufficiency of every (votes, certificates) pair of one class: one tidy table for all scorers.

    For each pair, the baseline, majority and certified circuits of every K (``method_masks``), or the
    ``methods`` asked for, are evaluated with :func:`evaluate_class` on every eval set; rows carry the
    ablation and the setting of their circuits (:func:`~certified_circuits.core.contracts.setting_columns`).

    Args:
        model, sets, label: the model, the eval sets and the class's logit index.
        concept: the class name; every pair must have been certified for it (``attrs["concept"]``).
        circuits: ``[(Votes, Certificates), ...]``.
        experiment, n_negatives, seed, max_batch: as for :func:`evaluate_class`.
        methods: a subset of ``baseline``/``majority``/``certified`` (default: all).
        ablation, fill: ``zero``, or ``mean`` with the fill of :func:`mean_ablation_fill`.
        progress_log: ``callable(message)`` called after each pair (the CLI logs it).

    Returns:
        A pandas DataFrame, one row per (scorer, eval set, method, K) plus the unmasked ``full`` rows.

    Raises:
        ValueError: a pair certified for another concept, or an unknown method; before any evaluation.
    """
    import time

    from certified_circuits.core.certification import method_masks
    from certified_circuits.core.contracts import setting_columns

    for votes, _ in circuits:
        certified_for = str(votes.attrs.get("concept", ""))
        if certified_for and certified_for != concept:
            raise ValueError(f"--concept {concept!r} but the circuits of {votes.attrs.get('source', 'a votes file')} "
                             f"were certified for {certified_for!r}: pass that class's votes and certificates")
    all_masks = [method_masks(votes, certificates) for votes, certificates in circuits]
    if methods:
        unknown = set(methods) - set(all_masks[0])
        if unknown:
            raise ValueError(f"unknown methods {sorted(unknown)}; available: {sorted(all_masks[0])}")
        all_masks = [{m: masks[m] for m in methods} for masks in all_masks]
    frames = []
    for (votes, certificates), masks in zip(circuits, all_masks):
        start = time.perf_counter()
        frame = evaluate_class(model, sets, label, masks, np.asarray(votes.k_grid), np.asarray(votes.groups),
                               experiment=experiment, concept=concept, n_negatives=n_negatives, seed=seed,
                               max_batch=max_batch, fill=fill)
        frames.append(frame.assign(ablation=ablation, **setting_columns(votes, certificates)))
        if progress_log:
            progress_log(f"{concept} ({votes.attrs.get('scorer')}): {len(frame)} rows in {time.perf_counter() - start:.1f}s")
    import pandas as pd  # after the batches: the start-up before the first batch stays free of it

    return pd.concat(frames, ignore_index=True)
