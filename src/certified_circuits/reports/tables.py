"""Tables of the paper as files: raw CSV for machines, Markdown and LaTeX for people.

:func:`write_table` writes ``stem.csv`` (raw values), ``stem.md`` and ``stem.tex`` (formatted), each
atomically. :func:`format_peak_table` and :func:`format_runtime_table` turn computed tables
(:mod:`certified_circuits.analysis.evaluation`, :mod:`certified_circuits.vision.runtime`) into their display
form: column names, percentages, significance markers. Nothing here computes a result.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from certified_circuits.storage.atomic import atomic_path

MISSING = "--"
METRIC_LABEL = {"cacc": "cACC", "balanced_accuracy": "balanced accuracy"}
PEAK_COLUMNS = (
    "experiment", "eval_set", "full", "baseline", "baseline_k", "certified", "certified_k", "delta", "delta_k", "pvalue",
)
RUNTIME_COLUMNS = ("n", "paradigm", "naive_sample_s", "cached_sample_s", "decision_s")


def selection_name(row: Mapping[str, Any]) -> str:
    """What chose a selected K, in words (one name for it in every table, finding and page): the metric it maximises
    and the held-out set, from a ``selected_*`` row's ``metric`` and ``selected_on`` (and ``ablation``, when not zero).

    Args:
        row: a row of a ``selected_*_raw.csv`` (a mapping or a pandas row).

    Returns:
        ``"chosen by max balanced accuracy (mean ablation) on id_test"``; ``"chosen on id_test"`` without a metric;
        ``"selected"`` without either.
    """
    def present(key: str) -> str:
        value = row.get(key) if hasattr(row, "get") else None
        return "" if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)

    metric, on, ablation = present("metric"), present("selected_on"), present("ablation")
    if not on:
        return "selected"
    label = METRIC_LABEL.get(metric, metric)
    label += f" ({ablation} ablation)" if label and ablation and ablation != "zero" else ""
    return f"chosen by max {label} on {on}" if label else f"chosen on {on}"


def require_rows(df: pd.DataFrame, columns, what: str) -> None:
    """Raise ValueError naming every required column ``df`` lacks, or saying that ``df`` is empty (a
    table or figure needs both)."""
    from certified_circuits.storage.tables import require_columns

    require_columns(df, columns, what)
    if df.empty:
        raise ValueError(f"{what} has no rows: nothing to render")


def stem_path(stem: Path, suffix: str) -> Path:
    """``stem`` + suffix, without ``with_suffix`` (stems such as ``radius_k0.6`` contain dots)."""
    stem = Path(stem)
    return stem.parent / f"{stem.name}{suffix}"


def _as_text(values: pd.Series, float_format: str) -> pd.Series:
    """One column as display strings: floats through ``float_format``, missing values as ``--``."""
    if pd.api.types.is_bool_dtype(values):
        text = values.astype(object).map(str)
    elif pd.api.types.is_float_dtype(values):
        text = values.map(lambda v: MISSING if pd.isna(v) else float_format.format(v))
    else:
        text = values.astype(object).map(lambda v: MISSING if pd.isna(v) else str(v))
    return text.astype(object)


def _is_numeric_text(text: pd.Series) -> bool:
    """Whether every shown cell of a text column reads as a number (right-aligned in tables)."""
    shown = text[text != MISSING].astype(str)
    return bool(len(shown)) and bool(shown.str.match(r"^[+\-]?\d").all())


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "Δ": r"$\Delta$",
    "±": r"$\pm$",
    "×": r"$\times$",
    "τ": r"$\tau$",
}
_LATEX_RE = re.compile("|".join(re.escape(k) for k in _LATEX_SPECIAL))


def _latex_escape(text: str) -> str:
    """Escape LaTeX's special characters and typeset the few Greek/maths symbols the tables use."""
    return _LATEX_RE.sub(lambda m: _LATEX_SPECIAL[m.group(0)], str(text))


def _markdown(cells: pd.DataFrame, numeric: Sequence[bool], caption: str) -> str:
    """A GitHub-flavoured pipe table (numeric columns right-aligned), optional caption line first."""
    escape = lambda s: str(s).replace("|", r"\|")  # noqa: E731
    header = "| " + " | ".join(escape(c) for c in cells.columns) + " |"
    rule = "|" + "|".join("---:" if num else ":---" for num in numeric) + "|"
    body = cells.apply(lambda col: col.map(escape)).agg(" | ".join, axis=1)
    lines = [header, rule, *("| " + body + " |").tolist()]
    if caption:
        lines = [f"Table: {caption}", "", *lines]
    return "\n".join(lines) + "\n"


