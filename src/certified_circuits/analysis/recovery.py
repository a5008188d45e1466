"""Recovery of a known circuit: confusion counts, precision, recall, FPR and AUROC per method (docs/embedded_default.md).

The embedded testbed plants circuits whose true components are known (a ground-truth JSON file, format
:data:`GROUND_TRUTH_FORMAT`, with one reader, :func:`read_ground_truth`, and one writer, :func:`write_ground_truth`,
which runs the reader's validation, :func:`parse_ground_truth`, before its atomic write). Every circuit the
workflow produces is scored against that truth, per K of the grid, for four methods read from a votes file and its
certificates file:

``baseline``
    ``votes.baseline``: the base algorithm A on the full dataset.
``majority``
    ``certificates.majority``: the majority vote of the smoothed votes at identical compute.
``certified_in``
    ``decision == 1``: the certified-in components (abstentions dropped: the paper's certified circuit).
``certified_in_abstain``
    ``decision != 0``: certified in or abstained (everything not certified out): how much of the truth the
    certificate leaves open, rather than excludes.

Definitions, with ``C`` a circuit and ``T`` the true set over ``U`` components (``P = |T|``, ``N = U - P``):

- ``TP = |C ∩ T|``, ``FP = |C \\ T|``, ``FN = |T \\ C|``, ``TN = U - TP - FP - FN``;
- ``recall = TPR = TP / P``; ``FPR = FP / N``;
- ``precision = TP / (TP + FP)``; for an **empty circuit** (``TP + FP = 0``) it is undefined: NaN, and the
  ``empty_circuit`` flag is True, so a table shows it as missing and says why (MIB's ``compare_graphs`` writes 0
  there, which would read as "all wrong" for a method that abstained on everything).

AUROC, as InterpBench (``circuits_benchmark/utils/circuit/circuit_eval.py``) and MIB
(``MIB_circuit_track/evaluation.py``, ``evaluate_area_under_roc``) compute it over a sweep of circuit sizes:
the points ``(FPR_k, TPR_k)`` over the K grid, plus ``(0, 0)`` (the empty circuit) and ``(1, 1)`` (every
component), sorted by FPR (ties by TPR, ascending: at one FPR the curve climbs to its best TPR before moving
right), integrated with the trapezoid rule. The end points make the area comparable across grids that stop
short of K = 1 (MIB's last fraction is 1, which reaches (1, 1) itself; its normalisation by the last FPR is then
a division by 1). A perfect ranking (the truth first) gives 1; circuits with ``TPR = FPR`` at every K (no better
than chance) give 0.5. Certified-in circuits are not nested in K the way top-K circuits are, so their points need
not be monotone; the sort makes the curve a function of FPR all the same.

Everything is vectorized over K (and any leading axes) and components: one boolean reduction per count.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np

from certified_circuits.analysis.component_truth import check_block, grey_components
from certified_circuits.core.certification import method_masks
from certified_circuits.core.contracts import OUT, Certificates, Votes
from certified_circuits.storage.atomic import write_json
from certified_circuits.storage.documents import read_json_document, unique_keys

#: the ``format`` string every ground-truth file carries (the integrator's contract, version 1)
GROUND_TRUTH_FORMAT = "certified-circuits/ground-truth/1"
#: circuit methods scored against the truth, in table order (module docstring)
RECOVERY_METHODS: tuple[str, ...] = ("baseline", "majority", "certified_in", "certified_in_abstain")
#: recovery method -> the circuit of :func:`~certified_circuits.core.certification.method_masks` it is (the one
#: renaming: the recovery tables call the certified-in circuit ``certified_in``, beside ``certified_in_abstain``)
METHOD_MASKS: dict[str, str] = {"baseline": "baseline", "majority": "majority", "certified_in": "certified"}
#: the ``selected_*`` table's ``<method>_k_target`` column each recovery method takes its K from
SELECTED_METHOD: dict[str, str] = {**METHOD_MASKS, "certified_in_abstain": "certified"}


@dataclass(frozen=True)
class GroundTruth:
    """A validated ground-truth file (docs/outputs.md: format, experiment, kind, concepts).

    Attributes:
        experiment, kind, model, how: the file's labels.
        n_components: ``U`` of the experiment's attribution files (None when the file omits it).
        concepts: concept name -> its true component names (file order, no duplicates).
        verification: concept name -> the causal check's numbers (``passed`` among them).
        path: where it was read from (for messages).
    """

    experiment: str
    kind: str
    model: str
    how: str
    n_components: int | None
    concepts: dict[str, tuple[str, ...]]
    verification: dict[str, dict[str, Any]] = field(default_factory=dict)
    path: str = ""

    def verified(self, concept: str) -> bool:
        """Whether the concept's planted circuit passed its causal check (``verification.passed``)."""
        return bool(self.verification.get(concept, {}).get("passed", False))

    def grey(self, concept: str) -> tuple[str, ...]:
        """The concept's grey zone: planted components between epsilon and delta, neither true nor null (issue 50;
        :func:`~certified_circuits.analysis.component_truth.grey_components`); empty without a per-component block."""
        block = self.verification.get(concept, {}).get("per_component")
        return tuple(grey_components(block)) if block else ()


