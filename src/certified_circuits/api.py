"""The public API: certify any circuit-discovery algorithm (paper Sec. 3, Algorithms 1 and 2).

Two entry points, one result type:

- :func:`certify_algorithm` wraps a **black-box** discovery algorithm ``A``: it draws the two
  independent deletion-mask streams of Algorithm 1 from ``setting.seed``, runs ``A`` on every
  sub-dataset ``D ⊙ eps`` (the paper's naive ``Sample``), counts the votes and certifies every component
  with the one-sided binomial test under family-wise error control.
- :func:`certify_scores` is the cached path for the paper's own base algorithm: ``A`` ranks the
  components by the mean of per-example scores and keeps the top-K per group. It computes exactly
  the same votes as ``certify_algorithm(TopKDiscovery(...))`` in one matrix product per chunk of masks.

Both return a :class:`Certificate`. Every certified label (1 in, 0 out) is invariant to any
``r = floor(log(1.5 - tau) / log(p_del))`` insertions, deletions or substitutions of examples
(Theorem 1), with probability at least ``1 - alpha`` over the masks for all components jointly.

This module imports numpy and scipy only; ``Certificate.save``/``load`` import h5py when called.
See docs/architecture.md for where this sits among the package's layers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from certified_circuits.core.certification import certified_radius, certify_with_pvalues, majority_vote
from certified_circuits.core.contracts import ABSTAIN, IN, OUT
from certified_circuits.core.planning import check_plan, plan
from certified_circuits.core.sampling import Algorithm, circuit_output, run_algorithm, sample_votes
from certified_circuits.core.setting import Setting
from certified_circuits.core.smoothing import compute_votes, selection_and_certification_masks
from certified_circuits.core.validation import check_count

__all__ = ["Algorithm", "Certificate", "certify_algorithm", "certify_scores", "sample_votes"]


@dataclass(frozen=True)
class Certificate:
    """Certified decisions of one concept's circuit (Algorithm 1), with the votes they came from.

    Attributes:
        decision: int8, the algorithm's output shape (``[U]`` or ``[nK, U]``): 1 certified in,
            0 certified out, -1 abstain.
        pvalue: float64, same shape: the binomial p-value of each component's test (before correction).
        selection_counts: int32, same shape: votes among the ``n0`` selection sub-datasets.
        certification_counts: int32, same shape: votes among the ``n`` certification sub-datasets.
        majority: bool, same shape: the majority vote over all ``n0 + n`` sub-datasets (App. D).
        baseline: bool, same shape: the algorithm on the full dataset (the uncertified circuit).
        setting: the :class:`~certified_circuits.core.setting.Setting` that produced it.
        n_examples: ``|D|``, the size of the concept dataset.
        k_grid: the K grid of the leading axis, or None when the algorithm returns one circuit ``[U]``.
        groups: int ``[U]`` group (layer) ids, when known (:func:`certify_scores`), else None.
        attrs: free-form labels (concept, scorer, model, ...) saved with the file.
        names: ``[U]`` component names (layer and channel, edge, ...), when known, else None; saved with
            the file (a certificate written before this field existed loads with None).
    """

    decision: np.ndarray
    pvalue: np.ndarray
    selection_counts: np.ndarray
    certification_counts: np.ndarray
    majority: np.ndarray
    baseline: np.ndarray
    setting: Setting
    n_examples: int
    k_grid: np.ndarray | None = None
    groups: np.ndarray | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    names: tuple[str, ...] | None = None

    @property
    def radius(self) -> int:
        """Certified radius ``r = floor(log(1.5 - tau) / log(p_del))`` (Theorem 1)."""
        return certified_radius(self.setting.tau, self.setting.p_del)

    @property
    def certified_in(self) -> np.ndarray:
        """bool: components certified in the circuit (the certified circuit; abstentions dropped)."""
        return self.decision == IN

    @property
    def certified_out(self) -> np.ndarray:
        """bool: components certified out of the circuit."""
        return self.decision == OUT

    @property
    def abstained(self) -> np.ndarray:
        """bool: components the test could not certify either way."""
        return self.decision == ABSTAIN

    def save(self, path: str | os.PathLike) -> Path:
        """Write this certificate to HDF5, atomically (:func:`certified_circuits.storage.store.write_certificate`).

        A certificate with a K grid is also a valid votes file and a valid certificates file of the
        workflow, so the ``report-*`` stages read it as they read their own.

        Returns:
            The path written.
        """
        from certified_circuits.storage.store import write_certificate

        return write_certificate(path, self)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Certificate":
        """Read a certificate written by :meth:`save`; its setting comes from the file's attributes."""
        from certified_circuits.storage.store import read_certificate

        fields = read_certificate(path)
        return cls(**{**fields, "setting": Setting(**fields["setting"])})


