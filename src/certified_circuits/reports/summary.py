"""``summary.md``: a run's results in one page a person reads in a minute (issue 35).

At most :data:`MAX_LINES` lines, in this order:

1. "What this run shows": the run's headline (:func:`certified_circuits.reports.findings.headline`: one short table
   per experiment at the truth's size and at most two lines; the explorer's first screen and the end of the run show
   the same cells);
2. one compact table per result family the run produced (:data:`FAMILIES`: sufficiency, faithfulness, recovery,
   stability, IoU, certification seeds, spurious index, attack, radius sweep), every row a mean read from the
   family's raw table, with a link to its full table;
3. the warnings, one line per kind (:func:`certified_circuits.reports.flags.grouped_markdown`) from the run's one
   list (``warnings.json``, :func:`certified_circuits.reports.flags.run_flags`), which the explorer, the MLflow tags
   and the end of the run show too.

A family's table keeps its first rows when the page would run over :data:`MAX_LINES`, and says how many rows its
full table has. Every table is aggregated with pandas (groupby), never a loop over examples or components.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Mapping, Sequence

import pandas as pd

from certified_circuits.core.setting import number
from certified_circuits.reports import flags as fl
from certified_circuits.reports.findings import NO_HEADLINE, Headline, headline_section
from certified_circuits.reports.tables import markdown_table, pct, selection_name
from certified_circuits.storage.atomic import write_text

__all__ = ["FAMILIES", "MAX_LINES", "family_tables", "summary_lines", "summary_report"]

#: the longest summary.md
MAX_LINES = 120
#: rows a family's table starts with (fewer when the page would be longer than :data:`MAX_LINES`)
MAX_ROWS = 8
#: the methods a compact table shows, in this order
METHODS = ("baseline", "majority", "certified")


def _main(frame: pd.DataFrame, main_scorer: str | None) -> pd.DataFrame:
    """The main scorer's rows of a vision table (every row when the table has no scorer column or none of its)."""
    if main_scorer and "scorer" in frame and (frame["scorer"].astype(str) == main_scorer).any():
        return frame[frame["scorer"].astype(str) == main_scorer]
    return frame


def _scorer(frame: pd.DataFrame) -> str:
    """The scorer a compact table's rows are of (every table names it), ``"--"`` when its table has none."""
    if "scorer" not in frame or frame.empty:
        return "--"
    return ", ".join(dict.fromkeys(frame["scorer"].astype(str)))


def _label(frame: pd.DataFrame, keys: Sequence[str]) -> pd.Series:
    """``"world / relevance / id"`` from the key columns a table has."""
    present = [k for k in keys if k in frame]
    return frame[present].astype(str).agg(" / ".join, axis=1) if present else pd.Series("", index=frame.index)


def sufficiency_table(tables: Path, experiment: str, main_scorer: str | None) -> pd.DataFrame | None:
    """cACC of each method at the K chosen on held-out data (``selected_cacc_raw.csv``; the ID peak
    ``peaks_cacc_raw.csv`` when the run selects on nothing), main scorer, per eval set: percent, K in percent, the
    false-positive rate beside each cACC where the table has it (zero ablation's cACC rewards class bias), the scorer
    and what chose the K (:func:`~certified_circuits.reports.tables.selection_name`)."""
    path = tables / "selected_cacc_raw.csv"
    path = path if path.is_file() else tables / "peaks_cacc_raw.csv"
    if not path.is_file():
        return None
    raw = _main(pd.read_csv(path, dtype={"concept": str}), main_scorer)
    blind = cannot_discriminate(raw)
    raw = raw[~blind]
    if raw.empty:  # every row left out: the family's title says how many
        empty = pd.DataFrame()
        empty.attrs[HIDDEN] = int(blind.sum())
        return empty
    out = pd.DataFrame({"experiment": experiment, "eval set": _label(raw, ["concept", "eval_set"])})
    out["scorer"] = raw["scorer"].astype(str) if "scorer" in raw else "--"
    out["K"] = [selection_name(row) if path.name.startswith("selected") else "the peak on the same set"
                for _, row in raw.iterrows()]
    fpr = {"full_fpr", "baseline_fpr", "certified_fpr"} <= set(raw.columns)
    out["full"] = pct(raw["full"]) + ((" (FPR " + pct(raw["full_fpr"]) + ")") if fpr else "")
    for method in ("baseline", "certified"):  # one header for every experiment: no duplicate, empty columns
        out[f"{method} (K %, FPR % where measured)"] = (
            pct(raw[method]) + " (" + pct(raw[f"{method}_k"]) + ((", " + pct(raw[f"{method}_fpr"])) if fpr else "")
            + ")")
    p = raw["pvalue_examples"] if "pvalue_examples" in raw else raw.get("pvalue")
    if p is not None:
        out["p"] = p.map(lambda v: "--" if pd.isna(v) else f"{v:.2g}")
    out = out.reset_index(drop=True)
    out.attrs[HIDDEN] = int(blind.sum())
    return out


