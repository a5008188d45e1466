"""The circuit explorer: a static HTML folder that shows a run's circuits (``<results_dir>/explorer/``).

It opens from disk with no server and no network: every page links ``explorer.css`` and ``explorer.js``
from the folder, every figure is copied into it, and the circuit data is embedded in the pages.

- ``index.html``: a warning box with every flag of the run's circuits and curves
  (:mod:`certified_circuits.reports.flags`: planner warnings, nothing certified, a model at chance, flat or
  identical curves...), each with its fix; the settings of each experiment in words and what the guarantee
  says (Theorem 1), the headline tables (peaks and held-out selections, with Δ and significance markers), the
  key figures with one-line captions, and links to every class and task;
- ``<experiment>/<class>.html`` (vision): under the setting, the circuit's flags (its certificate's and its
  curves'); the circuit per layer at a K chosen with a selector (default: the operating K), every channel
  coloured certified in, abstained within the baseline, abstained outside it, or certified out, with its
  certification votes on hover; the feature grid (top-activating images of channels of each category); the
  class's cACC-K and false-positive-rate curves; its attack result;
- ``<experiment>/<task>.html`` (language): under the setting, its flags; the circuit on the model graph at
  the selected setting and K (nodes by layer; certified-in edges solid, edges of the baseline that are not
  certified in dashed, the most-voted abstained edges outside the baseline dotted; the drawing keeps only
  those edges), the edge counts, every setting with its flag codes, the curves, the attack result and the
  circuit as a JSON download (every edge with its score, decision and ``in_graph``: certified in).

Names come from files any tool may write (the HDF5 contracts are public), so every string from a file reaches a
page through :func:`esc` (HTML text and attributes), :func:`url` (links and image sources, to files named by
:func:`file_stem`) or :func:`json_script` (the embedded page data): a name such as ``</script><script>...`` is
shown as text, never run.

Categories are :func:`certified_circuits.analysis.evaluation.channel_categories` (one definition for the
feature figure, the spurious index and this explorer).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence
from urllib.parse import quote

import numpy as np
import pandas as pd

from certified_circuits.analysis.evaluation import channel_categories
from certified_circuits.core.certification import certified_radius
from certified_circuits.core.contracts import setting_columns
from certified_circuits.language import names as grammar
from certified_circuits.reports.flags import Flag, certificate_flags, curve_flags, merge_flags, sorted_flags
from certified_circuits.reports.words import guarantee_words, setting_words, tag_words
from certified_circuits.storage.atomic import atomic_dir

#: one-line captions of the figures a run writes, by file name (the explorer and the report show them)
CAPTIONS = {
    "curves_cacc.png": "Circuit accuracy (cACC) against circuit size K: certified (solid), baseline (dashed) and "
    "majority-vote (dotted) circuits, the full model in grey; one panel per eval set.",
    "curves_balanced_accuracy.png": "Balanced accuracy against K: cACC on the class's images and 1 - false-positive "
    "rate on other classes' images, so a circuit that labels everything as its class scores 0.5.",
    "curves_false_positive_rate.png": "False-positive rate against K: how often a class circuit labels other classes' "
    "images as its class (the specificity control).",
    "iou.png": "IoU between each class's ID circuit and the circuit re-discovered on each OOD set, certified vs baseline.",
    "seed_stability.png": "IoU between circuits certified with different certification seeds (same data, same model).",
    "radius_sweep_fixed_k.png": "cACC and circuit size at a fixed K as the deletion probability (hence the radius) grows.",
    "radius_sweep_best_k.png": "Peak cACC and its K as the deletion probability (hence the radius) grows.",
    "spurious.png": "Spurious index (habitat vs shape sensitivity) of certified-in, abstained and certified-out channels.",
    "attack.png": "Dataset-edit attack: share of certified labels flipped by edits of r, 2r, 4r examples (0 within r, "
    "by Theorem 1), against the baseline's flips.",
    "radius_vs_pdel.png": "Certified radius r = floor(log(1.5 - tau) / log p_del) against the deletion probability.",
    "samples_vs_tau.png": "Certification samples n needed to certify at tau, with and without the Bonferroni correction.",
    "features": "Top-activating images of the most active certified-in, abstained (in the baseline only) and "
    "certified-out channels of the deepest layer, at the certified ID peak K (paper Fig. 4).",
}

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
    """The files of one concept's circuit (vision: the main scorer at the main setting; language: one setting)."""

    experiment: str
    concept: str
    attributions: Path
    votes: Path
    certificates: Path
    features: Path | None = None


# ---------------------------------------------------------------------------------------------- html pieces


def esc(value: object) -> str:
    """Any text reaching HTML (element text, attribute values, SVG ``<title>``): ``& < > " '`` escaped. Every
    string that comes from a file (component, layer, edge, class, task and experiment names, table cells,
    attributes) goes through it: the HDF5 contracts are public, so any tool may have written them."""
    return html.escape(str(value), quote=True)