def _check_setting(setting: Setting) -> Setting:
    if not isinstance(setting, Setting):
        raise TypeError(
            f"setting must be a certified_circuits.Setting, got {type(setting).__name__}: "
            "cc.Setting(p_del=..., n0=..., n=..., seed=..., tau=..., alpha=..., correction=...)"
        )
    return setting


def certify_algorithm(
    algorithm: Algorithm,
    n_examples: int,
    setting: Setting,
    *,
    k_grid: Any = None,
    workers: int = 1,
    progress: bool = True,
    attrs: dict[str, Any] | None = None,
    allow_vacuous: bool = False,
) -> Certificate:
    """Certify the circuit of any black-box discovery algorithm (Algorithm 1 around Algorithm 2).

    The selection masks (``n0``) and certification masks (``n``) are the two independent children of
    ``SeedSequence(setting.seed)`` (:func:`~certified_circuits.core.smoothing.selection_and_certification_masks`);
    each keeps every example with probability ``1 - p_del``. ``A`` runs once on the full dataset (the
    baseline) and once per mask. For each component ``u`` the selection votes pick the guess
    (in if ``c0_u > n0 / 2``), and the test rejects ``H0: P(A agrees with the guess) < tau`` when the
    binomial tail ``P(Bin(n, tau) >= c_u)`` (``c_u``: agreeing certification votes) is at most ``alpha``
    after the ``setting.correction`` (Bonferroni over all components of each K, or Holm).

    Args:
        algorithm: ``A(kept_indices) -> bool circuit``. ``kept_indices`` are the int indices (ascending)
            of the examples a sub-dataset keeps (possibly none); the circuit is bool ``[U]`` or ``[nK, U]``
            and has the same shape every call.
        n_examples: ``|D|``.
        setting: p_del, n0, n, seed of the votes and tau, alpha, correction of the test.
        k_grid: labels of the leading axis when the algorithm returns ``[nK, U]`` (optional; saved with
            the certificate).
        workers: processes for the sub-datasets (see :func:`sample_votes`).
        progress: progress bars on stderr.
        attrs: labels saved with the certificate (concept, model, ...).
        allow_vacuous: run even when the setting can certify nothing (see below).

    Before any sub-dataset is drawn, ``A`` runs once on the full dataset (which gives ``U``) and the
    exact plan :func:`certified_circuits.plan` of ``(n_examples, U, setting)`` is checked: a setting
    that can certify nothing raises, one where a side is impossible or sub-datasets are often empty
    warns (:class:`~certified_circuits.core.planning.PlanWarning`, with the numbers).

    Returns:
        The :class:`Certificate`; ``decision`` has the algorithm's output shape.

    Raises:
        VacuousSettingError: (a ``ValueError``) the setting can certify no component, in or out; the
            message gives ``min_samples``, ``max_tau``, ``p_empty`` and the fix. ``allow_vacuous=True``
            skips it.
    """
    setting = _check_setting(setting)
    n_examples = check_count("n_examples", n_examples, minimum=1)
    baseline = circuit_output(
        run_algorithm(algorithm, np.arange(n_examples), "the full dataset", n_examples), None, "the full dataset"
    )
    check_plan(plan(n_examples, baseline.shape[-1], setting), allow_vacuous=allow_vacuous)
    selection_masks, certification_masks = selection_and_certification_masks(
        n_examples, setting.n0, setting.n, setting.p_del, setting.seed
    )
    if k_grid is not None:
        k_grid = np.asarray(k_grid, dtype=np.float64)
        if baseline.ndim != 2 or k_grid.shape != (baseline.shape[0],):
            raise ValueError(
                f"k_grid has {k_grid.size} values but the algorithm returns shape {baseline.shape}: "
                "give one K per row of [nK, U]"
            )
    selection = sample_votes(
        algorithm, selection_masks, baseline.shape, workers=workers, progress=progress, desc="selection (n0)"
    )
    certification = sample_votes(
        algorithm, certification_masks, baseline.shape, workers=workers, progress=progress, desc="certification (n)"
    )
    return _certificate(selection, certification, baseline, setting, n_examples, k_grid, None, attrs)


