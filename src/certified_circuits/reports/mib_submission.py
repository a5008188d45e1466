"""Certified language circuits as MIB circuit-track submissions (MIB: Mueller et al. 2025, "MIB: A Mechanistic
Interpretability Benchmark"; docs/mib.md). The faithfulness table on MIB's grid is :mod:`.mib_faithfulness`.

MIB takes, per ``<task>_<model>`` folder, either (1) one importance file or (2) 9 binary circuits, one with at
most ``floor(p E)`` edges for each p of {0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50}% (hannamw/MIB-circuit-track
``README.md``, "Submitting to the MIB Leaderboard"). Both formats are written, in two upload folders (a task
folder holds one format), beside the notes MIB never reads::

    OUT/importances/<method>_patching_<level>/<task>_<model>/importances.json     format (1)
    OUT/multiple_circuits/<method>_patching_<level>/<task>_<model>/circuit_<p>pct.json   format (2), 9 files
    OUT/notes/<task>_<model>.json                                                 the certificate, not uploaded

``importances.json`` is the path MIB's ``run_evaluation.py`` reads (``{circuit_dir}/{method}_{ablation}_{level}/
{task}_{model}/importances.json``), so ``run_evaluation.py --circuit-dir OUT/importances --method <method>``
scores format (1) as is. MIB names no binary file; ``circuit_<p>pct.json`` is this package's name.

**What MIB's evaluator does with a file.** ``evaluate_area_under_curve`` calls ``graph.apply_topn(n, absolute)``
(reset: every edge out, then the ``n = int(p E)`` best by ``score``, by ``|score|`` when ``absolute``), then
``Graph.prune`` (nodes without an incoming or an outgoing edge leave, with their edges; at EAP-IG 7af394a one pass
there, since ``apply_topn`` has set the nodes already, and ``evaluate_graph`` prunes again until nothing changes:
docs/mib.md). It re-ranks by ``score``; ``in_graph`` is discarded. So the scores, not the membership, say what is evaluated:

- **binary file at p** (:func:`binary_scores`): the certified-in edges C score 1; every other edge scores less,
  each its own score in (0, 1) (all > 0: signed and absolute rankings agree; distinct: no tie for torch to
  break). First come the *dead* edges B, the edges that no path from ``input`` to ``logits`` through C can use
  (their child cannot reach ``logits`` in C, or their parent reaches it but cannot be reached from ``input``),
  then the rest, each group by the mean attribution (``|mean|`` for an absolute-ranking scorer). For n = int(p E)
  >= |C|, ``apply_topn(n)`` takes C and the best n - |C| of that order. Where |B| >= n - |C| they are all in B
  and ``prune`` removes them: MIB evaluates ``prune(C)``, the certified circuit, exactly (``keeps_membership``
  in the notes). Where it fails (a large circuit that keeps every node alive leaves few dead edges; the run
  warns), MIB's ``apply_topn`` always evaluates n edges, more than certified: C, B and the best-attributed live
  edges, the same ones in every run. ``in_graph`` marks C, for an evaluator that reads it;
- **importance file** (:func:`importance_order`): one ranking; at p MIB evaluates its first n edges. The order:
  edges by the smallest K of the grid at which they are certified in, then the edges never certified in that
  abstain at some K, then the rest; ties by the votes' ranking (|mean EAP-IG score|). The scores are
  ``(E - position) / E`` (distinct, positive). Where the certified sets are nested (C_K within C_K' for K < K'),
  the first n edges are C_K for the largest K with |C_K| <= n, followed by the next edges to be certified in
  (C_K' minus C_K for the next K'), and so on down the order; where they are not nested, the union of C_K' for
  every K' <= K comes first. MIB always evaluates n edges: the importance circuit at p is the certified circuit
  padded to n, the binary one is not.

The notes (:func:`write_submission`) record per fraction the K, the budget, ``truncated``, the counts, the
abstained edges and ``keeps_membership``, the setting, and whether the pair is submittable (MIB evaluates only
:data:`~certified_circuits.analysis.mib_constants.MIB_PAIRS`, on its own models' shapes).
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from certified_circuits.analysis import faithfulness as fa
from certified_circuits.analysis.mib_constants import (
    MIB_MODEL_SHAPES,
    MIB_MODELS,
    SUBMISSION_FRACTIONS,
    mib_pair,
    pair_problem,
)
from certified_circuits.reports.eap_graph import circuit_graph_json, decisions_sidecar, graph_cfg, write_graph_json
from certified_circuits.storage.atomic import write_text

log = logging.getLogger("certified_circuits")

#: MIB's ablation for the patching evaluation this package does (interchange patching with the corrupted run)
ABLATION = "patching"
#: a task or model name in a submission folder: letters, digits, '.', '-' (the '_' separates them)
FOLDER_PART = r"[A-Za-z0-9.\-]+"
#: the importance file's name: the one MIB's run_evaluation.py reads
IMPORTANCE_FILE = "importances.json"
#: the upload folders of the two formats (MIB's example repository: importances/, multiple_circuits/)
IMPORTANCES, MULTIPLE = "importances", "multiple_circuits"
#: the folder of the notes (not uploaded)
NOTES = "notes"
#: a binary file's score of a certified-in edge; every other edge scores below it, each its own (binary_scores)
IN_SCORE = 1.0


def percent_label(fraction: float) -> str:
    """A fraction as MIB's percentage: 0.001 -> ``0.1``, 0.05 -> ``5``, 1.0 -> ``100``."""
    return f"{round(float(fraction) * 100, 6):g}"


