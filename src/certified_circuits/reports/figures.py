"""Figures of the paper, rendered from tidy DataFrames (docs/architecture.md, section 2); tables are in
:mod:`certified_circuits.reports.tables`.

Pure rendering: every function takes a table already computed by :mod:`certified_circuits.analysis.evaluation`
(or nothing but hyperparameters, for the analytic figures of App. C) and writes ``stem.png`` (150 dpi)
and ``stem.pdf`` through :func:`save_figure`; none computes an evaluation result itself.

Every file goes through :func:`certified_circuits.storage.atomic.atomic_path` (temporary name in the
destination folder, renamed into place on success), so an interrupted job never leaves a truncated
figure that a resumed workflow would take for a finished one.

Figures are built on :class:`matplotlib.figure.Figure` with an explicit Agg canvas: no pyplot state,
no global backend switch, nothing to leak between calls.
"""

from __future__ import annotations

import textwrap
import zlib
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import ScalarFormatter

from certified_circuits.core.certification import certified_radius, max_certifiable_tau, min_samples
from certified_circuits.core.setting import number
from certified_circuits.core.planning import in_impossible_from
from certified_circuits.storage.atomic import atomic_path
from certified_circuits.reports.flags import CONSTANT_RANGE
from certified_circuits.reports.tables import require_rows, stem_path

__all__ = [
    "save_figure",
    "plot_message",
    "mark_constant",
    "plot_cacc_curves",
    "plot_cacc_figures",
    "plot_iou",
    "plot_seed_stability",
    "plot_radius_curves",
    "plot_sample_complexity",
    "plot_radius_sweep",
    "plot_spurious",
    "plot_feature_grid",
]

#: Line style per circuit method in the cACC-K figures (paper: certified solid, baseline dashed).
METHOD_STYLE = {"certified": "-", "baseline": "--", "majority": ":"}
METHOD_LABEL = {"certified": "Certified", "baseline": "Baseline", "majority": "Majority vote", "full": "Full model"}
#: Bar / box colours per method (certified in the paper's highlight blue, baseline gold).
METHOD_COLOR = {"certified": "#1f5fa8", "baseline": "#d4a017", "majority": "#7a7a7a"}
SPURIOUS_ORDER = ("certified_in", "abstained", "certified_out")
SPURIOUS_LABEL = {"certified_in": "Certified in", "abstained": "Abstained", "certified_out": "Certified out"}
#: Half-height of the y axis around a constant quantity (instead of an axis spanning rounding noise).
CONSTANT_MARGIN = 0.05
#: Resolution of every PNG (the PDF is vector).
PNG_DPI = 150
#: How the PNG's pixels are compressed (lossless either way): zlib's run-length strategy takes 0.05 s for a six-panel
#: 1800 x 960 figure where the default took 0.09 s, for files about 8% larger (issue 51)
PNG_ENCODING = {"compress_type": zlib.Z_RLE}


# --------------------------------------------------------------------------------------------------
# helpers


def _figure(
    nrows: int = 1, ncols: int = 1, *, panel: tuple[float, float] = (4.0, 3.2), **kwargs
) -> tuple[Figure, np.ndarray]:
    """A pyplot-free figure on an Agg canvas and its axes as a 2-D array ``[nrows, ncols]``."""
    fig = Figure(figsize=(panel[0] * ncols, panel[1] * nrows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False, **kwargs)
    return fig, axes


def _color_cycle(n: int) -> list:
    """``n`` distinguishable colours (tab10, then tab20 beyond ten)."""
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def mark_constant(ax, values, *, name: str = "y", over: str = "K", limits: bool = True) -> str | None:
    """Say so on the axes when a plotted quantity is constant (every line plot calls it per panel).

    When the finite ``values`` (the y values of the panel's curves) span less than
    :data:`certified_circuits.reports.flags.CONSTANT_RANGE`, the panel gets the annotation
    ``"constant: <name> = <value> at every <over>"`` and, with ``limits``, the y axis
    ``value ± CONSTANT_MARGIN`` (matplotlib would otherwise stretch rounding noise of 1e-17 over the whole axis).
    Pass ``limits=False`` where the axis is shared with panels that vary, or where a reference line (the full model)
    is drawn at another value. Returns the annotation, or None when the values vary (or there are none).
    """
    values = np.asarray(values, dtype=float).ravel()
    values = values[np.isfinite(values)]
    if values.size == 0 or values.max() - values.min() >= CONSTANT_RANGE:
        return None
    value = float(values.mean())
    text = f"constant: {name} = {value:.4g} at every {over}"
    if limits:
        ax.set_ylim(value - CONSTANT_MARGIN, value + CONSTANT_MARGIN)
    ax.text(0.5, 0.92, text, transform=ax.transAxes, ha="center", va="top", fontsize=8, color="#b22222",
            bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "#b22222", "alpha": 0.9})
    return text