class GroundTruthError(ValueError):
    """A ground-truth document that the reader refuses; ``problem`` is what is wrong, without the file or the fix (the
    reader and the writer, :func:`write_ground_truth`, each add their own)."""

    def __init__(self, message: str, problem: str) -> None:
        super().__init__(message)
        self.problem = problem


def _fail(path: str, problem: str) -> GroundTruthError:
    return GroundTruthError(
        f"{path}: {problem}; a ground-truth file is JSON with format {GROUND_TRUTH_FORMAT!r}, 'experiment', 'kind', "
        "'concepts': {concept: {'components': [names], 'verification': {...}}} (rerun the stage that writes it)",
        problem,
    )


def _text_field(data: Mapping[str, Any], key: str, path: str, required: bool) -> str:
    """A string field of the file (``experiment``, ``kind``, ``model``, ``how``): a number or a list is refused."""
    if key not in data:
        if required:
            raise _fail(path, f"field {key!r} is missing")
        return ""
    value = data[key]
    if not isinstance(value, str) or (required and not value):
        raise _fail(path, f"field {key!r} is {value!r}, expected a non-empty string")
    return value


#: the top-level fields of a ground-truth file (``planted``: the vision writer's spec); a key close to one of them
#: is a misspelling that would otherwise drop the field without a word (e.g. ``n_component``)
GROUND_TRUTH_FIELDS = ("format", "experiment", "kind", "model", "how", "n_components", "concepts", "planted")


def _misspelt(keys: Any, known: Sequence[str], absent_only: bool = True) -> tuple[str, str] | None:
    """(key, the known field it resembles) for the first key that is not a known field but close to one that is
    absent (``absent_only``); None when there is none."""
    from difflib import get_close_matches

    for key in keys:
        if key in known:
            continue
        close = [k for k in get_close_matches(str(key), known, n=3, cutoff=0.8) if not (absent_only and k in keys)]
        if close:
            return str(key), close[0]
    return None