def circuit_file(fraction: float) -> str:
    """The binary file at one fraction: ``circuit_<percent>pct.json`` (``circuit_0.1pct.json``); MIB names none."""
    return f"circuit_{percent_label(fraction)}pct.json"


def task_folder(task: str, model: str) -> str:
    """``<task>_<model>``, the task's ``_`` written ``-`` as MIB does (``task.replace('_', '-')``).

    Args:
        task: the task name (``arc_easy`` -> ``arc-easy``).
        model: MIB's short model name (``gpt2``, ``qwen2.5``, ``gemma2``, ``llama3``): no ``_``.

    Returns:
        The folder name, e.g. ``ioi_gpt2``.

    Raises:
        ValueError: a name that would not split back into task and model at its one ``_``.
    """
    task_part = task.replace("_", "-")
    for what, part in (("task", task_part), ("model", model)):
        if not re.fullmatch(FOLDER_PART, part):
            raise ValueError(f"MIB {what} name {part!r}: letters, digits, '.' and '-' only (the '_' joins task and model)")
    return mib_pair(task, model)


def method_folder(method: str, level: str = "edge", ablation: str = ABLATION) -> str:
    """``<method>_<ablation>_<level>`` (MIB's ``method_name_saveable``), e.g. ``certified-EAP-IG-inputs_patching_edge``."""
    return f"{method}_{ablation}_{level}"


def edge_ends(edge_names: Sequence[str]) -> tuple[list[str], list[str]]:
    """Each edge's parent node and child node (a head's q/k/v input is the head), as MIB's ``Graph.prune`` counts
    them."""
    from certified_circuits.language import names as grammar

    parents, children = [], []
    for name in edge_names:
        parent, child, _ = grammar.parse_edge(name)
        parents.append(parent)
        children.append(child)
    return parents, children