#: characters of embedded JSON that could end its ``<script>`` block or open markup (``</script>``, ``<!--``),
#: or break a JavaScript string (the line separators U+2028, U+2029), as JSON escapes
JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def json_script(data: object, element_id: str) -> str:
    """``data`` as a ``<script type="application/json">`` block: JSON whose ``<``, ``>``, ``&``, U+2028 and
    U+2029 are written as ``\\u`` escapes, so no string in it can close the block or start a tag, and
    ``JSON.parse`` (or :func:`json.loads`) of the block's text gives back ``data`` exactly."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False)
    text = re.sub("[<>&\u2028\u2029]", lambda m: JSON_ESCAPES[m[0]], text)
    return f'<script type="application/json" id="{esc(element_id)}">{text}</script>'


def url(path: str) -> str:
    """A relative link or image source (``href``, ``src``) to a file of the explorer, HTML-escaped: ``%``,
    ``#``, ``?``, control characters and whitespace other than a space percent-encoded (a name holding them
    still links to its own file, never to a fragment or a query), every other character kept as it is."""
    return esc(re.sub(r"[%#?\x00-\x1f\x7f]|[^\S ]", lambda m: quote(m[0], safe=""), path))


def file_stem(name: str) -> str:
    """The file name (without suffix) of a page or file named after a class, task or experiment: the name
    itself when it is a plain name (letters, digits, ``_ . + -``, inner spaces), else its plain characters
    with ``_`` for the others and a digest of the name (no path separator, no markup; two names that differ
    only in those characters still get two files)."""
    name = str(name)
    if PLAIN_NAME.fullmatch(name) and not name.endswith((" ", ".")):
        return name
    digest = hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    plain = re.sub(r"[^\w.+-]", "_", name)[:80].strip(".")
    return f"{plain}-{digest}"


#: a class, task or experiment name that is its own file name
PLAIN_NAME = re.compile(r"[\w+-][\w.+ -]*")


def markdown_table_html(text: str) -> str:
    """A Markdown pipe table (with an optional ``Table: caption`` line, as :func:`~certified_circuits.reports.tables.write_table`
    writes) as an HTML table; numeric columns right-aligned as in the Markdown."""
    lines = [line.rstrip("\r") for line in text.split("\n") if line.strip()]  # not splitlines: a cell may hold U+2028
    caption = next((line[len("Table:") :].strip() for line in lines if line.startswith("Table:")), "")
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines if line.startswith("|")]
    if len(rows) < 2:
        return f"<pre>{esc(text)}</pre>"
    head, align, body = rows[0], rows[1], rows[2:]
    right = [cell.endswith(":") and not cell.startswith(":") for cell in align]
    cells = lambda row, tag: "".join(f"<{tag}{' class=num' if r else ''}>{esc(c)}</{tag}>" for c, r in zip(row, right))  # noqa: E731
    return (
        f"<table>{f'<caption>{esc(caption)}</caption>' if caption else ''}<thead><tr>{cells(head, 'th')}</tr></thead>"
        f"<tbody>{''.join('<tr>' + cells(row, 'td') + '</tr>' for row in body)}</tbody></table>"
    )


def frame_html(frame: pd.DataFrame, caption: str = "", float_format: str = "{:.1f}") -> str:
    """A small DataFrame as an HTML table (floats formatted, numbers right-aligned)."""
    numeric = [
        pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c]) for c in frame.columns
    ]

    def cell(value, is_number):
        text = float_format.format(value) if isinstance(value, float) else str(value)
        return f"<td{' class=num' if is_number else ''}>{esc(text)}</td>"

    head = "".join(f"<th>{esc(c)}</th>" for c in frame.columns)
    body = "".join(
        "<tr>" + "".join(cell(v, n) for v, n in zip(row, numeric)) + "</tr>" for row in frame.itertuples(index=False)
    )
    return f"<table>{f'<caption>{esc(caption)}</caption>' if caption else ''}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def circuit_flags(where: str, certificates, curves: pd.DataFrame, setting: str) -> list[Flag]:
    """The flags of one circuit (:mod:`certified_circuits.reports.flags`): its certificate's (the planner
    warnings the certify stage recorded, nothing certified in) and those of its curves (``curves``: the
    concept's sufficiency rows, kept to ``setting`` and the full model when they name settings)."""
    flags = certificate_flags(certificates.decision, certificates.attrs, where)
    if not len(curves) or not {"method", "k_target"} <= set(curves.columns):
        return flags
    if "setting" in curves and (curves.setting.astype(str) == setting).any():
        curves = curves[(curves.setting.astype(str) == setting) | (curves.method == "full")]
    return flags + curve_flags(curves, where)


def code_spans(escaped: str) -> str:
    """Markdown code spans (`` `certified-circuits plan ...` ``) of already escaped text as ``<code>``."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)


def flags_html(flags: Sequence[Flag], title: str) -> str:
    """A warning box (most severe first): each flag's code, what it concerns, its message and its fix; ""
    without flags."""
    if not flags:
        return ""
    items = "".join(
        f"<li><b>{esc(f.code)}</b>{' · ' + esc(f.where) if f.where else ''}: {code_spans(esc(f.message))}"
        f"<br><i>Fix:</i> {code_spans(esc(f.fix))}</li>"
        for f in sorted_flags(flags)
    )
    return f'<div class="warning" role="alert"><p><b>{esc(title)}</b></p><ul>{items}</ul></div>'


LINE_STYLES = {"certified": "", "baseline": "6 4", "majority": "2 3"}
LINE_COLORS = {"certified": "#1b6ca8", "baseline": "#c0392b", "majority": "#7d7d7d"}


def svg_chart(
    series: Sequence[tuple[str, np.ndarray, np.ndarray]],
    title: str,
    ylabel: str,
    full: float | None = None,
    width: int = 330,
    height: int = 220,
    fraction: bool = True,
) -> str:
    """A line chart as inline SVG: x is K in percent, one line per (method, xs, ys), the full model as a grey
    line; y spans [0, 1] for a ``fraction`` whose values stay in it, else the values' range."""
    left, right, top, bottom = 56, 10, 40, 34
    values = [v for _, _, ys in series for v in ys if np.isfinite(v)] + (
        [full] if full is not None and np.isfinite(full) else []
    )
    inside = bool(values) and min(values) >= 0 and max(values) <= 1
    lo, hi = (
        (0.0, 1.0) if fraction and (inside or not values) else ((min(values), max(values)) if values else (0.0, 1.0))
    )
    hi = hi if hi > lo else lo + 1.0
    sx = lambda k: left + (width - left - right) * k  # noqa: E731
    sy = lambda v: top + (height - top - bottom) * (1 - (v - lo) / (hi - lo))  # noqa: E731
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img">',
        f'<text x="{width / 2}" y="14" class="ct">{esc(title)}</text>',
    ]
    for tick in np.linspace(lo, hi, 5):
        y = sy(tick)
        parts.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{left - 4}" y="{y + 3:.1f}" class="yt">{tick:.3g}</text>'
        )
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        parts.append(f'<text x="{sx(tick):.1f}" y="{height - bottom + 14}" class="xt">{100 * tick:g}</text>')
    middle = (top + height - bottom) / 2
    parts.append(
        f'<text x="{(left + width - right) / 2}" y="{height - 4}" class="xl">circuit size K (% of components)</text>'
        f'<text x="12" y="{middle}" class="yl" transform="rotate(-90 12 {middle})">{esc(ylabel)}</text>'
    )
    if full is not None and np.isfinite(full):
        parts.append(
            f'<line x1="{left}" x2="{width - right}" y1="{sy(full):.1f}" y2="{sy(full):.1f}" class="full">'
            f"<title>full model {full:.3f}</title></line>"
        )
    for method, xs, ys in series:
        order = np.argsort(xs)
        points = " ".join(
            f"{sx(float(x)):.1f},{sy(float(y)):.1f}"
            for x, y in zip(np.asarray(xs)[order], np.asarray(ys)[order])
            if np.isfinite(y)
        )
        dash = f' stroke-dasharray="{LINE_STYLES.get(method, "")}"' if LINE_STYLES.get(method) else ""
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="{LINE_COLORS.get(method, "#333")}" stroke-width="2"{dash}>'
            f"<title>{esc(method)}</title></polyline>"
        )
    legend = " ".join(f'<tspan fill="{LINE_COLORS.get(m, "#333")}">{esc(m)}</tspan>' for m, _, _ in series)
    parts.append(
        f'<text x="{left + 4}" y="29" class="lg">{legend}{" · full (grey)" if full is not None else ""}</text></svg>'
    )
    return "".join(parts)


