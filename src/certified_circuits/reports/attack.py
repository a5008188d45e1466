"""The report of the dataset-edit attack (``report-attack``): summary table, figure and files.

The edits and the re-certification are the engine's (:mod:`certified_circuits.core.edits`); this module
turns its rows into the tidy table, the summary per (edit, mode, multiple of r), the figure and the
headline metrics.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from certified_circuits.core.edits import COLUMNS, KINDS, MODES, attack_rows

log = logging.getLogger(__name__)


def attack_table(scores: np.ndarray, pool: np.ndarray, groups: np.ndarray, k_grid: Any, **settings: Any) -> pd.DataFrame:
    """:func:`certified_circuits.core.edits.attack_rows` as a tidy DataFrame with columns :data:`COLUMNS`.

    Args:
        scores, pool, groups, k_grid: as for ``attack_rows``.
        **settings: the keyword arguments of ``attack_rows`` (p_del, n0, n, seed, tau, alpha, ...).

    Returns:
        One row per (edit, mode, trial, r_multiple, k_target).
    """
    return pd.DataFrame(attack_rows(scores, pool, groups, k_grid, **settings), columns=list(COLUMNS))


SUMMARY_KEYS = ["edit", "mode", "r_multiple"]


def summarize_attack(raw: pd.DataFrame) -> pd.DataFrame:
    """Per (edit, mode, r_multiple): means over K, trials and classes (numeric, for the table and figure).

    ``certified_flip_share`` / ``abstain_share`` are means over runs with at least one certified
    component; ``max_certified_flip_share`` their maximum; ``flip_run_rate`` the share of runs (one run:
    a class, K, trial) in which some certified label flipped (the event Theorem 1 bounds by ``2 alpha``
    within the radius).
    """
    from certified_circuits.storage.tables import require_columns

    require_columns(raw, COLUMNS, "attack table")
    if raw.empty:
        raise ValueError("the attack table has no rows: every edit was infeasible (|D| too small for the radius?)")
    grouped = raw.groupby(SUMMARY_KEYS, sort=False)
    summary = grouped.agg(
        r_edits=("r_edits", "first"),
        within_radius=("within_radius", "all"),
        baseline_flip_share=("baseline_flip_share", "mean"),
        certified_flip_share=("certified_flip_share", "mean"),
        max_certified_flip_share=("certified_flip_share", "max"),
        flip_run_rate=("any_certified_flip", "mean"),
        abstain_share=("abstain_share", "mean"),
        n_certified=("n_certified", "mean"),
        runs=("k_target", "size"),
    ).reset_index()
    order = {**{kind: i for i, kind in enumerate(KINDS)}, **{mode: i for i, mode in enumerate(MODES)}}
    summary = summary.sort_values(
        SUMMARY_KEYS, key=lambda s: s.map(order) if s.name in ("edit", "mode") else s, kind="stable"
    )
    return summary.reset_index(drop=True)


def format_attack_summary(summary: pd.DataFrame) -> pd.DataFrame:
    """The display table: shares in percent (one decimal), integers as such."""
    pct = lambda s: (100.0 * s.astype(float)).round(1)  # noqa: E731
    return pd.DataFrame({
        "Edit": summary["edit"],
        "Mode": summary["mode"],
        "× r": summary["r_multiple"].astype(int),
        "Edits": summary["r_edits"].astype(int),
        "Within r": summary["within_radius"].map({True: "yes", False: "no"}),
        "Baseline flip %": pct(summary["baseline_flip_share"]),
        "Certified flip %": pct(summary["certified_flip_share"]),
        "Max certified flip %": pct(summary["max_certified_flip_share"]),
        "Runs with a flip %": pct(summary["flip_run_rate"]),
        "To abstain %": pct(summary["abstain_share"]),
        "Runs": summary["runs"].astype(int),
    })


MODE_COLOR = {"random": "#1f5fa8", "adversarial": "#c0392b"}


def plot_attack(summary: pd.DataFrame, stem: Path, alpha: float, radius: int) -> list[Path]:
    """Flip shares vs edits in multiples of r: one panel per edit kind (``stem.png`` and ``stem.pdf``).

    Solid: certified flip share (over components certified on ``D``); dashed: baseline flip share (over
    all components); dotted: share of certified components that moved to abstain. Colour: random or
    adversarial edits. Grey dashed line: ``alpha``; shaded: within the certified radius.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    from certified_circuits.reports.figures import save_figure

    kinds = [k for k in KINDS if k in set(summary["edit"])]
    fig = Figure(figsize=(3.6 * len(kinds), 3.3), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(kinds), squeeze=False, sharey=True)[0]
    styles = (("certified_flip_share", "-", "o"), ("baseline_flip_share", "--", "s"), ("abstain_share", ":", "^"))
    shown = summary[[column for column, _, _ in styles]].to_numpy(dtype=float)
    peak = np.nanmax(shown) if np.isfinite(shown).any() else 0.0
    top = min(1.02, max(0.05, 2.0 * alpha, 1.15 * peak))  # small shares stay readable
    for ax, kind in zip(axes, kinds):
        panel = summary[summary["edit"] == kind]
        if radius > 0:
            ax.axvspan(0, 1, color="0.92", zorder=0)
        ax.axhline(alpha, color="0.4", ls="--", lw=1.0)
        for mode, line in panel.groupby("mode", sort=False):
            line = line.sort_values("r_multiple")
            for column, ls, marker in styles:
                ax.plot(line["r_multiple"], line[column], ls=ls, marker=marker, ms=4, lw=1.5,
                        color=MODE_COLOR.get(mode, "0.3"))
        ax.set_title(kind)
        ax.set_xlabel(f"edits (multiples of r = {radius})" if radius > 0 else "edits (r = 0: single edits)")
        ax.set_xlim(0, max(summary["r_multiple"].max(), 1) * 1.05)
        ax.set_xticks(sorted(set(summary["r_multiple"].astype(int))))
        ax.set_ylim(0, top)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("share of components")
    handles = [
        Line2D([], [], color="black", ls="-", marker="o", ms=4, label="certified label flips"),
        Line2D([], [], color="black", ls="--", marker="s", ms=4, label="baseline membership flips"),
        Line2D([], [], color="black", ls=":", marker="^", ms=4, label="certified → abstain"),
        Line2D([], [], color="0.4", ls="--", label=f"α = {alpha:g}"),
        *[Line2D([], [], color=MODE_COLOR[m], lw=4, label=m) for m in MODES if m in set(summary["mode"])],
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=3, frameon=False)
    return save_figure(fig, stem)