def _latex(cells: pd.DataFrame, numeric: Sequence[bool], caption: str, label: str) -> str:
    """A booktabs ``table`` environment; cells and header escaped for LaTeX."""
    align = "".join("r" if num else "l" for num in numeric)
    header = " & ".join(_latex_escape(c) for c in cells.columns) + r" \\"
    body = cells.apply(lambda col: col.map(_latex_escape)).agg(" & ".join, axis=1) + r" \\"
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        rf"\begin{{tabular}}{{{align}}}",
        r"\toprule",
        header,
        r"\midrule",
        *body.tolist(),
        r"\bottomrule",
        r"\end{tabular}",
    ]
    if caption:
        lines.append(rf"\caption{{{_latex_escape(caption)}}}")
    lines += [rf"\label{{tab:{label}}}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def _signed_pct(values: pd.Series) -> pd.Series:
    """Fractions as signed percentages with one decimal (``0.038 -> '+3.8'``; ``-0.0`` shown as ``+0.0``)."""
    rounded = (100.0 * values.astype(float)).round(1) + 0.0  # + 0.0 turns -0.0 into 0.0
    return rounded.map(lambda v: MISSING if pd.isna(v) else f"{v:+.1f}")


def pct(values: pd.Series) -> pd.Series:
    """Fractions as percentages with one decimal (``0.912 -> '91.2'``)."""
    return (100.0 * values.astype(float)).map(lambda v: MISSING if pd.isna(v) else f"{v:.1f}")


def _pvalue(values: pd.Series) -> pd.Series:
    """p-values with two significant digits (``0.00123 -> '0.0012'``), ``<1e-4`` below that."""
    p = pd.to_numeric(values, errors="coerce")
    return p.map(lambda v: MISSING if pd.isna(v) else ("<1e-4" if v < 1e-4 else f"{v:.2g}"))


def significance_marker(pvalue: pd.Series) -> pd.Series:
    """``***`` p<0.001, ``**`` p<0.01, ``*`` p<0.05, ``ns`` otherwise; empty where no test was run (NaN)."""
    p = pd.to_numeric(pvalue, errors="coerce").to_numpy(dtype=float)
    marks = np.select([p < 0.001, p < 0.01, p < 0.05, np.isnan(p)], ["***", "**", "*", ""], default="ns")
    return pd.Series(marks, index=pvalue.index, dtype=object)


def _cells(df: pd.DataFrame, float_format: str) -> tuple[pd.DataFrame, list[bool]]:
    """The display strings of a table and which columns read as numbers (right-aligned)."""
    cells = pd.DataFrame({c: _as_text(df[c], float_format) for c in df.columns}, index=df.index)
    cells.columns = [str(c) for c in df.columns]
    numeric = [
        (pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])) or _is_numeric_text(cells[str(c)])
        for c in df.columns
    ]
    return cells, numeric


def markdown_table(df: pd.DataFrame, float_format: str = "{:.3f}") -> list[str]:
    """A table as the lines of a Markdown pipe table (no caption), formatted as :func:`write_table` formats its
    ``.md`` (floats through ``float_format``, missing values as ``--``, numbers right-aligned)."""
    cells, numeric = _cells(df, float_format)
    return _markdown(cells, numeric, "").rstrip("\n").split("\n")


