"""The public API: certify any circuit-discovery algorithm (paper Sec. 3, Algorithms 1 and 2).

Two entry points, one result type:

- :func:`certify_algorithm` wraps a **black-box** discovery algorithm ``A``: it draws the two
  independent deletion-mask streams of Algorithm 1 from ``setting.seed``, runs ``A`` on every
  sub-dataset ``D ⊙ eps`` (the paper's naive ``Sample``), counts the votes and certifies every component
  with the one-sided binomial test under family-wise error control.
- :func:`certify_scores` is the cached path for the paper's own base algorithm: ``A`` ranks the
  components by the mean of per-example scores and keeps the top-K per group. It computes exactly
  the same votes as ``certify_algorithm(TopKDiscovery(...))`` in one matrix product per chunk of masks.

- :func:`certify_votes` certifies vote counts already made (a workflow votes file, or any
  :class:`~certified_circuits.core.contracts.Votes`); the workflow's ``certify`` stage calls it.

All three return a :class:`Certificate`, the package's one certificate type, and reach their decisions
through one decision rule, :func:`certified_circuits.core.certification.decide` (here through
:func:`~certified_circuits.core.certification.decide_setting`, the same rule for a validated :class:`Setting`, whose
tau was checked when it was built). Every certified label (1 in, 0 out) is invariant to any
``r = floor(log(1.5 - tau) / log(p_del))`` insertions, deletions or substitutions of examples
(Theorem 1), with probability at least ``1 - alpha`` over the masks for all components jointly.

This module imports numpy and scipy only; ``Certificate.save``/``load`` import h5py when called.
See docs/architecture.md for where this sits among the package's layers.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from certified_circuits.core.certification import certify_votes_setting, decide_setting, radius_of
from certified_circuits.core.contracts import ABSTAIN, IN, OUT, Certificates, Votes
from certified_circuits.core.planning import PlanWarning, check_plan, plan
from certified_circuits.core.sampling import Algorithm, circuit_output, run_algorithm, sample_votes
from certified_circuits.core.setting import Setting
from certified_circuits.core.smoothing import compute_votes, selection_and_certification_masks
from certified_circuits.core.validation import check_count

__all__ = ["Algorithm", "Certificate", "certify_algorithm", "certify_scores", "certify_votes", "sample_votes"]

#: attributes of a votes record that the certificate's own fields own (its setting, n_examples, radius)
_OWNED_ATTRS = (
    "p_del",
    "n0",
    "n",
    "seed",
    "tau",
    "alpha",
    "correction",
    "radius",
    "n_examples",
    "kind",
    "n_components_tested",
)


@dataclass(frozen=True)
class Certificate:
    """Certified decisions of one concept's circuit (Algorithm 1), with the votes they came from.

    The package's one certificate type: the API returns it, and the workflow's ``certify`` stage writes
    it (``save``), so a workflow certificates file loads with :meth:`load`. A certificates file written
    before the stage wrote whole certificates (decisions only) loads with its votes file through
    :meth:`from_files`.

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
        return radius_of(self.setting.tau, self.setting.p_del)  # a Setting is checked when it is built

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
        """Read a certificate written by :meth:`save` (or by the workflow's ``certify`` stage); its setting
        comes from the file's attributes."""
        from certified_circuits.storage.store import read_certificate

        fields = read_certificate(path)
        return cls(**{**fields, "setting": Setting(**fields["setting"])})

    @classmethod
    def from_votes(cls, votes: Votes, decisions: Certificates) -> "Certificate":
        """Join a votes record and the decisions certified from it into one certificate.

        Args:
            votes: the vote counts (``attrs`` hold ``p_del, n0, n, seed, n_examples``).
            decisions: their decisions (``attrs`` hold ``tau, alpha, correction``), e.g. from
                :func:`certified_circuits.core.certification.certify_votes`.

        Returns:
            The certificate; its ``attrs`` are both records' labels except the facts its own fields own
            (the setting, ``n_examples``, the radius).

        Raises:
            ValueError: the two do not belong together (another K grid, component count or setting).
        """
        from certified_circuits.core.certification import check_certified_from

        check_certified_from(votes, decisions, "the votes", "the decisions")
        setting = Setting.from_config(
            votes.attrs,
            tau=decisions.attrs["tau"],
            alpha=decisions.attrs["alpha"],
            correction=decisions.attrs["correction"],
        )
        labels = {**votes.attrs, **decisions.attrs}
        groups = getattr(votes, "groups", None)
        names = getattr(votes, "names", None)
        return cls(
            decision=np.asarray(decisions.decision, dtype=np.int8),
            pvalue=np.asarray(decisions.pvalue, dtype=np.float64),
            selection_counts=np.asarray(votes.selection_counts, dtype=np.int32),
            certification_counts=np.asarray(votes.certification_counts, dtype=np.int32),
            majority=np.asarray(decisions.majority, dtype=bool),
            baseline=np.asarray(votes.baseline, dtype=bool),
            setting=setting,
            n_examples=int(votes.attrs["n_examples"]),
            k_grid=None if votes.k_grid is None else np.asarray(votes.k_grid, dtype=np.float64),
            groups=None if groups is None else np.asarray(groups),
            attrs={key: value for key, value in labels.items() if key not in _OWNED_ATTRS},
            names=None if names is None else tuple(str(name) for name in names),
        )

    @classmethod
    def from_files(cls, votes_path: str | os.PathLike, certificates_path: str | os.PathLike) -> "Certificate":
        """Load a workflow's votes file and its certificates file as one certificate.

        Reads either kind of certificates file: one written by the ``certify`` stage of today (a whole
        certificate) or one of earlier runs (decisions only); the counts always come from the votes.
        """
        from certified_circuits.storage.store import read_certificates, read_votes

        return cls.from_votes(read_votes(votes_path), read_certificates(certificates_path))


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
    checked = check_plan(plan(n_examples, baseline.shape[-1], setting), allow_vacuous=allow_vacuous)
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
    labels = {**checked.record(), **(attrs or {})}
    return _certificate(selection, certification, baseline, setting, n_examples, k_grid, None, labels)