def attack_metrics(raw: pd.DataFrame) -> dict[str, float]:
    """Headline numbers: the worst certified flip share within the radius, against the baseline's."""
    within = raw[raw["within_radius"]]
    beyond = raw[~raw["within_radius"]]
    metrics: dict[str, float] = {"radius": float(raw["radius"].iloc[0]), "runs": float(len(raw))}
    if len(within):
        metrics["max_certified_flip_share_within_r"] = float(within["certified_flip_share"].max(skipna=True))
        metrics["flip_run_rate_within_r"] = float(within["any_certified_flip"].mean())
        metrics["abstain_share_within_r"] = float(within["abstain_share"].mean(skipna=True))
        for mode in MODES:
            part = within[within["mode"] == mode]
            if len(part):
                metrics[f"baseline_flip_share_within_r_{mode}"] = float(part["baseline_flip_share"].mean())
    if len(beyond):
        metrics["max_certified_flip_share_beyond_r"] = float(beyond["certified_flip_share"].max(skipna=True))
        metrics["baseline_flip_share_beyond_r"] = float(beyond["baseline_flip_share"].mean())
    return {k: v for k, v in metrics.items() if np.isfinite(v)}


def write_attack_report(raw: pd.DataFrame, out_dir: Path, alpha: float) -> list[Path]:
    """``attack_raw.csv`` (tidy rows), ``attack.csv/.md/.tex`` (summary table), ``attack.png/.pdf``."""
    from certified_circuits.storage.atomic import write_csv
    from certified_circuits.reports.tables import write_table

    out_dir = Path(out_dir)
    summary = summarize_attack(raw)
    radius = int(raw["radius"].iloc[0])
    unit = str(raw["unit"].iloc[0])
    caption = (
        f"Dataset-edit attack (Theorem 1): certified radius r = {radius}"
        + ("" if radius > 0 else " (multiples of one edit)")
        + f", alpha = {alpha:g}. Shares in percent, means over K, trials and classes; certified flips are "
        "over components certified on D (moving to abstain is not a flip)."
    )
    written = [write_csv(out_dir / "attack_raw.csv", raw)]
    written += write_table(format_attack_summary(summary), out_dir / "attack", caption=caption, float_format="{:.1f}")
    written += plot_attack(summary, out_dir / "attack", alpha, radius)
    log.info("attack: r = %d (%s), %d runs -> %s", radius, unit, len(raw), out_dir)
    return written
