"""The circuit explorer: a static HTML folder that shows a run's circuits (``<results_dir>/explorer/``).

It opens from disk with no server and no network: every page links ``explorer.css`` and ``explorer.js``
from the folder, every figure is copied into it, and the circuit data is embedded in the pages.

- every page: a banner of its own warnings, one line per kind (wrapped, never cut), each a link to its details on
  the overview: the overview's are the run's one list (``warnings.json``, :func:`certified_circuits.reports.flags.
  run_flags`, the list ``summary.md``, MLflow and the end of the run show), a class or task page's those of its
  experiment that name its concept or none (:func:`page_flags`, by the flags' ``experiment`` and ``concept``);
- ``index.html``: its first screen is the run's headline (one table per experiment at the truth's size and at most
  two lines: :func:`certified_circuits.reports.findings.headline`, read from ``findings.json``, the same cells as
  ``summary.md``'s first screen and the end of the run) beside its main figure (the testbed's recovery figure,
  else the first key figure); then the results: the settings of each experiment in words and what the
  guarantee says (Theorem 1), the headline tables (peaks and held-out selections, with Δ and significance
  markers), the key figures with one-line captions, and links to every class and task; then every warning with
  its place and fix, one collapsed block per kind;
- ``<experiment>/<class>.html`` (vision): where the class has circuits of several scorers, a table of each
  scorer's certified counts and a switch between them (:func:`~.html.switch_html`; ``#scorer=NAME`` in the
  address opens one), each panel holding what follows for its scorer (the feature grid and the attack are the
  main scorer's); under the setting, the class's warnings (collapsed); the circuit per layer at a K chosen with
  a selector (opened at :func:`~.explorer_data.drawn_k`: the truth's size on a testbed model, else the operating
  K), every channel coloured certified in, abstained within the baseline,
  abstained outside it, or certified out, with its certification votes on hover; on a testbed model (one with a
  ground-truth file) the true channels marked, each method's precision and recall against them at the selected
  K (:mod:`certified_circuits.analysis.recovery`) and a switch to the truth alone, else a line saying that no
  truth is known; the feature grid (top-activating images of channels of each category); the class's cACC-K
  and false-positive-rate curves; its attack result;
- ``<experiment>/<task>.html`` (language): under the setting, its warnings (collapsed); the circuit on the model
  graph at the selected setting and the K of :func:`~.explorer_data.drawn_k` (the truth's size on a testbed model,
  else the operating K; the page names which) (nodes by layer, each named; certified-in edges solid, edges of the
  baseline that are not certified in dashed, the most-voted abstained edges outside the baseline dotted, the
  legend naming how many; the drawing keeps only those edges); on a testbed model the true edges drawn under it,
  precision and recall at the K shown and a switch to the truth alone; the edge counts (certified in, abstained
  and certified out partition the edges; the baseline, which overlaps them, counted apart), every setting with
  its flag codes, the curves, the attack result and the circuit as a JSON download (every edge with its score,
  decision and ``in_graph``: certified in); a switch between methods where the task has circuits of several.

The folder is assembled here (:func:`build_explorer`, the pages); the data it shows is gathered by
:mod:`.explorer_data` (circuits, the operating K) and its HTML and SVG pieces, with the
escaping every string from a file goes through, are :mod:`.html`; the page style and script are static files
of the package (``explorer_static/explorer.css`` and ``explorer.js``).
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from certified_circuits.analysis.recovery import RECOVERY_METHODS, GroundTruth
from certified_circuits.language import names as grammar
from certified_circuits.reports.explorer_data import (
    CATEGORIES,
    TABLE_FIX,
    Circuit,
    Experiment,
    circuit_json,
    concept_truth,
    drawn_k,
    nearest_index,
    operating_k,
    operating_k_name,
    read_circuit,
    read_truths,
    select_setting,
    truth_recovery,
    vision_circuit_data,
)
from certified_circuits.reports.findings import METHOD_WORDS, NO_HEADLINE, Headline
from certified_circuits.reports.flags import Flag, certificate_where, is_full_model, sorted_flags
from certified_circuits.reports.html import (
    EDGE_PARTITION,
    EDGE_STYLES,
    JSON_ESCAPES,
    LINE_COLORS,
    LINE_STYLES,
    PLAIN_NAME,
    code_spans,
    curve_charts,
    esc,
    file_stem,
    frame_html,
    headline_html,
    json_script,
    language_graph_svg,
    markdown_table_html,
    node_of,
    node_position,
    page,
    page_flags_html,
    svg_chart,
    switch_html,
    url,
    warnings_section_html,
)
from certified_circuits.reports.words import guarantee_words, setting_words, tag_words
from certified_circuits.storage.atomic import atomic_dir
from certified_circuits.storage.tables import read_k_table

#: the page style and script, static files of the package (``explorer_static/``; pyproject.toml's package data),
#: written next to the pages by :func:`build_explorer`
STATIC = resources.files("certified_circuits.reports") / "explorer_static"
CSS = (STATIC / "explorer.css").read_text(encoding="utf-8")
JS = (STATIC / "explorer.js").read_text(encoding="utf-8")

#: the names importable from here: the entry (:func:`build_explorer`), the page pieces of this module, and those
#: of :mod:`.explorer_data` and :mod:`.html` that callers and tests import from the explorer
__all__ = [
    "CAPTIONS",
    "CATEGORIES",
    "CSS",
    "EDGE_PARTITION",
    "EDGE_STYLES",
    "JS",
    "JSON_ESCAPES",
    "KEY_FIGURES",
    "LINE_COLORS",
    "LINE_STYLES",
    "NO_FEATURES",
    "PLAIN_NAME",
    "Circuit",
    "Experiment",
    "attack_html",
    "build_explorer",
    "circuit_json",
    "recovery_html",
    "code_spans",
    "curve_charts",
    "drawn_k",
    "esc",
    "figure_html",
    "file_stem",
    "page_flags",
    "page_flags_html",
    "frame_html",
    "headline_html",
    "json_script",
    "language_graph_svg",
    "language_page",
    "lead_html",
    "main_figure",
    "markdown_table_html",
    "nearest_index",
    "node_of",
    "node_position",
    "operating_k",
    "operating_k_name",
    "overview",
    "page",
    "read_circuit",
    "read_truths",
    "select_setting",
    "svg_chart",
    "switch_html",
    "truth_html",
    "url",
    "vision_circuit_data",
    "vision_page",
    "warnings_section_html",
]


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
    "recovery.png": "Recovery of the known circuit: true-positive rate against false-positive rate of each method's "
    "circuit over the K grid (mean over concepts); the area under it is the AUROC of InterpBench and MIB.",
    "spurious.png": "Spurious index (habitat vs shape sensitivity) of certified-in, abstained and certified-out channels.",
    "attack.png": "Dataset-edit attack: share of certified labels flipped by edits of r, 2r, 4r examples (0 within r, "
    "by Theorem 1), against the baseline's flips.",
    "radius_vs_pdel.png": "Certified radius r = floor(log(1.5 - tau) / log p_del) against the deletion probability.",
    "samples_vs_tau.png": "Certification samples n needed to certify at tau, with and without the Bonferroni correction.",
    "features": "Top-activating images of the most active certified-in, abstained (in the baseline only) and "
    "certified-out channels of the deepest layer, at the certified ID peak K (paper Fig. 4).",
}


def figure_html(src: str, name: str) -> str:
    caption = CAPTIONS.get(name, name)
    return f'<figure><img src="{url(src)}" alt="{esc(caption)}"><figcaption>{esc(caption)}</figcaption></figure>'


def attack_html(tables: Path, concept: str) -> str:
    raw = tables / "attack" / "attack_raw.csv"
    if not raw.is_file():
        return "<p>The dataset-edit attack is off for this run (<code>attack.enabled</code>).</p>"
    rows = read_k_table(raw, str(raw), [], TABLE_FIX, {"k_target": False}, {"concept": str}, allow_empty=True)
    rows = rows[rows.concept.astype(str) == concept] if "concept" in rows else rows.iloc[:0]
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

#: the recovery methods in words (:data:`certified_circuits.reports.findings.METHOD_WORDS` and the majority vote)
RECOVERY_WORDS = {**METHOD_WORDS, "majority": "majority vote"}
#: the most true components a page names in its text (the rest are counted)
SHOWN_TRUE = 60


def truth_table_html(rows: pd.DataFrame, k: float) -> str:
    """One K's precision and recall of each method's circuit against the truth, as an HTML table.

    Args:
        rows: :func:`~.explorer_data.truth_recovery` rows of one K (one per method).
        k: that K (a fraction of the components), for the caption.

    Returns:
        the table: method, circuit size, true components in it (TP), precision (n/a for an empty circuit),
        recall.
    """
    order = {m: i for i, m in enumerate(RECOVERY_METHODS)}
    rows = rows.sort_values("method", key=lambda m: m.map(order), kind="stable")
    frame = pd.DataFrame(
        {
            "method": [RECOVERY_WORDS.get(m, m) for m in rows["method"]],
            "circuit size": rows["size"].astype(int).to_numpy(),
            "true in it (TP)": rows["tp"].astype(int).to_numpy(),
            "precision": ["n/a (empty)" if e else f"{v:.2f}" for v, e in zip(rows["precision"], rows["empty_circuit"])],
            "recall": [f"{v:.2f}" for v in rows["recall"]],
        }
    )
    return frame_html(
        frame,
        f"Recovery of the known circuit at K = {100 * k:g}%: precision = TP / circuit size, recall = TP / the true "
        "components (analysis/recovery.py)",
    )


def truth_html(
    truth: np.ndarray | None,
    why: str,
    names: Sequence[str],
    votes,
    certificates,
    k_indices: Sequence[int],
    shown: int,
    what: str = "components",
) -> str:
    """A circuit's part about the known circuit (a testbed model's ground truth): the switch to the truth alone
    (hidden until the explorer's script shows it), the true components named, and each method's precision and
    recall against them at each K of ``k_indices`` (one table each; all but the ``shown`` K's ``hidden``, the
    K selector shows the others); or the sentence ``why`` there is none.

    Args:
        truth: bool ``[U]`` over ``names`` (:func:`~.explorer_data.concept_truth`), or None.
        why: the sentence shown without a truth.
        names: the component names.
        votes, certificates: the circuit's.
        k_indices: the positions in the K grid to give a table for (the page's selector's, or its one K).
        shown: the position shown first.
        what: what the components are called (channels, edges).

    Returns:
        the HTML.
    """
    if truth is None:
        return f"<p class=note>{esc(why)}</p>"
    rows = truth_recovery(votes, certificates, truth)
    true_names = [str(names[i]) for i in np.flatnonzero(truth)]
    listed = ", ".join(true_names[:SHOWN_TRUE]) + (
        f" and {len(true_names) - SHOWN_TRUE} more" if len(true_names) > SHOWN_TRUE else ""
    )
    tables = "".join(
        f'<div class="truth-k" data-k="{i}"{"" if i == shown else " hidden"}>'
        f"{truth_table_html(rows[rows.k_index == i], float(votes.k_grid[i]))}</div>"
        for i in k_indices
    )
    return (
        f'<p class="truth-note"><b>The known circuit</b> (ground truth): {len(true_names)} of {len(names)} {esc(what)}, '
        f"marked on the drawing: {esc(listed)}. "
        '<label class="truth-toggle" hidden><input type="checkbox"> show the truth alone</label></p>'
        f"{tables}"
    )


def scorer_of(votes) -> str:
    """The scorer (vision) or method (language) a circuit's votes were counted for."""
    return str(votes.attrs.get("scorer", ""))


def by_scorer(circuits: Sequence[Circuit]) -> dict[str, list[tuple[Circuit, object, object, object]]]:
    """A concept's circuits read and grouped by scorer, in the order given (the first is the main scorer)."""
    groups: dict[str, list[tuple[Circuit, object, object, object]]] = {}
    for circuit in circuits:
        attributions, votes, certificates = read_circuit(circuit)
        groups.setdefault(scorer_of(votes), []).append((circuit, attributions, votes, certificates))
    return groups


def vision_panel(
    read: tuple[Circuit, object, object, object],
    experiment: Experiment,
    sufficiency: pd.DataFrame,
    features: str | None,
    index: int,
    flags: Sequence[Flag] = (),
    truths: Mapping[str, GroundTruth] | None = None,
) -> tuple[str, dict]:
    """One scorer's part of a class page: its circuit per layer with a K selector (on a testbed model the true
    channels marked, each method's precision and recall against them at the selected K, and a switch to the
    truth alone), the feature grid (the main scorer's, ``index`` 0; the others say whose it is) and its curves.

    Args:
        read: the circuit and its (attributions, votes, certificates).
        experiment: the class's experiment.
        sufficiency: the experiment's sufficiency rows (the curves).
        features: the feature grid's image, relative to the page, or None.
        index: the panel's position (0: the main scorer).
        flags: the page's flags.
        truths: the run's ground truths by experiment (:func:`~.explorer_data.read_truths`).

    Returns:
        the HTML, and the row of the page's scorer table (the certified in, abstained and out counts at the
        page's K, the codes of the page's ``flags`` that name this scorer).
    """
    circuit, attributions, votes, certificates = read
    suffix = "" if index == 0 else f"-{index}"
    scorer = scorer_of(votes)
    data = vision_circuit_data(attributions.names, attributions.groups, votes, certificates)
    where = str(circuit.attributions)
    truth, why = concept_truth(truths or {}, experiment.name, circuit.concept, attributions.names, where)
    if truth is not None:
        data["truth"] = "".join("1" if t else "0" for t in truth)
    k, chosen_by = drawn_k(
        experiment.tables,
        None,
        scorer,
        votes.k_grid,
        (truths or {}).get(experiment.name),
        circuit.concept,
        len(attributions.names),
    )
    k0 = nearest_index(votes.k_grid, k)
    k_named = f"The K opened first ({100 * votes.k_grid[k0]:g}%) is {chosen_by}."
    options = "".join(
        f'<option value="{i}"{" selected" if i == k0 else ""}>K = {100 * k:g}%</option>'
        for i, k in enumerate(votes.k_grid)
    )
    legend = "".join(f'<span class="sw {css}"></span>{esc(label)} ' for _, (_, css, label) in CATEGORIES.items())
    if truth is not None:
        legend += '<span class="sw t"></span>true channel (ground truth) '
    known = truth_html(truth, why, attributions.names, votes, certificates, range(len(votes.k_grid)), k0, "channels")
    rows = sufficiency[(sufficiency.concept.astype(str) == circuit.concept)]
    if "scorer" in rows:
        rows = rows[rows.scorer == votes.attrs.get("scorer")]
    charts = curve_charts(
        rows.rename(columns={"accuracy": "cacc"}),
        [("cacc", "cACC", True), ("false_positive_rate", "false-positive rate", True)],
    )
    mine = [f for f in flags if f.where == certificate_where(certificates.attrs) or f"scorer {scorer}" in f.where]
    if index == 0:
        grid = figure_html(features, "features") if features else NO_FEATURES
    else:
        grid = "<p>The feature grid is the main scorer's (the first of the switch).</p>"
    decision = certificates.decision[k0]
    row = {
        "scorer": scorer,
        "K (%)": f"{100 * votes.k_grid[k0]:g}",
        "certified in": int((decision == 1).sum()),
        "abstained": int((decision == -1).sum()),
        "certified out": int((decision == 0).sum()),
        "warnings": ", ".join(dict.fromkeys(f.code for f in sorted_flags(mine))) or "none",
    }
    return (
        (
            f'<h2>Circuit per layer</h2><div class="circuit-view"><p><label>K <select id=kselect{suffix}>{options}'
            f"</select></label> <span class=legend>{legend}</span></p><p class=note>{esc(k_named)}</p>{known}"
            f"<p class=note>Each square is a channel; hover for "
            f"its certification votes (how many of the n = {data['n']} sub-datasets put it in the circuit).</p>"
            f'<div class="circuit" id="circuit{suffix}"></div>{json_script(data, "circuit-data" + suffix)}</div>'
            f"<h2>Features</h2>{grid}<h2>Curves</h2>{charts}"
        ),
        row,
    )


def page_flags(flags: Sequence[Flag], experiment: str, concept: str) -> list[Flag]:
    """The flags of the run's list (``warnings.json``) that concern one class or task page, selected by the flags'
    structured fields (never by their text): those of its experiment (``Flag.experiment``) that name its concept or
    no concept (``Flag.concept`` empty: the experiment's tables as a whole, which its pages show). A page's banner
    and its collapsed list show these; a flag of no experiment, or of another, is on the overview only."""
    return [f for f in flags if f.experiment == experiment and f.concept in (concept, "")]


PAGE_WARNINGS = "Warnings about this page's circuits and settings"


def vision_page(
    circuits: Circuit | Sequence[Circuit],
    experiment: Experiment,
    sufficiency: pd.DataFrame,
    features: str | None,
    flags: Sequence[Flag] = (),
    truths: Mapping[str, GroundTruth] | None = None,
) -> tuple[str, list[Flag]]:
    """The class page: under its setting, the class's flags of the run's list (collapsed: one line, a click
    away); per scorer (a switch between them where the class has several circuits, one per scorer; the first
    given is the main scorer) the circuit per layer with a K selector (with the known circuit on a testbed
    model, ``truths``; opened at :func:`~.explorer_data.drawn_k`: the truth's size there), the feature grid and the
    curves; then the attack (the main scorer's). Returns the page's body and its flags (:func:`page_flags`: the
    page's banner lists them)."""
    circuits = [circuits] if isinstance(circuits, Circuit) else list(circuits)
    groups = by_scorer(circuits)
    scorers = list(groups)
    concept = circuits[0].concept
    _, _, votes, certificates = groups[scorers[0]][0]
    attrs = dict(certificates.attrs)
    several = len(scorers) > 1
    mine = page_flags(flags, experiment.name, concept)
    panels, rows = [], []
    for index, scorer in enumerate(scorers):
        panel, row = vision_panel(groups[scorer][0], experiment, sufficiency, features, index, mine, truths)
        panels.append(panel)
        rows.append(row)
    table = (
        frame_html(pd.DataFrame(rows), "Every scorer's certified circuit at its operating K (switch to see each)")
        if several
        else ""
    )
    who = f"scorers {', '.join(scorers)} (main: {scorers[0]})" if several else f"scorer {attrs.get('scorer', '')}"
    attack = "<p class=note>The attack edits the main scorer's circuits.</p>" if several else ""
    body = (
        f"<h1>{esc(concept)}</h1><p class=meta>{esc(experiment.name)} · model {esc(attrs.get('model', ''))} · "
        f"{esc(who)} · |D| = {int(votes.attrs['n_examples'])} · {esc(setting_words(attrs))}</p>"
        f"{page_flags_html(mine, PAGE_WARNINGS)}{table}{switch_html(scorers, panels, 'Scorer')}"
        f"<h2>Attack</h2>{attack}{attack_html(experiment.tables, concept)}"
    )
    return body, mine


def language_panel(
    read: Sequence[tuple[Circuit, object, object, object]],
    experiment: Experiment,
    sufficiency: pd.DataFrame,
    out_dir: Path,
    index: int,
    several: bool,
    flags: Sequence[Flag] = (),
    truths: Mapping[str, GroundTruth] | None = None,
) -> tuple[str, dict]:
    """One method's part of a task page, at the selected setting: the circuit on the model graph (on a testbed
    model with the known circuit marked, each method's precision and recall against it at the K shown, and a
    switch to the truth alone), the edge counts (certified in, abstained, certified out: they partition the
    edges; the baseline counted apart, as it overlaps them), every setting with the codes of its flags (those of
    the page's ``flags`` that name its certificate or its setting), the curves and the circuit JSON (a file
    beside the page).

    Args:
        read: the task's circuits of this method (one per setting) with their files read.
        experiment: the task's experiment.
        sufficiency: the experiment's sufficiency rows (the curves).
        out_dir: the experiment's folder (the circuit JSON is written there).
        index: the panel's position (0: the main method).
        several: whether the task has several methods (the K is then this method's).
        flags: the page's flags.
        truths: the run's ground truths by experiment (:func:`~.explorer_data.read_truths`).

    Returns:
        the HTML and the shown circuit's attributes.
    """
    from certified_circuits.reports.paper import setting_tag

    task = read[0][0].concept
    scorer = scorer_of(read[0][2])
    chosen = select_setting(experiment.tables, task)
    by_tag = {setting_tag(v, cert): (c, a, v, cert) for c, a, v, cert in read}
    tag = chosen if chosen in by_tag else next(iter(by_tag))
    circuit, attributions, votes, certificates = by_tag[tag]
    k, chosen_by = drawn_k(
        experiment.tables,
        task,
        scorer if several else None,
        votes.k_grid,
        (truths or {}).get(experiment.name),
        task,
        len(attributions.names),
    )
    i = nearest_index(votes.k_grid, k)
    attrs = {
        **dict(votes.attrs),
        **dict(certificates.attrs),
        **{key: attributions.attrs.get(key) for key in ("n_layers", "n_heads", "d_model", "parallel_attn_mlp")},
    }
    truth, why = concept_truth(truths or {}, experiment.name, task, attributions.names, str(circuit.attributions))
    drawn = (attributions.names, certificates.decision[i], votes.baseline[i], votes.certification_counts[i])
    marks: dict = {"truth": truth}
    if attributions.names and not grammar.is_edge(attributions.names[0]):  # node level: each node's edges drawn
        from certified_circuits.reports.eap_graph import graph_cfg
        from certified_circuits.reports.language_graphs import node_to_edge_view

        cfg = graph_cfg(
            int(attrs["n_layers"]), int(attrs["n_heads"]), 0, bool(int(attrs.get("parallel_attn_mlp") or 0))
        )
        drawn = node_to_edge_view(cfg, *drawn)
        true_nodes = [] if truth is None else [str(attributions.names[j]) for j in np.flatnonzero(truth)]
        marks = {"true_nodes": true_nodes}
    svg, counts = language_graph_svg(
        *drawn, int(attributions.attrs["n_layers"]), int(attributions.attrs["n_heads"]), **marks
    )
    level = "edges" if not attributions.names or grammar.is_edge(attributions.names[0]) else "nodes"
    known = truth_html(truth, why, attributions.names, votes, certificates, [i], i, level)
    score_name = scorer or "eap_ig"
    scores = (
        attributions.scores[score_name].mean(axis=0)
        if len(attributions.scores[score_name])
        else np.zeros(len(attributions.names))
    )
    stem = file_stem(task) if index == 0 else f"{file_stem(task)}_{file_stem(scorer)}"
    download = out_dir / f"{stem}_circuit.json"
    download.write_text(
        circuit_json(attributions.names, scores, certificates.decision[i], float(votes.k_grid[i]), attrs)
    )
    task_rows = sufficiency[(sufficiency.concept.astype(str) == task)]
    if several and "scorer" in task_rows:
        task_rows = task_rows[task_rows.scorer.astype(str) == scorer]
    per_setting = {
        t: [f for f in flags if f.where == certificate_where(cert.attrs) or f"setting {t}" in f.where]
        for t, (_, _, _, cert) in by_tag.items()
    }
    settings = frame_html(
        pd.DataFrame(
            [
                {
                    "setting": tag_words(t),
                    "certified in": int((cert.decision[nearest_index(v.k_grid, k)] == 1).sum()),
                    "abstained": int((cert.decision[nearest_index(v.k_grid, k)] == -1).sum()),
                    "warnings": ", ".join(dict.fromkeys(f.code for f in sorted_flags(per_setting[t]))) or "none",
                }
                for t, (_, _, v, cert) in by_tag.items()
            ]
        ),
        "Every certified setting of the task at this K (the warnings of each are listed above and on the overview)",
    )
    rows = task_rows
    if "setting" in rows:
        rows = rows[rows.setting == tag]
    charts = curve_charts(
        rows.rename(columns={"accuracy": "cacc"}), [("cacc", "cACC", True), ("logit_diff", "logit difference", False)]
    )
    count_table = frame_html(
        pd.DataFrame([{**{key: counts[key] for key in EDGE_PARTITION}, "edges": counts["edges"]}]),
        f"Edges at K = {100 * votes.k_grid[i]:g}%: certified in, abstained and certified out partition the edges "
        "(each edge is in one; they sum to the edges)",
    )
    both = counts["in the baseline"] - counts["baseline, not certified in"]
    baseline = (
        f"<p class=note>In the baseline (counted apart: it overlaps the three): {counts['in the baseline']} of the "
        f"{counts['edges']} edges, {both} of them certified in, {counts['baseline, not certified in']} not "
        "(drawn dashed).</p>"
    )
    outside = counts["abstained outside the baseline"]
    dotted = (
        f"all {outside}"
        if counts["abstained drawn"] == outside
        else f"the {counts['abstained drawn']} most voted of {outside}"
    )
    truth_key = (
        '<span class="ln ln-true"></span>true edge (ground truth) ' if truth is not None and level == "edges" else ""
    )
    truth_key += '<span class="ring"></span>true node (ground truth) ' if truth is not None and level == "nodes" else ""
    return (
        (
            f"<h2>Circuit on the model graph (K = {100 * votes.k_grid[i]:g}%, {esc(tag_words(tag))})</h2>"
            f"<p class=note>K = {100 * votes.k_grid[i]:g}% is {esc(chosen_by)}.</p>"
            f'<div class="graph-view"><p><span class=legend><span class="ln ln-in"></span>certified in '
            f'<span class="ln ln-base"></span>in the baseline, not certified in <span class="ln ln-abs"></span>abstained '
            f"outside the baseline ({dotted}) {truth_key}</span> · "
            f'<a href="{url(download.name)}" download>circuit JSON (EAP-IG graph layout)</a></p>{known}'
            f'<div class="graphbox">{svg}</div></div>{count_table}{baseline}{settings}<h2>Curves</h2>{charts}'
        ),
        attrs,
    )


def language_page(
    circuits: Sequence[Circuit],
    experiment: Experiment,
    sufficiency: pd.DataFrame,
    out_dir: Path,
    flags: Sequence[Flag] = (),
    truths: Mapping[str, GroundTruth] | None = None,
) -> tuple[str, list[Flag]]:
    """The task page at the selected setting (held-out selection when there is one, else the best peak): under
    its setting, the task's flags of the run's list (collapsed, a click away); per method (a switch between them
    where the task has circuits of several; the first given is the main one) the circuit on the model graph
    (with the known circuit on a testbed model, ``truths``; drawn at :func:`~.explorer_data.drawn_k`: the
    truth's size there) and every setting's flag codes in the settings table; then the attack. Returns the page's
    body and its flags (:func:`page_flags`: the page's banner lists them)."""
    task = circuits[0].concept
    groups = by_scorer(circuits)
    methods = list(groups)
    several = len(methods) > 1
    mine = page_flags(flags, experiment.name, task)
    panels, attrs = [], {}
    for index, method in enumerate(methods):
        panel, shown = language_panel(groups[method], experiment, sufficiency, out_dir, index, several, mine, truths)
        panels.append(panel)
        attrs = attrs or shown
    votes = groups[methods[0]][0][2]
    who = f" · methods {', '.join(methods)} (main: {methods[0]})" if several else ""
    return (
        f"<h1>{esc(task)}</h1><p class=meta>{esc(experiment.name)} · model {esc(votes.attrs.get('model', ''))}{esc(who)} · "
        f"|D| = {int(votes.attrs['n_examples'])} prompts · {esc(setting_words(attrs))}</p>"
        f"{page_flags_html(mine, PAGE_WARNINGS)}{switch_html(methods, panels, 'Method')}"
        f"<h2>Attack</h2>{attack_html(experiment.tables, task)}"
    ), mine


def recovery_html(tables: Path) -> str:
    """One line on how each method recovers the experiment's known circuit (``testbed/recovery_auroc.csv`` of
    report-recovery: mean AUROC over concepts, and precision / recall at each method's held-out-selected K where the
    run selected one), and the recovery table; nothing for an experiment without a ground truth. K is named in % of
    the components (the held-out selection's K of each method, every concept's where they differ); a run that
    selected no K (the embedded default's vision half) shows AUROC alone, and says where the truth's size is."""
    path = tables / "testbed" / "recovery_auroc.csv"
    if not path.is_file():
        return ""
    table = read_k_table(
        path,
        str(path),
        ["method", "auroc", "precision", "recall", "at_selected_setting"],
        TABLE_FIX,
        {"k_target": True},
        {"concept": str},
    )
    table = table[table["at_selected_setting"].astype(bool)]
    if "scorer" in table and table["scorer"].nunique() > 1:
        table = table[table["scorer"] == table["scorer"].iloc[0]]
    selected = bool(table["k_target"].notna().any())
    words = []
    for method, part in table.groupby("method", sort=False):
        name = METHOD_WORDS.get(method, method)
        k = ", ".join(f"{100 * v:g}%" for v in sorted(part["k_target"].dropna().unique()))
        whole = len(part) and part["k_target"].map(is_full_model).all()
        if not selected:
            point = ""
        elif whole:
            point = " (its selected K is 100%, the whole model: no comparison there)"
        else:
            point = f", precision {part['precision'].mean():.2f} / recall {part['recall'].mean():.2f}" + (
                f" at K {k}" if k else ""
            )
        words.append(f"{name} AUROC {part['auroc'].mean():.3f}{point}")
    scorer = f" ({table['scorer'].iloc[0]})" if "scorer" in table and len(table) else ""
    how = (
        "mean over concepts; precision and recall at the K selected on held-out data"
        if selected
        else "mean over concepts, over the K grid; no K was selected on held-out data: precision and recall at "
        "the truth's size are in the first table"
    )
    summary = tables / "testbed" / "recovery_summary.md"
    return (
        f"<p><b>Recovery of the known circuit{esc(scorer)}</b> ({esc(how)}). {esc('; '.join(words))} "
        f"(<code>testbed/recovery_auroc.csv</code>).</p>"
        + (markdown_table_html(summary.read_text()) if summary.is_file() else "")
    )


def main_figure(figures: Mapping[str, Sequence[tuple[str, str]]]) -> tuple[str, str, str] | None:
    """The run's main figure: the testbed's recovery figure (``testbed/recovery.png``) of the first experiment
    that has one, else the first key figure (:data:`KEY_FIGURES` order) of the first experiment with any.

    Args:
        figures: experiment -> its copied key figures, (file name, source relative to the overview).

    Returns:
        (experiment, file name, source), or None when the run has no key figure.
    """
    for experiment, shown in figures.items():
        for name, src in shown:
            if name == "recovery.png":
                return experiment, name, src
    for experiment, shown in figures.items():
        if shown:
            return experiment, *shown[0]
    return None


def lead_html(found: Headline, figure: tuple[str, str, str] | None) -> str:
    """The overview's first screen: the run's headline (:func:`certified_circuits.reports.findings.headline`, read
    from ``findings.json``: the same tables and lines as ``summary.md``'s first screen and the end of the run,
    :func:`~.html.headline_html`) beside its main figure (:func:`main_figure`).

    Args:
        found: the headline (empty: the run has no testbed).
        figure: (experiment, file name, source) or None.

    Returns:
        the section, or "" with neither.
    """
    if not found and figure is None:
        return ""
    words = (
        f"<div class=findings>{headline_html(found)}<p class=note>The same tables open "
        '<a href="../summary.md">summary.md</a> and end the run in the terminal.</p></div>'
        if found
        else "<div class=findings><p class=note>No headline: the run has no testbed model (one whose circuits have "
        "a known right answer, with its table at the truth's size).</p></div>"
    )
    shown = ""
    if figure is not None:
        experiment, name, src = figure
        caption = f"{experiment}: {CAPTIONS.get(name, name)}"
        shown = f'<figure class="main-figure"><img src="{url(src)}" alt="{esc(caption)}"><figcaption>{esc(caption)}</figcaption></figure>'
    return f'<section class="lead"><h2>What this run shows</h2><div class="lead-body">{words}{shown}</div></section>'


def overview(
    experiments: Sequence[Experiment],
    first_attrs: dict[str, dict],
    links: dict[str, list[tuple[str, str]]],
    figures: dict[str, list[tuple[str, str]]],
    theory: list[tuple[str, str]],
    flags: Sequence[Flag] = (),
    findings: Headline = NO_HEADLINE,
) -> str:
    """The overview page: first the run's headline beside its main figure (:func:`lead_html`), then the
    results of each experiment (settings, guarantee, links to every class and task, recovery, headline tables,
    key figures), then the theory figures, then the run's warnings in full (one collapsed block per kind,
    :func:`~.html.warnings_section_html`; every page's banner links there).

    Args:
        experiments: the run's experiments.
        first_attrs: experiment -> the attributes of its first circuit (its setting in words).
        links: experiment -> (concept, page) of each class or task page.
        figures: experiment -> its key figures, (file name, source).
        theory: the theory figures, (file name, source).
        flags: the run's warning list.
        findings: the run's headline (``findings.json``).

    Returns:
        the page's body.
    """
    parts = ["<h1>Certified circuits of this run</h1>", lead_html(findings, main_figure(figures))]
    for experiment in experiments:
        attrs = first_attrs.get(experiment.name)
        parts.append(f"<section><h2>{esc(experiment.name)} ({esc(experiment.kind)})</h2>")
        if attrs:
            parts.append(
                f"<p><b>Setting.</b> {esc(setting_words(attrs))}.</p><p><b>Guarantee.</b> {esc(guarantee_words(attrs))}</p>"
            )
        pages = " ".join(f'<a href="{url(href)}">{esc(label)}</a>' for label, href in links.get(experiment.name, []))
        parts.append(f"<p><b>{'Classes' if experiment.kind == 'vision' else 'Tasks'}:</b> {pages}</p>")
        parts.append(recovery_html(experiment.tables))
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
    parts.append(warnings_section_html(flags))
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
    "testbed/recovery.png",
)