#: ``DataFrame.attrs`` key: the rows a compact table leaves out because they cannot tell the methods apart
HIDDEN = "rows_that_cannot_discriminate"


def cannot_discriminate(raw: pd.DataFrame) -> pd.Series:
    """The rows of a selected / peak cACC table that cannot tell the baseline from the certified circuit (issue 50:
    not shown at all; their flags, ``full-model-k`` and ``identical-curves``, stay in the warning list).

    A row is blind when either circuit is the whole model at its K (``K = 100%``: the full model against itself), or
    both score the same perfect cACC (1.0: no difference possible, p = 1 by construction).

    Args:
        raw: ``selected_cacc_raw.csv`` / ``peaks_cacc_raw.csv`` rows (``baseline``, ``certified``, ``baseline_k``,
            ``certified_k``: shares in [0, 1]).

    Returns:
        bool per row, True where the row is left out.
    """
    whole = (raw["baseline_k"] >= 1.0) | (raw["certified_k"] >= 1.0)
    perfect = (raw["baseline"] >= 1.0) & (raw["certified"] >= 1.0)
    return whole | perfect


def faithfulness_table(tables: Path, experiment: str, main_scorer: str | None) -> pd.DataFrame | None:
    """CPR (higher is better) of each method per eval set (``faithfulness_mean.csv``; main scorer, first
    setting)."""
    path = tables / "faithfulness_mean.csv"
    if not path.is_file():
        return None
    raw = _main(pd.read_csv(path, dtype={"concept": str}), main_scorer)
    if "setting" in raw and raw["setting"].nunique() > 1:
        raw = raw[raw["setting"] == raw["setting"].iloc[0]]
    cpr = next((c for c in raw.columns if c.startswith("CPR")), None)
    if cpr is None or "eval_set" not in raw or "method" not in raw:
        return None
    wide = raw.pivot_table(index="eval_set", columns="method", values=cpr, aggfunc="mean", sort=False)
    out = pd.DataFrame({"experiment": experiment, "eval set": wide.index.astype(str), "scorer": _scorer(raw)})
    for method in (m for m in METHODS if m in wide):
        out[f"CPR {method}"] = wide[method].to_numpy()
    return out


def recovery_table(tables: Path, experiment: str, main_scorer: str | None) -> pd.DataFrame | None:
    """Mean AUROC of each method over the concepts, per scorer (``testbed/recovery_auroc.csv``, selected setting)."""
    path = tables / "testbed" / "recovery_auroc.csv"
    if not path.is_file():
        return None
    raw = pd.read_csv(path, dtype={"concept": str})
    raw = raw[raw["at_selected_setting"].astype(bool)]
    wide = raw.pivot_table(index="scorer", columns="method", values="auroc", aggfunc="mean", sort=False)
    out = pd.DataFrame({"experiment": experiment, "scorer": wide.index.astype(str),
                        "concepts": raw.groupby("scorer", sort=False)["concept"].nunique().reindex(wide.index).to_numpy()})
    for method in wide.columns:
        out[f"AUROC {method}"] = wide[method].to_numpy()
    return out


