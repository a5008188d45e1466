"""The data types that pass between stages: attributions, votes and certificates (docs/architecture.md, section 2).

Plain dataclasses over numpy arrays. The engine (:mod:`~certified_circuits.core.smoothing`,
:mod:`~certified_circuits.core.certification`) produces and consumes them without knowing how they are
stored; :mod:`~certified_circuits.storage.store` writes and reads them as HDF5.

Settings travel with the data (``attrs``): votes carry p_del, n0, n, seed, scorer and concept;
certificates carry those of their votes plus tau, alpha, correction and the radius, so every
downstream table can be labelled without reading a path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: certified decisions (Algorithm 1): in, out, abstain
IN, OUT, ABSTAIN = 1, 0, -1


@dataclass
class Attributions:
    """Per-example, per-component scores of one (experiment, split, concept)."""

    scores: dict[str, np.ndarray]
    groups: np.ndarray
    names: list[str]
    example_ids: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    extras: dict[str, np.ndarray] = field(default_factory=dict)
    #: scorer -> ranking convention of its base algorithm (``signed`` | ``absolute``, core.discovery.RANKINGS)
    rankings: dict[str, str] = field(default_factory=dict)

    def absolute(self, scorer: str) -> bool:
        """Whether ``scorer``'s base algorithm ranks by the absolute mean score (EAP-IG) or the signed one."""
        return self.rankings.get(scorer, "signed") == "absolute"

    @property
    def n_examples(self) -> int:
        return len(self.example_ids)

    @property
    def n_components(self) -> int:
        return int(self.groups.shape[0])


@dataclass
class Votes:
    """Vote counts of Algorithm 2 for a K grid, plus the baseline circuits (A on the full dataset).

    ``names`` are the ``[U]`` component names of the scores the votes were counted from (the attribution
    file's ``components/name``), or None when unknown (votes files written before they were recorded); the
    certificate certified from the votes carries them, so ``inspect`` and the reports name each component.
    """

    k_grid: np.ndarray
    baseline: np.ndarray
    selection_counts: np.ndarray
    certification_counts: np.ndarray
    groups: np.ndarray
    attrs: dict[str, Any] = field(default_factory=dict)
    names: tuple[str, ...] | None = None


@dataclass
class Certificates:
    """Certified decisions (Algorithm 1) and majority-vote circuits for a K grid."""

    k_grid: np.ndarray
    decision: np.ndarray
    majority: np.ndarray
    pvalue: np.ndarray
    attrs: dict[str, Any] = field(default_factory=dict)


def setting_columns(votes: Votes, certificates: Certificates) -> dict[str, Any]:
    """The settings a circuit came from, as columns of the tables built from it (sufficiency CSVs).

    Read from the files' attributes, never from their paths: scorer, split, the votes' p_del, n0, n, seed,
    the test's tau, alpha, correction, the certified radius, and ``setting``, the layout's name of the
    whole setting (``p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni``).
    """
    from certified_circuits.core.setting import Setting

    v, c = votes.attrs, certificates.attrs
    setting = Setting.from_config(v, tau=c["tau"], alpha=c["alpha"], correction=c["correction"])
    return {
        "scorer": str(v.get("scorer", "")),
        "split": str(v.get("split", "")),
        "setting": setting.tag,
        "p_del": setting.p_del,
        "n0": setting.n0,
        "n": setting.n,
        "seed": setting.seed,
        "tau": setting.tau,
        "alpha": setting.alpha,
        "correction": setting.correction,
        "radius": int(c["radius"]),
    }