def certify_scores(
    scores: Any,
    groups: Any,
    k_grid: Any,
    setting: Setting,
    *,
    absolute: bool = False,
    device: Any = None,
    attrs: dict[str, Any] | None = None,
    allow_vacuous: bool = False,
) -> Certificate:
    """Certify top-K circuits of per-example scores: the paper's cached path (App. D).

    The base algorithm is ``A_K(D') = top-K per group of mean_{i in D'} S_i`` (``|.|`` of the mean when
    ``absolute``: EAP-IG's ranking), i.e. :class:`~certified_circuits.core.discovery.TopKDiscovery`;
    the decisions equal ``certify_algorithm(TopKDiscovery(scores, groups, k_grid, absolute),
    len(scores), setting, k_grid=k_grid)`` exactly, computed without a Python loop over sub-datasets.

    Args:
        scores: float ``[N, U]`` per-example component scores (numpy, or a torch tensor: counted on its device).
        groups: int ``[U]`` group (layer) of each component; K is a fraction of each group.
        k_grid: fractions in (0, 1].
        setting: the certification setting.
        absolute: rank by the absolute mean score.
        device: where to count votes (None: follow the scores; ``"auto"``: CUDA when available).
        attrs: labels saved with the certificate.
        allow_vacuous: run even when the setting can certify nothing.

    The plan of ``(N, U, setting)`` is checked before any mask is drawn, as in :func:`certify_algorithm`.

    Returns:
        The :class:`Certificate`, ``decision`` of shape ``[len(k_grid), U]``.

    Raises:
        VacuousSettingError: (a ``ValueError``) the setting can certify no component; ``allow_vacuous=True``
            skips it.
    """
    setting = _check_setting(setting)
    scores = _array_like("scores", scores, np.float64, "a 2-D array of numbers [n_examples, n_components]")
    groups = _array_like("groups", groups, None, "a 1-D array of integer group ids [n_components]")
    shape = tuple(getattr(scores, "shape", np.shape(scores)))
    if len(shape) != 2 or min(shape) < 1:
        raise ValueError(f"scores must be a non-empty 2-D array [n_examples, n_components], got shape {shape}")
    check_plan(plan(int(shape[0]), int(shape[1]), setting), allow_vacuous=allow_vacuous)
    votes = compute_votes(
        scores, groups, k_grid, setting.p_del, setting.n0, setting.n, setting.seed, absolute=absolute, device=device
    )
    return _certificate(
        votes.selection_counts,
        votes.certification_counts,
        votes.baseline,
        setting,
        int(votes.attrs["n_examples"]),
        votes.k_grid,
        votes.groups,
        {"absolute": bool(absolute), **(attrs or {})},
    )


def _array_like(name: str, value: Any, dtype: Any, expected: str) -> Any:
    """A numpy array or torch tensor as given; any other array-like (lists, tuples, pandas) as a numpy array."""
    if isinstance(value, np.ndarray) or type(value).__module__.split(".")[0] == "torch":
        return value
    try:
        array = np.asarray(value, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{name} must be {expected} (a numpy array, a torch tensor, or nested lists of equal lengths): {exc}"
        ) from exc
    if array.dtype == object:
        raise ValueError(f"{name} must be {expected}; got {type(value).__name__} of mixed or ragged items")
    return array


def _certificate(
    selection: np.ndarray,
    certification: np.ndarray,
    baseline: np.ndarray,
    setting: Setting,
    n_examples: int,
    k_grid: np.ndarray | None,
    groups: np.ndarray | None,
    attrs: dict[str, Any] | None,
) -> Certificate:
    """Algorithm 1 on the counts, plus the majority vote at identical compute."""
    decision, pvalue = certify_with_pvalues(
        selection, certification, setting.n0, setting.n, setting.tau, setting.alpha, setting.correction
    )
    return Certificate(
        decision=decision,
        pvalue=pvalue,
        selection_counts=selection.astype(np.int32),
        certification_counts=certification.astype(np.int32),
        majority=majority_vote(selection, certification, setting.n0, setting.n),
        baseline=baseline.astype(bool),
        setting=setting,
        n_examples=int(n_examples),
        k_grid=k_grid,
        groups=groups,
        attrs=dict(attrs or {}),
    )