# --------------------------------------------------------------------------------------------------
# writers


def plot_message(stem: Path, title: str, message: str) -> list[Path]:
    """A figure that says why there is nothing to plot (so a report stage always has its outputs)."""
    fig, axes = _figure()
    ax = axes[0, 0]
    ax.set_axis_off()
    ax.set_title(title)
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True, transform=ax.transAxes)
    return save_figure(fig, stem)


def save_figure(fig: Figure, stem: Path) -> list[Path]:
    """Write ``stem.png`` (150 dpi) and ``stem.pdf`` atomically, then close ``fig``.

    The temporary files carry the suffix ``.tmp``, so the format is always passed explicitly. The PDF
    is written without a creation date, so re-rendering unchanged data gives identical bytes. The layout is
    computed once (:func:`_settle_layout`) and both files are drawn with it.
    Returns the two paths written.
    """
    written: list[Path] = []
    try:
        _settle_layout(fig, PNG_DPI)
        formats = (
            (".png", {"format": "png", "dpi": PNG_DPI, "pil_kwargs": PNG_ENCODING}),
            (".pdf", {"format": "pdf", "metadata": {"CreationDate": None}}),
        )
        for suffix, options in formats:
            target = stem_path(stem, suffix)
            with atomic_path(target) as tmp:
                fig.savefig(tmp, **options)
            written.append(target)
            _drop_layout_engine(fig)  # a canvas other than Agg: the PNG's save ran the layout, the PDF keeps it
    finally:
        if getattr(fig.canvas, "manager", None) is not None:  # a pyplot-managed figure
            from matplotlib import pyplot as plt

            plt.close(fig)
    return written


def _settle_layout(fig: Figure, dpi: float) -> None:
    """Run ``fig``'s layout engine once, at the PNG's ``dpi``, then remove the engine (issue 51).

    ``savefig`` with a layout engine first draws the whole figure without rendering, only to run the engine, then
    draws it again; with the engine removed, each file is one draw. The positions are those ``savefig`` computes
    (the same renderer at the same dpi: the PNG is byte-equal), and the PDF is drawn with the PNG's layout (running
    the engine again at the PDF's 72 dpi moved the axes by under 0.1 pt, for a third of the PDF's time). Only on an
    Agg canvas (every figure built here): another canvas keeps its own renderer's layout, run by its PNG's save.

    Args:
        fig: the figure about to be saved.
        dpi: the PNG's dots per inch.
    """
    engine = fig.get_layout_engine()
    if engine is None or not isinstance(fig.canvas, FigureCanvasAgg):
        return
    shown = fig.get_dpi()
    fig.set_dpi(dpi)
    try:
        engine.execute(fig)
    finally:
        fig.set_dpi(shown)
    _drop_layout_engine(fig)


def _drop_layout_engine(fig: Figure) -> None:
    """Remove ``fig``'s layout engine, so a save neither runs it nor pre-draws the figure for it (``"none"`` would
    keep a placeholder engine, which ``savefig`` still pre-draws for; None would be read from the rcParams)."""
    from matplotlib import rc_context

    with rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
        fig.set_layout_engine(None)


