"""Certified language circuits as MIB circuit-track submissions, and the faithfulness table on MIB's grid
(MIB: Mueller et al. 2025, "MIB: A Mechanistic Interpretability Benchmark"; docs/mib.md).

Submission layout (hannamw/MIB-circuit-track ``README.md``, "Submitting to the MIB Leaderboard", and
``run_attribution.py``/``run_evaluation.py``, which write and read ``{circuit_dir}/{method}_{ablation}_{level}/
{task with '_' as '-'}_{model}/``)::

    OUT/<method>_<ablation>_<level>/          the folder uploaded (one per method)
        <task>_<model>/                       one folder per task and model: task and model joined by '_'
            circuit_0.1pct.json ... circuit_100pct.json

Each file is one binary circuit in hannamw/EAP-IG Graph JSON (:mod:`.eap_graph`) with at most
``floor(p E)`` edges in the graph for its fraction p of
:data:`~certified_circuits.analysis.faithfulness.MIB_FRACTIONS` (the README: "one circuit containing no more
than each of the following percentages of edges"). The circuit at p is the certificate's certified-in edges at
the largest K <= p of the run's grid (:func:`~certified_circuits.analysis.faithfulness.circuits_at_fractions`).
Every edge keeps its EAP-IG score (``Graph.from_json`` reads a score for every edge listed). The certificate,
which MIB's loader ignores (``Graph.from_json`` reads only ``cfg``, ``nodes`` and ``edges``), is kept under
:data:`EXTRA_KEY`: the K it came from, the budget, the setting, the abstained edges and the counts.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from certified_circuits.analysis import faithfulness as fa
from certified_circuits.reports import tables
from certified_circuits.reports.eap_graph import circuit_graph_json, decisions_sidecar, graph_cfg, write_graph_json
from certified_circuits.storage.atomic import write_csv

#: the top-level key of the certificate in each file (MIB's ``Graph.from_json`` ignores every other key)
EXTRA_KEY = "certificate"
#: MIB's ablation for the patching evaluation this package does (interchange patching with the corrupted run)
ABLATION = "patching"
#: a task or model name in a submission folder: letters, digits, '.', '-' (the '_' separates them)
FOLDER_PART = r"[A-Za-z0-9.\-]+"


def percent_label(fraction: float) -> str:
    """A fraction as MIB's percentage: 0.001 -> ``0.1``, 0.05 -> ``5``, 1.0 -> ``100``."""
    return f"{round(float(fraction) * 100, 6):g}"


def circuit_file(fraction: float) -> str:
    """The file name of the circuit at one fraction: ``circuit_<percent>pct.json`` (``circuit_0.1pct.json``)."""
    return f"circuit_{percent_label(fraction)}pct.json"


