"""The faithfulness table on MIB's grid (MIB: Mueller et al. 2025; docs/mib.md): the ``language-faithfulness-mib``
tables combined into ``faithfulness_mib.csv`` and their CPR and CMD means (:func:`mib_faithfulness_report`; the areas
are :func:`certified_circuits.analysis.faithfulness.mib_faithfulness_table`). The submissions MIB evaluates are
written by :mod:`.mib_submission`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import pandas as pd

from certified_circuits.analysis import faithfulness as fa
from certified_circuits.reports import tables
from certified_circuits.storage.atomic import write_csv
from certified_circuits.storage.tables import check_distinct_files, read_k_table


#: the caption of the MIB-grid table: the abs convention of each area stated
MIB_CAPTION = ("Faithfulness on MIB's grid (Mueller et al. 2025): f = (m(C) - m(empty)) / (m(M) - m(empty)) at "
               "{0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100}% of the edges, circuits pruned as MIB's Graph.prune; "
               "trapezoids over the nominal fractions. Baseline CPR ranks edges by their signed score (abs = False), "
               "baseline CMD by |score| (abs = True); a certified circuit is binary (no ranking): both areas from "
               "the same circuits, its certified-in edges at the largest K <= p. CPR: higher better; CMD: lower better.")


#: what to do when an input table is refused
MIB_FIX = "pass the CSVs that language-faithfulness-mib wrote, each once"


def mib_faithfulness_report(inputs: Sequence[str | os.PathLike], out_dir: str | os.PathLike) -> dict[str, float]:
    """``faithfulness_mib.csv`` (per task, eval set and circuit family) and ``faithfulness_mib_mean.{csv,md,tex}``.

    Args:
        inputs: CSVs of ``language-faithfulness-mib`` (:func:`~certified_circuits.language.evaluate.mib_table` rows
            with their setting columns).
        out_dir: the tables folder.

    Returns:
        ``{"mib_<method>_cpr": mean, "mib_<method>_cmd": mean}``.

    Raises:
        ValueError: no table, a table given twice, or one that is unreadable, lacks a column or holds a ``k_target``
            outside (0, 1] (the fraction of edges; file, row and column named), before anything is written.
    """
    if not inputs:
        raise ValueError("no MIB-grid evaluation tables given")
    check_distinct_files(inputs, "--inputs")
    frames = [read_k_table(p, f"{p} (--inputs)", ["method", "ranking", *fa.FAITH_COLUMNS], MIB_FIX,
                           {"k_target": False}) for p in inputs]
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