def build_explorer(
    out_dir: Path,
    experiments: Sequence[Experiment],
    circuits: Sequence[Circuit],
    theory_figures: Iterable[Path] = (),
    flags: Sequence[Flag] = (),
    ground_truths: Iterable[Path] = (),
    findings: Headline = NO_HEADLINE,
) -> dict[str, float]:
    """Write the explorer folder (atomically: a temporary folder renamed into place).

    Args:
        out_dir: ``<results_dir>/explorer``.
        experiments: every experiment's tables folder.
        circuits: the circuits to show (vision: one per class; language: one per task and setting).
        theory_figures: PNGs of the theory report.
        flags: the run's one warning list (``warnings.json``, :func:`certified_circuits.reports.flags.run_flags`):
            the overview's banner (one line per kind) and its full list at the end; each class and task page's
            banner and collapsed list show those that concern it (:func:`page_flags`).
        ground_truths: the testbed models' ground-truth files (``ground_truth/<experiment>.json``): each class or
            task page of their experiments marks the true components and gives precision and recall against them.
        findings: the run's headline (``findings.json``, :func:`certified_circuits.reports.findings.read_headline`),
            on the overview's first screen beside the main figure.

    Returns:
        metrics: pages written, the largest page's size in bytes, and the flags shown (``len(flags)``).
    """
    kinds = {e.name: e for e in experiments}
    truths = read_truths(ground_truths)
    unknown = sorted({c.experiment for c in circuits} - set(kinds))
    if unknown:
        raise ValueError(f"circuits of experiments {unknown} but no --experiment with their tables: pass both")
    with atomic_dir(Path(out_dir)) as tmp:
        (tmp / "explorer.css").write_text(CSS)
        (tmp / "explorer.js").write_text(JS)
        figures: dict[str, list[tuple[str, str]]] = {}
        links: dict[str, list[tuple[str, str]]] = {}
        first_attrs: dict[str, dict] = {}
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
            curves = experiment.tables / "sufficiency.csv"
            sufficiency = (
                read_k_table(curves, str(curves), ["concept"], TABLE_FIX, {"k_target": False}, {"concept": str})
                if curves.is_file()
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
                    body, own = vision_page(group, experiment, sufficiency, features, flags, truths)
                else:
                    body, own = language_page(group, experiment, sufficiency, folder, flags, truths)
                text = page(f"{concept} · {experiment.name}", body, depth=1, flags=own)
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
        body = overview(experiments, first_attrs, links, figures, theory, flags, findings)
        index = page("certified-circuits explorer", body, depth=0, flags=flags)
        (tmp / "index.html").write_text(index)
    return {
        "explorer_pages": float(len(sizes) + 1),
        "explorer_largest_page_bytes": float(max(sizes + [len(index)])),
        "explorer_flags": float(len(flags)),
    }