def task_folder(task: str, model: str) -> str:
    """``<task>_<model>``, the task's ``_`` written ``-`` as MIB does (``task.replace('_', '-')``).

    Args:
        task: the task name (``greater_than`` -> ``greater-than``).
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
    return f"{task_part}_{model}"


def method_folder(method: str, level: str = "edge", ablation: str = ABLATION) -> str:
    """``<method>_<ablation>_<level>`` (MIB's ``method_name_saveable``), e.g. ``certified-EAP-IG-inputs_patching_edge``."""
    return f"{method}_{ablation}_{level}"


def submission_graphs(cfg: Mapping[str, Any], edge_names: Sequence[str], scores: np.ndarray, decision: np.ndarray,
                      k_grid: Sequence[float], *, setting: Mapping[str, Any], rank_scores: np.ndarray | None = None,
                      fractions: Sequence[float] = fa.MIB_FRACTIONS) -> list[tuple[float, dict]]:
    """One Graph JSON dict per fraction: the certified circuit MIB is given at that size.

    Args:
        cfg: the Graph JSON ``cfg`` (:func:`~.eap_graph.graph_cfg`).
        edge_names: every edge of the graph, in the certificate's component order.
        scores: float [E] signed mean EAP-IG scores (written as each edge's score).
        decision: int [nK, E] the certificate's decisions.
        k_grid: its K grid.
        setting: the certification setting (recorded in :data:`EXTRA_KEY`).
        rank_scores: the votes' ranking (default ``|scores|``), used only to cut a circuit over its budget.
        fractions: default MIB's.

    Returns:
        ``[(fraction, graph dict), ...]``; each dict also holds :data:`EXTRA_KEY`: ``fraction``, ``budget``,
        ``k`` (None: no K <= p in the grid, the empty circuit), ``truncated``, ``n_in``, the ``setting`` and the
        certificate's ``abstain`` names and ``counts`` at that K.
    """
    from certified_circuits.language import names as grammar

    edge_names = list(edge_names)
    if not edge_names or not all(grammar.is_edge(n) for n in edge_names):
        raise ValueError("MIB's multiple-circuit files are edge circuits: a node-level certificate cannot be exported")
    decision = np.asarray(decision)
    ranks = np.abs(np.asarray(scores, dtype=np.float64)) if rank_scores is None else rank_scores
    out = []
    for c in fa.circuits_at_fractions(decision, k_grid, ranks, fractions):
        graph = circuit_graph_json(cfg, edge_names, scores, c["in_graph"])
        extra: dict[str, Any] = dict(fraction=c["fraction"], budget=c["budget"], k=c["k"],
                                     truncated=c["truncated"], n_in=c["n_in"])
        if c["k_index"] is not None:
            side = decisions_sidecar(edge_names, decision[c["k_index"]], k=c["k"], setting=setting)
            extra.update(setting=side["setting"], abstain=side["abstain"], counts=side["counts"])
        else:
            extra.update(setting=decisions_sidecar([], np.zeros(0, int), k=0.0, setting=setting)["setting"],
                         abstain=[], counts={"in": 0, "out": 0, "abstain": 0})
        graph[EXTRA_KEY] = extra
        out.append((c["fraction"], graph))
    return out


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


def write_submission(out_dir: str | os.PathLike, task: str, model: str, method: str, attributions: str | os.PathLike,
                     votes: str | os.PathLike, certificates: str | os.PathLike, *,
                     fractions: Sequence[float] = fa.MIB_FRACTIONS) -> list[Path]:
    """Write one task's MIB files (module docstring) from its attribution, votes and certificates files.

    Args:
        out_dir: the submission root; files go to ``out_dir/<method folder>/<task>_<model>/``.
        task: the task (concept) name.
        model: MIB's short model name.
        method: the method's name in the method folder (``certified-EAP-IG-inputs``).
        attributions: the task's train attribution file (scores, edge names, model shape).
        votes, certificates: one setting's files.
        fractions: default MIB's.

    Returns:
        The files written, in fraction order.
    """
    from certified_circuits.core.contracts import setting_columns
    from certified_circuits.storage.store import read_attributions, read_certificates, read_votes

    attr, v, c = read_attributions(attributions), read_votes(votes), read_certificates(certificates)
    scorer = str(v.attrs.get("scorer", "eap_ig"))
    scores = attr.scores[scorer].mean(0).astype(np.float64)
    level = str(attr.attrs.get("level", "edge"))
    cfg = graph_cfg(int(attr.attrs["n_layers"]), int(attr.attrs["n_heads"]), int(attr.attrs.get("d_model", 0)),
                    bool(int(attr.attrs.get("parallel_attn_mlp", 0))), model=str(attr.attrs.get("model_path", "")),
                    task=task, method=method, level=level)
    if c.decision.shape[1] != scores.size:
        raise ValueError(f"{certificates} certifies {c.decision.shape[1]} components but {attributions} scores "
                         f"{scores.size}: they come from different runs")
    rank_scores = np.abs(scores) if attr.absolute(scorer) else scores
    folder = Path(out_dir) / method_folder(method, level) / task_folder(task, model)
    written = []
    for fraction, graph in submission_graphs(cfg, list(attr.names), scores, c.decision, v.k_grid,
                                             setting=setting_columns(v, c), rank_scores=rank_scores,
                                             fractions=fractions):
        written.append(write_graph_json(folder / circuit_file(fraction), graph))
    return written


def check_submission(root: str | os.PathLike, fractions: Sequence[float] = fa.MIB_FRACTIONS) -> dict[str, int]:
    """Check a method folder against MIB's layout: ``<task>_<model>`` folders, one file per fraction, each a
    Graph JSON with at most ``floor(p E)`` edges in the graph.

    Args:
        root: a method folder (``OUT/<method>_<ablation>_<level>``).
        fractions: the fractions expected.

    Returns:
        ``{"<task>_<model>": number of files}``.

    Raises:
        ValueError: a folder name, a missing or extra file, or a circuit over its budget (the message names it).
    """
    root = Path(root)
    folders = sorted(p for p in root.iterdir() if p.is_dir())
    if not folders:
        raise ValueError(f"{root}: no <task>_<model> folder")
    found = {}
    expected = {circuit_file(p): p for p in fractions}
    for folder in folders:
        if not re.fullmatch(f"{FOLDER_PART}_{FOLDER_PART}", folder.name):
            raise ValueError(f"{folder}: MIB expects <task>_<model> with one '_'")
        files = {p.name for p in folder.iterdir()}
        if files != set(expected):
            raise ValueError(f"{folder}: files {sorted(files ^ set(expected))} differ from one circuit per fraction")
        for name, p in expected.items():
            d = json.loads((folder / name).read_text())
            n_edges, n_in = len(d["edges"]), sum(e["in_graph"] for e in d["edges"].values())
            if n_in > fa.mib_edge_count(p, n_edges):
                raise ValueError(f"{folder / name}: {n_in} edges in the graph, over MIB's {percent_label(p)}% "
                                 f"of {n_edges} = {fa.mib_edge_count(p, n_edges)}")
        found[folder.name] = len(files)
    return found


#: the caption of the MIB-grid table: the abs convention of each area stated
MIB_CAPTION = ("Faithfulness on MIB's grid (Mueller et al. 2025): f = (m(C) - m(empty)) / (m(M) - m(empty)) at "
               "{0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100}% of the edges, circuits pruned as MIB's Graph.prune; "
               "trapezoids over the nominal fractions. Baseline CPR ranks edges by their signed score (abs = False), "
               "baseline CMD by |score| (abs = True); a certified circuit is binary (no ranking): both areas from "
               "the same circuits, its certified-in edges at the largest K <= p. CPR: higher better; CMD: lower better.")


def mib_faithfulness_report(inputs: Sequence[str | os.PathLike], out_dir: str | os.PathLike) -> dict[str, float]:
    """``faithfulness_mib.csv`` (per task, eval set and circuit family) and ``faithfulness_mib_mean.{csv,md,tex}``.

    Args:
        inputs: CSVs of ``language-faithfulness-mib`` (:func:`~certified_circuits.language.evaluate.mib_table` rows
            with their setting columns).
        out_dir: the tables folder.

    Returns:
        ``{"mib_<method>_cpr": mean, "mib_<method>_cmd": mean}``.
    """
    frames = [pd.read_csv(p) for p in inputs]
    if not frames:
        raise ValueError("no MIB-grid evaluation tables given")
    table = pd.concat(frames, ignore_index=True)
    tables.require_rows(table, ["method", "ranking", "k_target", *fa.FAITH_COLUMNS], "MIB-grid evaluation tables")
    keys = [k for k in ("experiment", "setting", "eval_set") if k in table.columns]
    faith = fa.mib_faithfulness_table(table, keys)
    out_dir = Path(out_dir)
    write_csv(out_dir / "faithfulness_mib.csv", faith)
    shown = [k for k in keys if k != "experiment"]
    mean = faith.groupby([*[k for k in shown if k != "setting"], "method", "cpr_ranking", "cmd_ranking"],
                         sort=False)[["cpr", "cmd"]].mean().reset_index()
    display = mean.rename(columns={"cpr": "CPR (higher better)", "cmd": "CMD (lower better)",
                                   "cpr_ranking": "CPR ranking", "cmd_ranking": "CMD ranking"})
    tables.write_table(display, out_dir / "faithfulness_mib_mean", caption=MIB_CAPTION)
    return {f"mib_{m}_{area}": float(part[area].mean()) for m, part in faith.groupby("method") for area in ("cpr", "cmd")}
