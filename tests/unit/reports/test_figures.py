"""Rendering tests: every figure/table function on small hand-built tables (figures.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from certified_circuits.reports import figures, tables
from certified_circuits.core.certification import certified_radius

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def assert_figure(paths: list[Path], stem: Path) -> None:
    """Both files written, at the expected names, and valid by their magic bytes."""
    png, pdf = stem.parent / f"{stem.name}.png", stem.parent / f"{stem.name}.pdf"
    assert paths == [png, pdf]
    assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 500
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 500


def assert_no_tmp(folder: Path) -> None:
    assert not list(folder.rglob("*.tmp")), list(folder.rglob("*.tmp"))


def curves_table() -> pd.DataFrame:
    k = np.array([0.1, 0.3, 0.5, 0.7, 1.0])
    frames = []
    for experiment in ("resnet101", "vit_b16"):
        for eval_set in ("imagenet", "imagenet_a"):
            for method, shift in (("baseline", 0.0), ("majority", 0.03), ("certified", 0.08)):
                frames.append(pd.DataFrame({
                    "experiment": experiment, "eval_set": eval_set, "method": method, "k_target": k,
                    "k_effective": k * (0.6 if method == "certified" else 1.0),
                    "cacc": np.clip(0.5 + 0.4 * k + shift, 0, 1), "balanced_accuracy": 0.6 + 0.2 * k,
                }))
            frames.append(pd.DataFrame({"experiment": [experiment], "eval_set": [eval_set], "method": ["full"],
                                        "k_target": [1.0], "k_effective": [1.0], "cacc": [0.78], "balanced_accuracy": [0.8]}))
    return pd.concat(frames, ignore_index=True)


def peaks_table() -> pd.DataFrame:
    return pd.DataFrame({
        "experiment": ["resnet101", "resnet101", "resnet101"],
        "eval_set": ["imagenet", "imagenet_a", "ood_cv"],
        "full": [0.78, 0.07, 0.2],
        "baseline": [0.874, 0.60, 0.73],
        "baseline_k": [0.70, 0.40, 0.40],
        "certified": [0.912, 0.94, 0.73],
        "certified_k": [0.336, 0.342, 0.4],
        "delta": [0.038, 0.34, -0.0004],
        "delta_k": [-0.364, -0.058, 0.0],
        "pvalue": [0.004, 0.0002, 0.2],
        "test": ["wilcoxon"] * 3,
        "n_concepts": [10, 10, 10],
    })


# --------------------------------------------------------------------------------------------------
# tables


def test_format_peak_table_values(tmp_path: Path) -> None:
    table = tables.format_peak_table(peaks_table())
    assert list(table.columns) == ["Dataset", "Full", "Baseline cACC (K%)", "Certified cACC (K%)", "Δ cACC (rel. %)", "Δ K (rel. %)"]
    first = table.iloc[0].to_dict()
    assert first == {
        "Dataset": "imagenet", "Full": "78.0", "Baseline cACC (K%)": "87.4 (70.0)",
        "Certified cACC (K%)": "91.2 (33.6)", "Δ cACC (rel. %)": "+3.8 **", "Δ K (rel. %)": "-36.4",
    }
    assert table["Δ cACC (rel. %)"].tolist() == ["+3.8 **", "+34.0 ***", "+0.0 ns"]  # -0.04 pp rounds to +0.0, not -0.0
    assert table["Δ K (rel. %)"].tolist() == ["-36.4", "-5.8", "+0.0"]

    paths = tables.write_table(table, tmp_path / "tab_cert_vs_baseline", caption="Peak cACC (ResNet-101)")
    assert [p.name for p in paths] == ["tab_cert_vs_baseline.csv", "tab_cert_vs_baseline.md", "tab_cert_vs_baseline.tex"]
    md, tex = paths[1].read_text(encoding="utf-8"), paths[2].read_text(encoding="utf-8")
    assert "| imagenet | 78.0 | 87.4 (70.0) | 91.2 (33.6) | +3.8 ** | -36.4 |" in md
    assert "| Dataset | Full | Baseline cACC (K%) | Certified cACC (K%) | Δ cACC (rel. %) | Δ K (rel. %) |" in md
    assert md.startswith("Table: Peak cACC (ResNet-101)")
    assert r"imagenet\_a & 7.0 & 60.0 (40.0) & 94.0 (34.2) & +34.0 *** & -5.8 \\" in tex
    assert r"Baseline cACC (K\%)" in tex and r"$\Delta$ cACC" in tex
    assert r"\begin{tabular}{lrrrrr}" in tex and r"\label{tab:tab_cert_vs_baseline}" in tex
    assert r"\caption{Peak cACC (ResNet-101)}" in tex
    assert pd.read_csv(paths[0])["Δ cACC (rel. %)"].tolist() == ["+3.8 **", "+34.0 ***", "+0.0 ns"]
    assert_no_tmp(tmp_path)


def test_significance_thresholds() -> None:
    p = pd.Series([0.0009, 0.001, 0.0099, 0.01, 0.049, 0.05, 0.5, np.nan])
    assert tables.significance_marker(p).tolist() == ["***", "**", "**", "*", "*", "ns", "ns", ""]


def test_peak_table_several_experiments_prefixes_dataset() -> None:
    peaks = pd.concat([peaks_table().iloc[:1], peaks_table().iloc[:1].assign(experiment="vit_b16")], ignore_index=True)
    assert tables.format_peak_table(peaks)["Dataset"].tolist() == ["resnet101: imagenet", "vit_b16: imagenet"]


def test_write_table_float_format_and_missing(tmp_path: Path) -> None:
    df = pd.DataFrame({"name": ["a_b", "c&d"], "n": [100, 1000], "x": [1.23456, np.nan], "ok": [True, False]})
    paths = tables.write_table(df, tmp_path / "sub" / "t.v1", float_format="{:.2f}")
    assert [p.name for p in paths] == ["t.v1.csv", "t.v1.md", "t.v1.tex"]  # dots in a stem are kept
    md, tex = paths[1].read_text(encoding="utf-8"), paths[2].read_text(encoding="utf-8")
    assert "| a_b | 100 | 1.23 | True |" in md and "| c&d | 1000 | -- | False |" in md
    assert "|:---|---:|---:|:---|" in md
    assert r"a\_b & 100 & 1.23 & True \\" in tex and r"c\&d & 1000 & -- & False \\" in tex
    back = pd.read_csv(paths[0])
    assert back["x"].iloc[0] == pytest.approx(1.23456)  # CSV keeps full precision
    assert_no_tmp(tmp_path)


def test_runtime_table_speedup(tmp_path: Path) -> None:
    runtime = pd.DataFrame({
        "n": [100, 100, 1000, 1000],
        "paradigm": ["majority", "certified", "majority", "certified"],
        "naive_sample_s": [101.0, 101.0, 1007.0, 1007.0],
        "cached_sample_s": [0.990, 0.990, 2.226, 2.226],
        "decision_s": [0.006, 0.024, 0.021, 0.194],
    })
    out = tables.format_runtime_table(runtime)
    assert out["total_naive_s"].tolist() == pytest.approx([101.006, 101.024, 1007.021, 1007.194])
    assert out["total_cached_s"].tolist() == pytest.approx([0.996, 1.014, 2.247, 2.420])
    assert out["speedup"].tolist() == pytest.approx([101.006 / 0.996, 101.024 / 1.014, 1007.021 / 2.247, 1007.194 / 2.420])
    assert round(out["speedup"].iloc[3]) == 416  # the paper's x416 at n = 1000
    assert list(runtime.columns) == ["n", "paradigm", "naive_sample_s", "cached_sample_s", "decision_s"]  # input untouched
    paths = tables.write_table(out, tmp_path / "runtime", float_format="{:.3f}")
    assert "| 1000 | certified | 1007.000 | 2.226 | 0.194 | 1007.194 | 2.420 | 416.196 |" in paths[1].read_text(encoding="utf-8")


# --------------------------------------------------------------------------------------------------
# figures


def test_save_figure_pyplot_and_closes(tmp_path: Path) -> None:
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    assert_figure(figures.save_figure(fig, tmp_path / "plain"), tmp_path / "plain")
    assert not plt.fignum_exists(fig.number)
    assert_no_tmp(tmp_path)


@pytest.mark.parametrize("metric", ["cacc", "balanced_accuracy"])
def test_plot_cacc_curves(tmp_path: Path, metric: str) -> None:
    stem = tmp_path / f"cacc_{metric}"
    assert_figure(figures.plot_cacc_curves(curves_table(), stem, metric=metric, title="cACC vs K"), stem)
    assert_no_tmp(tmp_path)


def _pixels(path: Path) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as image:
        return np.asarray(image.convert("RGBA"))


def test_save_figure_lays_out_once_and_draws_each_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 51: a figure with a layout engine is drawn once per file (savefig alone draws it twice: once without
    rendering, to run the engine), and the files are those of matplotlib's own path: the PNG's pixels those of a plain
    ``savefig`` at 150 dpi, the PDF's bytes those of a PDF drawn with the PNG's layout."""
    from matplotlib.figure import Figure

    def build() -> Figure:
        fig, axes = figures._figure(1, 2, sharey=True)
        for ax, slope in zip(axes[0], (1.0, 2.5)):
            ax.plot([0, 1, 2], [0.0, slope, 3 * slope], label=f"slope {slope}")
            ax.set_title(f"panel {slope}")
            ax.set_xlabel("x")
        axes[0, 0].set_ylabel("y")
        fig.legend(loc="outside lower center", ncol=2)
        return fig

    reference = build()
    reference.savefig(tmp_path / "reference.png", format="png", dpi=150)
    reference.set_layout_engine("none")
    reference.savefig(tmp_path / "reference.pdf", format="pdf", metadata={"CreationDate": None})
    draws: list[str] = []
    draw = Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda self, renderer: draws.append(type(renderer).__name__) or draw(self, renderer))
    png, pdf = figures.save_figure(build(), tmp_path / "saved")
    assert draws == ["RendererAgg", "MixedModeRenderer"]  # one draw each (savefig alone: four)
    assert np.array_equal(_pixels(png), _pixels(tmp_path / "reference.png"))
    assert pdf.read_bytes() == (tmp_path / "reference.pdf").read_bytes()


