"""The explorer's HTML and SVG pieces: escaping, tables, charts, the language graph and the page frame.

Names come from files any tool may write (the HDF5 contracts are public), so every string from a file reaches a
page through :func:`esc` (HTML text and attributes), :func:`url` (links and image sources, to files named by
:func:`file_stem`) or :func:`json_script` (the embedded page data): a name such as ``</script><script>...`` is
shown as text, never run. Nothing here reads a file: :mod:`.explorer_data` gathers, :mod:`.explorer` assembles.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
from typing import Sequence
from urllib.parse import quote

import numpy as np
import pandas as pd

from certified_circuits.language import names as grammar
from certified_circuits.reports.findings import Headline
from certified_circuits.reports.flags import Flag, by_kind, counts_line, kind_line, sorted_flags


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


def code_spans(escaped: str) -> str:
    """Markdown code spans (`` `certified-circuits plan ...` ``) of already escaped text as ``<code>``."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)


def _flag_items(flags: Sequence[Flag]) -> str:
    return "".join(
        f"<li><b>{esc(f.code)}</b>{' · ' + esc(f.where) if f.where else ''}: {code_spans(esc(f.message))}"
        f"<br><i>Fix:</i> {code_spans(esc(f.fix))}</li>"
        for f in sorted_flags(flags)
    )


def banner_html(flags: Sequence[Flag], depth: int) -> str:
    """A page's warnings as one line per kind, on top of it: the kind, its count, its first place and
    message (whole: the line wraps, it is never cut), each a link to the kind's details on the overview
    (``index.html#warn-<kind>``); "" without flags."""
    if not flags:
        return ""
    up = "../" * depth
    lines = "".join(
        f'<a class="banner" href="{up}index.html#warn-{esc(code)}"><b>{esc(code)}</b> × {len(group)}: '
        f"{esc(group[0].where or '(run)')}: {esc(group[0].message)}</a>"
        for code, group in by_kind(flags).items()
    )
    return f'<nav class="banners" aria-label="warnings of this run">{lines}</nav>'


def warnings_section_html(flags: Sequence[Flag]) -> str:
    """The overview's full warning list (``id="warnings"``, after the results): one collapsed block per kind
    (``id="warn-<kind>"``) whose one-line summary is :func:`~certified_circuits.reports.flags.kind_line` and whose
    body lists every place with its message and fix."""
    if not flags:
        return ""
    blocks = "".join(
        f'<details class="warning" id="warn-{esc(code)}"><summary>{code_spans(esc(kind_line(code, group).replace("**", "")))}'
        f"</summary><ul>{_flag_items(group)}</ul></details>"
        for code, group in by_kind(flags).items()
    )
    return f'<section id="warnings"><h2>{esc(counts_line(flags))}</h2>{blocks}</section>'


def headline_html(found: Headline) -> str:
    """The run's headline (:func:`certified_circuits.reports.findings.headline`) as HTML: per experiment a table
    whose caption is its title, then its lines as paragraphs (code spans as ``<code>``); every cell escaped. The same
    cells as :func:`~certified_circuits.reports.findings.headline_markdown` and
    :func:`~certified_circuits.reports.findings.headline_text`."""
    parts = []
    for table in found.tables:
        head = "".join(f"<th{' class=num' if n else ''}>{esc(h)}</th>" for h, n in zip(table.header, table.numeric))
        body = "".join(
            "<tr>"
            + "".join(f"<td{' class=num' if n else ''}>{esc(c)}</td>" for c, n in zip(row, table.numeric))
            + "</tr>"
            for row in table.rows
        )
        parts.append(
            f'<table class="headline"><caption>{code_spans(esc(table.title))}</caption><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table>"
        )
    parts += [f"<p class=headline-line>{code_spans(esc(line))}</p>" for line in found.lines]
    return "".join(parts)


def page_flags_html(flags: Sequence[Flag], title: str) -> str:
    """A page's own warnings, collapsed (a click away): a one-line summary (the title and the counts by kind) that
    opens the list of each flag with its place, message and fix; "" without flags."""
    if not flags:
        return ""
    return (
        f'<details class="warning"><summary><b>{esc(title)}</b> · {esc(counts_line(flags))}</summary>'
        f"<ul>{_flag_items(flags)}</ul></details>"
    )


def switch_html(labels: Sequence[str], panels: Sequence[str], title: str) -> str:
    """Panels of already built HTML with a switch between them: one button per label (escaped), the first panel
    shown, the others ``hidden`` until their button is pressed (the explorer's script; ``#scorer=<label>`` in the
    page's address opens that panel). One panel: the panel itself, no switch."""
    if len(panels) == 1:
        return panels[0]
    buttons = "".join(
        f'<button type="button" data-panel="{i}" data-name="{esc(label)}" aria-pressed="{"true" if i == 0 else "false"}">'
        f"{esc(label)}</button>"
        for i, label in enumerate(labels)
    )
    body = "".join(
        f'<div class="panel" data-panel="{i}"{"" if i == 0 else " hidden"}>{panel}</div>'
        for i, panel in enumerate(panels)
    )
    return f'<div class="switched"><div class="switch" role="group"><b>{esc(title)}:</b> {buttons}</div>{body}</div>'


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

#: the edge counts of :func:`language_graph_svg` that partition the edges (each edge in exactly one; they sum to
#: ``edges``)
EDGE_PARTITION = ("certified in", "abstained", "certified out")