def _reach(starts: set[str], steps: Mapping[str, set[str]]) -> set[str]:
    """The nodes reachable from ``starts`` along ``steps``."""
    seen, todo = set(starts), list(starts)
    while todo:
        for nxt in steps.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def binary_scores(edge_names: Sequence[str], in_graph: np.ndarray, n: int, rank_scores: np.ndarray,
                  ends: tuple[list[str], list[str]] | None = None) -> tuple[np.ndarray, bool]:
    """The scores of one binary file that make MIB's ``apply_topn(n)`` + ``prune`` evaluate the circuit given,
    padded (where MIB must pad) deterministically with the best edges.

    With C the circuit, ``R_out`` the nodes with a path in C to ``logits`` and ``R_in`` those with a path in C
    from ``input``, the *dead* edges B are the edges outside C whose child is not in ``R_out`` (nor ``logits``),
    and those whose parent is in ``R_out`` but not in ``R_in`` (nor ``input``). Adding any subset of B to C adds no
    node to either reach set (a path through a B edge would need a C path that does not exist), so ``prune`` (which
    keeps exactly the edges on an ``input`` -> ``logits`` path) removes every B edge: ``prune(C + S) = prune(C)``.

    The order, best first: C (score :data:`IN_SCORE`), then B, then the other (*live*) edges; within B and within
    the live edges by ``rank_scores`` descending, then the lower index. Every edge outside C gets its own score,
    ``(m - i) / (m + 1)`` at position i of the m edges outside C: distinct (in float32 too, for m < 2**24), in
    (0, 1), all below C's and positive, so the signed and the absolute ranking agree and MIB's top n leaves no tie
    to torch's ``argsort``.

    Args:
        edge_names: every edge of the graph.
        in_graph: bool [E] the certified circuit C.
        n: MIB's edge count at the file's fraction, ``int(p E)`` (>= |C|).
        rank_scores: float [E] the mean attribution (``|mean|`` for an absolute-ranking scorer), higher first.
        ends: :func:`edge_ends` of ``edge_names``, when the caller has them.

    Returns:
        ``(scores, keeps)``: float [E]; ``keeps`` is True when |B| >= n - |C|: MIB's top n are then C and the best
        edges of B, and it evaluates ``prune(C)``. When C leaves too few dead edges (every node alive), no scores can
        do it: ``apply_topn`` always takes n edges, and the added live ones, the best-ranked, survive ``prune``.
    """
    from certified_circuits.language import names as grammar

    in_graph = np.asarray(in_graph, dtype=bool)
    rank_scores = np.asarray(rank_scores, dtype=np.float64)
    if rank_scores.shape != in_graph.shape:
        raise ValueError(f"{rank_scores.size} ranking scores for {in_graph.size} edges")
    parents, children = edge_ends(edge_names) if ends is None else ends
    forward: dict[str, set[str]] = {}
    backward: dict[str, set[str]] = {}
    for i in np.flatnonzero(in_graph):
        forward.setdefault(parents[i], set()).add(children[i])
        backward.setdefault(children[i], set()).add(parents[i])
    r_in, r_out = _reach({grammar.INPUT}, forward), _reach({grammar.LOGITS}, backward)
    dead = np.array([(c not in r_out) or (p in r_out and p not in r_in) for p, c in zip(parents, children)],
                    dtype=bool) & ~in_graph
    outside = np.flatnonzero(~in_graph)
    # tier 0: dead, 1: live; then the ranking descending, then the index
    order = outside[np.lexsort((outside, -rank_scores[outside], ~dead[outside]))]
    m = outside.size
    scores = np.full(in_graph.shape, IN_SCORE, dtype=np.float64)
    scores[order] = (m - np.arange(m)) / (m + 1)
    return scores, bool(int(dead.sum()) >= int(n) - int(in_graph.sum()))


def importance_order(decision: np.ndarray, rank_scores: np.ndarray) -> np.ndarray:
    """The importance file's ranking of the edges (module docstring), best first.

    Args:
        decision: int [nK, E] in {1 in, 0 out, -1 abstain}, rows in grid order (K ascending).
        rank_scores: float [E] the votes' ranking (higher first).

    Returns:
        int [E] edge indices: by the first K certified in; then never-in edges that abstain at some K; then the
        rest; ties by ``rank_scores`` descending, then the lower index.
    """
    decision = np.asarray(decision)
    n_k = decision.shape[0]
    is_in = decision == 1
    first_in = np.where(is_in.any(0), is_in.argmax(0), n_k)
    tier = np.where(first_in < n_k, first_in, np.where((decision == -1).any(0), n_k, n_k + 1))
    index = np.arange(decision.shape[1])
    return np.lexsort((index, -np.asarray(rank_scores, dtype=np.float64), tier))


