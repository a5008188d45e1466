"""Per-concept sufficiency CSVs of the embedded default's shape, generated from a seed (no model, no workflow run).

The default (config.yaml) evaluates 10 classes x 2 scorers (relevance, activation) x 6 eval sets x (3 methods x
10 K + the full model) = 3,720 rows per ablation, and writes both ablations (zero, mean) into each class's CSV:
7,440 rows in 10 files. The columns are those of ``vision-evaluate`` (:data:`certified_circuits.vision.evaluate.COLUMNS`,
then ``ablation`` and :func:`certified_circuits.core.contracts.setting_columns`). Every metric is computed from the
row's own per-example outcomes (``per_example_correct``: the class's ``n_images`` positives, then ``n_negatives``
negatives), as the stage computes it, so the paired tests see consistent inputs:

    accuracy = mean of the positives' outcomes,  false_positive_rate = 1 - mean of the negatives' outcomes,
    balanced_accuracy = (accuracy + 1 - false_positive_rate) / 2.

Used by ``benchmarks/bench_report_sufficiency.py`` and ``tests/unit/analysis/test_sufficiency_speed.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

CONCEPTS = ("circle", "square", "triangle", "star", "cross", "ring", "diamond", "heart", "arrow", "moon")
SCORERS = ("relevance", "activation")
EVAL_SETS = ("id", "id_test", "context_shift", "corruption", "adversarial", "anomaly")
K_GRID = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1.0)
ABLATIONS = ("zero", "mean")
METHODS = ("baseline", "majority", "certified")
N_NEGATIVES = 100
SETTING = dict(split="concept", setting="p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni", p_del=0.6, n0=100, n=1000,
               seed=0, tau=0.95, alpha=0.001, correction="bonferroni", radius=1)


def _outcome_strings(correct: np.ndarray) -> np.ndarray:
    """Rows of a bool [R, N] array as ``0``/``1`` strings (as ``encode_outcomes`` writes them)."""
    chars = correct.astype(np.uint8) + ord("0")
    return np.array([row.tobytes().decode("ascii") for row in chars], dtype=object)


def concept_table(concept: str, index: int, rng: np.random.Generator) -> pd.DataFrame:
    """One class's CSV rows: both ablations x scorers x eval sets x (full + methods x K), drawn from ``rng``.

    Args:
        concept: the class name.
        index: its position (the experiment's classes are distinct in difficulty).
        rng: the generator every value is drawn from.

    Returns:
        The table, in the stage's row order (full first, then method-major over K), 744 rows.
    """
    frames = []
    k = np.asarray(K_GRID)
    for ablation in ABLATIONS:
        for scorer in SCORERS:
            for eval_set in EVAL_SETS:
                n_pos = 50 if eval_set == "id" else int(rng.integers(8, 50))
                n = n_pos + N_NEGATIVES
                # a latent per-example difficulty: circuits of larger K get more examples right, certified ones a bit more
                difficulty = rng.random(n)
                level = {"baseline": 0.35 + 0.5 * k, "majority": 0.37 + 0.5 * k,
                         "certified": 0.4 + 0.5 * k + 0.02 * index / len(CONCEPTS)}
                p_right = np.concatenate([[0.9]] + [level[m] for m in METHODS])  # [1 + 3 K]: full, then methods x K
                correct = difficulty[None, :] < p_right.reshape(-1, 1) + 0.05 * rng.normal(size=(p_right.size, 1))
                correct ^= rng.random(correct.shape) < 0.08  # each circuit errs on its own too: discordance both ways
                rows = len(correct)
                method = ["full"] + [m for m in METHODS for _ in K_GRID]
                k_target = np.concatenate([[1.0], np.tile(k, len(METHODS))])
                k_effective = k_target.copy()
                k_effective[1 + 2 * len(k):] = np.round(k * rng.uniform(0.5, 0.9, len(k)), 6)  # certified: abstentions
                accuracy = correct[:, :n_pos].mean(1)
                fpr = 1.0 - correct[:, n_pos:].mean(1)
                m_full = float(rng.uniform(2.0, 4.0))
                m_empty = float(rng.uniform(-0.5, 0.5))
                m = m_empty + (m_full - m_empty) * np.clip(k_target * rng.uniform(0.8, 1.3, rows), 0, 1.4)
                m[0] = m_full
                frames.append(pd.DataFrame({
                    "experiment": "world", "concept": concept, "eval_set": eval_set, "method": method,
                    "k_target": k_target, "k_effective": k_effective, "accuracy": accuracy,
                    "false_positive_rate": fpr, "balanced_accuracy": (accuracy + 1.0 - fpr) / 2.0,
                    "n_images": n_pos, "n_negatives": N_NEGATIVES, "per_example_correct": _outcome_strings(correct),
                    "m": m, "m_empty": m_empty, "m_full": m_full, "ablation": ablation, "scorer": scorer, **SETTING,
                }))
    return pd.concat(frames, ignore_index=True)


def write_default_tables(folder: Path, seed: int = 0) -> list[Path]:
    """The default's 10 per-class sufficiency CSVs under ``folder`` (created), drawn from ``seed``.

    Args:
        folder: where ``<concept>.csv`` go.
        seed: the seed of every value.

    Returns:
        The paths, in class order (7,440 rows in all; 3,720 per ablation).
    """
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, concept in enumerate(CONCEPTS):
        path = folder / f"{concept}.csv"
        concept_table(concept, index, rng).to_csv(path, index=False)
        paths.append(path)
    return paths