def curve_charts(table: pd.DataFrame, metrics: Sequence[tuple[str, str, bool]]) -> str:
    """Charts of one concept's sufficiency rows: one per (eval set, metric), methods as lines."""
    charts: list[str] = []
    if table.empty or not {"eval_set", "method", "k_effective"} <= set(table.columns):
        return "<p>No curves for this concept.</p>"
    for eval_set, rows in table.groupby("eval_set", sort=False):
        for column, label, fraction in metrics:
            if column not in rows:
                continue
            full = rows.loc[rows.method == "full", column]
            series = [
                (m, part["k_effective"].to_numpy(float), part[column].to_numpy(float))
                for m, part in rows[rows.method != "full"].groupby("method", sort=False)
            ]
            charts.append(
                svg_chart(
                    series, f"{eval_set}: {label}", label, float(full.mean()) if len(full) else None, fraction=fraction
                )
            )
    return f'<div class="charts">{"".join(charts)}</div>' if charts else "<p>No curves for this concept.</p>"


# ---------------------------------------------------------------------------------------------- circuits


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


def node_of(endpoint: str) -> str:
    """``a1.h2<q>`` -> ``a1.h2``; ``m0`` and ``logits`` unchanged (the grammar of language/names.py)."""
    return grammar.node_of(endpoint)


def node_position(node: str, n_layers: int, n_heads: int, width: float, height: float) -> tuple[float, float]:
    """Where a node of the EAP graph is drawn: input at the bottom, logits at the top, layer l's heads and MLP
    on row l + 1 (heads left to right, the MLP last)."""
    rows = n_layers + 2
    y = lambda row: height - 20 - (height - 40) * row / (rows - 1)  # noqa: E731
    try:
        parsed = grammar.parse_node(node)
    except ValueError:
        raise ValueError(f"not an EAP graph node: {node!r}") from None
    if parsed.kind in ("input", "logits"):
        return width / 2, y(parsed.depth(n_layers) + 1)
    column = parsed.head if parsed.kind == "head" else n_heads
    return 30 + (width - 60) * (column + 0.5) / (n_heads + 1), y(parsed.depth(n_layers) + 1)