def importance_scores(order: np.ndarray) -> np.ndarray:
    """``(E - position) / E`` for each edge of ``order``: distinct, in (0, 1], so both MIB rankings follow it."""
    n_edges = len(order)
    scores = np.empty(n_edges, dtype=np.float64)
    scores[order] = (n_edges - np.arange(n_edges)) / n_edges
    return scores


def _fraction_note(c: Mapping[str, Any], edge_names: Sequence[str], decision: np.ndarray, setting) -> dict:
    note: dict[str, Any] = dict(fraction=c["fraction"], budget=c["budget"], k=c["k"], truncated=c["truncated"],
                                n_in=c["n_in"])
    if c["k_index"] is not None:
        side = decisions_sidecar(edge_names, decision[c["k_index"]], k=c["k"], setting=setting)
        note.update(abstain=side["abstain"], counts=side["counts"])
    else:
        note.update(abstain=[], counts={"in": 0, "out": 0, "abstain": 0})
    return note


def submission_files(cfg: Mapping[str, Any], edge_names: Sequence[str], decision: np.ndarray,
                     k_grid: Sequence[float], *, setting: Mapping[str, Any], rank_scores: np.ndarray,
                     fractions: Sequence[float] = SUBMISSION_FRACTIONS) -> dict[str, Any]:
    """Both submission formats of one task and their notes (module docstring).

    Args:
        cfg: the Graph JSON ``cfg`` (:func:`~.eap_graph.graph_cfg`).
        edge_names: every edge of the graph, in the certificate's component order.
        decision: int [nK, E] the certificate's decisions.
        k_grid: its K grid (ascending).
        setting: the certification setting (recorded in the notes).
        rank_scores: float [E] the votes' ranking (``|mean score|`` for EAP-IG): cuts a circuit over its budget
            and breaks the importance file's ties.
        fractions: default MIB's 9.

    Returns:
        ``{"binary": [(fraction, graph dict)], "importances": graph dict, "notes": {...}}``.
    """
    from certified_circuits.language import names as grammar

    edge_names = list(edge_names)
    if not edge_names or not all(grammar.is_edge(n) for n in edge_names):
        raise ValueError("MIB's circuit files are edge circuits: a node-level certificate cannot be exported")
    decision = np.asarray(decision)
    k_grid = np.asarray(k_grid, dtype=np.float64)
    if np.any(np.diff(k_grid) <= 0):
        raise ValueError(f"the K grid {k_grid.tolist()} must be ascending (the importance order reads it so)")
    binary, notes = [], []
    ends = edge_ends(edge_names)
    for c in fa.circuits_at_fractions(decision, k_grid, rank_scores, fractions):
        scores, keeps = binary_scores(edge_names, c["in_graph"], c["budget"], rank_scores, ends)
        binary.append((c["fraction"], circuit_graph_json(cfg, edge_names, scores, c["in_graph"])))
        note = _fraction_note(c, edge_names, decision, setting)
        note.update(file=circuit_file(c["fraction"]), keeps_membership=keeps)
        notes.append(note)
    order = importance_order(decision, rank_scores)
    importance = importance_scores(order)
    first_in = [np.flatnonzero(decision[i] == 1) for i in range(len(k_grid))]
    nested = all(set(first_in[i].tolist()) <= set(first_in[i + 1].tolist()) for i in range(len(k_grid) - 1))
    ever_in = (decision == 1).any(0)  # in_graph of the importance file: certified in at some K (MIB re-ranks)
    return {"binary": binary, "importances": circuit_graph_json(cfg, edge_names, importance, ever_in),
            "notes": {"fractions": notes, "setting": decisions_sidecar([], np.zeros(0, int), k=0.0,
                                                                        setting=setting)["setting"],
                      "k_grid": k_grid.tolist(), "nested": nested,
                      "importance_order": "first K certified in, then abstaining at some K, then out; ties by "
                                          "|mean score| (reports/mib_submission.py importance_order)"}}


