"""The explorer of issue 44: the known circuit on a testbed model's pages (marks, precision and recall, the switch
to the truth alone), warning lines that wrap, edge counts that partition the edges, a label on every node, and the
overview's first screen (the findings and the main figure)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import pytest

from certified_circuits.core.contracts import Certificates, Votes
from certified_circuits.reports.explorer import (CSS, EDGE_PARTITION, Circuit, Experiment, build_explorer,
                                                 language_graph_svg, lead_html, main_figure)
from certified_circuits.reports.findings import NO_HEADLINE, Headline, HeadlineTable
from certified_circuits.reports.flags import Flag
from certified_circuits.reports.html import banner_html
from certified_circuits.storage.store import write_attributions, write_certificates, write_votes

from .test_explorer_escaping import EDGES, SETTING, TEST, Page, build

CHANNELS = ["layer1.0", "layer1.1", "layer1.2", "layer2.0", "layer2.1", "layer2.2"]
#: the tiny explorer's circuits (test_explorer_escaping.build): decisions per K (25%, 50%), baseline the first half
VISION_DECISION = np.array([[1, -1, -1, 0, 1, 0], [1, 1, -1, -1, 0, 0]])
LANGUAGE_DECISION = np.array([[1, 1, -1, 0, -1, -1], [1, 1, 1, -1, 0, -1]])
BASELINE = np.array([1, 1, 1, 0, 0, 0], bool)
TRUE_CHANNELS = ["layer1.0", "layer2.0", "layer2.2"]
TRUE_EDGES = ["input->a0.h0<q>", "a0.h0->m0", "m0->logits"]


def _truth_file(folder: Path, experiment: str, kind: str, concept: str, components: list[str], n: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{experiment}.json"
    path.write_text(json.dumps({"format": "certified-circuits/ground-truth/1", "experiment": experiment, "kind": kind,
                                "n_components": n, "concepts": {concept: {"components": components,
                                                                          "verification": {"passed": True}}}}))
    return path


def _expected(decision: np.ndarray, names: list[str], true: list[str]) -> dict[str, tuple[int, int, str, str]]:
    """Each method's (size, TP, precision, recall) at one K, computed here with sets (not analysis/recovery.py)."""
    truth = set(true)
    circuits = {"baseline": BASELINE, "majority vote": BASELINE, "certified in": decision == 1,
                "certified in + abstain": decision != 0}
    out = {}
    for method, mask in circuits.items():
        members = {n for n, m in zip(names, mask) if m}
        tp = len(members & truth)
        out[method] = (len(members), tp, f"{tp / len(members):.2f}" if members else "n/a (empty)",
                       f"{tp / len(truth):.2f}")
    return out


def _table_rows(html: str) -> dict[str, tuple[int, int, str, str]]:
    rows = re.findall(r"<tr><td>([^<]+)</td><td class=num>(\d+)</td><td class=num>(\d+)</td><td>([^<]+)</td>"
                      r"<td>([^<]+)</td></tr>", html)
    return {m: (int(size), int(tp), p, r) for m, size, tp, p, r in rows}


@pytest.fixture(scope="module")
def testbed(tmp_path_factory) -> dict[str, object]:
    """The tiny explorer with a ground truth for both models, and without one (for comparison)."""
    root = tmp_path_factory.mktemp("truth")
    truths = (_truth_file(root / "gt", "world", "vision", "circle", TRUE_CHANNELS, 6),
              _truth_file(root / "gt", "tiny_gpt2", "language", "ioi", TRUE_EDGES, 6))
    with_truth = build(root / "both", ground_truths=truths)
    vision_only = build(root / "vision_only", ground_truths=truths[:1])
    without = build(root / "none")
    return {"both": with_truth, "vision_only": vision_only, "none": without}