def stability_table(tables: Path, experiment: str, main_scorer: str | None) -> pd.DataFrame | None:
    """Under bootstrap resamples, mean over concepts and K (``testbed/stability.csv``): Jaccard of the baseline to
    the full-data circuit, shares of baseline memberships and certified labels that change, in<->out flips."""
    path = tables / "testbed" / "stability.csv"
    if not path.is_file():
        return None
    raw = pd.read_csv(path, dtype={"concept": str})
    columns = {"baseline_jaccard_mean": "J baseline", "baseline_change_share": "baseline changed %",
               "certified_change_share": "certified label changed %", "certified_flip_share": "in<->out flips %"}
    mean = raw.groupby("scorer", sort=False)[list(columns)].mean()
    out = pd.DataFrame({"experiment": experiment, "scorer": mean.index.astype(str),
                        "resamples": raw.groupby("scorer", sort=False)["resamples"].first().to_numpy()})
    for column, name in columns.items():
        out[name] = mean[column].to_numpy() * (1 if column == "baseline_jaccard_mean" else 100)
    return out


def iou_table(tables: Path, experiment: str, main_scorer: str | None) -> pd.DataFrame | None:
    """Mean IoU of the ID circuit with the circuit re-discovered on each OOD set, per method (``iou.csv``)."""
    path = tables / "iou.csv"
    if not path.is_file():
        return None
    raw = _main(pd.read_csv(path, dtype={"concept": str}), main_scorer)
    if raw.empty:
        return None
    wide = raw.pivot_table(index="eval_set", columns="method", values="iou", aggfunc="mean", sort=False)
    out = pd.DataFrame({"experiment": experiment, "OOD set": wide.index.astype(str), "scorer": _scorer(raw),
                        "classes": raw.groupby("eval_set", sort=False)["concept"].nunique().reindex(wide.index).to_numpy()})
    for method in (m for m in METHODS if m in wide):
        out[f"IoU {method}"] = wide[method].to_numpy()
    return out


def seeds_table(tables: Path, experiment: str, main_scorer: str | None) -> pd.DataFrame | None:
    """Mean pairwise IoU of circuits certified with different certification seeds, per method
    (``seed_stability.csv``)."""
    path = tables / "seed_stability.csv"
    if not path.is_file():
        return None
    raw = _main(pd.read_csv(path, dtype={"concept": str}), main_scorer)
    grouped = raw.groupby("method", sort=False)
    out = pd.DataFrame({"experiment": experiment, "scorer": _scorer(raw), "method": list(grouped.groups),
                        "mean IoU": grouped["iou"].mean().to_numpy(),
                        "min IoU": grouped["iou"].min().to_numpy(), "seed pairs": grouped.size().to_numpy()})
    return out


def spurious_table(tables: Path, experiment: str, main_scorer: str | None) -> pd.DataFrame | None:
    """Spurious index (habitat over shape sensitivity) by certification category (``spurious_summary.csv``)."""
    path = tables / "spurious_summary.csv"
    if not path.is_file():
        return None
    raw = pd.read_csv(path)
    return pd.DataFrame({"experiment": experiment, "category": raw["category"].astype(str).str.replace("_", " "),
                         "mean index": raw["mean"], "median index": raw["median"], "channels": raw["count"]})