#: edge category -> (CSS class, label) in the language graph
EDGE_STYLES = {
    "certified_in": ("in", "certified in"),
    "baseline_only": ("base", "in the baseline, not certified in"),
    "abstained": ("abs", "abstained outside the baseline"),
}


def language_graph_svg(
    names: Sequence[str],
    decision: np.ndarray,
    baseline: np.ndarray,
    votes: np.ndarray,
    n_layers: int,
    n_heads: int,
    max_abstained: int = 300,
    max_drawn: int = 2000,
) -> tuple[str, dict[str, int]]:
    """The circuit on the model graph as inline SVG (paper Fig. 3), pruned to its edges: certified in (solid),
    in the baseline but not certified in (dashed), and the ``max_abstained`` most-voted abstained edges outside
    the baseline (dotted); at most ``max_drawn`` edges of each of the first two (the most voted), which a
    circuit at the operating K (GPT-2 Small: about 2% of 32,491 edges) never reaches.

    Returns:
        the SVG, and the edge counts: certified in, baseline only, abstained (all), certified out, edges.
    """
    decision, baseline = np.asarray(decision), np.asarray(baseline, bool)
    certified_in = decision == 1
    groups = {
        name: members[np.argsort(-votes[members], kind="stable")][:max_drawn]  # keep a page light at any K
        for name, members in (
            ("certified_in", np.flatnonzero(certified_in)),
            ("baseline_only", np.flatnonzero(baseline & ~certified_in)),
        )
    }
    outside = np.flatnonzero((decision == -1) & ~baseline)
    groups["abstained"] = outside[np.argsort(-votes[outside], kind="stable")][:max_abstained]
    counts = {
        "certified in": int(certified_in.sum()),
        "baseline only": len(groups["baseline_only"]),
        "abstained": int((decision == -1).sum()),
        "certified out": int((decision == 0).sum()),
        "edges": len(names),
    }
    width, height = 900.0, max(260.0, 60.0 * (n_layers + 2))
    parts = [
        f'<svg class="graph" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" height="{height:.0f}" role="img">'
    ]
    used = set()
    for category in ("abstained", "baseline_only", "certified_in"):  # the circuit drawn last, on top
        css, label = EDGE_STYLES[category]
        for index in groups[category]:
            up, down = grammar.edge_nodes(names[index])
            x1, y1 = node_position(up, n_layers, n_heads, width, height)
            x2, y2 = node_position(down, n_layers, n_heads, width, height)
            used.update({up, down})
            parts.append(
                f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" class="edge {css}">'
                f"<title>{esc(names[index])}: {esc(label)}, {int(votes[index])} certification votes</title></line>"
            )
    nodes = (
        [grammar.INPUT, grammar.LOGITS]
        + [grammar.head(l, h) for l in range(n_layers) for h in range(n_heads)]
        + [grammar.mlp(l) for l in range(n_layers)]
    )
    for node in nodes:
        x, y = node_position(node, n_layers, n_heads, width, height)
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{6 if node in used else 3}" class="node{" used" if node in used else ""}">'
            f"<title>{esc(node)}</title></circle>"
        )
        if node in used or node in (grammar.INPUT, grammar.LOGITS):
            parts.append(f'<text x="{x + 8:.1f}" y="{y + 4:.1f}" class="nl">{esc(node)}</text>')
    parts.append("</svg>")
    return "".join(parts), counts


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


# ---------------------------------------------------------------------------------------------- pages


def page(title: str, body: str, depth: int) -> str:
    up = "../" * depth
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
        f'<link rel="stylesheet" href="{up}explorer.css"></head><body><div id="errors" hidden></div>'
        f'<header><a href="{up}index.html">certified-circuits explorer</a></header><main>{body}</main>'
        f'<script src="{up}explorer.js"></script></body></html>'
    )


def figure_html(src: str, name: str) -> str:
    caption = CAPTIONS.get(name, name)
    return f'<figure><img src="{url(src)}" alt="{esc(caption)}"><figcaption>{esc(caption)}</figcaption></figure>'