def test_the_class_page_marks_exactly_the_true_channels_and_scores_each_method_at_every_k(testbed):
    out = testbed["both"]
    text = (out / "world" / "circle.html").read_text()
    page = Page(text)
    data = json.loads(page.scripts["circuit-data"])
    assert data["truth"] == "".join("1" if n in TRUE_CHANNELS else "0" for n in CHANNELS)  # the page's script marks
    # one table per K of the selector; the page's K (the middle of the grid: 50%, index 1) shown, the other hidden
    blocks = re.findall(r'<div class="truth-k" data-k="(\d)"( hidden)?>(.*?)</div>', text)
    assert [(k, hidden) for k, hidden, _ in blocks] == [("0", " hidden"), ("1", "")]
    for k, _, table in blocks:
        assert _table_rows(table) == _expected(VISION_DECISION[int(k)], CHANNELS, TRUE_CHANNELS), k
    # at 50%: certified in {layer1.0, layer1.1} holds 1 of the 3 true channels
    assert _table_rows(blocks[1][2])["certified in"] == (2, 1, "0.50", "0.33")
    assert "3 of 6 channels, marked on the drawing: layer1.0, layer2.0, layer2.2" in page.all_text
    # the switch to the truth alone: a checkbox the script shows (hidden without it)
    toggles = [dict(a) for t, a in page.tags if t == "label" and dict(a).get("class") == "truth-toggle"]
    assert len(toggles) == 1 and "hidden" in toggles[0]
    assert ".truth-only .c.t{" in CSS and ".c.t{" in CSS


def test_the_task_page_draws_exactly_the_true_edges_and_scores_each_method_at_its_k(testbed):
    text = (testbed["both"] / "tiny_gpt2" / "ioi.html").read_text()
    page = Page(text)
    bands = re.findall(r'<line [^>]*class="truth"><title>([^<]+)</title>', text)
    assert sorted(html.unescape(t).split(":")[0] for t in bands) == sorted(TRUE_EDGES)
    blocks = re.findall(r'<div class="truth-k" data-k="(\d)"( hidden)?>(.*?)</div>', text)
    assert [(k, hidden) for k, hidden, _ in blocks] == [("1", "")]  # the one K the page shows
    assert _table_rows(blocks[0][2]) == _expected(LANGUAGE_DECISION[1], EDGES, TRUE_EDGES)
    assert _table_rows(blocks[0][2])["certified in"] == (3, 2, "0.67", "0.67")
    assert "true edge (ground truth)" in page.all_text and "3 of 6 edges" in page.all_text
    assert ".truth-only .graph .edge{display:none}" in CSS


def test_a_model_without_a_truth_says_so_and_is_otherwise_unchanged(testbed):
    """The task page of a model with no ground-truth file is the same whether or not another model has one."""
    for name in ("vision_only", "none"):
        text = (testbed[name] / "tiny_gpt2" / "ioi.html").read_text()
        assert "No ground truth is known for this model (experiment tiny_gpt2)" in text
        assert 'class="truth' not in text and "truth-toggle" not in text
    assert ((testbed["vision_only"] / "tiny_gpt2" / "ioi.html").read_text()
            == (testbed["none"] / "tiny_gpt2" / "ioi.html").read_text())
    vision = Page((testbed["none"] / "world" / "circle.html").read_text())
    assert "truth" not in json.loads(vision.scripts["circuit-data"])
    assert "No ground truth is known for this model (experiment world)" in vision.all_text


def test_a_truth_of_other_components_is_refused(tmp_path):
    wrong = _truth_file(tmp_path / "gt", "world", "vision", "circle", ["layer9.0"], 6)
    with pytest.raises(ValueError, match="layer9.0"):
        build(tmp_path, ground_truths=(wrong,))


def test_warning_lines_wrap_and_are_never_cut():
    message = "The model is at chance on this eval set, so every circuit's accuracy there means nothing. " * 4
    flag = Flag("model-at-chance", "world / eval_set id", message.strip(), "Train longer.", "world")
    banner = Page(banner_html([flag], 0))
    assert message.strip() in banner.all_text  # the whole message, in Python
    rules = dict(re.findall(r"([^{}]+)\{([^{}]*)\}", CSS))
    for selector, body in rules.items():
        if "banner" in selector or "warning" in selector:
            assert not re.search(r"nowrap|ellipsis|overflow:\s*hidden|line-clamp", body), (selector, body)


