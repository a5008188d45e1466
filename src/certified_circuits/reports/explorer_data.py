"""The explorer's data: the circuits it shows, read from their files, and what is chosen for each page.

:class:`Experiment` and :class:`Circuit` name the files; :func:`read_circuit` reads them; the page data of a
vision circuit (:func:`vision_circuit_data`), a language circuit as EAP-IG Graph JSON (:func:`circuit_json`),
the page's default K (:func:`operating_k`), the K a page draws (:func:`drawn_k`: the truth's size on a
testbed model) and a task's
held-out setting (:func:`select_setting`), and on a testbed model the known circuit (:func:`read_truths`,
:func:`concept_truth`) with each method's precision and recall against it (:func:`truth_recovery`, by
:mod:`certified_circuits.analysis.recovery`). Nothing here writes HTML (:mod:`.html`, :mod:`.explorer`).

Categories are :func:`certified_circuits.analysis.evaluation.channel_categories` (one definition for the
feature figure, the spurious index and this explorer).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from certified_circuits.analysis.evaluation import channel_categories
from certified_circuits.analysis.recovery import GroundTruth, read_ground_truth, recovery_rows, truth_mask
from certified_circuits.core.certification import certified_radius
from certified_circuits.language import names as grammar

#: category of a component -> (one-letter code in the page data, CSS class, label)
CATEGORIES = {
    "certified_in": ("I", "in", "certified in"),
    "abstained": ("A", "abs", "abstained (in the baseline only)"),
    "other": ("X", "oth", "abstained (outside the baseline)"),
    "certified_out": ("O", "out", "certified out"),
}


@dataclass(frozen=True)
class Experiment:
    """One experiment's tables folder. ``kind``: ``vision`` or ``language``."""

    kind: str
    name: str
    tables: Path


@dataclass(frozen=True)
class Circuit:
    """The files of one concept's circuit (vision: one scorer at the main setting; language: one method and
    setting). A concept given circuits of several scorers (methods) gets a switch between them on its page; the
    first given is the main scorer."""

    experiment: str
    concept: str
    attributions: Path
    votes: Path
    certificates: Path
    features: Path | None = None


def read_circuit(circuit: Circuit):
    """(attributions, votes, certificates) of a :class:`Circuit`."""
    from certified_circuits.storage.store import read_attributions, read_certificates, read_votes

    return read_attributions(circuit.attributions), read_votes(circuit.votes), read_certificates(circuit.certificates)


def vision_circuit_data(names: Sequence[str], groups: np.ndarray, votes, certificates) -> dict:
    """The page data of a vision circuit: per K a category string (one letter per channel), the baseline as
    0/1 string, and the certification votes (uint16, base64) for the hover text."""
    categories = {name: code for name, (code, _, _) in CATEGORIES.items()}
    per_k = []
    for i, k in enumerate(votes.k_grid):
        labels = channel_categories(certificates.decision[i], votes.baseline[i])
        per_k.append(
            {
                "k": float(k),
                "cat": "".join(categories[label] for label in labels),
                "base": "".join("1" if b else "0" for b in votes.baseline[i]),
                "votes": base64.b64encode(votes.certification_counts[i].astype("<u2").tobytes()).decode(),
            }
        )
    layers = []
    for g in np.unique(groups):
        members = np.flatnonzero(groups == g)
        layers.append(
            {"name": str(names[members[0]]).rsplit(".", 1)[0], "start": int(members[0]), "size": int(len(members))}
        )
    return {
        "names": [str(n).rsplit(".", 1)[-1] for n in names],
        "layers": layers,
        "k": per_k,
        "n": int(votes.attrs["n"]),
    }


def circuit_json(names: Sequence[str], scores: np.ndarray, decision: np.ndarray, k: float, attrs: dict) -> str:
    """The certified circuit of a task as hannamw/EAP-IG Graph JSON (:mod:`.eap_graph`): ``cfg`` (with K and the
    setting), ``nodes`` and ``edges``, each edge with its ``score`` (the mean per-example score), ``in_graph``
    (certified in) and, beside them, its ``decision``: 1 in, 0 out, -1 abstain (edge level)."""
    from certified_circuits.reports.eap_graph import graph_cfg
    from certified_circuits.reports.language_graphs import graph_dict

    cfg = graph_cfg(
        int(attrs.get("n_layers", 0)),
        int(attrs.get("n_heads", 0)),
        int(attrs.get("d_model") or 0),
        bool(int(attrs.get("parallel_attn_mlp") or 0)),
        k=k,
        tau=float(attrs["tau"]),
        p_del=float(attrs["p_del"]),
        alpha=float(attrs["alpha"]),
        radius=certified_radius(float(attrs["tau"]), float(attrs["p_del"])),
    )
    graph = graph_dict(cfg, list(names), scores, np.asarray(decision) == 1)
    if names and grammar.is_edge(names[0]):
        for name, d in zip(names, decision):
            graph["edges"][name]["decision"] = int(d)
    else:
        for name, d in zip(names, decision):
            graph["nodes"][name]["decision"] = int(d)
    return json.dumps(graph)