# --------------------------------------------------------------------------------------------------
# sufficiency (Fig. cACC-K, Table 1 / Table 3)


def plot_cacc_curves(curves: pd.DataFrame, stem: Path, metric: str = "cacc", title: str = "") -> list[Path]:
    """Circuit accuracy vs circuit size K (paper Fig. cACC-K, fig:cacc-k-vision; App. language figures).

    One panel per ``eval_set`` (at most three a row, shared y). x is ``k_effective`` in percent of components, y is
    ``metric`` (``cacc``, ``balanced_accuracy``, ``false_positive_rate``, ...). Certified circuits are
    solid, the baseline dashed, the majority vote dotted, colours distinguish experiments (models);
    ``full`` (the unpruned model) is a horizontal grey line. Several rows for the same
    (experiment, eval_set, method, k_target) are averaged. One legend for the whole figure.
    (:func:`plot_cacc_figures` with one metric.)
    """
    return plot_cacc_figures(curves, {metric: stem}, title=title)[metric]


def plot_cacc_figures(curves: pd.DataFrame, stems: Mapping[str, Path], title: str = "") -> dict[str, list[Path]]:
    """The cACC-K figure (:func:`plot_cacc_curves`) of each metric in ``stems``, drawn on one Figure (issue 51).

    Every metric's figure has the same panels, titles, x axes (``k_effective``), legend and suptitle: they are built
    once, and each metric in turn gets its curves, y label and constant marks, which replace the previous metric's
    before its files are written. The axes and their tick objects are reused (the default's first six-panel figure
    took 0.9 s of CPU, each later one 0.6 s); each metric's axes start as a new figure's do (no data limits, y view
    (0, 1), autoscaled), and its layout is computed again from the subplot grid, so each file is the figure
    :func:`plot_cacc_curves` would draw alone.

    Args:
        curves: the curves table (``experiment``, ``eval_set``, ``method``, ``k_target``, ``k_effective`` and each
            metric); several rows of one (experiment, eval_set, method, k_target) are averaged.
        stems: metric -> stem of its ``.png`` and ``.pdf``, drawn in this order.
        title: the suptitle of every figure.

    Returns:
        metric -> the two paths written.
    """
    metrics = list(stems)
    if not metrics:
        raise ValueError("plot_cacc_figures: stems is empty; give each metric to draw with its file stem, "
                         "e.g. {'cacc': out_dir / 'curves_cacc'}")
    require_rows(curves, ["experiment", "eval_set", "method", "k_target", "k_effective", *metrics], "curves")
    keys = ["experiment", "eval_set", "method", "k_target"]
    data = curves.groupby(keys, sort=False, dropna=False, as_index=False)[["k_effective", *metrics]].mean()
    eval_sets = list(pd.unique(data["eval_set"]))
    experiments = list(pd.unique(data["experiment"]))
    colors = dict(zip(experiments, _color_cycle(len(experiments))))
    ncols = min(3, len(eval_sets))  # at most three panels a row: six eval sets are two rows, not one strip
    nrows = -(-len(eval_sets) // ncols)
    fig, axes = _figure(nrows, ncols, sharey=True)
    engine = fig.get_layout_engine()
    for ax in axes.ravel()[len(eval_sets):]:
        ax.set_visible(False)
    panels = list(zip(axes.ravel(), eval_sets))
    # each panel's rows once, for every metric: its curves' rows (for the constant check) and its lines, each sorted
    # by K, in the order of first appearance (full model first where the table has it first)
    rows = {eval_set: data[data["eval_set"] == eval_set] for eval_set in eval_sets}
    curve_rows = {eval_set: panel[panel["method"] != "full"] for eval_set, panel in rows.items()}
    lines = {eval_set: [(experiment, method, line if method == "full" else line.sort_values("k_effective"))
                        for (experiment, method), line in panel.groupby(["experiment", "method"], sort=False)]
             for eval_set, panel in rows.items()}
    for ax, eval_set in panels:
        ax.set_title(str(eval_set))
        ax.set_xlabel("circuit size K (% of components)")
        ax.grid(alpha=0.3)
    methods = list(pd.unique(data["method"]))
    handles = [
        Line2D([], [], color="black", ls=METHOD_STYLE.get(m, "-."), label=METHOD_LABEL.get(m, m))
        for m in methods
        if m != "full"
    ]
    if "full" in methods:
        handles.append(Line2D([], [], color="0.55", label=METHOD_LABEL["full"]))
    if len(experiments) > 1:
        handles += [Line2D([], [], color=colors[e], lw=4, label=str(e)) for e in experiments]
    # as many legend columns as fit the figure's width (a legend wider than the figure is clipped at both edges)
    longest = max(len(h.get_label()) for h in handles)
    ncol = max(1, min(len(handles), int(fig.get_figwidth() * 72 // (5.5 * longest + 36))))
    fig.legend(handles=handles, loc="outside lower center", ncol=ncol, frameon=False, fontsize="small")
    if title:
        fig.suptitle(title)

    written: dict[str, list[Path]] = {}
    drawn: list = []  # the previous metric's curves and marks
    for metric in metrics:
        for artist in drawn:
            artist.remove()
        drawn = []
        for ax in axes.ravel():  # as a new figure's axes: no data limits, y view (0, 1) autoscaled, at the grid's place
            ax.relim()
            ax.set_ylim(0.0, 1.0, auto=True)
            ax.set_position(ax.get_subplotspec().get_position(fig))
            ax.set_in_layout(True)  # set_position takes an axes out of the layout
        fig.set_layout_engine(engine)  # save_figure removed it after the previous metric's layout
        shown = metric.replace("_", " ") if metric != "cacc" else "cACC"
        # the panels share y: the axis is set around a constant only when every panel's values (full model's
        # included) are that constant; each panel whose curves are constant says so
        figure_constant = bool(float(data[metric].max() - data[metric].min()) < CONSTANT_RANGE)
        for ax, eval_set in panels:
            before = len(ax.texts)
            mark_constant(ax, curve_rows[eval_set][metric], name=shown, limits=figure_constant)
            drawn += ax.texts[before:]
            for experiment, method, line in lines[eval_set]:
                if method == "full":
                    drawn.append(ax.axhline(line[metric].mean(), color="0.55", lw=1.2, zorder=1))
                    continue
                style = METHOD_STYLE.get(method, "-.")
                drawn += ax.plot(100.0 * line["k_effective"], line[metric], ls=style, color=colors[experiment], lw=1.6)
        for row in axes:
            row[0].set_ylabel(shown)
        written[metric] = save_figure(fig, stems[metric])
    return written


# --------------------------------------------------------------------------------------------------
# structural stability (Fig. IoU, seed stability)


def plot_iou(iou: pd.DataFrame, stem: Path) -> list[Path]:
    """Structural stability across distribution shift (paper Fig. IoU).

    Grouped bars: for each ``eval_set`` the mean IoU over concepts of the baseline and the certified
    circuit, with ± one standard error (std with ddof=1 over concepts / sqrt(n); 0 for a single
    concept). One panel per experiment.
    """
    require_rows(iou, ["experiment", "concept", "eval_set", "method", "iou"], "iou")
    per_concept = iou.groupby(["experiment", "eval_set", "method", "concept"], sort=False, as_index=False)["iou"].mean()
    stats = (
        per_concept.groupby(["experiment", "eval_set", "method"], sort=False)["iou"]
        .agg(["mean", "std", "count"])
        .reset_index()
    )
    stats["se"] = (stats["std"] / np.sqrt(stats["count"])).fillna(0.0)
    experiments = list(pd.unique(stats["experiment"]))
    present = set(stats["method"])
    methods = [m for m in ("baseline", "certified") if m in present] + sorted(present - {"baseline", "certified"})
    panel_width = max(4.0, 1.1 * stats["eval_set"].nunique() + 1.5)
    fig, axes = _figure(1, len(experiments), panel=(panel_width, 3.2), sharey=True)
    width = 0.8 / len(methods)

    for ax, experiment in zip(axes[0], experiments):
        panel = stats[stats["experiment"] == experiment]
        eval_sets = list(pd.unique(panel["eval_set"]))
        position = pd.Series(np.arange(len(eval_sets), dtype=float), index=eval_sets)
        for j, method in enumerate(methods):
            bars = panel[panel["method"] == method]
            x = position.loc[bars["eval_set"]].to_numpy() + (j - (len(methods) - 1) / 2) * width
            ax.bar(
                x, bars["mean"], width, yerr=bars["se"], capsize=3,
                color=METHOD_COLOR.get(method), label=METHOD_LABEL.get(method, method),
            )
        ax.set_xticks(position.to_numpy(), [str(e) for e in eval_sets], rotation=20, ha="right")
        ax.set_title(str(experiment))
        ax.set_ylim(0, 1.05)
        ax.grid(axis="y", alpha=0.3)
    axes[0, 0].set_ylabel("IoU with ID circuit (mean ± s.e.)")
    handles, labels = axes[0, 0].get_legend_handles_labels()  # below the panels: inside, it covered the bars
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), frameon=False)
    return save_figure(fig, stem)


def plot_seed_stability(stability: pd.DataFrame, stem: Path) -> list[Path]:
    """Circuit stability across discovery seeds / resampled concept datasets (paper stability figure).

    One box per method of the pairwise IoUs between circuits found with ``seed_a`` and ``seed_b``
    (all concepts pooled); one panel per experiment.
    """
    require_rows(stability, ["experiment", "concept", "method", "seed_a", "seed_b", "iou"], "stability")
    experiments = list(pd.unique(stability["experiment"]))
    fig, axes = _figure(1, len(experiments), sharey=True)
    for ax, experiment in zip(axes[0], experiments):
        panel = stability[stability["experiment"] == experiment]
        groups = {m: g["iou"].dropna().to_numpy(dtype=float) for m, g in panel.groupby("method", sort=False)}
        methods = [m for m in ("baseline", "majority", "certified") if m in groups]
        methods += [m for m in groups if m not in METHOD_STYLE]
        labels = [METHOD_LABEL.get(m, m) for m in methods]
        boxes = ax.boxplot([groups[m] for m in methods], tick_labels=labels, patch_artist=True, widths=0.6)
        for patch, method in zip(boxes["boxes"], methods):
            patch.set_facecolor(METHOD_COLOR.get(method, "0.8"))
            patch.set_alpha(0.7)
        ax.set_title(str(experiment))
        ax.grid(axis="y", alpha=0.3)
    axes[0, 0].set_ylabel("IoU between seeds")
    return save_figure(fig, stem)


# --------------------------------------------------------------------------------------------------
# analysis of the certificate (App. C.1, C.2, larger radii)


def plot_radius_curves(
    stem: Path,
    taus: Sequence[float] = (0.6, 0.7, 0.8, 0.9, 0.95),
    p_del: Sequence[float] | np.ndarray | None = None,
    n_examples: int | None = None,
    title: str = "",
) -> list[Path]:
    """Certified radius r vs deletion probability p_del for several tau (App. C.1, fig:radius-analysis).

    ``r = floor(log(1.5 - tau) / log p_del)`` (Eq. r) from
    :func:`certified_circuits.core.certification.certified_radius`, drawn as a step function per tau. With
    ``n_examples`` (the run's ``|D|``), each tau's curve turns faint and dotted where ``p_empty = p_del^|D| >= 1 - tau``:
    there no component can be certified IN (docs/architecture.md section 6), whatever the radius; a tick marks where that starts.
    """
    p_del = np.linspace(0.5, 0.995, 200) if p_del is None else np.asarray(p_del, dtype=float)
    fig, axes = _figure(1, 1, panel=(5.0, 3.6))
    ax = axes[0, 0]
    for tau, color in zip(taus, _color_cycle(len(taus))):
        radius = np.array([certified_radius(tau, p) for p in p_del])
        if n_examples is None:
            ax.step(p_del, radius, where="post", color=color, lw=1.6, label=rf"$\tau$ = {number(tau)}")
            continue
        boundary = in_impossible_from(tau, n_examples)
        possible = p_del < boundary
        ax.step(p_del[possible], radius[possible], where="post", color=color, lw=1.6, label=rf"$\tau$ = {number(tau)}")
        ax.step(p_del[~possible], radius[~possible], where="post", color=color, lw=1.0, ls=":", alpha=0.6)
        if p_del.min() <= boundary <= p_del.max():
            ax.axvline(boundary, color=color, lw=0.8, ls=":", alpha=0.6)
    ax.set_yscale("symlog", linthresh=10)
    top = max(1, int(ax.get_ylim()[1]))
    ax.set_yticks([t for t in (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000) if t <= top], minor=False)
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.set_xlabel(r"deletion probability $p_{\mathrm{del}}$")
    ax.set_ylabel("certified radius r (edits)")
    ax.grid(alpha=0.3, which="both")
    handles, _ = ax.get_legend_handles_labels()
    if n_examples is not None:
        handles.append(Line2D([], [], color="0.4", ls=":", lw=1.0,
                              label=rf"IN impossible at |D| = {n_examples:,}: $p_{{del}}^{{|D|}} \geq 1 - \tau$"))
    ax.legend(handles=handles, frameon=False, fontsize=7)
    if title:
        ax.set_title(title, fontsize=9)
    return save_figure(fig, stem)


def plot_sample_complexity(
    stem: Path,
    n_components: int = 3840,
    alphas: Sequence[float] = (0.01, 0.001, 0.0001),
    taus: Sequence[float] | np.ndarray | None = None,
    title: str = "",
) -> list[Path]:
    """Minimum number of certification samples n vs tau under perfect agreement (App. C.2, fig:n-vs-tau).

    Solid: Bonferroni over ``n_components`` components (``tau^n <= alpha / N``); dashed: a single
    component (``tau^n <= alpha``); one colour per alpha; log y axis. The vertical line marks
    ``tau* = max_certifiable_tau(1000, 0.001, n_components)``, the largest tau the paper's
    ``n = 1000`` certifies at ``alpha = 0.001`` (0.985 for N = 3840). ``n_components`` is the run's ``U``
    (:func:`certified_circuits.reports.paper.theory_report`); ``title`` states it.
    """
    taus = np.linspace(0.6, 0.99, 100) if taus is None else np.asarray(taus, dtype=float)
    fig, axes = _figure(1, 1, panel=(5.0, 3.6))
    ax = axes[0, 0]
    for alpha, color in zip(alphas, _color_cycle(len(alphas))):
        corrected = [min_samples(t, alpha, n_components) for t in taus]
        single = [min_samples(t, alpha, 1) for t in taus]
        bonferroni = rf"$\alpha$ = {alpha:g}, Bonferroni (N = {n_components:,})"
        ax.plot(taus, corrected, color=color, ls="-", lw=1.6, label=bonferroni)
        ax.plot(taus, single, color=color, ls="--", lw=1.2, label=rf"$\alpha$ = {alpha:g}, per component")
    tau_star = max_certifiable_tau(1000, 0.001, n_components)
    ax.axvline(tau_star, color="0.3", ls=":", lw=1.2)
    ax.axhline(1000, color="0.6", ls=":", lw=1.0)
    ax.annotate(rf"$\tau^*$ = {tau_star:.3f}", (tau_star, 0.02), xycoords=("data", "axes fraction"),
                xytext=(-3, 0), textcoords="offset points", rotation=90, ha="right", va="bottom", fontsize=8)
    ax.set_yscale("log")
    ax.set_xlabel(r"confidence threshold $\tau$")
    ax.set_ylabel("minimum samples n")
    ax.grid(alpha=0.3, which="both")
    ax.legend(frameon=False, fontsize=7)
    if title:
        ax.set_title(title, fontsize=9)
    return save_figure(fig, stem)


def plot_radius_sweep(sweep: pd.DataFrame, stem: Path, warnings: Sequence[str] = ()) -> list[Path]:
    """Certification at larger radii (App. larger-radii figures, fig:radius_fixed_K / fig:radius_optimal_K).

    Rows of panels: cACC, effective circuit size and abstention rate, each vs certified radius, one
    line per concept-dataset size ``n_examples``; one column per experiment. Rows sharing
    (experiment, n_examples, radius), e.g. several (p_del, tau) giving the same radius, are averaged.
    A setting whose recorded plan verdict (column ``plan_verdict``, from the certificates) is not ``ok`` is drawn
    as a hollow red-edged marker and named in the legend: the sweep explores where certification stops being
    possible, and its figure says where that is (``marginal``: IN impossible or rare; ``vacuous``: nothing).
    ``warnings`` (the parse-time plan warnings of the sweep's settings, ``plan/warnings.json``) are written in the
    cACC panel, so the figure says why a marked point is what it is.
    """
    require_rows(
        sweep, ["experiment", "n_examples", "p_del", "tau", "radius", "abstain_rate", "effective_k", "cacc"], "sweep"
    )
    data = (
        sweep.groupby(["experiment", "n_examples", "radius"], as_index=False)[["cacc", "effective_k", "abstain_rate"]]
        .mean()
        .sort_values(["experiment", "n_examples", "radius"])
    )
    verdicts = (
        sweep.assign(plan_verdict=sweep["plan_verdict"].fillna("ok").astype(str))
        .groupby(["experiment", "n_examples", "radius"])["plan_verdict"]
        .agg(lambda v: "ok" if set(v) <= {"ok", ""} else sorted(set(v) - {"ok", ""})[0])
        if "plan_verdict" in sweep
        else None
    )
    if verdicts is not None:
        data = data.merge(verdicts.reset_index(), on=["experiment", "n_examples", "radius"], how="left")
    else:
        data["plan_verdict"] = "ok"
    experiments = list(pd.unique(sweep["experiment"]))
    sizes = sorted(pd.unique(data["n_examples"]))
    colors = dict(zip(sizes, _color_cycle(len(sizes))))
    rows = [("cacc", "cACC"), ("effective_k", "effective K"), ("abstain_rate", "abstention rate")]
    fig, axes = _figure(len(rows), len(experiments), panel=(3.6, 2.4), sharex="col", sharey="row")
    row_constant = {column: float(data[column].max() - data[column].min()) < CONSTANT_RANGE for column, _ in rows}
    for col, experiment in enumerate(experiments):
        panel = data[data["experiment"] == experiment]
        for row, (column, label) in enumerate(rows):
            ax = axes[row, col]
            mark_constant(ax, panel[column], name=label, over="radius", limits=row_constant[column])
            for size, line in panel.groupby("n_examples"):
                ax.plot(line["radius"], line[column], marker="o", ms=3, color=colors[size], label=f"|D| = {size}")
                flagged = line[line["plan_verdict"] != "ok"]
                ax.plot(flagged["radius"], flagged[column], ls="none", marker="o", ms=8, mfc="none", mec="#d62728",
                        mew=1.4)
            ax.grid(alpha=0.3)
            if col == 0:
                ax.set_ylabel(label)
        axes[0, col].set_title(str(experiment))
        axes[-1, col].set_xlabel("certified radius r")
    if warnings:  # the plan's words next to the points they concern
        text = "\n".join(textwrap.fill(f"plan warning: {w}", 70) for w in warnings)
        axes[0, 0].text(0.02, 0.03, text, transform=axes[0, 0].transAxes, fontsize=5, color="#d62728", va="bottom",
                        bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "#d62728", "linewidth": 0.5})
    handles = [Line2D([], [], color=colors[s], marker="o", ms=3, label=f"|D| = {s}") for s in sizes]
    flagged = data[data["plan_verdict"] != "ok"]
    if len(flagged):
        where = "; ".join(f"|D| = {r.n_examples}, r = {r.radius}: {r.plan_verdict}" for r in flagged.itertuples())
        handles.append(Line2D([], [], ls="none", marker="o", ms=8, mfc="none", mec="#d62728", mew=1.4,
                              label=textwrap.fill(f"plan not ok ({where})", 40)))
    # one column when a plan note is in the legend: a long entry beside the sizes is cut at the figure's edge
    fig.legend(handles=handles, loc="outside lower center", ncol=1 if len(flagged) else min(len(handles), 3),
               frameon=False)
    return save_figure(fig, stem)


# --------------------------------------------------------------------------------------------------
# qualitative (feature visualisation, spurious channels)


def plot_spurious(spurious: pd.DataFrame, stem: Path) -> list[Path]:
    """Spurious index of channels by certification outcome (feature-visualisation section).

    One box per category (certified in, abstained, certified out) over all channels of all concepts;
    the paper's claim is that abstained channels carry the spurious (background/co-occurring) features.
    """
    require_rows(spurious, ["concept", "category", "spurious_index"], "spurious")
    present = set(spurious["category"])
    categories = [c for c in SPURIOUS_ORDER if c in present] + sorted(present - set(SPURIOUS_ORDER))
    groups = spurious.groupby("category")["spurious_index"]
    values = [groups.get_group(c).dropna().to_numpy(dtype=float) for c in categories]
    counts = [len(v) for v in values]
    fig, axes = _figure(1, 1, panel=(4.5, 3.4))
    ax = axes[0, 0]
    labels = [f"{SPURIOUS_LABEL.get(c, c)}\n(n = {k})" for c, k in zip(categories, counts)]
    boxes = ax.boxplot(values, tick_labels=labels, patch_artist=True, widths=0.6)
    palette = {"certified_in": METHOD_COLOR["certified"], "abstained": "#c0392b", "certified_out": "0.7"}
    for patch, category in zip(boxes["boxes"], categories):
        patch.set_facecolor(palette.get(category, "0.85"))
        patch.set_alpha(0.7)
    ax.set_ylabel("spurious index")
    ax.grid(axis="y", alpha=0.3)
    return save_figure(fig, stem)




def plot_feature_grid(images: np.ndarray, rows: list[str], stem: Path, title: str = "") -> list[Path]:
    """Top-activating examples per channel (paper Fig. 1a and the feature-visualisation figures).

    ``images`` is uint8 ``[n_rows, n_cols, H, W, 3]``: one row per channel, its ``n_cols``
    top-activating examples; ``rows`` labels each row (e.g. ``'certified in: layer3.17'``). Drawn as
    an image grid without axes, the label left of each row.
    """
    images = np.asarray(images)
    if images.ndim != 5 or images.shape[-1] != 3:
        raise ValueError(f"images must have shape [n_rows, n_cols, H, W, 3], got {images.shape}")
    if images.dtype != np.uint8:
        raise ValueError(f"images must be uint8 RGB, got dtype {images.dtype}")
    n_rows, n_cols = images.shape[:2]
    if len(rows) != n_rows:
        raise ValueError(f"rows has {len(rows)} labels for {n_rows} image rows")
    if n_rows == 0 or n_cols == 0:
        raise ValueError("images has no rows or no columns: nothing to render")
    fig, axes = _figure(n_rows, n_cols, panel=(1.3, 1.3))
    for (i, j), ax in np.ndenumerate(axes):
        ax.imshow(images[i, j], interpolation="nearest")
        ax.set_xticks([])
        ax.set_yticks([])
        for spine in ax.spines.values():
            spine.set_visible(False)
    for ax, label in zip(axes[:, 0], rows):
        ax.set_ylabel(str(label), rotation=0, ha="right", va="center", fontsize=8)
    if title:
        fig.suptitle(title)
    return save_figure(fig, stem)