def decision_words(decision: int) -> str:
    """A component's certified decision in words: 1 certified in, -1 abstained, else certified out."""
    return {1: "certified in", -1: "abstained"}.get(int(decision), "certified out")


def language_graph_svg(
    names: Sequence[str],
    decision: np.ndarray,
    baseline: np.ndarray,
    votes: np.ndarray,
    n_layers: int,
    n_heads: int,
    max_abstained: int = 300,
    max_drawn: int = 2000,
    truth: np.ndarray | None = None,
    true_nodes: Sequence[str] = (),
) -> tuple[str, dict[str, int]]:
    """The circuit on the model graph as inline SVG (paper Fig. 3), pruned to its edges: certified in (solid),
    in the baseline but not certified in (dashed), and the ``max_abstained`` most-voted abstained edges outside
    the baseline (dotted); at most ``max_drawn`` edges of each of the first two (the most voted), which a
    circuit at the operating K (GPT-2 Small: about 2% of 32,491 edges) never reaches. Every node is drawn with
    its name beside it (larger where an edge drawn touches it).

    Args:
        names: the edge names (``parent->child``).
        decision: ``[U]`` certified decisions (1 in, -1 abstain, 0 out).
        baseline: ``[U]`` bool: in the baseline circuit.
        votes: ``[U]`` certification votes (the hover text, and which abstained edges are drawn).
        n_layers, n_heads: the model's shape (the node grid).
        max_abstained, max_drawn: the pruning limits above.
        truth: ``[U]`` bool, the known circuit's edges (a testbed model's ground truth), or None: each true edge
            is drawn under the circuit as a wide band (``class="truth"``), whatever its decision.
        true_nodes: the known circuit's nodes when the truth is over nodes (heads and MLPs): ringed
            (``class="node ... true"``).

    Returns:
        the SVG, and the edge counts: ``certified in``, ``abstained``, ``certified out`` (:data:`EDGE_PARTITION`:
        disjoint, summing to ``edges``), ``edges`` (U), ``in the baseline`` (overlaps the three),
        ``baseline, not certified in`` (drawn dashed), ``abstained outside the baseline`` and ``abstained drawn``
        (those of them drawn dotted: at most ``max_abstained``), and with a truth ``true`` (its edges).
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
        "abstained": int((decision == -1).sum()),
        "certified out": int(((decision != 1) & (decision != -1)).sum()),
        "edges": len(names),
        "in the baseline": int(baseline.sum()),
        "baseline, not certified in": len(groups["baseline_only"]),
        "abstained outside the baseline": len(outside),
        "abstained drawn": len(groups["abstained"]),
    }
    width, height = 900.0, max(260.0, 60.0 * (n_layers + 2))
    parts = [
        f'<svg class="graph" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" height="{height:.0f}" role="img">'
    ]
    used: set[str] = set()

    def line(index: int, css: str, words: str) -> str:
        """One edge as an SVG line between its nodes (which count as used), with its name and ``words`` on hover."""
        up, down = grammar.edge_nodes(names[index])
        x1, y1 = node_position(up, n_layers, n_heads, width, height)
        x2, y2 = node_position(down, n_layers, n_heads, width, height)
        used.update({up, down})
        return (
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" class="{css}">'
            f"<title>{esc(names[index])}: {esc(words)}, {int(votes[index])} certification votes</title></line>"
        )

    if truth is not None:
        truth = np.asarray(truth, bool)
        counts["true"] = int(truth.sum())
        parts += [  # under everything: a band the circuit's line runs along
            line(index, "truth", f"true edge (ground truth); {decision_words(decision[index])}")
            for index in np.flatnonzero(truth)
        ]
    for category in ("abstained", "baseline_only", "certified_in"):  # the circuit drawn last, on top
        css, label = EDGE_STYLES[category]
        parts += [line(index, f"edge {css}", label) for index in groups[category]]
    nodes = (
        [grammar.INPUT, grammar.LOGITS]
        + [grammar.head(l, h) for l in range(n_layers) for h in range(n_heads)]
        + [grammar.mlp(l) for l in range(n_layers)]
    )
    true_nodes = set(true_nodes)
    for node in nodes:
        x, y = node_position(node, n_layers, n_heads, width, height)
        css = "node" + (" used" if node in used else "") + (" true" if node in true_nodes else "")
        title = node + ("; true node (ground truth)" if node in true_nodes else "")
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{6 if node in used else 3}" class="{css}"><title>{esc(title)}</title></circle>'
            f'<text x="{x + 8:.1f}" y="{y + 4:.1f}" class="nl{"" if node in used else " idle"}">{esc(node)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts), counts


def page(title: str, body: str, depth: int, flags: Sequence[Flag] = ()) -> str:
    """A page of the explorer: its title, the link home, the page's warnings as one line per kind
    (:func:`banner_html`: the overview is given the run's list, a class or task page its own,
    :func:`certified_circuits.reports.explorer.page_flags`), then ``body``; ``depth``: folders below the explorer's
    root."""
    up = "../" * depth
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
        f'<link rel="stylesheet" href="{up}explorer.css"></head><body><div id="errors" hidden></div>'
        f'<header><a href="{up}index.html">certified-circuits explorer</a></header>{banner_html(flags, depth)}'
        f"<main>{body}</main>"
        f'<script src="{up}explorer.js"></script></body></html>'
    )