#: what to do when a table the explorer reads is refused
TABLE_FIX = "rerun the report stage that writes it (make reproduce reruns only what is missing)"


def _operating_choice(tables: Path, concept: str | None, scorer: str | None) -> tuple[float, str] | None:
    """The page's default K and, in words, what chose it (the one lookup behind :func:`operating_k` and
    :func:`operating_k_name`), or None when the run chose none. Each table's K column is read by the one K parser
    (:func:`~certified_circuits.storage.tables.read_k_table`: a share in (0, 1], ``100%`` the whole model; a value
    outside is refused with the file, row and column); a row with no K (an empty cell) chooses nothing."""
    from certified_circuits.reports.tables import selection_name
    from certified_circuits.storage.tables import read_k_table

    for name, column in (("selected_cacc_raw.csv", "certified_k_target"), ("operating_points.csv", "k_target")):
        path = tables / name
        if not path.is_file():
            continue
        rows = read_k_table(path, str(path), [], TABLE_FIX, {column: True}, {"concept": str}, allow_empty=True)
        rows = rows[rows[column].notna()]
        if scorer is not None and "scorer" in rows:
            rows = rows[rows.scorer == scorer]
        if concept is not None and "concept" in rows:
            rows = rows[rows.concept.astype(str) == concept]
        if "criterion" in rows:
            rows = rows[rows.criterion == "certified_peak"]
            rows = rows.sort_values("eval_set", key=lambda e: ~e.isin(["id", "id_test"]), kind="stable")
        if len(rows):
            row = rows.iloc[0]
            why = (
                f"the certified circuit's K {selection_name(row)}"
                if name.startswith("selected")
                else f"the K of the certified curve's peak cACC on {row.get('eval_set', 'ID data')}"
            )
            return float(row[column]), why
    return None