def _concept_entry(concept: str, entry: Any, path: str, require_passed: bool = False
                   ) -> tuple[tuple[str, ...], dict[str, Any]]:
    """One concept's components (strings, none twice: checked in linear time) and its verification, whose
    ``passed`` is a JSON true/false (the string "false" is not a boolean and would read as verified); with
    ``require_passed`` (the writer's check), ``passed`` must be there."""
    components = entry.get("components") if isinstance(entry, Mapping) else None
    if not isinstance(components, list) or not components or not all(isinstance(c, str) for c in components):
        raise _fail(path, f"concept {concept!r} needs 'components', a non-empty list of component names")
    if len(set(components)) != len(components):
        duplicated = sorted(name for name, n in Counter(components).items() if n > 1)
        shown = duplicated[:10] + ([f"... {len(duplicated) - 10} more"] if len(duplicated) > 10 else [])
        raise _fail(path, f"concept {concept!r} lists {shown} more than once")
    checks = entry.get("verification", {})
    if not isinstance(checks, Mapping):
        raise _fail(path, f"concept {concept!r}: 'verification' must be an object")
    typo = _misspelt(entry, ("components", "verification")) or _misspelt(checks, ("passed", "per_component"))
    if typo:
        raise _fail(path, f"concept {concept!r}: key {typo[0]!r} is not a field; did you mean {typo[1]!r}?")
    if require_passed and "passed" not in checks:
        raise _fail(path, f"concept {concept!r}: verification has no 'passed' (true or false: whether the concept's "
                          "causal check passed)")
    if "passed" in checks and not isinstance(checks["passed"], bool):
        raise _fail(path, f"concept {concept!r}: verification.passed is {checks['passed']!r} "
                          f"({type(checks['passed']).__name__}), expected JSON true or false")
    if "per_component" in checks:  # the truth verified component by component (analysis/component_truth.py)
        try:
            check_block(checks["per_component"], components, f"concept {concept!r}", checks.get("passed"))
        except ValueError as exc:
            raise _fail(path, str(exc)) from None
    return tuple(components), dict(checks)


def parse_ground_truth(data: Mapping[str, Any], path: str = "<ground truth>", require_passed: bool = False
                       ) -> GroundTruth:
    """Validate a ground-truth mapping (the parsed JSON) and return it as a :class:`GroundTruth`: the one validation
    of the format, run by the reader (:func:`read_ground_truth`) and by the writer (:func:`write_ground_truth`).

    Args:
        data: the parsed JSON.
        path: the file, for messages.
        require_passed: every concept's verification must hold ``passed`` (the writer's rule; files written before
            it, and hand-made ones, may leave it out and then read as not verified).

    Returns:
        The validated :class:`GroundTruth`.

    Raises:
        GroundTruthError: a ValueError naming the file, the field and the fix (wrong format string, missing or
            mistyped field, a concept with no or duplicated components, a ``passed`` that is not a boolean, or
            missing under ``require_passed``, a ``per_component`` block its truth contradicts).
    """
    if not isinstance(data, Mapping):
        raise _fail(path, f"the top level is a {type(data).__name__}, not a JSON object")
    found = data.get("format")
    if found != GROUND_TRUTH_FORMAT:
        raise _fail(path, f"format is {found!r}, expected {GROUND_TRUTH_FORMAT!r}")
    typo = _misspelt(data, GROUND_TRUTH_FIELDS)
    if typo:
        raise _fail(path, f"key {typo[0]!r} is not a field; did you mean {typo[1]!r}?")
    labels = {key: _text_field(data, key, path, key in ("experiment", "kind")) for key in ("experiment", "kind",
                                                                                           "model", "how")}
    if "concepts" not in data:
        raise _fail(path, "field 'concepts' is missing")
    if labels["kind"] not in ("vision", "language"):
        raise _fail(path, f"kind is {labels['kind']!r}, expected 'vision' or 'language'")
    n_components = data.get("n_components")
    if n_components is not None and (
        isinstance(n_components, bool) or not isinstance(n_components, int) or n_components < 1
    ):
        raise _fail(path, f"n_components is {n_components!r}, expected a positive integer")
    concepts_in = data["concepts"]
    if not isinstance(concepts_in, Mapping) or not concepts_in:
        raise _fail(path, "'concepts' must be a non-empty object {concept: {...}}")
    concepts: dict[str, tuple[str, ...]] = {}
    verification: dict[str, dict[str, Any]] = {}
    for concept, entry in concepts_in.items():
        concepts[str(concept)], verification[str(concept)] = _concept_entry(str(concept), entry, path, require_passed)
    return GroundTruth(
        experiment=labels["experiment"], kind=labels["kind"], model=labels["model"], how=labels["how"],
        n_components=n_components, concepts=concepts, verification=verification, path=path,
    )  # fmt: skip