def operating_k(tables: Path, concept: str | None, scorer: str | None, k_grid: np.ndarray) -> float:
    """The page's default K: the certified circuit's K chosen on held-out data (``selected_cacc_raw.csv``, the
    same choice as the fair-comparison table) when the run made one, else the K of the certified curve's
    peak cACC (``operating_points.csv``) on ID data, else the middle of the grid."""
    for name, column in (("selected_cacc_raw.csv", "certified_k_target"), ("operating_points.csv", "k_target")):
        path = tables / name
        if not path.is_file():
            continue
        rows = pd.read_csv(path)
        if scorer is not None and "scorer" in rows:
            rows = rows[rows.scorer == scorer]
        if concept is not None and "concept" in rows:
            rows = rows[rows.concept.astype(str) == concept]
        if "criterion" in rows:
            rows = rows[rows.criterion == "certified_peak"]
            rows = rows.sort_values("eval_set", key=lambda e: ~e.isin(["id", "id_test"]), kind="stable")
        if len(rows) and column in rows:
            return float(rows.iloc[0][column])
    return float(k_grid[len(k_grid) // 2])


def nearest_index(k_grid: np.ndarray, k: float) -> int:
    return int(np.argmin(np.abs(np.asarray(k_grid, float) - k)))


def attack_html(tables: Path, concept: str) -> str:
    raw = tables / "attack" / "attack_raw.csv"
    if not raw.is_file():
        return "<p>The dataset-edit attack is off for this run (<code>attack.enabled</code>).</p>"
    rows = pd.read_csv(raw)
    rows = rows[rows.concept.astype(str) == concept]
    if not len(rows):
        return "<p>No attack on this concept (it has too few pool examples).</p>"
    summary = (
        rows.groupby(["edit", "mode", "r_edits", "within_radius"], sort=False)
        .agg(
            baseline=("baseline_flip_share", "mean"),
            certified=("certified_flip_share", "mean"),
            abstained=("abstain_share", "mean"),
            trials=("trial", "count"),
        )
        .reset_index()
    )
    summary[["baseline", "certified", "abstained"]] *= 100
    summary.columns = [
        "edit",
        "mode",
        "edits",
        "within r",
        "baseline flips %",
        "certified flips %",
        "to abstain %",
        "trials",
    ]
    return frame_html(
        summary, "Labels flipped by editing the concept dataset (certified flips within r are impossible by Theorem 1)"
    )


NO_FEATURES = "<p>No feature grid for this class (vision.feature_concepts).</p>"


def vision_page(
    circuit: Circuit, experiment: Experiment, sufficiency: pd.DataFrame, features: str | None
) -> tuple[str, list[Flag]]:
    """The class page: the circuit per layer with a K selector, the feature grid, the curves, the attack; the
    circuit's flags in a warning box under its setting. Returns the page's body and its flags."""
    attributions, votes, certificates = read_circuit(circuit)
    data = vision_circuit_data(attributions.names, attributions.groups, votes, certificates)
    k0 = nearest_index(votes.k_grid, operating_k(experiment.tables, None, str(votes.attrs.get("scorer")), votes.k_grid))
    options = "".join(
        f'<option value="{i}"{" selected" if i == k0 else ""}>K = {100 * k:g}%</option>'
        for i, k in enumerate(votes.k_grid)
    )
    legend = "".join(f'<span class="sw {css}"></span>{esc(label)} ' for _, (_, css, label) in CATEGORIES.items())
    rows = sufficiency[(sufficiency.concept.astype(str) == circuit.concept)]
    if "scorer" in rows:
        rows = rows[rows.scorer == votes.attrs.get("scorer")]
    charts = curve_charts(
        rows.rename(columns={"accuracy": "cacc"}),
        [("cacc", "cACC", True), ("false_positive_rate", "false-positive rate", True)],
    )
    attrs = dict(certificates.attrs)
    tag = setting_columns(votes, certificates)["setting"]
    flags = circuit_flags(f"{experiment.name} / {circuit.concept} / {tag_words(tag)}", certificates, rows, tag)
    body = (
        f"<h1>{esc(circuit.concept)}</h1><p class=meta>{esc(experiment.name)} · model {esc(attrs.get('model', ''))} · "
        f"scorer {esc(attrs.get('scorer', ''))} · |D| = {int(votes.attrs['n_examples'])} · {esc(setting_words(attrs))}</p>"
        f"{flags_html(flags, 'Warnings about this circuit and its setting')}"
        f"<h2>Circuit per layer</h2><p><label>K <select id=kselect>{options}</select></label> "
        f"<span class=legend>{legend}</span></p><p class=note>Each square is a channel; hover for its "
        f"certification votes (how many of the n = {data['n']} sub-datasets put it in the circuit).</p>"
        f'<div id="circuit"></div>{json_script(data, "circuit-data")}'
        f"<h2>Features</h2>{figure_html(features, 'features') if features else NO_FEATURES}"
        f"<h2>Curves</h2>{charts}<h2>Attack</h2>{attack_html(experiment.tables, circuit.concept)}"
    )
    return body, flags


def language_page(
    circuits: Sequence[Circuit], experiment: Experiment, sufficiency: pd.DataFrame, out_dir: Path
) -> tuple[str, list[Flag]]:
    """The task page at the selected setting (held-out selection when there is one, else the best peak); the
    shown setting's flags in a warning box under it, every setting's flag codes in the settings table. Returns
    the page's body and the flags of every setting."""
    task = circuits[0].concept
    chosen = select_setting(experiment.tables, task)
    read = [(c, *read_circuit(c)) for c in circuits]
    from certified_circuits.reports.paper import setting_tag

    by_tag = {setting_tag(v, cert): (c, a, v, cert) for c, a, v, cert in read}
    tag = chosen if chosen in by_tag else next(iter(by_tag))
    circuit, attributions, votes, certificates = by_tag[tag]
    k = operating_k(experiment.tables, task, None, votes.k_grid)
    i = nearest_index(votes.k_grid, k)
    attrs = {
        **dict(votes.attrs),
        **dict(certificates.attrs),
        **{key: attributions.attrs.get(key) for key in ("n_layers", "n_heads", "d_model", "parallel_attn_mlp")},
    }
    drawn = (attributions.names, certificates.decision[i], votes.baseline[i], votes.certification_counts[i])
    if attributions.names and not grammar.is_edge(attributions.names[0]):  # node level: each node's edges drawn
        from certified_circuits.reports.eap_graph import graph_cfg
        from certified_circuits.reports.language_graphs import node_to_edge_view

        cfg = graph_cfg(
            int(attrs["n_layers"]), int(attrs["n_heads"]), 0, bool(int(attrs.get("parallel_attn_mlp") or 0))
        )
        drawn = node_to_edge_view(cfg, *drawn)
    svg, counts = language_graph_svg(*drawn, int(attributions.attrs["n_layers"]), int(attributions.attrs["n_heads"]))
    scorer = str(votes.attrs.get("scorer", "eap_ig"))
    scores = (
        attributions.scores[scorer].mean(axis=0)
        if len(attributions.scores[scorer])
        else np.zeros(len(attributions.names))
    )
    download = out_dir / f"{file_stem(task)}_circuit.json"
    download.write_text(
        circuit_json(attributions.names, scores, certificates.decision[i], float(votes.k_grid[i]), attrs)
    )
    task_rows = sufficiency[(sufficiency.concept.astype(str) == task)]
    flags = {
        t: circuit_flags(f"{experiment.name} / {task} / {tag_words(t)}", cert, task_rows, t)
        for t, (_, _, _, cert) in by_tag.items()
    }
    settings = frame_html(
        pd.DataFrame(
            [
                {
                    "setting": tag_words(t),
                    "certified in": int((cert.decision[nearest_index(v.k_grid, k)] == 1).sum()),
                    "abstained": int((cert.decision[nearest_index(v.k_grid, k)] == -1).sum()),
                    "warnings": ", ".join(dict.fromkeys(f.code for f in sorted_flags(flags[t]))) or "none",
                }
                for t, (_, _, v, cert) in by_tag.items()
            ]
        ),
        "Every certified setting of the task at this K (the warnings of each are listed on the overview page)",
    )
    rows = task_rows
    if "setting" in rows:
        rows = rows[rows.setting == tag]
    charts = curve_charts(
        rows.rename(columns={"accuracy": "cacc"}), [("cacc", "cACC", True), ("logit_diff", "logit difference", False)]
    )
    count_table = frame_html(pd.DataFrame([counts]), f"Edges at K = {100 * votes.k_grid[i]:g}%")
    return (
        f"<h1>{esc(task)}</h1><p class=meta>{esc(experiment.name)} · model {esc(votes.attrs.get('model', ''))} · "
        f"|D| = {int(votes.attrs['n_examples'])} prompts · {esc(setting_words(attrs))}</p>"
        f"{flags_html(flags[tag], f'Warnings about this circuit and its setting ({tag_words(tag)})')}"
        f"<h2>Circuit on the model graph (K = {100 * votes.k_grid[i]:g}%, {esc(tag_words(tag))})</h2>"
        f'<p><span class=legend><span class="ln ln-in"></span>certified in <span class="ln ln-base"></span>in the baseline, '
        f'not certified in <span class="ln ln-abs"></span>abstained outside the baseline (the 300 most voted)</span> · '
        f'<a href="{url(download.name)}" download>circuit JSON (EAP-IG graph layout)</a></p>'
        f'<div class="graphbox">{svg}</div>{count_table}{settings}<h2>Curves</h2>{charts}'
        f"<h2>Attack</h2>{attack_html(experiment.tables, task)}"
    ), [flag for t in by_tag for flag in flags[t]]


def select_setting(tables: Path, task: str) -> str | None:
    """The certified setting chosen on held-out prompts (selected_cacc_raw.csv), or None."""
    path = tables / "selected_cacc_raw.csv"
    if not path.is_file():
        return None
    rows = pd.read_csv(path)
    rows = rows[rows.concept.astype(str) == task]
    return str(rows.iloc[0]["certified_setting"]) if len(rows) and "certified_setting" in rows else None


def overview(
    experiments: Sequence[Experiment],
    first_attrs: dict[str, dict],
    links: dict[str, list[tuple[str, str]]],
    figures: dict[str, list[tuple[str, str]]],
    theory: list[tuple[str, str]],
    flags: Sequence[Flag] = (),
) -> str:
    parts = [
        "<h1>Certified circuits of this run</h1>",
        flags_html(  # one item per warning, with the places it concerns (a setting's plan warning of every class)
            merge_flags(flags), f"Warnings: {len(flags)} result{'s' if len(flags) != 1 else ''} to read with care"
        ),
    ]
    for experiment in experiments:
        attrs = first_attrs.get(experiment.name)
        parts.append(f"<section><h2>{esc(experiment.name)} ({esc(experiment.kind)})</h2>")
        if attrs:
            parts.append(
                f"<p><b>Setting.</b> {esc(setting_words(attrs))}.</p><p><b>Guarantee.</b> {esc(guarantee_words(attrs))}</p>"
            )
        pages = " ".join(f'<a href="{url(href)}">{esc(label)}</a>' for label, href in links.get(experiment.name, []))
        parts.append(f"<p><b>{'Classes' if experiment.kind == 'vision' else 'Tasks'}:</b> {pages}</p>")
        for name in ("peaks_cacc", "peaks_balanced", "selected_cacc", "selected_balanced", "faithfulness_mean"):
            md = experiment.tables / f"{name}.md"
            if md.is_file():
                parts.append(markdown_table_html(md.read_text()))
        parts.append(
            '<div class="figures">'
            + "".join(figure_html(src, name) for name, src in figures.get(experiment.name, []))
            + "</div></section>"
        )
    if theory:
        parts.append(
            '<section><h2>Theory</h2><div class="figures">'
            + "".join(figure_html(src, name) for name, src in theory)
            + "</div></section>"
        )
    parts.append(
        '<p class=note>Raw tables: <code>tables/</code>; the run summary: <a href="../summary.md">summary.md</a>.</p>'
    )
    return "".join(parts)


KEY_FIGURES = (
    "curves_cacc.png",
    "curves_balanced_accuracy.png",
    "curves_false_positive_rate.png",
    "iou.png",
    "seed_stability.png",
    "radius_sweep_best_k.png",
    "spurious.png",
    "attack/attack.png",
)


def build_explorer(
    out_dir: Path, experiments: Sequence[Experiment], circuits: Sequence[Circuit], theory_figures: Iterable[Path] = ()
) -> dict[str, float]:
    """Write the explorer folder (atomically: a temporary folder renamed into place).

    Args:
        out_dir: ``<results_dir>/explorer``.
        experiments: every experiment's tables folder.
        circuits: the circuits to show (vision: one per class; language: one per task and setting).
        theory_figures: PNGs of the theory report.

    Returns:
        metrics: pages written, the largest page's size in bytes, and the flags shown
        (:mod:`certified_circuits.reports.flags`: every circuit's and every shown curve's).
    """
    kinds = {e.name: e for e in experiments}
    unknown = sorted({c.experiment for c in circuits} - set(kinds))
    if unknown:
        raise ValueError(f"circuits of experiments {unknown} but no --experiment with their tables: pass both")
    with atomic_dir(Path(out_dir)) as tmp:
        (tmp / "explorer.css").write_text(CSS)
        (tmp / "explorer.js").write_text(JS)
        figures: dict[str, list[tuple[str, str]]] = {}
        links: dict[str, list[tuple[str, str]]] = {}
        first_attrs: dict[str, dict] = {}
        flags: list[Flag] = []
        sizes = []
        for experiment in experiments:
            folder = tmp / file_stem(experiment.name)
            (folder / "figures").mkdir(parents=True)
            for name in KEY_FIGURES:
                source = experiment.tables / name
                if source.is_file():
                    target = folder / "figures" / source.name
                    shutil.copyfile(source, target)
                    figures.setdefault(experiment.name, []).append(
                        (source.name, f"{folder.name}/figures/{source.name}")
                    )
            sufficiency = (
                pd.read_csv(experiment.tables / "sufficiency.csv")
                if (experiment.tables / "sufficiency.csv").is_file()
                else pd.DataFrame(columns=["concept"])
            )
            mine = [c for c in circuits if c.experiment == experiment.name]
            for concept in dict.fromkeys(c.concept for c in mine):
                group = [c for c in mine if c.concept == concept]
                if experiment.kind == "vision":
                    features = None
                    if group[0].features is not None and Path(group[0].features).is_file():
                        features = f"figures/features_{file_stem(concept)}.png"
                        shutil.copyfile(group[0].features, folder / features)
                    body, found = vision_page(group[0], experiment, sufficiency, features)
                else:
                    body, found = language_page(group, experiment, sufficiency, folder)
                flags += found
                text = page(f"{concept} · {experiment.name}", body, depth=1)
                (folder / f"{file_stem(concept)}.html").write_text(text)
                sizes.append(len(text))
                links.setdefault(experiment.name, []).append((concept, f"{folder.name}/{file_stem(concept)}.html"))
                if experiment.name not in first_attrs:
                    first_attrs[experiment.name] = dict(read_circuit(group[0])[2].attrs)
        theory = []
        theory_figures = list(theory_figures)
        if theory_figures:
            (tmp / "theory").mkdir()
        for source in theory_figures:
            shutil.copyfile(source, tmp / "theory" / Path(source).name)
            theory.append((Path(source).name, f"theory/{Path(source).name}"))
        body = overview(experiments, first_attrs, links, figures, theory, flags)
        index = page("certified-circuits explorer", body, depth=0)
        (tmp / "index.html").write_text(index)
    return {
        "explorer_pages": float(len(sizes) + 1),
        "explorer_largest_page_bytes": float(max(sizes + [len(index)])),
        "explorer_flags": float(len(flags)),
    }


CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
header{background:#1b3a57;padding:8px 18px}header a{color:#fff;text-decoration:none;font-weight:600}
main{max-width:1180px;margin:0 auto;padding:8px 18px 40px}h1{font-size:24px}h2{font-size:18px;margin-top:28px}
.meta,.note{color:#555}.num{text-align:right;font-variant-numeric:tabular-nums}
table{border-collapse:collapse;margin:10px 0;background:#fff}th,td{border:1px solid #ddd;padding:3px 8px}
caption{caption-side:top;text-align:left;color:#444;padding:4px 0;max-width:1100px}
.figures{display:flex;flex-wrap:wrap;gap:14px}figure{margin:0;max-width:560px;background:#fff;border:1px solid #e3e3e3;padding:6px}
figure img{max-width:100%;height:auto}figcaption{font-size:12.5px;color:#444}
.layer{margin:6px 0}.layer b{display:inline-block;min-width:140px;font-weight:600}
.cells{display:flex;flex-wrap:wrap;gap:1px;max-width:1140px}.c{width:9px;height:9px;display:inline-block}
.in{background:#1a7f37}.abs{background:#e3a008}.oth{background:#f3e6b0}.out{background:#d0d7de}
.sw{display:inline-block;width:11px;height:11px;margin:0 4px 0 10px;vertical-align:-1px}
.charts{display:flex;flex-wrap:wrap;gap:10px}.chart{background:#fff;border:1px solid #e3e3e3}
.chart .grid{stroke:#eee}.chart .full{stroke:#999;stroke-width:1.5}.chart text{font-size:10px;fill:#444}
.chart .ct{text-anchor:middle;font-size:11px;font-weight:600}.chart .yt{text-anchor:end}.chart .xt,.chart .xl{text-anchor:middle}
.chart .yl{text-anchor:middle}.graphbox{overflow-x:auto;background:#fff;border:1px solid #e3e3e3}
.graph .edge{stroke-width:1.4}.graph .in{stroke:#1b6ca8;stroke-width:2.2}.graph .base{stroke:#d35400;stroke-dasharray:6 4}
.graph .abs{stroke:#aaa;stroke-dasharray:2 3;stroke-width:1}.graph .node{fill:#bbb}.graph .node.used{fill:#1b3a57}.graph .nl{font-size:10px}
.ln{display:inline-block;width:26px;height:0;margin:0 4px 3px 10px}.ln-in{border-top:2px solid #1b6ca8}
.ln-base{border-top:2px dashed #d35400}.ln-abs{border-top:2px dotted #999}#errors{background:#fdd;padding:8px}
.warning{background:#fff4e5;border:1px solid #f0b46b;border-left:6px solid #d35400;padding:6px 14px;margin:10px 0}
.warning ul{margin:4px 0;padding-left:20px}.warning li{margin:4px 0}
"""

JS = """
(function () {
  var errors = document.getElementById('errors');
  window.addEventListener('error', function (e) {
    if (errors) { errors.hidden = false; errors.textContent += 'JavaScript error: ' + e.message + '\\n'; }
  });
  window.addEventListener('load', function () {
    Array.prototype.forEach.call(document.images, function (img) {
      if (!img.complete || img.naturalWidth === 0) {
        errors.hidden = false;
        errors.textContent += 'Missing image: ' + img.getAttribute('src') + '\\n';
      }
    });
  });
  var node = document.getElementById('circuit-data');
  if (!node) return;
  var data = JSON.parse(node.textContent);
  var labels = {I: ['in', 'certified in'], A: ['abs', 'abstained (in the baseline only)'],
                X: ['oth', 'abstained (outside the baseline)'], O: ['out', 'certified out']};
  function votes(b64) {
    var raw = atob(b64), out = new Uint16Array(raw.length / 2);
    for (var i = 0; i < out.length; i++) out[i] = raw.charCodeAt(2 * i) | (raw.charCodeAt(2 * i + 1) << 8);
    return out;
  }
  function render(index) {
    var k = data.k[index], v = votes(k.votes), box = document.getElementById('circuit');
    box.textContent = '';
    data.layers.forEach(function (layer) {
      var row = document.createElement('div'), counts = {I: 0, A: 0, X: 0, O: 0};
      row.className = 'layer';
      var cells = document.createElement('div');
      cells.className = 'cells';
      for (var u = layer.start; u < layer.start + layer.size; u++) {
        var c = k.cat.charAt(u), cell = document.createElement('span');
        counts[c] += 1;
        cell.className = 'c ' + labels[c][0];
        cell.title = layer.name + '.' + data.names[u] + ': ' + labels[c][1] + '; ' + v[u] + ' of ' + data.n +
          ' certification votes (' + Math.round(100 * v[u] / data.n) + '%); baseline: ' + (k.base.charAt(u) === '1' ? 'in' : 'out');
        cells.appendChild(cell);
      }
      var title = document.createElement('b');
      title.textContent = layer.name;
      row.appendChild(title);
      var text = ' ' + counts.I + ' in, ' + (counts.A + counts.X) + ' abstained, ' + counts.O + ' out of ' + layer.size;
      row.appendChild(document.createTextNode(text));
      row.appendChild(cells);
      box.appendChild(row);
    });
  }
  var select = document.getElementById('kselect');
  select.addEventListener('change', function () { render(+select.value); });
  render(+select.value);
})();
"""