def test_cacc_figures_on_one_figure_equal_each_figure_drawn_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 51: the metrics' figures drawn in turn on one Figure are each the figure ``plot_cacc_curves`` draws alone
    (PNG pixels and PDF bytes): no curve, constant mark, y limit or layout of a previous metric is left. Four eval
    sets (two hidden panels); a constant metric first (its y axis narrowed to 0.5 ± 0.05, its panels marked), then
    cACC, then a metric far outside [0, 1]."""
    base = curves_table()
    table = pd.concat([base, base.assign(eval_set=base["eval_set"] + "_c")], ignore_index=True)
    table["flat"] = 0.5
    table["wide"] = 40.0 + 10.0 * table["k_target"]
    metrics = ("flat", "cacc", "wide")
    seen: dict[str, list] = {}
    save = figures.save_figure

    def record(fig, stem):  # what each saved figure holds, read when it is written
        seen[Path(stem).name] = [([np.asarray(line.get_ydata(), float).tolist() for line in ax.lines], ax.get_ylim(),
                                  [t.get_text() for t in ax.texts])
                                 for ax in fig.axes if ax.get_visible()]
        return save(fig, stem)

    monkeypatch.setattr(figures, "save_figure", record)
    written = figures.plot_cacc_figures(table, {m: tmp_path / "one" / m for m in metrics}, title="world")
    for metric in metrics:
        alone = figures.plot_cacc_curves(table, tmp_path / "alone" / metric, metric=metric, title="world")
        assert [p.name for p in written[metric]] == [f"{metric}.png", f"{metric}.pdf"]
        assert np.array_equal(_pixels(written[metric][0]), _pixels(alone[0])), metric
        assert written[metric][1].read_bytes() == alone[1].read_bytes(), metric
    # the cACC figure's first panel (resnet101 then vit_b16 on imagenet): each method's curve sorted by K, the full
    # model a horizontal line at 0.78; no constant mark, and its y axis is cACC's, not the flat metric's 0.5 ± 0.05
    k = np.array([0.1, 0.3, 0.5, 0.7, 1.0])
    expected = [np.clip(0.5 + 0.4 * k + shift, 0, 1).tolist() for shift in (0.0, 0.03, 0.08)] + [[0.78, 0.78]]
    lines, (low, high), texts = seen["cacc"][0]
    assert len(lines) == 8 and texts == []
    for drawn, values in zip(lines, expected + expected):
        np.testing.assert_allclose(drawn, values, rtol=0, atol=1e-12)
    assert low < 0.7 and high > 0.95
    assert all(t == ["constant: flat = 0.5 at every K"] for _, _, t in seen["flat"])
    assert all(ylim == pytest.approx((0.45, 0.55)) for _, ylim, _ in seen["flat"])
    assert all(lo <= 41.0 and hi >= 50.0 and t == [] for _, (lo, hi), t in seen["wide"])
    with pytest.raises(ValueError, match="stems is empty"):
        figures.plot_cacc_figures(table, {})


def test_plot_iou_and_seed_stability(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    iou = pd.DataFrame([
        {"experiment": "resnet101", "concept": c, "eval_set": e, "method": m, "iou": rng.uniform(0.3, 0.9)}
        for c in ("crocodile", "goldfish", "tench") for e in ("imagenet_a", "imagenet_c") for m in ("baseline", "certified")
    ])
    assert_figure(figures.plot_iou(iou, tmp_path / "iou"), tmp_path / "iou")
    stability = pd.DataFrame([
        {"experiment": "resnet101", "concept": c, "method": m, "seed_a": a, "seed_b": b, "iou": rng.uniform(0.4, 1.0)}
        for c in ("crocodile", "goldfish") for m in ("baseline", "certified") for a, b in ((0, 1), (0, 2), (1, 2))
    ])
    assert_figure(figures.plot_seed_stability(stability, tmp_path / "seeds"), tmp_path / "seeds")
    assert_no_tmp(tmp_path)


def test_analytic_figures(tmp_path: Path) -> None:
    assert_figure(figures.plot_radius_curves(tmp_path / "radius", p_del=np.linspace(0.5, 0.99, 40)), tmp_path / "radius")
    assert_figure(figures.plot_sample_complexity(tmp_path / "n_vs_tau", taus=np.linspace(0.6, 0.99, 30)), tmp_path / "n_vs_tau")
    assert_no_tmp(tmp_path)


def test_plot_radius_sweep(tmp_path: Path) -> None:
    rows = [
        {"experiment": exp, "n_examples": n, "p_del": p, "tau": 0.95, "radius": certified_radius(0.95, p),
         "abstain_rate": 0.1 + 0.5 * p / n * 50, "effective_k": 0.4, "cacc": 0.9 - 0.1 * p}
        for exp in ("imagenet", "imagenet_a") for n in (50, 100, 500) for p in (0.5, 0.7, 0.8, 0.9)
    ]
    assert_figure(figures.plot_radius_sweep(pd.DataFrame(rows), tmp_path / "sweep"), tmp_path / "sweep")


def test_the_radius_sweep_figure_marks_settings_whose_plan_is_not_ok(tmp_path: Path, monkeypatch) -> None:
    """A marginal setting (IN impossible at |D| = 50, p_del 0.948) gets a hollow red marker and a legend entry."""
    rows = [{"experiment": "world", "n_examples": n, "p_del": p, "tau": 0.95, "radius": certified_radius(0.95, p),
             "abstain_rate": 0.2, "effective_k": 0.4, "cacc": 0.8 - 0.1 * p,
             "plan_verdict": "marginal" if (n, p) == (50, 0.948) else "ok"}
            for n in (50, 200) for p in (0.6, 0.948)]
    legends = []
    real_legend = figures.Figure.legend

    def spy(self, *args, **kwargs):
        legends.append([h.get_label() for h in kwargs.get("handles", [])])
        return real_legend(self, *args, **kwargs)

    monkeypatch.setattr(figures.Figure, "legend", spy)
    assert_figure(figures.plot_radius_sweep(pd.DataFrame(rows), tmp_path / "sweep"), tmp_path / "sweep")
    assert legends[-1][-1] == "plan not ok (|D| = 50, r = 11: marginal)"
    # the parse-time plan warning (plan/warnings.json) is written in the cACC panel, next to the marked point
    texts = []
    from matplotlib.axes import Axes

    real_text = Axes.text

    def spy_text(self, x, y, s, *args, **kwargs):
        texts.append(s)
        return real_text(self, x, y, s, *args, **kwargs)

    monkeypatch.setattr(Axes, "text", spy_text)
    warning = "|D| = 50, p_del 0.948 (r = 11): IN cannot be certified: p_empty = 0.0692"
    figures.plot_radius_sweep(pd.DataFrame(rows), tmp_path / "warned", [warning])
    assert any(t.replace("\n", " ").startswith("plan warning: " + warning) for t in texts)
    legends.clear()
    figures.plot_radius_sweep(pd.DataFrame(rows).assign(plan_verdict="ok"), tmp_path / "ok")
    assert legends[-1] == ["|D| = 50", "|D| = 200"]


def test_plot_spurious_and_feature_grid(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    spurious = pd.DataFrame({
        "concept": np.repeat(["crocodile", "goldfish"], 30),
        "category": np.tile(np.repeat(["certified_in", "abstained", "certified_out"], 10), 2),
        "spurious_index": rng.uniform(0, 1, 60),
    })
    assert_figure(figures.plot_spurious(spurious, tmp_path / "spurious"), tmp_path / "spurious")
    images = rng.integers(0, 256, size=(2, 3, 8, 8, 3), dtype=np.uint8)
    labels = ["certified in: layer3.17", "abstained: layer4.2"]
    assert_figure(figures.plot_feature_grid(images, labels, tmp_path / "grid", title="crocodile"), tmp_path / "grid")
    with pytest.raises(ValueError, match="labels"):
        figures.plot_feature_grid(images, labels[:1], tmp_path / "bad")
    with pytest.raises(ValueError, match="uint8"):
        figures.plot_feature_grid(images.astype(float), labels, tmp_path / "bad")
    assert_no_tmp(tmp_path)


# --------------------------------------------------------------------------------------------------
# validation


@pytest.mark.parametrize(
    ("call", "frame", "column"),
    [
        ("curves", curves_table().drop(columns="k_effective"), "k_effective"),
        ("peaks", peaks_table().drop(columns="pvalue"), "pvalue"),
        ("iou", pd.DataFrame({"experiment": ["e"], "concept": ["c"], "eval_set": ["s"], "method": ["baseline"]}), "iou"),
        ("stability", pd.DataFrame({"experiment": ["e"], "concept": ["c"], "method": ["m"], "seed_a": [0], "iou": [1.0]}), "seed_b"),
        (
            "sweep",
            pd.DataFrame({"experiment": ["e"], "n_examples": [50], "p_del": [0.5], "tau": [0.95], "radius": [1],
                          "cacc": [0.9], "effective_k": [0.4]}),
            "abstain_rate",
        ),
        ("spurious", pd.DataFrame({"concept": ["c"], "spurious_index": [0.3]}), "category"),
        ("runtime", pd.DataFrame({"n": [1], "paradigm": ["certified"], "naive_sample_s": [1.0], "decision_s": [0.1]}), "cached_sample_s"),
    ],
)
def test_missing_column_raises_naming_it(tmp_path: Path, call: str, frame: pd.DataFrame, column: str) -> None:
    functions = {
        "curves": lambda df: figures.plot_cacc_curves(df, tmp_path / "x"),
        "peaks": tables.format_peak_table,
        "iou": lambda df: figures.plot_iou(df, tmp_path / "x"),
        "stability": lambda df: figures.plot_seed_stability(df, tmp_path / "x"),
        "sweep": lambda df: figures.plot_radius_sweep(df, tmp_path / "x"),
        "spurious": lambda df: figures.plot_spurious(df, tmp_path / "x"),
        "runtime": tables.format_runtime_table,
    }
    with pytest.raises(ValueError, match=repr(column)):
        functions[call](frame)
    assert not list(tmp_path.iterdir())  # nothing written, not even a temporary file


def test_missing_metric_column_and_empty_table(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'false_positive_rate'"):
        figures.plot_cacc_curves(curves_table(), tmp_path / "x", metric="false_positive_rate")
    with pytest.raises(ValueError, match="no rows"):
        tables.format_peak_table(peaks_table().iloc[:0])


# ---------------------------------------------------------------------------------------- constant quantities


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list:
    """The Figure objects the plot functions build (save_figure replaced: nothing written)."""
    figs: list = []
    monkeypatch.setattr(figures, "save_figure", lambda fig, stem: figs.append(fig) or [])
    return figs


def _texts(ax) -> list[str]:
    return [t.get_text() for t in ax.texts]


def test_constant_curves_get_an_annotation_and_a_sane_axis(tmp_path: Path, captured: list) -> None:
    table = curves_table()
    table = table[table.eval_set == "imagenet"].copy()
    table["cacc"] = 0.9412
    table.loc[table.index[::2], "cacc"] = 0.9412 + 1e-16  # rounding noise: matplotlib would span it
    figures.plot_cacc_curves(table, tmp_path / "x")
    ax = captured[0].axes[0]
    assert "constant: cACC = 0.9412 at every K" in _texts(ax)
    low, high = ax.get_ylim()
    assert low == pytest.approx(0.9412 - figures.CONSTANT_MARGIN) and high == pytest.approx(0.9412 + figures.CONSTANT_MARGIN)


def test_varying_curves_are_not_marked(tmp_path: Path, captured: list) -> None:
    figures.plot_cacc_curves(curves_table(), tmp_path / "x")
    assert not any("constant" in t for ax in captured[0].axes for t in _texts(ax))
    # one flat line beside varying ones is no constant panel (reports/flags.py flags the line); a range of 1e-6
    # is a variation
    table = curves_table()
    table.loc[table.method == "baseline", "cacc"] = 0.5
    near = curves_table()
    near.loc[near.method != "full", "cacc"] = 0.5 + np.tile([0, 1e-6, 0, 0, 0], 12)
    figures.plot_cacc_curves(table, tmp_path / "y")
    figures.plot_cacc_curves(near, tmp_path / "z")
    assert not any("constant" in t for fig in captured[1:] for ax in fig.axes for t in _texts(ax))


def test_constant_panel_beside_a_varying_one_keeps_the_shared_axis(tmp_path: Path, captured: list) -> None:
    table = curves_table()
    flat = (table.eval_set == "imagenet_a") & (table.method != "full")
    table.loc[flat, "cacc"] = 0.25
    figures.plot_cacc_curves(table, tmp_path / "x")
    first, second = captured[0].axes[:2]
    assert _texts(second) == ["constant: cACC = 0.25 at every K"] and not _texts(first)
    low, high = second.get_ylim()
    assert high - low > 0.5  # shared with the varying panel, not narrowed to 0.25 ± 0.05


def test_radius_sweep_marks_a_constant_row(tmp_path: Path, captured: list) -> None:
    rows = [{"experiment": "world", "n_examples": n, "p_del": p, "tau": 0.95, "radius": certified_radius(0.95, p),
             "abstain_rate": 0.1 + 0.2 * p, "effective_k": 0.0, "cacc": 0.9 - 0.1 * p}
            for n in (20, 40) for p in (0.6, 0.8, 0.9)]
    figures.plot_radius_sweep(pd.DataFrame(rows), tmp_path / "x")
    cacc, size, abstain = captured[0].axes[:3]
    assert _texts(size) == ["constant: effective K = 0 at every radius"]
    assert size.get_ylim() == pytest.approx((-figures.CONSTANT_MARGIN, figures.CONSTANT_MARGIN))
    assert not _texts(cacc) and not _texts(abstain)


def test_mark_constant_ignores_nan_and_empty() -> None:
    from matplotlib.figure import Figure

    ax = Figure().subplots()
    assert figures.mark_constant(ax, []) is None and figures.mark_constant(ax, [np.nan, np.nan]) is None
    assert figures.mark_constant(ax, [0.5, np.nan, 0.5], name="f", over="seed") == "constant: f = 0.5 at every seed"