def read_ground_truth(path: str | os.PathLike) -> GroundTruth:
    """Read and validate a ground-truth JSON file (:func:`parse_ground_truth`), strictly
    (:func:`certified_circuits.storage.documents.read_json_document`: UTF-8, no key twice, so a concept given
    twice is refused rather than kept once, and the format :data:`GROUND_TRUTH_FORMAT`). The one reader of the
    file: recovery, stability and the summary's findings all read it here.

    Args:
        path: the file.

    Returns:
        The validated :class:`GroundTruth`.

    Raises:
        ValueError: the file is not UTF-8 JSON, gives a key twice, or is not a valid ground truth (the message
            names the file and the fix).
    """
    data = read_json_document(path, "rerun the stage that writes it (vision-ground-truth or language-ground-truth)",
                              fmt=GROUND_TRUTH_FORMAT, what="ground-truth file")
    return parse_ground_truth(data, str(path))


#: the writer's fix, when the document a stage built is refused (nothing is written)
WRITE_FIX = ("nothing was written: the stage built a ground truth its reader would refuse; give write_ground_truth "
             "each concept's components as names of the model's components, none twice, and a verification with "
             "'passed' (true or false) and the per_component block of analysis/component_truth.py")


def _unwritable(value: Any, where: str = "") -> str | None:
    """The first field of a document that JSON cannot carry as the reader reads it: a NaN or infinite number (the
    reader refuses them) or a value of no JSON type (e.g. a numpy float32), as ``"<field> is <what>"``; None when
    there is none."""
    if isinstance(value, Mapping):
        found = (_unwritable(v, f"{where}.{k}" if where else str(k)) for k, v in value.items())
        return next((f for f in found if f), None)
    if isinstance(value, (list, tuple)):
        return next((f for f in (_unwritable(v, f"{where}[{i}]") for i, v in enumerate(value)) if f), None)
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where} is {value} (JSON has no NaN or infinity: write a finite number, or null)"
    if value is None or isinstance(value, (str, int, float)):
        return None
    return f"{where} is a {type(value).__name__} (not a JSON value: convert it to a number, string, list or object)"


def write_ground_truth(
    path: str | os.PathLike,
    *,
    experiment: str,
    kind: str,
    model: str,
    how: str,
    names: Sequence[str],
    concepts: Mapping[str, Mapping[str, Any]],
    planted: Mapping[str, Any] | None = None,
) -> GroundTruth:
    """Write a ground-truth file (format :data:`GROUND_TRUTH_FORMAT`): the one writer of the format, which the
    vision and language ground-truth stages call. The document is checked as the reader will read it before the
    atomic write (:func:`~certified_circuits.storage.atomic.write_json`), so an invalid one leaves no file:

    1. it survives JSON as the reader parses it (no NaN or infinity, every value a JSON type, no key twice);
    2. :func:`parse_ground_truth` accepts it, with ``passed`` required of every concept;
    3. every concept's components are among ``names`` and leave some out (:func:`truth_mask`, the check recovery
       runs against the votes' names), so ``n_components = len(names)`` is the truth's ``U``.

    Args:
        path: the file to write.
        experiment: the experiment's name.
        kind: ``"vision"`` or ``"language"``.
        model: the model, in words.
        how: how the truth is known and checked.
        names: the model's ``[U]`` component names, as in its attribution files.
        concepts: concept -> ``{"components": [names], "verification": {"passed": bool, "per_component": {...},
            ...}, ...}`` (an entry may carry more, e.g. the language truth's ``heads``).
        planted: the planted model's spec (vision), written as ``planted``; None leaves it out.

    Returns:
        The validated :class:`GroundTruth` as it will be read back.

    Raises:
        ValueError: ``"<path> (not written): <the field and what is wrong>; nothing was written: ..."``, before
            anything is written.
    """
    where = f"{path} (not written)"
    document: dict[str, Any] = {
        "format": GROUND_TRUTH_FORMAT,
        "experiment": experiment,
        "kind": kind,
        "model": model,
        "how": how,
        "n_components": len(names),
        **({} if planted is None else {"planted": planted}),
        "concepts": concepts,
    }
    try:
        as_read = json.loads(json.dumps(document, allow_nan=False), object_pairs_hook=unique_keys)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {_unwritable(document) or exc}; {WRITE_FIX}") from None
    try:
        truth = parse_ground_truth(as_read, where, require_passed=True)
    except GroundTruthError as exc:
        raise ValueError(f"{where}: {exc.problem}; {WRITE_FIX}") from None
    for concept in truth.concepts:
        truth_mask(truth, concept, names, f"the model's {len(names)} components")
    write_json(path, document)
    return replace(truth, path=str(path))