def select_circuit(task: str, circuits: Sequence[tuple[str | os.PathLike, str | os.PathLike]],
                   selected: pd.DataFrame | None) -> tuple[Any, Any, Path, Path]:
    """The one certified circuit of a task that MIB's files and MIB's grid use: the setting selected on held-out
    prompts.

    Which setting: the certified method's setting in the ``selected_cacc_raw.csv`` table of ``report-sufficiency
    --select-on`` (column ``certified_setting``), chosen on the selection set (the language half's ``validation``
    prompts) by the one procedure that chooses every method's setting and K there (highest mean cACC; ties: the
    smaller K, then the first setting in sorted order); the same choice as ``report-graphs --selected`` and the explorer. Not the
    task's first setting: that one can certify nothing in (a vacuous or marginal plan), and a file of empty
    circuits says nothing. MIB's baselines need no choice: they rank the train attributions' mean score, which no
    setting changes. Without a selection table (``language.selection_set: null``) the task must come with exactly
    one circuit (the workflow then passes its first setting).

    Args:
        task: the task (concept) name.
        circuits: ``(votes, certificates)`` paths of the task's settings (one with ``selected`` None).
        selected: the ``selected_cacc_raw.csv`` table, or None.

    Returns:
        ``(votes, certificates, votes path, certificates path)`` of the chosen setting, read.

    Raises:
        ValueError: no circuit, several without a table, a task or setting the table does not name.
    """
    from certified_circuits.core.contracts import setting_columns
    from certified_circuits.storage.store import read_certificates, read_votes

    if not circuits:
        raise ValueError(f"{task}: no circuit given")
    if selected is None:
        if len(circuits) != 1:
            raise ValueError(f"{task}: {len(circuits)} circuits (settings) and no selected table to choose one: "
                             "give the selected_cacc_raw.csv of report-sufficiency --select-on, or one circuit")
        votes_path, cert_path = map(Path, circuits[0])
        return read_votes(votes_path), read_certificates(cert_path), votes_path, cert_path
    rows = selected[selected.concept.astype(str) == task] if "concept" in selected else selected.iloc[:0]
    if rows.empty or "certified_setting" not in rows:
        raise ValueError(f"the selected table has no certified setting for task {task!r}: was it made with --select-on?")
    wanted = str(rows.iloc[0]["certified_setting"])
    found = []
    for votes_path, cert_path in circuits:
        votes, certs = read_votes(votes_path), read_certificates(cert_path)
        setting = setting_columns(votes, certs)["setting"]
        if setting == wanted:
            return votes, certs, Path(votes_path), Path(cert_path)
        found.append(setting)
    raise ValueError(f"{task}: the selected certified setting {wanted} is not among the circuits given ({found})")


def submission_cfg(n_layers: int, n_heads: int, d_model: int, parallel: bool, *, task: str, model: str, method: str,
                   level: str) -> dict:
    """The ``cfg`` of the files: the graph's shape and labels; ``model`` is MIB's name of the model (its full name
    for MIB's models, else the short name given): never a local path, which a public upload would expose."""
    return graph_cfg(n_layers, n_heads, d_model, parallel, model=MIB_MODELS.get(model, model), task=task,
                     method=method, level=level)


#: what report-mib takes, said when it is given another run's files
LANGUAGE_FILES = ("report-mib takes a language run's files: each task's train attribution file "
                  "(attributions/language/train/<task>.h5), and its votes and certificates")


def graph_shape(attrs: Mapping[str, Any], where: str) -> tuple[int, int]:
    """The shape of the EAP graph an attribution file of a language run records (``n_layers`` L and ``n_heads`` H,
    from which MIB's graph and its ``E = sum_l [3H(1 + l(H+1)) + (1 + l(H+1) + H)] + 1 + L(H+1)`` edges are built).

    Args:
        attrs: the attribution file's attributes.
        where: the file and option, for messages (``"ATTR.h5 (--circuit ioi)"``).

    Returns:
        ``(n_layers, n_heads)``, each an integer >= 1.

    Raises:
        ValueError: the file records no shape (a vision run's file: its channels form no EAP graph) or a shape that
            is not two positive integers; naming the file, the attribute and that report-mib takes a language run's
            files.
    """
    missing = [key for key in ("n_layers", "n_heads") if key not in attrs]
    if missing:
        model = f" (its model: {attrs['model']!r})" if attrs.get("model") not in (None, "") else ""
        raise ValueError(f"{where} is not a language run's attribution file{model}: it records no "
                         f"{' or '.join(missing)}, the shape of the EAP graph whose edges MIB evaluates (a vision "
                         f"run's channels form no such graph); {LANGUAGE_FILES}")
    shape = []
    for key in ("n_layers", "n_heads"):
        value = attrs[key]
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < 1:
            raise ValueError(f"{where}: attribute {key} is {value!r}, not an integer >= 1: the file is damaged or not "
                             f"an attribution file of the language stages; {LANGUAGE_FILES}")
        shape.append(int(value))
    return shape[0], shape[1]