def test_every_node_of_the_graph_is_labelled():
    names = ["input->a0.h0<q>", "a0.h0->logits"]
    svg, _ = language_graph_svg(names, np.array([1, 0]), np.zeros(2, bool), np.array([5, 1]), n_layers=2, n_heads=3)
    page = Page(svg)
    circles = re.findall(r"<circle [^>]*><title>([^<;]+)", svg)
    labels = re.findall(r'<text [^>]*class="nl[^"]*">([^<]+)</text>', svg)
    assert len(circles) == 2 + 2 * 3 + 2 and labels == circles  # input, logits, 6 heads, 2 MLPs
    assert page.names.count("circle") == page.names.count("text")


def _tiny_gpt2_task(folder: Path) -> tuple[Circuit, np.ndarray, np.ndarray]:
    """A task on tiny_gpt2's graph (2 layers, 4 heads: U = 110 edges) with the counts of issue 44's page at its
    K: 12 certified in, 55 abstained, 43 certified out, and a baseline of 44 edges (12 of them certified in, 32 not)
    that overlaps the three."""
    from certified_circuits.language.graph import edge_names

    names = edge_names(2, 4, False)
    u = len(names)
    rng = np.random.default_rng(44)
    decision = np.array([1] * 12 + [-1] * 55 + [0] * 43)[rng.permutation(u)]
    baseline = np.zeros(u, bool)
    baseline[np.flatnonzero(decision == 1)] = True
    baseline[rng.choice(np.flatnonzero(decision != 1), 32, replace=False)] = True
    grid = np.array([0.4, 0.5, 0.6])
    counts = np.tile(rng.integers(0, 1000, u).astype(np.int32), (3, 1))
    attributions = write_attributions(folder / "a.h5", {"eap_ig": rng.normal(size=(4, u))}, np.zeros(u, int), names,
                                      [f"e{i}" for i in range(4)], {"model": "m", "concept": "induction",
                                                                    "n_layers": 2, "n_heads": 4, "d_model": 8},
                                      rankings={"eap_ig": "absolute"})
    votes = write_votes(folder / "v.h5", Votes(k_grid=grid, baseline=np.tile(baseline, (3, 1)), selection_counts=counts,
                                               certification_counts=counts, groups=np.zeros(u, np.int32),
                                               attrs={**SETTING, "scorer": "eap_ig", "model": "m"}))
    certificates = write_certificates(folder / "c.h5", Certificates(
        k_grid=grid, decision=np.tile(decision, (3, 1)).astype(np.int8), majority=np.tile(baseline, (3, 1)),
        pvalue=np.zeros((3, u)), attrs={**SETTING, **TEST, "scorer": "eap_ig", "model": "m"}))
    return Circuit("tiny_gpt2", "induction", attributions, votes, certificates), decision, baseline


def test_the_task_page_counts_partition_the_edges_of_tiny_gpt2(tmp_path):
    """Issue 44's page said 12 certified in, 32 baseline only, 55 abstained and 43 certified out: 142 of 110 edges.
    The counts shown now are the partition (they sum to U = 110), and the baseline is counted apart."""
    circuit, decision, baseline = _tiny_gpt2_task(tmp_path)
    u = len(decision)
    assert u == 110
    tables = tmp_path / "tables"
    tables.mkdir()
    out = tmp_path / "explorer"
    build_explorer(out, [Experiment("language", "tiny_gpt2", tables)], [circuit])
    text = (out / "tiny_gpt2" / "induction.html").read_text()
    table = text.split("partition the edges", 1)[1].split("</table>", 1)[0]
    heads = re.findall(r"<th>([^<]+)</th>", table)
    values = [int(v) for v in re.findall(r"<td class=num>(\d+)</td>", table)]
    shown = dict(zip(heads, values))
    assert shown == {"certified in": 12, "abstained": 55, "certified out": 43, "edges": 110}
    assert sum(shown[key] for key in EDGE_PARTITION) == shown["edges"] == u
    assert "baseline only" not in table
    assert "In the baseline (counted apart: it overlaps the three): 44 of the 110 edges, 12 of them certified in, " \
           "32 not (drawn dashed)." in Page(text).all_text
    # the legend names the dotted edges drawn: every abstained edge outside the baseline (fewer than 300)
    outside = int(((decision == -1) & ~baseline).sum())
    assert "the 300 most voted" not in text and 0 < outside < 55
    assert f"abstained outside the baseline (all {outside})" in Page(text).all_text
    assert text.count('class="edge abs"') == outside