def truth_mask(
    truth: GroundTruth, concept: str, names: Sequence[str] | None, where: str = "the circuits"
) -> np.ndarray:
    """The concept's true components as a bool ``[U]`` mask over ``names`` (the votes' or attributions' names).

    Args:
        truth: the ground truth.
        concept: a concept of ``truth.concepts``.
        names: the ``[U]`` component names the circuits are indexed by.
        where: what ``names`` come from, for messages (a file path).

    Returns:
        bool ``[U]``: True for the true components.

    Raises:
        ValueError: the concept is not in the truth; ``names`` are missing (older votes files), have another
            length than the truth's ``n_components``, or lack some true component names (each is named, with the
            fix); the truth covers every component (no negatives: FPR undefined).
    """
    if concept not in truth.concepts:
        raise ValueError(
            f"{truth.path}: no ground truth for concept {concept!r} (it has {sorted(truth.concepts)}): "
            "pass the ground-truth file of this experiment, or drop this concept's circuits"
        )
    if names is None:
        raise ValueError(
            f"{where} record no component names, so the ground truth cannot be matched: rerun the votes "
            "stage (votes files record the attribution file's components/name)"
        )
    names = [str(n) for n in names]
    if truth.n_components is not None and truth.n_components != len(names):
        raise ValueError(
            f"{truth.path} is of {truth.n_components} components but {where} have {len(names)}: the "
            "ground truth and the circuits are of different models or graphs; pass matching files"
        )
    position = {name: i for i, name in enumerate(names)}
    missing = [name for name in truth.concepts[concept] if name not in position]
    if missing:
        shown = ", ".join(repr(m) for m in missing[:10]) + (
            f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        )
        raise ValueError(
            f"{truth.path}: concept {concept!r} names {len(missing)} component(s) that {where} do not "
            f"have: {shown} (names there look like {names[:3]}); write the ground truth with the "
            "attribution file's components/name, or pass the circuits of the same model"
        )
    mask = np.zeros(len(names), dtype=bool)
    mask[[position[name] for name in truth.concepts[concept]]] = True
    if mask.all():
        raise ValueError(
            f"{truth.path}: concept {concept!r} marks all {mask.size} components true, so no false "
            "positive is possible and FPR is undefined; a ground truth must leave components out"
        )
    return mask


def grey_mask(truth: GroundTruth, concept: str, names: Sequence[str]) -> np.ndarray:
    """The concept's grey components (:meth:`GroundTruth.grey`) as a bool ``[U]`` mask over ``names``."""
    return np.isin(np.asarray([str(n) for n in names]), list(truth.grey(concept)))


def method_circuits(votes: Votes, certificates: Certificates) -> dict[str, np.ndarray]:
    """The circuits of :data:`RECOVERY_METHODS`, bool ``[nK, U]`` each (module docstring): the paper's three from
    :func:`~certified_circuits.core.certification.method_masks`, renamed by :data:`METHOD_MASKS`, and
    ``certified_in_abstain`` (every component not certified out).

    Args:
        votes: the vote counts.
        certificates: their decisions and majority vote.

    Returns:
        recovery method -> its circuits, in :data:`RECOVERY_METHODS` order.

    Raises:
        ValueError: the votes and certificates are of different shapes.
    """
    masks = method_masks(votes, certificates)
    circuits = {method: masks[name] for method, name in METHOD_MASKS.items()}
    circuits["certified_in_abstain"] = np.asarray(certificates.decision) != OUT
    return {method: circuits[method] for method in RECOVERY_METHODS}