def submittable(task: str, model: str, n_layers: int, n_heads: int) -> str | None:
    """Why a task/model's files cannot be submitted to MIB (None when they can): a pair MIB does not evaluate, or
    a graph whose shape is not the MIB model's (``Graph.from_model`` would build another graph)."""
    problem = pair_problem(task, model)
    if problem is None and (n_layers, n_heads) != MIB_MODEL_SHAPES[model]:
        problem = (f"the circuit's graph has {n_layers} layers and {n_heads} heads but MIB's {model} "
                   f"({MIB_MODELS[model]}) has {MIB_MODEL_SHAPES[model][0]} and {MIB_MODEL_SHAPES[model][1]}: "
                   f"certify MIB's own model")
    return problem


def write_submission(out_dir: str | os.PathLike, task: str, model: str, method: str, attributions: str | os.PathLike,
                     votes: str | os.PathLike, certificates: str | os.PathLike, *,
                     fractions: Sequence[float] = SUBMISSION_FRACTIONS) -> list[Path]:
    """Write one task's MIB files (module docstring) from its attribution, votes and certificates files.

    Args:
        out_dir: the submission root (``OUT``).
        task: the task (concept) name.
        model: MIB's short model name (or your own name: then the files are for local evaluation, and the notes
            say why they are not submittable).
        method: the method's name in the method folder (``certified-EAP-IG-inputs``).
        attributions: the task's train attribution file (scores, edge names, model shape).
        votes, certificates: one setting's files.
        fractions: default MIB's 9.

    Returns:
        The files written: the 9 binary files, the importance file, the notes.
    """
    from certified_circuits.core.contracts import setting_columns
    from certified_circuits.storage.store import read_attributions, read_certificates, read_votes

    attr, v, c = read_attributions(attributions), read_votes(votes), read_certificates(certificates)
    scorer = str(v.attrs.get("scorer", "eap_ig"))
    scores = attr.scores[scorer].mean(0).astype(np.float64)
    level = str(attr.attrs.get("level", "edge"))
    n_layers, n_heads = graph_shape(attr.attrs, str(attributions))
    cfg = submission_cfg(n_layers, n_heads, int(attr.attrs.get("d_model", 0)),
                         bool(int(attr.attrs.get("parallel_attn_mlp", 0))), task=task, model=model, method=method,
                         level=level)
    if c.decision.shape[1] != scores.size:
        raise ValueError(f"{certificates} certifies {c.decision.shape[1]} components but {attributions} scores "
                         f"{scores.size}: they come from different runs")
    rank_scores = np.abs(scores) if attr.absolute(scorer) else scores
    files = submission_files(cfg, list(attr.names), c.decision, v.k_grid, setting=setting_columns(v, c),
                             rank_scores=rank_scores, fractions=fractions)
    root, pair = Path(out_dir), task_folder(task, model)
    written = [write_graph_json(root / MULTIPLE / method_folder(method, level) / pair / circuit_file(p), graph)
               for p, graph in files["binary"]]
    written.append(write_graph_json(root / IMPORTANCES / method_folder(method, level) / pair / IMPORTANCE_FILE,
                                    files["importances"]))
    problem = submittable(task, model, n_layers, n_heads)
    lost = [n["file"] for n in files["notes"]["fractions"] if not n["keeps_membership"]]
    if problem:
        log.warning("report-mib: %s is not submittable to MIB (local evaluation only): %s", pair, problem)
    if lost:
        log.warning("report-mib: %s: in %s MIB's top-n re-ranking adds edges that pruning keeps (too few dead "
                    "edges): MIB would evaluate more than the certified circuit", pair, ", ".join(lost))
    notes = {"pair": pair, "task": task, "model": model, "method": method, "level": level,
             "submittable": problem is None, "not_submittable_because": problem, **files["notes"]}
    written.append(write_text(root / NOTES / f"{pair}.json", json.dumps(notes, indent=1, allow_nan=False)))
    return written