def attack_table(tables: Path, experiment: str, main_scorer: str | None) -> pd.DataFrame | None:
    """Label flips of the dataset-edit attack within and beyond the certified radius (``attack/attack_raw.csv``):
    mean shares in percent over edits, modes, trials and classes."""
    path = tables / "attack" / "attack_raw.csv"
    if not path.is_file():
        return None
    raw = pd.read_csv(path)
    grouped = raw.groupby("within_radius", sort=True)
    shares = grouped[["baseline_flip_share", "certified_flip_share"]].mean() * 100
    out = pd.DataFrame({"experiment": experiment,
                        "edits": ["beyond r" if not w else "within r" for w in shares.index],
                        "baseline flips %": shares["baseline_flip_share"].to_numpy(),
                        "certified flips %": shares["certified_flip_share"].to_numpy(),
                        "max certified flips %": grouped["certified_flip_share"].max().to_numpy() * 100,
                        "runs": grouped.size().to_numpy()})
    return out.iloc[::-1].reset_index(drop=True)  # within r first: the guarantee


def radius_table(tables: Path, experiment: str, main_scorer: str | None,
                 plan_warnings: Sequence[Mapping] = ()) -> pd.DataFrame | None:
    """The radius sweep at its best K (``radius_sweep_best_k.csv``): per (|D|, p_del) the radius, the plan's
    verdict, cACC and the abstention; ``plan warning`` names what the parse-time plan said of that setting
    (``plan/warnings.json``)."""
    path = tables / "radius_sweep_best_k.csv"
    if not path.is_file():
        return None
    raw = pd.read_csv(path)
    warned = {(int(r["n_examples"]), round(float(r["p_del"]), 9)): str(r["message"]).split(":")[0]
              for r in plan_warnings if "radius sweep" in str(r.get("where", ""))}
    notes = [warned.get((int(n), round(float(p), 9)), "") for n, p in zip(raw["n_examples"], raw["p_del"])]
    return pd.DataFrame({"experiment": experiment, "|D|": raw["n_examples"], "p_del": raw["p_del"].map(number),
                         "radius": raw["radius"], "plan": raw["plan_verdict"], "best K %": raw["k_target"] * 100,
                         "cACC %": raw["cacc"] * 100, "abstain %": raw["abstain_rate"] * 100,
                         "plan warning": notes})


#: (title, what the table shows, builder, the full table under ``tables/<experiment>/``: the first that exists) of
#: every result family
FAMILIES: tuple[tuple[str, str, Callable[..., pd.DataFrame | None], str | tuple[str, ...]], ...] = (
    ("Sufficiency", "cACC % of each circuit under zero ablation at the K chosen on held-out data (column K says by "
     "what), else at its peak, with its false-positive rate (a cACC above the full model's with an FPR near 100% is "
     "class bias, not a better circuit; K and FPR in %; p: per-example paired test)", sufficiency_table,
     ("selected_cacc.md", "peaks_cacc.md")),
    ("Faithfulness", "CPR, the area under f = (m(C) - m(empty)) / (m(M) - m(empty)) over K (higher is better)",
     faithfulness_table, "faithfulness_mean.md"),
    ("Recovery", "AUROC of each method's circuit against the known circuit over the K grid (0.5: chance)",
     recovery_table, "testbed/recovery_summary.md"),
    ("Stability", "bootstrap resamples of each concept dataset, mean over concepts and K", stability_table,
     "testbed/stability_summary.md"),
    ("IoU", "ID circuit vs the circuit re-discovered on each OOD set", iou_table, "iou.csv"),
    ("Certification seeds", "pairwise IoU of circuits certified with different seeds", seeds_table,
     "seed_stability.csv"),
    ("Spurious index", "habitat vs shape sensitivity of channels by category", spurious_table, "spurious_summary.csv"),
    ("Attack", "label flips when the concept dataset is edited (none within r, by Theorem 1)", attack_table,
     "attack/attack.md"),
    ("Radius sweep", "certified radius, cACC and abstention as |D| and p_del vary", radius_table,
     "radius_sweep_best_k.csv"),
)