def confusion(circuits: np.ndarray, truth: np.ndarray) -> dict[str, np.ndarray]:
    """Confusion counts of circuits against the truth, over the last axis.

    Args:
        circuits: bool ``[..., U]``.
        truth: bool ``[U]``.

    Returns:
        int64 ``[...]`` each: ``tp = sum(C & T)``, ``fp = sum(C & ~T)``, ``fn = sum(~C & T)``, ``tn = sum(~C & ~T)``.
    """
    circuits = np.asarray(circuits, dtype=bool)
    truth = np.asarray(truth, dtype=bool)
    if circuits.shape[-1] != truth.shape[0]:
        raise ValueError(f"circuits have {circuits.shape[-1]} components but the truth has {truth.shape[0]}")
    tp = (circuits & truth).sum(axis=-1, dtype=np.int64)
    fp = circuits.sum(axis=-1, dtype=np.int64) - tp
    positives, negatives = int(truth.sum()), int((~truth).sum())
    return {"tp": tp, "fp": fp, "fn": positives - tp, "tn": negatives - fp}


def rates(counts: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Precision, recall (TPR), FPR and the empty-circuit flag from :func:`confusion` counts.

    Returns:
        float64 ``precision = tp / (tp + fp)`` (NaN for an empty circuit), ``recall = tp / (tp + fn)``,
        ``fpr = fp / (fp + tn)`` (NaN when there are no positives, resp. negatives), and bool ``empty_circuit``
        (``tp + fp == 0``).
    """
    tp, fp, fn, tn = (np.asarray(counts[key], dtype=np.float64) for key in ("tp", "fp", "fn", "tn"))
    with np.errstate(invalid="ignore", divide="ignore"):
        return {
            "precision": np.where(tp + fp > 0, tp / (tp + fp), np.nan),
            "recall": np.where(tp + fn > 0, tp / (tp + fn), np.nan),
            "fpr": np.where(fp + tn > 0, fp / (fp + tn), np.nan),
            "empty_circuit": (tp + fp) == 0,
        }


def nearest_k(k_grid: Sequence[float] | np.ndarray, k: float) -> float:
    """The K of a grid nearest ``k`` (ties to the smaller K).

    Args:
        k_grid: K targets, in any order, repeats allowed (a table's ``k_target`` column).
        k: the K wanted.

    Returns:
        ``argmin_g |g - k|`` over the distinct grid values: ``nearest_k([0.1, 0.25, 0.5], 0.2) == 0.25``.
    """
    grid = np.unique(np.asarray(k_grid, dtype=float))
    return float(grid[np.argmin(np.abs(grid - float(k)))])


def truth_size_k(
    n_true: Sequence[int] | np.ndarray, n_components: Sequence[int] | np.ndarray, k_grid: Sequence[float] | np.ndarray
) -> float:
    """The K of the grid where a circuit has the truth's size: nearest the mean of ``n_true / n_components`` over
    the rows given (one per concept, method or K). There precision equals recall up to rounding (R-precision), a
    recovery point that involves no selection.

    Returns:
        :func:`nearest_k` of that share: 36 true of 180 components on the grid (0.15, 0.2, 0.25) -> 0.2.
    """
    share = float(np.mean(np.asarray(n_true, dtype=float) / np.asarray(n_components, dtype=float)))
    return nearest_k(k_grid, share)


def roc_auc(fpr: np.ndarray, tpr: np.ndarray) -> np.ndarray:
    """AUROC over a sweep of circuit sizes (module docstring): trapezoid of TPR over FPR along the last axis.

    Args:
        fpr, tpr: float ``[..., nK]``, one point per K.

    Returns:
        float64 ``[...]``: the area under the points plus ``(0, 0)`` and ``(1, 1)``, sorted by FPR (ties by TPR);
        NaN where a point is NaN.
    """
    fpr = np.asarray(fpr, dtype=np.float64)
    tpr = np.asarray(tpr, dtype=np.float64)
    if fpr.shape != tpr.shape:
        raise ValueError(f"fpr {fpr.shape} and tpr {tpr.shape} must have one shape")
    lead = fpr.shape[:-1]
    x = np.concatenate([np.zeros(lead + (1,)), fpr, np.ones(lead + (1,))], axis=-1)
    y = np.concatenate([np.zeros(lead + (1,)), tpr, np.ones(lead + (1,))], axis=-1)
    order = np.lexsort((y, x), axis=-1)
    x, y = np.take_along_axis(x, order, axis=-1), np.take_along_axis(y, order, axis=-1)
    area = np.sum(np.diff(x, axis=-1) * (y[..., 1:] + y[..., :-1]) / 2.0, axis=-1)
    return np.where(np.isnan(fpr).any(axis=-1) | np.isnan(tpr).any(axis=-1), np.nan, area)


def scored_only(circuits: np.ndarray, truth: np.ndarray, exclude: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """``circuits [..., U]`` and ``truth [U]`` restricted to the scored components: a grey component (``exclude``)
    is neither a hit nor a miss, so it leaves precision, recall, FPR and AUROC (issue 50)."""
    if exclude is None or not np.asarray(exclude).any():
        return circuits, truth
    keep = ~np.asarray(exclude, dtype=bool)
    return circuits[..., keep], np.asarray(truth, dtype=bool)[keep]


def recovery_rows(votes: Votes, certificates: Certificates, truth: np.ndarray,
                  labels: Mapping[str, Any] | None = None,
                  exclude: np.ndarray | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Tidy rows of one circuit pair: one per (method, K) with the counts and rates, plus ``labels``.

    Columns: ``**labels, method, k_target, tp, fp, fn, tn, precision, recall, fpr, empty_circuit, size``
    (``size``: the circuit's number of scored components; ``exclude``: grey components, left out, :func:`scored_only`).
    """
    circuits = method_circuits(votes, certificates)
    stacked, truth = scored_only(np.stack([circuits[m] for m in RECOVERY_METHODS]), truth, exclude)  # [M, nK, U]
    counts = confusion(stacked, truth)
    measured = rates(counts)
    k_grid = np.asarray(votes.k_grid, dtype=np.float64)
    rows = []
    for m, method in enumerate(RECOVERY_METHODS):
        for k, k_target in enumerate(k_grid):
            row = {**(labels or {}), "method": method, "k_target": float(k_target)}
            row.update({key: int(counts[key][m, k]) for key in ("tp", "fp", "fn", "tn")})
            row.update({key: float(measured[key][m, k]) for key in ("precision", "recall", "fpr")})
            row["empty_circuit"] = bool(measured["empty_circuit"][m, k])
            row["size"] = int(counts["tp"][m, k] + counts["fp"][m, k])
            rows.append(row)
    return rows


def auroc_by_method(votes: Votes, certificates: Certificates, truth: np.ndarray,
                    exclude: np.ndarray | None = None) -> dict[str, float]:  # fmt: skip
    """AUROC of each of :data:`RECOVERY_METHODS` over the votes' K grid (:func:`roc_auc`), grey components
    (``exclude``) left out."""
    circuits = method_circuits(votes, certificates)
    stacked, truth = scored_only(np.stack([circuits[m] for m in RECOVERY_METHODS]), truth, exclude)
    measured = rates(confusion(stacked, truth))
    area = roc_auc(measured["fpr"], measured["recall"])
    return {method: float(area[m]) for m, method in enumerate(RECOVERY_METHODS)}
