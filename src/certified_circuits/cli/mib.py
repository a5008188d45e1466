"""MIB's circuit-track conventions (Mueller et al. 2025; docs/mib.md): ``report-mib`` (certified circuits as
submission files), ``language-faithfulness-mib`` (faithfulness on MIB's edge-fraction grid) and
``report-mib-faithfulness`` (its CPR/CMD table). The logic lives in :mod:`certified_circuits.reports.mib_submission`,
:mod:`certified_circuits.reports.mib_faithfulness`, :mod:`certified_circuits.language.evaluate` and
:mod:`certified_circuits.analysis.faithfulness`.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from certified_circuits.cli.language import model_arguments, task_name
from certified_circuits.cli.stages import (InputError, Stages, check_circuit_files, existing_file, named_path,
                                           output_file)
from certified_circuits.pipeline.tracking import add_metrics

log = logging.getLogger("certified_circuits")

STAGES = Stages()


# ---------------------------------------------------------------------------------------------- export


def _add_selected(p: argparse.ArgumentParser) -> None:
    p.add_argument("--selected", type=existing_file, default=None,
                   help="selected_cacc_raw.csv of report-sufficiency --select-on: each task's circuit is the one of the "
                        "certified setting chosen on held-out prompts (without it: one circuit per task)")


def _export_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--circuit", nargs=4, action="append", required=True,
                   metavar=("TASK", "ATTRIBUTIONS", "VOTES", "CERTIFICATES"),
                   help="one task's train attribution file and one setting's votes and certificates (repeatable: "
                        "every setting of every task, one chosen per task by --selected)")
    _add_selected(p)
    p.add_argument("--model-name", required=True,
                   help="MIB's short model name in the folder <task>_<model> (gpt2, qwen2.5, gemma2, llama3), or your own name "
                        "(no '_'; files for local evaluation, marked not submittable in the notes)")
    p.add_argument("--method", default="certified-EAP-IG-inputs",
                   help="the method's name in the method folder <method>_patching_<level> (no '_')")
    p.add_argument("--out-dir", required=True, type=Path, help="submission root (holds the method folder)")


def _read_selected(path: Path | None):
    """The ``--selected`` table (None without one), checked to be a selected table: readable CSV with rows and the
    ``concept`` and ``certified_setting`` columns a task's circuit is chosen by.

    Args:
        path: the CSV, or None.

    Returns:
        The table, or None.

    Raises:
        InputError: naming the file, what is wrong and the fix.
    """
    from certified_circuits.storage.tables import read_csv_table

    if path is None:
        return None
    fix = "pass the selected_cacc_raw.csv that report-sufficiency --select-on wrote"
    try:
        return read_csv_table(path, f"{path} (--selected)", ("concept", "certified_setting"), fix,
                              {"concept": str}, kind="selected table")
    except ValueError as exc:
        raise InputError(str(exc)) from None


def _selected_circuit(task: str, circuits: list[tuple[str, str]], selected, what: str):
    """:func:`~certified_circuits.reports.mib_submission.select_circuit`, its refusals as input errors, and the files
    checked to be one circuit of ``task``."""
    from certified_circuits.reports.mib_submission import select_circuit

    for pair in circuits:
        for path in pair:
            if not Path(path).is_file():
                raise InputError(f"{what} {task}: {path} does not exist")
    try:
        votes, certs, votes_path, certs_path = select_circuit(task, circuits, selected)
    except ValueError as error:
        raise InputError(str(error)) from None
    check_circuit_files([(votes, votes_path, certs, certs_path)], concept=task, what=what)
    return votes, certs, votes_path, certs_path


def _export_circuits(args: argparse.Namespace) -> dict[str, tuple[str, Path, Path]]:
    """Every option of report-mib checked before the first file is written: the method and model names (no '_',
    which separates MIB's folder names), each task's name, its one attribution file and its chosen circuit.

    Args:
        args: the parsed options.

    Returns:
        task -> (attribution file, votes, certificates) of its chosen circuit.

    Raises:
        InputError: naming the option, the task and the fix (a vision run's attribution file included:
            :func:`~certified_circuits.reports.mib_submission.graph_shape`).
    """
    from certified_circuits.reports.mib_submission import graph_shape
    from certified_circuits.storage.store import read_attributions

    for option, value in (("--method", args.method), ("--model-name", args.model_name)):
        if "_" in value or not value:
            raise InputError(f"{option} {value!r}: MIB's folders are <method>_<ablation>_<level> and <task>_<model>, "
                             f"so a name holds no '_' and is not empty; use '-'")
    by_task: dict[str, tuple[str, list[tuple[str, str]]]] = {}
    for task, attr, votes, certs in args.circuit:
        try:
            task_name(task)
        except argparse.ArgumentTypeError as error:
            raise InputError(f"--circuit {task}: {error}") from None
        first, pairs = by_task.setdefault(task, (attr, []))
        if Path(attr) != Path(first):
            raise InputError(f"--circuit {task}: two attribution files ({first}, {attr}); a task has one")
        pairs.append((votes, certs))
    selected = _read_selected(args.selected)
    chosen = {}
    for task, (attr, pairs) in by_task.items():
        if not Path(attr).is_file():
            raise InputError(f"--circuit {task}: {attr} does not exist")
        _, _, votes_path, certs_path = _selected_circuit(task, pairs, selected, "--circuit")
        chosen[task] = (attr, votes_path, certs_path)
    for task, (attr, _, _) in chosen.items():  # a vision run's file records no EAP graph: refused before any write
        try:
            graph_shape(read_attributions(attr).attrs, f"{attr} (--circuit {task})")
        except ValueError as error:
            raise InputError(str(error)) from None
    return chosen


@STAGES.stage("report-mib", _export_arguments,
              help="certified language circuits as MIB circuit-track submissions: 9 binary files and 1 importance "
                   "file per task/model")
def _cmd_export(args: argparse.Namespace) -> int:
    """Write, per task, OUT/multiple_circuits/<method>_patching_<level>/<task>_<model>/circuit_<p>pct.json for p in
    0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50 (% of the edges; the certified-in edges at the largest K <= p, at most
    int(p E), scored so that MIB's top-n re-ranking keeps them), OUT/importances/<method>_patching_<level>/
    <task>_<model>/importances.json (one ranking: certified in first, by the K they enter at, then abstaining,
    then out) and OUT/notes/<task>_<model>.json (K, budgets, abstentions, setting, whether the pair is
    submittable; not uploaded). Each task's circuit is the certified setting selected on held-out prompts
    (--selected; reports.mib_submission.select_circuit). The folders are checked after writing (reports.mib_submission.check_submission).

    Example:

        certified-circuits report-mib --model-name gpt2 --circuit ioi ATTR.h5 VOTES.h5 CERTS.h5
        --selected results/tables/language/selected_cacc_raw.csv --out-dir results/mib/language
    """
    from certified_circuits.reports.mib_submission import check_submission, write_submission

    by_task = _export_circuits(args)
    n = 0
    for task, (attr, votes_path, certs_path) in by_task.items():
        try:
            n += len(write_submission(args.out_dir, task, args.model_name, args.method, attr, votes_path,
                                      certs_path))
        except ValueError as error:
            raise InputError(f"--circuit {task}: {error}") from None
    found = check_submission(args.out_dir)
    add_metrics({"mib_files": float(n), "mib_folders": float(len(found))})
    log.info("report-mib: %d files in %d task folders -> %s", n, len(found), args.out_dir)
    return 0


# ---------------------------------------------------------------------------------------------- MIB's grid


def _faithfulness_arguments(p: argparse.ArgumentParser) -> None:
    model_arguments(p)
    p.add_argument("--task", required=True, type=task_name)
    p.add_argument("--attributions", type=existing_file, required=True, help="the task's train attribution file")
    p.add_argument("--circuits", nargs=2, action="append", required=True, metavar=("VOTES", "CERTIFICATES"),
                   help="votes and certificates .h5 of one setting of this task (repeatable: every setting, one "
                        "chosen by --selected)")
    _add_selected(p)
    p.add_argument("--eval-set", action="append", required=True, type=named_path, metavar="NAME=PATH",
                   help="evaluation prompts, repeatable: id_test=DIR/id_test.jsonl")
    p.add_argument("--experiment", default="language")
    p.add_argument("--max-floats", type=float, default=None, help="activation buffer per patched batch in floats")
    p.add_argument("--out", type=output_file, required=True, help="CSV to write")


@STAGES.stage("language-faithfulness-mib", _faithfulness_arguments,
              help="faithfulness of baseline and certified circuits at MIB's edge fractions (CSV)")
def _cmd_faithfulness(args: argparse.Namespace) -> int:
    """At each of MIB's fractions p (0.1% .. 100% of the edges): the baseline's top floor(p E) edges by signed
    score (CPR's circuits) and by |score| (CMD's), and the certified circuit (certified-in edges at the largest
    K <= p), each pruned as MIB's Graph.prune; every circuit interchange-patched on every eval set. Rows carry
    f's m, m_empty and m_full and the effective size (edges left after pruning).

    Example:

        certified-circuits language-faithfulness-mib --model embedded --model-path results/language/model
        --task ioi --attributions ATTR.h5 --circuits VOTES.h5 CERTS.h5
        --eval-set id_test=results/language/tasks/ioi/id_test.jsonl --out mib_ioi.csv
    """
    import numpy as np

    from certified_circuits.core.contracts import setting_columns
    from certified_circuits.core.devices import configure_torch, resolve_device
    from certified_circuits.language.evaluate import load_evaluation_model, mib_circuit_masks, mib_table
    from certified_circuits.storage.atomic import write_csv
    from certified_circuits.storage.store import read_attributions

    votes, certs, _, _ = _selected_circuit(args.task, [tuple(c) for c in args.circuits],
                                           _read_selected(args.selected), "--task")
    attr = read_attributions(args.attributions)
    scorer = str(votes.attrs.get("scorer", "eap_ig"))
    if scorer not in attr.scores:
        raise InputError(f"{args.attributions} has no {scorer!r} scores (the votes' scorer)")
    scores = attr.scores[scorer].mean(0).astype(np.float64)
    device = resolve_device(args.device)
    configure_torch(args.threads)
    eval_sets = dict(args.eval_set)
    lm = load_evaluation_model(args.model, args.model_path, args.task, eval_sets, str(device))
    if scores.size != lm.graph.n_edges:
        raise InputError(f"{args.attributions} scores {scores.size} components, the model's graph has "
                         f"{lm.graph.n_edges} edges: MIB's grid needs an edge-level run (language.level: edge)")
    rank = np.abs(scores) if attr.absolute(scorer) else scores
    circuits = mib_circuit_masks(lm.graph, scores, certs.decision, votes.k_grid, rank_scores=rank)
    table = mib_table(lm, args.task, circuits, eval_sets, experiment=args.experiment, device=str(device),
                      budget_floats=args.max_floats)
    table = table.assign(**setting_columns(votes, certs))
    write_csv(args.out, table)
    log.info("language-faithfulness-mib: %d rows -> %s", len(table), args.out)
    return 0


def _table_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--inputs", nargs="+", required=True, type=existing_file,
                   help="CSVs of language-faithfulness-mib")
    p.add_argument("--out-dir", required=True, type=Path, help="the tables folder")


@STAGES.stage("report-mib-faithfulness", _table_arguments,
              help="CPR (signed ranking) and CMD (|score| ranking) on MIB's grid: faithfulness_mib tables")
def _cmd_table(args: argparse.Namespace) -> int:
    """Write faithfulness_mib.csv and faithfulness_mib_mean.{csv,md,tex}: CPR and CMD per task, eval set and
    circuit family, integrated over MIB's nominal fractions; the caption states which ranking each area used.

    Example:

        certified-circuits report-mib-faithfulness --inputs results/faithfulness_mib/language/*.csv --out-dir results/tables/language
    """
    from certified_circuits.reports.mib_faithfulness import mib_faithfulness_report

    add_metrics(mib_faithfulness_report(args.inputs, args.out_dir))
    return 0