def family_tables(experiments: Sequence[tuple[str, Path]], main_scorer: str | None = None,
                  plan_warnings: Sequence[Mapping] = ()) -> list[tuple[str, str, pd.DataFrame, list[str]]]:
    """Each result family the run produced: (title, what it shows, the rows of every experiment, the links to the
    full tables); a family no experiment produced is left out."""
    found = []
    for title, what, build, full in FAMILIES:
        frames, links, hidden = [], [], 0
        for name, tables in experiments:
            extra = {"plan_warnings": plan_warnings} if build is radius_table else {}
            frame = build(Path(tables), name, main_scorer, **extra)
            hidden += int(frame.attrs.get(HIDDEN, 0)) if frame is not None else 0
            if frame is not None and (len(frame) or frame.attrs.get(HIDDEN)):
                frames.append(frame)
                names = (full,) if isinstance(full, str) else full
                shown = next((n for n in names if (Path(tables) / n).is_file()), names[0])
                links.append(f"`tables/{Path(tables).name}/{shown}`")
        if frames:
            note = (f"; {hidden} row{'s' if hidden > 1 else ''} that cannot tell the methods apart (a whole-model K, "
                    "or both circuits perfect) left out: see the warnings") if hidden else ""
            found.append((title, what + note, pd.concat(frames, ignore_index=True), links))
    return found


def _section(title: str, what: str, frame: pd.DataFrame, links: Sequence[str], rows: int) -> list[str]:
    if frame.empty:  # every row left out (the title says why)
        return [f"### {title}: {what} ({', '.join(links)})", ""]
    shown = frame.head(rows)
    left = len(frame) - rows
    more = [f"... {left} more row{'s' if left > 1 else ''} in the full table{'s' if len(links) > 1 else ''}."] if left > 0 else []
    return [f"### {title}: {what} ({', '.join(links)})", "", *markdown_table(shown, "{:.3g}"), *more, ""]


def summary_lines(experiments: Sequence[tuple[str, Path]], flags: Sequence[fl.Flag],
                  found: Headline | None = None, main_scorer: str | None = None,
                  plan_warnings: Sequence[Mapping] = ()) -> list[str]:
    """The lines of ``summary.md`` (at most :data:`MAX_LINES`; see the module docstring).

    Args:
        experiments: (name, tables folder) of each experiment.
        flags: the run's one warning list (``warnings.json``).
        found: the run's headline (:func:`certified_circuits.reports.findings.headline`; None: no testbed).
        main_scorer: the vision scorer the compact tables report.
        plan_warnings: the parse-time plan records (``plan/warnings.json``), marked in the radius sweep's table.

    Returns:
        The lines, without newlines.
    """
    head = ["# certified-circuits run summary", "",
            "Explorer: `explorer/index.html` (beside this file: every circuit, figure and warning); full tables: "
            "`tables/`.", ""]
    head += headline_section(found or NO_HEADLINE)
    tail = fl.grouped_markdown(flags, "Every warning with its place and fix: the explorer's overview "
                                      "(`explorer/index.html#warnings`); as data: `warnings.json`.")
    families = family_tables(experiments, main_scorer, plan_warnings)
    results = ["## Results", ""] if families else []
    for rows in range(MAX_ROWS, 0, -1):  # the most rows per table that fit the page
        body = [line for family in families for line in _section(*family, rows)]
        if len(head) + len(results) + len(body) + len(tail) <= MAX_LINES:
            break
    return head + results + body + tail


def summary_report(out: Path, experiments: Sequence[tuple[str, Path]], flags: Sequence[fl.Flag] = (),
                   found: Headline | None = None, main_scorer: str | None = None,
                   plan_warnings: Sequence[Mapping] = ()) -> int:
    """Write ``summary.md`` (:func:`summary_lines`, atomically) and say on stderr where it is.

    Returns:
        Its number of lines.
    """
    lines = summary_lines(experiments, flags, found, main_scorer, plan_warnings)
    write_text(out, "\n".join(lines) + "\n")
    print(f"summary: {len(lines)} lines -> {out}", file=sys.stderr)
    return len(lines)
