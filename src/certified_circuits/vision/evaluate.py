"""Circuit sufficiency with a specificity control (paper Sec. 4 "Sufficiency", Eq. cACC).

For one class c and every circuit (all K x methods baseline / majority / certified), the model runs
with every non-circuit vertex zeroed at each block output:

- ``accuracy`` (the paper's CA(C_c, D)): share of the eval set's class-c images predicted as c
  (argmax over all classes);
- ``false_positive_rate`` (beyond the paper): share of a fixed, seeded sample of the same eval set's
  *other* classes' images that the circuit labels c -- a circuit that labels everything c would
  otherwise score accuracy 1;
- ``balanced_accuracy`` = (accuracy + 1 - false_positive_rate) / 2.

All distinct masks of a class are evaluated together: masks are a batch dimension (``hooks.masked``),
so each image passes the shared prefix once. The unmasked model is reported as method ``full``.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from .data import ImageSet
from .hooks import masked_logits
from .models import VisionModel

COLUMNS = ["experiment", "concept", "eval_set", "method", "k_target", "k_effective", "accuracy",
           "false_positive_rate", "balanced_accuracy", "n_images", "n_negatives"]


@torch.no_grad()
def predictions_under_masks(model: VisionModel, imageset: ImageSet, idx: np.ndarray, masks: np.ndarray,
                            max_batch: int = 1024, progress: bool = False, desc: str = "masks",
                            fill: list[torch.Tensor] | None = None) -> np.ndarray:
    """Predicted class int64 [M, len(idx)] of every image under every mask (masks bool/float [M, U]).

    Batches hold at most ``max_batch`` (mask, image) pairs."""
    masks_t = torch.as_tensor(np.asarray(masks), dtype=torch.float32, device=model.device)
    m = masks_t.shape[0]
    mc = max(1, min(m, max_batch))
    b = max(1, max_batch // mc)
    out = np.empty((m, len(idx)), dtype=np.int64)
    for s0 in tqdm(range(0, len(idx), b), desc=desc, disable=not progress, leave=False):
        sl = slice(s0, min(len(idx), s0 + b))
        x = imageset.load(idx[sl], model).to(model.device)
        for m0 in range(0, m, mc):
            logits = masked_logits(model, x, masks_t[m0 : m0 + mc], fill)
            out[m0 : m0 + mc, sl] = logits.argmax(-1).cpu().numpy()
    return out


@torch.no_grad()
def plain_predictions(model: VisionModel, imageset: ImageSet, idx: np.ndarray, batch_size: int = 256) -> np.ndarray:
    out = [model.net(imageset.load(idx[s : s + batch_size], model).to(model.device)).argmax(1).cpu().numpy()
           for s in range(0, len(idx), batch_size)]
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def negative_sample(labels: np.ndarray, label: int, n: int, seed: int, eval_set: str) -> np.ndarray:
    """Fixed seeded sample (sorted indices) of up to ``n`` images of classes other than ``label``."""
    others = np.flatnonzero(labels != label)
    rng = np.random.default_rng(np.random.SeedSequence([seed, int(label), zlib.crc32(eval_set.encode())]))
    if len(others) <= n:
        return others
    return np.sort(rng.choice(others, size=n, replace=False))


def evaluate_class(model: VisionModel, sets: Mapping[str, ImageSet], label: int, masks: Mapping[str, np.ndarray],
                   k_grid: np.ndarray, groups: np.ndarray, *, experiment: str, concept: str, n_negatives: int = 200,
                   seed: int = 0, max_batch: int = 1024, progress: bool = True,
                   fill: list[torch.Tensor] | None = None) -> pd.DataFrame:
    """Tidy table of accuracy / FPR / balanced accuracy for every (eval set, method, K) + ``full``.

    ``fill``: None zeroes removed channels (the paper); block-mean tensors give mean ablation.

    masks: {method: bool [nK, U]}; eval sets without images of the class are skipped (warned on stderr)."""
    from ..discovery import effective_k

    import sys

    methods = list(masks)
    stacked = np.concatenate([np.asarray(masks[mth], dtype=bool) for mth in methods])  # [nM*nK, U]
    if stacked.shape[1] != model.n_vertices:
        raise ValueError(f"masks have {stacked.shape[1]} components but {model.arch} has {model.n_vertices} vertices: "
                         f"were the votes computed from this model's attributions?")
    uniq, inverse = np.unique(stacked, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    keff = {mth: effective_k(np.asarray(masks[mth], dtype=bool), groups) for mth in methods}
    nk = len(k_grid)
    rows = []
    for name, iset in tqdm(list(sets.items()), desc="vision-evaluate", disable=not progress):
        pos = np.flatnonzero(iset.labels == label)
        if len(pos) == 0:
            print(f"vision-evaluate: eval set {name!r} has no images of class {concept}; skipped", file=sys.stderr)
            continue
        neg = negative_sample(iset.labels, label, n_negatives, seed, name)
        idx = np.concatenate([pos, neg])
        pred_u = predictions_under_masks(model, iset, idx, uniq, max_batch, progress, desc=name, fill=fill)
        hit = pred_u == label  # [Mu, N]
        acc_u = hit[:, : len(pos)].mean(1)
        fpr_u = hit[:, len(pos) :].mean(1) if len(neg) else np.full(len(uniq), np.nan)
        full = plain_predictions(model, iset, idx) == label
        full_fpr = full[len(pos) :].mean() if len(neg) else np.nan
        rows.append((experiment, concept, name, "full", 1.0, 1.0, full[: len(pos)].mean(), full_fpr, len(pos), len(neg)))
        for j, mth in enumerate(methods):
            for i in range(nk):
                u = inverse[j * nk + i]
                rows.append((experiment, concept, name, mth, float(k_grid[i]), float(keff[mth][i]), acc_u[u], fpr_u[u], len(pos), len(neg)))
    df = pd.DataFrame(rows, columns=[c for c in COLUMNS if c != "balanced_accuracy"])
    df["accuracy"] = df["accuracy"].astype(float)
    df["false_positive_rate"] = df["false_positive_rate"].astype(float)
    df["balanced_accuracy"] = (df["accuracy"] + 1.0 - df["false_positive_rate"]) / 2.0
    return df[COLUMNS]


def write_table(df: pd.DataFrame, out: Path | str) -> Path:
    """Write the tidy CSV atomically."""
    from ..store import atomic_path

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        df.to_csv(tmp, index=False)
    return out
