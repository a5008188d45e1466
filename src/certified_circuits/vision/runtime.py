"""Naive vs cached certification cost with a real vision base algorithm (paper App. D, Table runtime).

The base algorithm A scores a sub-dataset by the relevance (gradient x activation of the class logit)
of every vertex, averaged over its images, and keeps the top-K fraction per layer for every K of a
grid. *Naive*: A re-runs its forward/backward pass on every sub-dataset (Algorithm 2 with A called per
mask). *Cached*: one pass over the concept dataset, then vote counts for all masks from the per-example
scores (one matrix product and a per-group sort / threshold count, on the model's device when it is a
GPU). Both then run the same decision rule. Used by the workflow's runtime
table and by ``benchmarks/bench_naive_vs_cached.py``.
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from certified_circuits.core.certification import certify, majority_vote
from certified_circuits.core.discovery import TopKDiscovery
from certified_circuits.core.setting import Setting
from certified_circuits.core.smoothing import selection_and_certification_masks, vote_counts, vote_counts_naive, vote_device
from certified_circuits.analysis.timing import best_of
from certified_circuits.vision.networks.models import VisionModel
from certified_circuits.vision.scoring.scorers import score_batch

#: the defaults of every setting field this measurement takes: :class:`Setting`'s
DEFAULT = Setting()


def measure_naive_vs_cached(
    model: VisionModel,
    images: torch.Tensor,
    label: int,
    n_values: Sequence[int],
    k_grid: np.ndarray,
    p_del: float = DEFAULT.p_del,
    tau: float = DEFAULT.tau,
    alpha: float = DEFAULT.alpha,
    seed: int = DEFAULT.seed,
    votes_device: str | torch.device | None = None,
    correction: str = DEFAULT.correction,
) -> pd.DataFrame:
    """Times of the naive and cached paths for each ``n`` (``n0 = n / 10``), majority vote and certified.

    ``p_del``, ``tau``, ``alpha``, ``seed`` (of the masks, used as given) and ``correction``: a
    :class:`~certified_circuits.core.setting.Setting`'s fields, its defaults and its validation (with
    ``n0 = max(1, n // 10)`` and ``n`` for each ``n`` of ``n_values``).

    Both paths run Algorithm 2 (``Sample``) on the same numpy-drawn masks. The relevance pass runs on
    the model's device; the cached path keeps the per-example scores there and counts votes where
    ``votes_device`` says (:func:`certified_circuits.core.devices.vote_device`; default: follow the
    scores, i.e. torch on a GPU model, numpy on a CPU one).

    Returns the columns ``format_runtime_table`` expects: n, paradigm, naive_sample_s, cached_sample_s,
    decision_s, plus ``agreement`` (share of counts on which the two paths agree within 1% of n: they
    differ only by float32 rounding of scores computed in different batch sizes) and
    ``votes_equal_numpy`` (share of cached counts identical to the numpy path's on the same scores;
    NaN when the cached path is the numpy path). The n = 1 row is the baseline, A once on the full
    dataset.
    """
    base = Setting(p_del=p_del, tau=tau, alpha=alpha, seed=seed, correction=correction)  # validated before any work
    settings = [base.replace(n0=max(1, n // 10), n=n) for n in n_values]
    groups = model.groups().numpy()
    n_examples = images.shape[0]

    def relevance(index: np.ndarray) -> torch.Tensor:
        """Per-example relevance [len(index), U] on the model's device."""
        picked = images[torch.as_tensor(index, device=images.device)]
        return score_batch(model, picked, label)[0]["relevance"]

    def naive_algorithm(kept: np.ndarray) -> np.ndarray:
        if kept.size == 0:
            return np.zeros((len(k_grid), groups.size), dtype=bool)
        return TopKDiscovery(relevance(kept).cpu().numpy(), groups, k_grid)(np.arange(kept.size))

    rows = [dict(n=1, paradigm="baseline", naive_sample_s=np.nan,
                 cached_sample_s=best_of(lambda: naive_algorithm(np.arange(n_examples)), 3), decision_s=0.0,
                 agreement=np.nan, votes_equal_numpy=np.nan)]
    for setting in settings:
        n0, n = setting.n0, setting.n
        selection_masks, certification_masks = selection_and_certification_masks(
            n_examples, n0, n, setting.p_del, setting.seed)
        start = time.perf_counter()
        naive_certification = vote_counts_naive(naive_algorithm, certification_masks)
        vote_counts_naive(naive_algorithm, selection_masks)
        naive_time = time.perf_counter() - start

        def cached() -> tuple[np.ndarray, np.ndarray, torch.Tensor]:
            scores = relevance(np.arange(n_examples))
            return (vote_counts(scores, groups, k_grid, selection_masks, device=votes_device),
                    vote_counts(scores, groups, k_grid, certification_masks, device=votes_device), scores)

        selection, certification, scores = cached()
        cached_time = best_of(cached, 3)
        agreement = float((np.abs(naive_certification.astype(int) - certification) <= 0.01 * n).mean())
        equal_numpy = np.nan
        if vote_device(scores, votes_device) is not None:
            host = scores.cpu().numpy()
            equal_numpy = float(np.mean(np.concatenate([
                (vote_counts(host, groups, k_grid, selection_masks) == selection).ravel(),
                (vote_counts(host, groups, k_grid, certification_masks) == certification).ravel()])))
        decisions = {
            "majority": lambda: majority_vote(selection, certification, n0, n),
            "certified": lambda: certify(selection, certification, n0, n, setting.tau, setting.alpha,
                                         setting.correction),
        }
        for paradigm, decide in decisions.items():
            rows.append(dict(n=n, paradigm=paradigm, naive_sample_s=naive_time, cached_sample_s=cached_time,
                             decision_s=best_of(decide, 5), agreement=agreement, votes_equal_numpy=equal_numpy))
    return pd.DataFrame(rows)