def test_the_overview_opens_with_the_headline_and_the_main_figure(tmp_path):
    table = HeadlineTable("world", "world at the truth's size (`tables/world/testbed/truth_size.csv`)",
                          ("circuit", "precision"), (False, True), (("certified IN <b>", "0.50"),))
    found = Headline((table,), ("The truths passed their causal check (`ground_truth/`).",))
    out = build(tmp_path, findings=found)
    index = (out / "index.html").read_text()
    lead = index.split('<section class="lead">', 1)[1].split("</section>", 1)[0]
    assert "<caption>world at the truth&#x27;s size (<code>tables/world/testbed/truth_size.csv</code>)</caption>" in lead
    assert "<td>certified IN &lt;b&gt;</td><td class=num>0.50</td>" in lead  # every cell escaped
    assert "<p class=headline-line>The truths passed their causal check (<code>ground_truth/</code>).</p>" in lead
    assert index.index('<section class="lead">') < index.index("<section><h2>world")  # first, before the results
    figures = {"world": [("curves_cacc.png", "world/figures/curves_cacc.png"),
                         ("recovery.png", "world/figures/recovery.png")],
               "tiny_gpt2": [("curves_cacc.png", "tiny_gpt2/figures/curves_cacc.png")]}
    assert main_figure(figures) == ("world", "recovery.png", "world/figures/recovery.png")
    assert main_figure({"world": figures["world"][:1]}) == ("world", "curves_cacc.png", "world/figures/curves_cacc.png")
    assert main_figure({}) is None
    # without a headline (no testbed) the first screen says so beside the main figure; with neither it is empty
    lead = lead_html(NO_HEADLINE, main_figure(figures))
    assert "No headline: the run has no testbed model" in lead and 'src="world/figures/recovery.png"' in lead
    assert "world: Recovery of the known circuit" in lead and lead_html(NO_HEADLINE, None) == ""


def test_the_cut_of_the_dotted_edges_is_named_in_the_legend():
    """Over ``max_abstained`` abstained edges outside the baseline: the most voted are drawn, and counted."""
    names = ["input->a0.h0<q>", "input->m0", "a0.h0->m0", "a0.h1->logits", "m0->logits", "input->logits"]
    svg, counts = language_graph_svg(names, np.full(6, -1), np.zeros(6, bool), np.arange(6), 1, 2, max_abstained=4)
    assert counts["abstained outside the baseline"] == 6 and counts["abstained drawn"] == 4
    assert svg.count('class="edge abs"') == 4