def certify_votes(
    votes: Votes,
    tau: float,
    alpha: float,
    correction: str = "bonferroni",
    *,
    allow_vacuous: bool = False,
    attrs: dict[str, Any] | None = None,
) -> Certificate:
    """Certify counted votes (Algorithm 1): the last step of :func:`certify_scores` and of the workflow.

    For each component the selection votes pick the guess (in iff ``c0_u > n0 / 2``) and the one-sided
    binomial test ``P(Bin(n, tau) >= c_u) <= alpha`` (after the correction, separately for each K)
    certifies it (:func:`certified_circuits.core.certification.decide`).

    Args:
        votes: a :class:`~certified_circuits.core.contracts.Votes` record (e.g.
            :func:`certified_circuits.storage.store.read_votes` of a workflow votes file); its ``attrs`` give
            ``p_del, n0, n, seed, n_examples``.
        tau, alpha, correction: the test.
        allow_vacuous: certify even when the plan says no component can be certified.
        attrs: labels added to the certificate's.

    The exact plan of ``(n_examples, U, setting)`` is checked first, as in :func:`certify_scores`; the
    certificate records it (``attrs["plan_verdict"]``, ``attrs["plan_warnings"]``).

    Returns:
        The :class:`Certificate` of the votes' shape ``[nK, U]``.

    Raises:
        ValueError: a votes attribute is missing; VacuousSettingError (a ``ValueError``) as in
            :func:`certify_scores`.
    """
    missing = [key for key in ("p_del", "n0", "n", "seed", "n_examples") if key not in votes.attrs]
    if missing:
        raise ValueError(f"votes.attrs lacks {missing}: count votes with certify_scores or the votes stage")
    setting = _check_setting(Setting.from_config(votes.attrs, tau=tau, alpha=alpha, correction=correction))
    checked = check_plan(
        plan(int(votes.attrs["n_examples"]), int(votes.selection_counts.shape[-1]), setting),
        allow_vacuous=allow_vacuous,
    )
    decisions = certify_votes_setting(votes, setting)
    certificate = Certificate.from_votes(votes, decisions)
    return replace(certificate, attrs={**certificate.attrs, **checked.record(), **(attrs or {})})


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
    with warnings.catch_warnings():  # the plan above has warned already
        warnings.simplefilter("ignore", PlanWarning)
        return certify_votes(
            votes, setting.tau, setting.alpha, setting.correction, allow_vacuous=True,
            attrs={"absolute": bool(absolute), **(attrs or {})},
        )  # fmt: skip


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
    """Algorithm 1 on the counts of any shape (:func:`~certified_circuits.core.certification.decide_setting`)."""
    decision, pvalue, majority = decide_setting(selection, certification, setting)
    return Certificate(
        decision=decision,
        pvalue=pvalue,
        selection_counts=selection.astype(np.int32),
        certification_counts=certification.astype(np.int32),
        majority=majority,
        baseline=baseline.astype(bool),
        setting=setting,
        n_examples=int(n_examples),
        k_grid=k_grid,
        groups=groups,
        attrs=dict(attrs or {}),
    )
