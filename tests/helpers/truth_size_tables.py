"""Hand-built ``testbed/truth_size.csv`` tables (the ``stability`` stage's second table, combined by
``report-stability``) for the tests of ``report-hypotheses`` and ``analysis.hypotheses``: every column the workflow
writes, the numbers the hypotheses read set by the test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

#: a certificate's rows, in the stage's order
METHODS = ("baseline", "certified_in", "certified_in_abstain", "majority")


def certificate(concept: str = "a", scorer: str = "relevance", setting: str = "s", *, experiment: str = "world",
                cert_in: tuple[float, float] = (0.6, 0.5), in_abstain: tuple[float, float] = (0.6, 0.5),
                recall: tuple[float, float] = (0.5, 0.5), change: tuple[float, float] = (0.01, 0.03),
                can_certify_in: bool = True, certified_in_any: bool = True, n_true: int = 4,
                n_components: int = 20) -> list[dict[str, Any]]:
    """One certificate's four rows.

    Args:
        cert_in: certified IN's precision and its size-matched baseline's.
        in_abstain: IN + abstain's precision and its size-matched baseline's.
        recall: IN + abstain's recall and its size-matched baseline's.
        change: the certified labels' and the baseline memberships' change shares (the certificate's stability).
    """
    common = {"experiment": experiment, "concept": concept, "scorer": scorer, "split": "concept", "setting": setting,
              "p_del": 0.6, "n0": 100, "n": 1000, "seed": 0, "tau": 0.95, "alpha": 0.001, "correction": "bonferroni",
              "radius": 1, "mask_seed": 12345, "truth_verified": True, "n_examples": 50}
    shared = {"n_true": n_true, "n_grey": 0, "n_components": n_components, "can_certify_in": can_certify_in,
              "resamples": 20, "baseline_jaccard_mean": 0.9, "baseline_change_share": change[1],
              "certified_change_share": change[0], "certified_flip_share": 0.0, "certified_in_any": certified_in_any,
              "abstain_share": 0.05}
    numbers = {"baseline": (n_true, 0.5, 0.5, 0.5, 0.5), "certified_in": (3, cert_in[0], 0.4, cert_in[1], 0.4),
               "certified_in_abstain": (5, in_abstain[0], recall[0], in_abstain[1], recall[1]),
               "majority": (n_true, 0.5, 0.5, 0.5, 0.5)}
    return [{**common, "method": method, **dict(zip(("size", "precision", "recall", "baseline_precision",
                                                     "baseline_recall"), numbers[method])), **shared}
            for method in METHODS]


def write_seed(folder: Path, rows: list[dict[str, Any]]) -> Path:
    """``folder/truth_size.csv`` from certificate rows; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(folder / "truth_size.csv", index=False)
    return folder