CHROMIUM = __import__("shutil").which("chromium") or __import__("shutil").which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium to run the page's script")
def test_the_script_marks_the_true_channels_and_shows_the_switch(testbed):
    """In headless Chromium: the class page's script draws the true channels with the ``t`` mark (and only them)
    and shows the switch to the truth alone, which is hidden in the HTML."""
    import subprocess

    address = (testbed["both"] / "world" / "circle.html").resolve().as_uri()
    done = subprocess.run([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=3000",
                           "--dump-dom", address], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and '<div id="errors" hidden="">' in done.stdout, done.stderr[-2000:]
    cells = re.findall(r'<span class="c (\w+)( t)?" title="([^"]+)"', done.stdout)
    assert [bool(t) for _, t, _ in cells] == [n in TRUE_CHANNELS for n in CHANNELS]
    assert all(("true channel" in title) == bool(t) for _, t, title in cells)
    assert '<label class="truth-toggle">' in done.stdout  # shown by the script
    assert "1 true" in done.stdout and "2 true" in done.stdout  # the per-layer counts


def test_a_hostile_true_component_is_shown_as_text(tmp_path):
    """The true components' names come from a file (the ground truth, matched to the attribution file's names):
    a hostile one is escaped, so the class page has the same elements as with a clean name."""
    from .test_explorer_escaping import HOSTILE

    pages_of = {}
    for label, component in (("clean", "0"), ("hostile", HOSTILE)):
        truth = _truth_file(tmp_path / label / "gt", "world", "vision", "circle", [f"layer1.{component}", "layer2.0"], 6)
        out = build(tmp_path / label, component=component, ground_truths=(truth,))
        pages_of[label] = Page((out / "world" / "circle.html").read_text())
    assert pages_of["hostile"].names == pages_of["clean"].names
    assert f"layer1.{HOSTILE}, layer2.0" in pages_of["hostile"].all_text
    assert json.loads(pages_of["hostile"].scripts["circuit-data"])["truth"] == "100100"


def test_a_truth_over_nodes_rings_the_true_nodes():
    names = ["input->a0.h0<q>", "a0.h0->logits"]
    svg, counts = language_graph_svg(names, np.array([1, 0]), np.zeros(2, bool), np.array([5, 1]), 1, 2,
                                     true_nodes=["a0.h1", "m0"])
    ringed = re.findall(r'class="node[^"]* true"><title>([^<]+)</title>', svg)
    assert ringed == ["a0.h1; true node (ground truth)", "m0; true node (ground truth)"]
    assert 'class="truth"' not in svg and "true" not in counts  # no edge truth given


@pytest.mark.skipif(not __import__("os").environ.get("CC_RESULTS"), reason="set CC_RESULTS to a run's results folder")
def test_the_counts_partition_the_edges_of_a_real_run(tmp_path):
    """On a real run's language circuits (``$CC_RESULTS``: certificates, votes and attributions of every task and
    setting, and the ground truths): every task page's edge counts sum to the attribution file's U, and a testbed
    task's page has its truth table."""
    import os

    from certified_circuits.analysis.recovery import read_ground_truth
    from certified_circuits.storage.store import read_attributions

    results = Path(os.environ["CC_RESULTS"])
    circuits, experiments = [], {}
    for cert in sorted(results.glob("certificates/*/train/*/*/*/*.h5")):
        experiment, split, task, method, setting = cert.relative_to(results / "certificates").parts[:5]
        votes = results / "votes" / experiment / split / task / method / f"{setting}.h5"
        attributions = results / "attributions" / experiment / split / f"{task}.h5"
        if votes.is_file() and attributions.is_file() and read_attributions(attributions).attrs.get("n_heads"):
            circuits.append(Circuit(experiment, task, attributions, votes, cert))
            experiments[experiment] = Experiment("language", experiment, tmp_path / "tables")
    if not circuits:
        pytest.skip(f"no language circuit in {results}")
    (tmp_path / "tables").mkdir()
    truths = sorted(results.glob("ground_truth/*.json"))
    out = tmp_path / "explorer"
    build_explorer(out, list(experiments.values()), circuits, ground_truths=truths)
    for circuit in circuits:
        text = (out / circuit.experiment / f"{circuit.concept}.html").read_text()
        table = text.split("partition the edges", 1)[1].split("</table>", 1)[0]
        shown = dict(zip(re.findall(r"<th>([^<]+)</th>", table), map(int, re.findall(r"<td class=num>(\d+)</td>", table))))
        u = len(read_attributions(circuit.attributions).names)
        assert sum(shown[key] for key in EDGE_PARTITION) == shown["edges"] == u, (circuit, shown)
    for path in truths:  # a testbed task's page gives each method's precision and recall at its K
        truth = read_ground_truth(path)
        for circuit in circuits:
            if circuit.experiment == truth.experiment and circuit.concept in truth.concepts:
                text = (out / circuit.experiment / f"{circuit.concept}.html").read_text()
                shown = _table_rows(text.split('<div class="truth-k"', 1)[1].split("</div>", 1)[0])
                assert set(shown) == {"baseline", "majority vote", "certified in", "certified in + abstain"}
                assert all(tp <= min(size, len(truth.concepts[circuit.concept])) for size, tp, _, _ in shown.values())


# ------------------------------------------------------------------------------ each page's own warnings, its K


def _banner_codes(page: Page) -> list[str]:
    return [dict(a)["href"].rsplit("#warn-", 1)[1] for t, a in page.tags if dict(a).get("class") == "banner"]


def test_each_pages_banner_lists_its_own_warnings_by_their_experiment_and_concept(tmp_path):
    """The overview's banner is the run's list; a class or task page's lists the flags of its experiment that name
    its concept or none, chosen by the flags' fields: a flag's text (here naming the other page) plays no part."""
    from certified_circuits.reports.explorer import page_flags

    flags = [
        Flag("saturated", "world / scorer relevance", "every circuit equals the model.", "f.", experiment="world"),
        Flag("certified-nothing", "tiny_gpt2 / ioi (text naming the task page)", "m.", "f.", experiment="world",
             concept="circle"),
        Flag("plan", "world / circle (text naming the class page)", "m.", "f.", experiment="tiny_gpt2", concept="ioi"),
        Flag("high-fpr", "world / square", "m.", "f.", experiment="world", concept="square"),
        Flag("empty-circuit", "the run", "m.", "f."),
    ]
    out = build(tmp_path, flags=flags)
    found = {"index": Page((out / "index.html").read_text()), "vision": Page((out / "world" / "circle.html").read_text()),
             "language": Page((out / "tiny_gpt2" / "ioi.html").read_text())}
    assert _banner_codes(found["index"]) == ["plan", "certified-nothing", "empty-circuit", "saturated", "high-fpr"]
    assert _banner_codes(found["vision"]) == ["certified-nothing", "saturated"]
    assert _banner_codes(found["language"]) == ["plan"]
    assert [f.code for f in page_flags(flags, "tiny_gpt2", "ioi")] == ["plan"]  # the one selection, both places
    assert "every circuit equals the model" not in found["language"].all_text
    # the page's collapsed list holds the same flags as its banner
    assert "Warnings: 1 certified-nothing, 1 saturated" in found["vision"].all_text
    assert "Warnings: 1 plan" in found["language"].all_text


def _one_true(folder: Path, passed: bool = True) -> tuple[Path, Path]:
    """Ground truths of one true channel and one true edge (1 of 6: the truth's size is K 1/6, nearest 25%)."""
    paths = (_truth_file(folder, "world", "vision", "circle", TRUE_CHANNELS[:1], 6),
             _truth_file(folder, "tiny_gpt2", "language", "ioi", TRUE_EDGES[:1], 6))
    for path in paths:
        doc = json.loads(path.read_text())
        next(iter(doc["concepts"].values()))["verification"]["passed"] = passed
        path.write_text(json.dumps(doc))
    return paths


def test_a_page_draws_its_circuit_at_the_truths_size_where_a_verified_truth_exists(tmp_path):
    """The size rule (explorer_data.drawn_k): a verified truth -> the grid's K nearest |T| / U; no truth, or one
    that failed its check -> the operating K (here, with no selection or peak table, the grid's middle)."""
    from certified_circuits.analysis.recovery import read_ground_truth
    from certified_circuits.reports.explorer_data import drawn_k

    grid = np.array([0.25, 0.5])
    verified = read_ground_truth(_one_true(tmp_path / "ok")[0])
    failed = read_ground_truth(_one_true(tmp_path / "failed", passed=False)[0])
    k, why = drawn_k(tmp_path, None, None, grid, verified, "circle", 6)
    assert k == 0.25 and why.startswith("the K of the grid nearest the truth's size (1 of 6 components")
    assert drawn_k(tmp_path, None, None, grid, failed, "circle", 6) == (0.5, "the middle of the K grid (this run "
                                                                              "chose no K)")
    assert drawn_k(tmp_path, None, None, grid, None, "circle", 6)[0] == 0.5
    assert drawn_k(tmp_path, None, None, grid, verified, "square", 6)[0] == 0.5  # no truth for this concept
    # on the pages: the class page's selector opens at 25%, the task page draws 25% and says why
    out = build(tmp_path / "pages", ground_truths=_one_true(tmp_path / "gt"))
    vision = (out / "world" / "circle.html").read_text()
    assert '<option value="0" selected>K = 25%</option>' in vision
    assert "The K opened first (25%) is the K of the grid nearest the truth&#x27;s size (1 of 6 components" in vision
    language = (out / "tiny_gpt2" / "ioi.html").read_text()
    assert "<h2>Circuit on the model graph (K = 25%," in language
    assert re.findall(r'<div class="truth-k" data-k="(\d)"', language) == ["0"]
    assert "K = 25% is the K of the grid nearest the truth&#x27;s size (1 of 6 components" in language
    unverified = build(tmp_path / "failed_pages", ground_truths=_one_true(tmp_path / "gt2", passed=False))
    assert "<h2>Circuit on the model graph (K = 50%," in (unverified / "tiny_gpt2" / "ioi.html").read_text()