def write_table(df: pd.DataFrame, stem: Path, caption: str = "", float_format: str = "{:.3f}") -> list[Path]:
    """Write a table as ``stem.csv``, ``stem.md`` and ``stem.tex`` atomically.

    The CSV holds the raw values (full precision, for downstream use); Markdown and LaTeX (booktabs,
    ``\\label{tab:<stem name>}``) show float columns through ``float_format``, missing values as
    ``--``, and right-align columns that read as numbers. Used for paper Table 1/3
    (tab:cert-vs-baseline, via :func:`format_peak_table`) and the App. D runtime table
    (tab:runtime, via :func:`format_runtime_table`). Returns the three paths written.
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"write_table needs a pandas DataFrame, got {type(df).__name__}")
    cells, numeric = _cells(df, float_format)
    targets = [stem_path(stem, s) for s in (".csv", ".md", ".tex")]
    with atomic_path(targets[0]) as tmp, open(tmp, "w", newline="", encoding="utf-8") as handle:
        df.to_csv(handle, index=False)
    with atomic_path(targets[1]) as tmp:
        tmp.write_text(_markdown(cells, numeric, caption), encoding="utf-8")
    with atomic_path(targets[2]) as tmp:
        tmp.write_text(_latex(cells, numeric, caption, Path(stem).name), encoding="utf-8")
    return targets


def format_peak_table(peaks: pd.DataFrame) -> pd.DataFrame:
    """The display table of paper Table 1 (tab:cert-vs-baseline) and Table 3 (other scorers).

    Columns: ``Dataset``, ``Full``, ``Baseline cACC (K%)``, ``Certified cACC (K%)``, ``Δ cACC (rel. %)``,
    ``Δ K (rel. %)`` (the unit in the name: a relative change, never percentage points), with the metric named after
    the ``metric`` column when there is one (``cacc`` -> cACC, ``balanced_accuracy`` -> balanced accuracy, and
    then ``Full (<metric>)``). All numbers are percentages with one decimal: the peak with the circuit size K at which it is reached in
    parentheses (e.g. ``91.2 (33.6)``); ``Δ`` columns are the ``delta`` and ``delta_k`` columns, the
    relative change certified vs baseline, ``(certified - baseline) / baseline``, in percent. A cACC table whose rows
    carry the false-positive rates (``full_fpr``, ``baseline_fpr``, ``certified_fpr``: vision) adds
    ``FPR % (full / baseline / certified)``: cACC under zero ablation rewards a circuit that labels every image ``c``,
    and the FPR beside it shows when it does.

    Significance markers on ``Δ cACC (rel. %)`` come from the per-example paired test (``pvalue_examples``,
    McNemar or bootstrap, named in ``example_test``) where the table has one, else from the class-level
    ``pvalue`` (the test named in ``test``): ``***`` p < 0.001, ``**`` p < 0.01, ``*`` p < 0.05, ``ns``
    otherwise; no marker where the p-value is missing (no test run). With per-example tests, a column
    ``p (classes / examples)`` shows both p-values. ``Dataset`` is the ``eval_set``, prefixed with ``experiment: `` when the
    table holds more than one experiment. Rows keep the order of ``peaks``.
    """
    require_rows(peaks, PEAK_COLUMNS, "peaks")
    dataset = peaks["eval_set"].astype(str)
    if peaks["experiment"].nunique() > 1:
        dataset = peaks["experiment"].astype(str) + ": " + dataset
    per_example = "pvalue_examples" in peaks.columns and peaks["pvalue_examples"].notna().any()
    marker = significance_marker(peaks["pvalue_examples"] if per_example else peaks["pvalue"])
    delta = (_signed_pct(peaks["delta"]) + " " + marker).str.rstrip()
    metrics = set(peaks["metric"]) if "metric" in peaks.columns else set()
    if len(metrics) > 1:
        raise ValueError(f"peaks mixes metrics {sorted(metrics)}: format one metric per table")
    label = METRIC_LABEL.get(metrics.pop(), "cACC") if metrics else "cACC"
    table = pd.DataFrame(
        {
            "Dataset": dataset,
            f"Full ({label})" if "metric" in peaks.columns else "Full": pct(peaks["full"]),
            f"Baseline {label} (K%)": pct(peaks["baseline"]) + " (" + pct(peaks["baseline_k"]) + ")",
            f"Certified {label} (K%)": pct(peaks["certified"]) + " (" + pct(peaks["certified_k"]) + ")",
            f"Δ {label} (rel. %)": delta,
            "Δ K (rel. %)": _signed_pct(peaks["delta_k"]),
        }
    )
    if label == "cACC" and {"full_fpr", "baseline_fpr", "certified_fpr"} <= set(peaks.columns):
        table["FPR % (full / baseline / certified)"] = (
            pct(peaks["full_fpr"]) + " / " + pct(peaks["baseline_fpr"]) + " / " + pct(peaks["certified_fpr"]))
    if per_example:
        table["p (classes / examples)"] = _pvalue(peaks["pvalue"]) + " / " + _pvalue(peaks["pvalue_examples"])
    return table.reset_index(drop=True).astype(object)


def format_runtime_table(runtime: pd.DataFrame) -> pd.DataFrame:
    """The runtime breakdown of App. D (tab:runtime), numeric, ready for :func:`write_table`.

    Adds ``total_naive_s = naive_sample_s + decision_s``, ``total_cached_s = cached_sample_s +
    decision_s`` and ``speedup = total_naive_s / total_cached_s`` (the paper's "optimized speedup",
    e.g. 1007 s / 2.420 s = 416x at n = 1000, certified). A missing ``decision_s`` (the n = 1 baseline)
    counts as 0; a missing naive time gives a missing total and speedup. Rows keep their order.
    """
    require_rows(runtime, RUNTIME_COLUMNS, "runtime")
    out = runtime.copy()
    decision = out["decision_s"].astype(float).fillna(0.0)
    out["total_naive_s"] = out["naive_sample_s"].astype(float) + decision
    out["total_cached_s"] = out["cached_sample_s"].astype(float) + decision
    out["speedup"] = out["total_naive_s"] / out["total_cached_s"].where(out["total_cached_s"] > 0)
    return out