def operating_k(tables: Path, concept: str | None, scorer: str | None, k_grid: np.ndarray) -> float:
    """The page's default K: the certified circuit's K chosen on held-out data (``selected_cacc_raw.csv``, the
    same choice as the fair-comparison table) when the run made one, else the K of the certified curve's
    peak cACC (``operating_points.csv``) on ID data, else the middle of the grid."""
    choice = _operating_choice(tables, concept, scorer)
    return choice[0] if choice else float(k_grid[len(k_grid) // 2])


def operating_k_name(tables: Path, concept: str | None, scorer: str | None) -> str:
    """What chose the page's default K, in words (:func:`operating_k`): ``"the certified circuit's K chosen by max
    cACC on id_test"``; the same name the summary and tables give it."""
    choice = _operating_choice(tables, concept, scorer)
    return choice[1] if choice else "the middle of the K grid (this run chose no K)"


def drawn_k(
    tables: Path,
    concept: str | None,
    scorer: str | None,
    k_grid: np.ndarray,
    truth: GroundTruth | None = None,
    page_concept: str = "",
    n_components: int = 0,
) -> tuple[float, str]:
    """The K a page draws its circuit at (a class page's K selector opens there; a task page draws that K alone),
    and what chose it, in words. One rule for every page:

    1. where the page's concept has a ground truth that passed its causal check (``truth.verified``): the K of the
       grid nearest the truth's size, ``|T| / U`` (:func:`~certified_circuits.analysis.recovery.truth_size_k`).
       There the baseline keeps as many components as the truth and no selection is involved, so the drawing shows
       each method's hits and misses against it; a K chosen on held-out data can be most of the model (the noisy
       language model's: 70% of 310 edges, precision 0.04), which draws nothing worth reading;
    2. otherwise the operating K (:func:`operating_k`: the certified circuit's K chosen on held-out data, else the
       K of its ID peak, else the grid's middle), named by :func:`operating_k_name`.

    Args:
        tables: the experiment's tables folder (rule 2).
        concept, scorer: as :func:`operating_k` (rule 2; ``concept`` None for a vision class).
        k_grid: the circuit's K grid.
        truth: the experiment's ground truth, or None.
        page_concept: the page's concept (its truth is ``truth.concepts[page_concept]``).
        n_components: ``U``, the circuit's components.

    Returns:
        (K, why).
    """
    from certified_circuits.analysis.recovery import truth_size_k

    if truth is not None and page_concept in truth.concepts and truth.verified(page_concept) and n_components:
        size = len(truth.concepts[page_concept])
        k = truth_size_k([size], [n_components], k_grid)
        return k, (
            f"the K of the grid nearest the truth's size ({size} of {n_components} components, verified causally): "
            "there the baseline keeps as many components as the truth, and no selection is involved"
        )
    return operating_k(tables, concept, scorer, k_grid), operating_k_name(tables, concept, scorer)


def nearest_index(k_grid: np.ndarray, k: float) -> int:
    return int(np.argmin(np.abs(np.asarray(k_grid, float) - k)))


def select_setting(tables: Path, task: str) -> str | None:
    """The certified setting chosen on held-out prompts (selected_cacc_raw.csv), or None."""
    from certified_circuits.storage.tables import read_csv_table

    path = tables / "selected_cacc_raw.csv"
    if not path.is_file():
        return None
    rows = read_csv_table(path, str(path), ["concept"], TABLE_FIX, {"concept": str}, allow_empty=True)
    rows = rows[rows.concept.astype(str) == task]
    return str(rows.iloc[0]["certified_setting"]) if len(rows) and "certified_setting" in rows else None


def read_truths(paths: Iterable[str | Path]) -> dict[str, GroundTruth]:
    """The ground truths of the run's testbed models, by experiment.

    Args:
        paths: ground-truth JSON files (``ground_truth/<experiment>.json``), read and validated by
            :func:`certified_circuits.analysis.recovery.read_ground_truth`.

    Returns:
        experiment name -> its :class:`~certified_circuits.analysis.recovery.GroundTruth`.

    Raises:
        ValueError: a file is not a valid ground truth, or two files are of one experiment.
    """
    truths: dict[str, GroundTruth] = {}
    for path in paths:
        truth = read_ground_truth(path)
        if truth.experiment in truths:
            raise ValueError(
                f"{path} and {truths[truth.experiment].path} are both ground truths of experiment "
                f"{truth.experiment!r}: pass one per experiment"
            )
        truths[truth.experiment] = truth
    return truths


def concept_truth(
    truths: Mapping[str, GroundTruth], experiment: str, concept: str, names: Sequence[str], where: str
) -> tuple[np.ndarray | None, str]:
    """A concept's true components over a circuit's components, or why there are none.

    Args:
        truths: :func:`read_truths`.
        experiment, concept: the page's.
        names: the ``[U]`` component names of the circuit (its attributions file's).
        where: the circuit's file, for messages.

    Returns:
        (bool ``[U]`` mask of :func:`~certified_circuits.analysis.recovery.truth_mask`, "") for a testbed
        concept; (None, the sentence the page shows) otherwise: no truth for the model, or none for the concept.

    Raises:
        ValueError: the truth does not match the circuit's components (:func:`truth_mask`'s message).
    """
    truth = truths.get(experiment)
    if truth is None:
        return None, f"No ground truth is known for this model (experiment {experiment}): no true components to show."
    if concept not in truth.concepts:
        return None, (
            f"The ground truth of experiment {experiment} has no circuit for {concept} "
            f"(it has {', '.join(sorted(truth.concepts))}): no true components to show."
        )
    return truth_mask(truth, concept, names, where), ""


def truth_recovery(votes, certificates, truth: np.ndarray) -> pd.DataFrame:
    """Each method's circuit scored against the truth at every K of the grid: the rows of
    :func:`certified_circuits.analysis.recovery.recovery_rows` (``method``, ``k_target``, ``tp``, ``fp``,
    ``size``, ``precision``, ``recall``, ``empty_circuit``, ...), with ``k_index`` (the row's position in
    ``votes.k_grid``).

    Args:
        votes, certificates: the circuit's.
        truth: bool ``[U]`` (:func:`concept_truth`).

    Returns:
        one row per (method, K).
    """
    rows = pd.DataFrame(recovery_rows(votes, certificates, truth))  # method by method, K by K in grid order
    rows["k_index"] = np.tile(np.arange(len(votes.k_grid)), len(rows) // max(len(votes.k_grid), 1))
    return rows