def check_submission(root: str | os.PathLike, fractions: Sequence[float] = SUBMISSION_FRACTIONS) -> dict[str, int]:
    """Check a submission root against MIB's layout and read each file as MIB's evaluator does.

    Both formats' ``<method>_<ablation>_<level>`` folders hold ``<task>_<model>`` folders: one
    ``importances.json`` each, or one binary file per fraction; a binary file's ``in_graph`` edges must score
    :data:`IN_SCORE`, every other edge less (none negative: MIB's signed and absolute rankings agree) and no two of
    them the same (MIB's padding then needs no tie order), and its ``in_graph`` edges must be at most ``int(p E)``.

    Args:
        root: the submission root (``OUT``, holding ``importances/`` and ``multiple_circuits/``).
        fractions: the binary files' fractions.

    Returns:
        ``{"<format>/<method folder>/<task>_<model>": number of files}``.

    Raises:
        ValueError: a folder name, a missing or extra file, a circuit over its budget or a score MIB would
            re-rank into another circuit (the message names it).
    """
    root = Path(root)
    found: dict[str, int] = {}
    expected = {IMPORTANCES: {IMPORTANCE_FILE: None}, MULTIPLE: {circuit_file(p): p for p in fractions}}
    for fmt, files in expected.items():
        for method in sorted(p for p in (root / fmt).glob("*") if p.is_dir()):
            for folder in sorted(p for p in method.iterdir() if p.is_dir()):
                if not re.fullmatch(f"{FOLDER_PART}_{FOLDER_PART}", folder.name):
                    raise ValueError(f"{folder}: MIB expects <task>_<model> with one '_'")
                names = {p.name for p in folder.iterdir()}
                if names != set(files):
                    raise ValueError(f"{folder}: files {sorted(names ^ set(files))} differ from MIB's format "
                                     f"({'one importance file' if fmt == IMPORTANCES else 'one circuit per fraction'})")
                for name, p in files.items():
                    if p is not None:
                        _check_binary(folder / name, p)
                found[f"{fmt}/{method.name}/{folder.name}"] = len(names)
    if not found:
        raise ValueError(f"{root}: no {IMPORTANCES}/ or {MULTIPLE}/ <method>/<task>_<model> folder")
    return found


def _check_binary(path: Path, fraction: float) -> None:
    d = json.loads(path.read_text())
    edges = d["edges"]
    n = fa.mib_edge_count(fraction, len(edges))
    scores = np.array([e["score"] for e in edges.values()], dtype=np.float64)
    in_graph = np.array([bool(e["in_graph"]) for e in edges.values()])
    if in_graph.sum() > n:
        raise ValueError(f"{path}: {int(in_graph.sum())} edges in the graph, over MIB's {percent_label(fraction)}% "
                         f"of {len(edges)} = {n}")
    if not (np.all(scores[in_graph] == IN_SCORE) and np.all(scores[~in_graph] < IN_SCORE) and np.all(scores >= 0)):
        raise ValueError(f"{path}: the scores do not put the in_graph edges first (1 in, < 1 out, none negative): "
                         f"MIB's apply_topn would evaluate another circuit")
    outside = scores[~in_graph].astype(np.float32)  # MIB's Graph holds float32 scores
    if np.unique(outside).size < outside.size:
        raise ValueError(f"{path}: edges outside in_graph share a score: which of them MIB's apply_topn adds to fill "
                         f"int(p E) would depend on torch's tie order")
