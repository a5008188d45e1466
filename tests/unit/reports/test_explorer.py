"""The circuit explorer's pieces: words, tables, page data and the language graph (the pages themselves are
opened in a real browser by tests/integration/test_workflow.py, test_the_explorer_opens_from_disk_in_a_browser)."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from certified_circuits.core.contracts import Certificates, Votes
from certified_circuits.reports.explorer import (EDGE_PARTITION, circuit_json, language_graph_svg, markdown_table_html,
                                                 node_position, svg_chart, vision_circuit_data)
from certified_circuits.reports.words import guarantee_words, setting_words, tag_words
from .test_explorer_escaping import IMG, Page, build, pages

ATTRS = {"tau": 0.95, "p_del": 0.6, "alpha": 0.001, "n0": 100, "n": 1000, "correction": "bonferroni"}


def test_settings_and_the_guarantee_in_words():
    assert setting_words(ATTRS).startswith("tau 0.95, p_del 0.6 (radius r = 1), alpha 0.001, n0 = 100 selection")
    assert "any 1 insertion, deletion or substitution" in guarantee_words(ATTRS)
    assert "at least 99.9%" in guarantee_words(ATTRS)
    nine = guarantee_words({**ATTRS, "tau": 0.9, "p_del": 0.95})
    assert "any 9 insertions, deletions or substitutions" in nine
    zero = guarantee_words({**ATTRS, "tau": 0.7, "p_del": 0.6})
    assert "radius is r = 0: no edit" in zero and "insertion" not in zero
    assert tag_words("p0.95_n0100_n1000_s0/t0.9_a0.001_bonferroni") == "tau 0.9, p_del 0.95, r = 9"
    assert tag_words("p0.6_n020_n100_s0/t0.7_a0.05_holm") == "tau 0.7, p_del 0.6, r = 0"
    assert tag_words("not a tag") == "not a tag"


def test_markdown_tables_become_html_with_their_caption_and_alignment():
    text = "Table: Peak cACC <x>\n\n| Dataset | Δ cACC |\n|:---|---:|\n| relevance / id | +1.5 ** |\n"
    out = markdown_table_html(text)
    assert "<caption>Peak cACC &lt;x&gt;</caption>" in out
    assert "<th>Dataset</th><th class=num>Δ cACC</th>" in out
    assert "<td>relevance / id</td><td class=num>+1.5 **</td>" in out


def _circuit(decision, baseline, counts, k_grid=(0.25, 0.5)):
    votes = Votes(k_grid=np.asarray(k_grid), baseline=np.asarray(baseline, bool), selection_counts=np.zeros_like(counts),
                  certification_counts=np.asarray(counts, np.int32), groups=np.array([0, 0, 1, 1, 1]), attrs={"n": 100})
    return votes, Certificates(k_grid=np.asarray(k_grid), decision=np.asarray(decision, np.int8),
                               majority=np.zeros_like(baseline, bool), pvalue=np.zeros(np.shape(decision)))


def test_vision_page_data_codes_every_channel_and_its_votes():
    decision = [[1, -1, -1, 0, 1], [1, 1, -1, -1, 0]]
    baseline = [[1, 1, 0, 1, 0], [1, 1, 1, 0, 0]]
    counts = [[100, 60, 40, 2, 99], [100, 97, 55, 50, 0]]
    votes, certificates = _circuit(decision, baseline, counts)
    data = vision_circuit_data(["layer1.0", "layer1.1", "layer2.0", "layer2.1", "layer2.2"], votes.groups, votes, certificates)
    # in; abstained within the baseline; abstained outside it; out (whatever the baseline says); in
    assert [k["cat"] for k in data["k"]] == ["IAXOI", "IIAXO"]
    assert [k["base"] for k in data["k"]] == ["11010", "11100"]
    decoded = np.frombuffer(base64.b64decode(data["k"][1]["votes"]), "<u2")
    assert decoded.tolist() == [100, 97, 55, 50, 0]
    assert data["layers"] == [{"name": "layer1", "start": 0, "size": 2}, {"name": "layer2", "start": 2, "size": 3}]
    assert data["names"] == ["0", "1", "0", "1", "2"] and data["n"] == 100


def test_language_graph_draws_the_circuit_and_counts_its_edges():
    names = ["input->a0.h0<q>", "input->m0", "a0.h0->m0", "a0.h1->logits", "m0->logits", "input->logits"]
    decision = np.array([1, 1, -1, 0, -1, -1])
    baseline = np.array([1, 0, 1, 1, 0, 0], bool)
    votes = np.array([990, 995, 700, 10, 400, 300])
    svg, counts = language_graph_svg(names, decision, baseline, votes, n_layers=1, n_heads=2, max_abstained=1)
    assert counts == {"certified in": 2, "abstained": 3, "certified out": 1, "edges": 6, "in the baseline": 3,
                      "baseline, not certified in": 2, "abstained outside the baseline": 2, "abstained drawn": 1}
    assert sum(counts[key] for key in EDGE_PARTITION) == counts["edges"]  # the partition; the baseline apart
    assert svg.count('class="edge in"') == 2 and svg.count('class="edge base"') == 2
    assert svg.count('class="edge abs"') == 1 and "m0-&gt;logits: abstained outside the baseline, 400" in svg  # most voted
    assert "input-&gt;logits" not in svg  # pruned: not in the circuit, not among the most voted abstained
    with pytest.raises(ValueError, match="not an EAP graph node"):
        node_position("b0", 1, 2, 900, 300)


def test_the_circuit_json_marks_certified_in_edges_in_graph():
    names = ["input->a0.h0<q>", "a0.h0->logits", "input->logits"]
    text = circuit_json(names, np.array([0.5, -0.25, 0.1]), np.array([1, -1, 0]), 0.5, {**ATTRS, "n_layers": 1, "n_heads": 1})
    graph = json.loads(text)
    assert graph["edges"]["input->a0.h0<q>"] == {"score": 0.5, "in_graph": True, "decision": 1}
    assert graph["edges"]["a0.h0->logits"]["in_graph"] is False and graph["edges"]["a0.h0->logits"]["decision"] == -1
    # the reference's Graph.from_json layout: every node a dict with in_graph
    assert graph["nodes"] == {"a0.h0": {"in_graph": True}, "input": {"in_graph": True}, "logits": {"in_graph": False}}
    assert graph["cfg"]["radius"] == 1 and graph["cfg"]["n_layers"] == 1


def test_charts_scale_fractions_to_the_unit_interval_and_other_metrics_to_their_range():
    frac = svg_chart([("certified", np.array([0.1, 0.5]), np.array([0.2, 0.4]))], "id: cACC", "cACC", full=0.9)
    assert ">1</text>" in frac and "full model 0.900" in frac
    diff = svg_chart([("baseline", np.array([0.1, 0.5]), np.array([0.001, 0.003]))], "id: logit", "logit", fraction=False)
    assert ">0.003</text>" in diff and ">0.001</text>" in diff and ">0.75</text>" not in diff


def test_a_page_opens_at_the_held_out_k_then_the_id_peak(tmp_path):
    """The default K of a page: the certified K chosen on held-out data (the fair comparison's choice), else the
    certified curve's ID peak, else the middle of the grid."""
    import pandas as pd

    from certified_circuits.reports.explorer import operating_k, operating_k_name

    grid = np.array([0.1, 0.5, 0.9])
    assert operating_k(tmp_path, None, "relevance", grid) == 0.5
    assert operating_k_name(tmp_path, None, "relevance") == "the middle of the K grid (this run chose no K)"
    pd.DataFrame([{"scorer": "relevance", "eval_set": "context_shift", "criterion": "certified_peak", "k_target": 0.9},
                  {"scorer": "relevance", "eval_set": "id", "criterion": "max_gap", "k_target": 0.9},
                  {"scorer": "relevance", "eval_set": "id", "criterion": "certified_peak", "k_target": 0.25},
                  {"scorer": "rank", "eval_set": "id", "criterion": "certified_peak", "k_target": 0.75}]
                 ).to_csv(tmp_path / "operating_points.csv", index=False)
    assert operating_k(tmp_path, None, "relevance", grid) == 0.25
    assert operating_k_name(tmp_path, None, "relevance") == "the K of the certified curve's peak cACC on id"
    pd.DataFrame([{"scorer": "relevance", "eval_set": "test", "metric": "cacc", "selected_on": "id",
                   "certified_k_target": 0.1},
                  {"scorer": "rank", "eval_set": "test", "metric": "cacc", "selected_on": "id",
                   "certified_k_target": 0.5}]).to_csv(tmp_path / "selected_cacc_raw.csv", index=False)
    assert operating_k(tmp_path, None, "relevance", grid) == 0.1 and operating_k(tmp_path, None, "rank", grid) == 0.5
    # the name the summary and the tables give the same K
    assert operating_k_name(tmp_path, None, "relevance") == "the certified circuit's K chosen by max cACC on id"


# ---------------------------------------------------------------------------------------------- flags (issue 26)


def _warning_boxes(page: Page) -> int:
    return sum(1 for _, attrs in page.tags if "warning" in (dict(attrs).get("class") or "").split())


def _banners(page: Page) -> list[str]:
    return [dict(attrs)["href"] for _, attrs in page.tags if dict(attrs).get("class") == "banner"]


def test_a_healthy_run_shows_no_warning(tmp_path):
    out = build(tmp_path)
    assert all(_warning_boxes(page) == 0 for page in pages(out).values())
    assert 'class="warning"' not in "".join(p.read_text() for p in out.rglob("*.html"))
    assert json.loads((tmp_path / "metrics.json").read_text())["explorer_flags"] == 0


def test_a_circuit_that_certifies_nothing_is_flagged_next_to_its_setting_and_on_the_overview(tmp_path):
    """A certificate that certifies nothing, whose certify stage recorded a plan warning: the overview (high on
    the page) and the class page (right under its setting) show both flags with their fixes; the task page,
    healthy, shows none."""
    from certified_circuits.core.planning import plan
    from certified_circuits.core.setting import Setting

    checked = plan(4, 6, Setting(p_del=0.6, n0=10, n=20, tau=0.95, alpha=0.05))  # the fixture's |D|, U and setting
    warnings = checked.problems()
    assert checked.verdict != "ok" and any("IN cannot be certified" in w for w in warnings)
    attrs = {"tau": 0.95, "radius": 0, "plan_verdict": checked.verdict, "plan_warnings": "\n".join(warnings)}
    out = build(tmp_path, concept="c" + IMG, cert_attrs=attrs, decision=np.array([[-1] * 6, [0, -1, -1, -1, 0, -1]]))
    found = pages(out)
    message, _, fix = next(w for w in warnings if "IN cannot be certified" in w).partition(" Fix: ")
    for role in ("index", "vision"):
        page = found[role]
        assert _warning_boxes(page) == (2 if role == "index" else 1), role  # the overview: one block per kind
        text = " ".join(page.all_text.split())
        assert " ".join(message.split()) in text and " ".join(fix.split()) in text, role  # the planner's warning
        assert "certified-nothing" in text and "no component is certified IN" in text and "lower p_del or tau" in text
        assert "certified-circuits plan --examples 4 --components 6" in text  # the fix's command, as <code>
        assert "c" + IMG in text  # where: the class, shown as text, never markup (the fixture has no images)
        assert "img" not in page.names and not [n for _, attrs in page.tags for n, _ in attrs if n.startswith("on")]
    assert json.loads((tmp_path / "metrics.json").read_text())["explorer_flags"] == len(warnings) + 1
    # the overview and the class page carry one line per kind, each a link to its details on the overview; the
    # healthy task page has no banner: a page's banner lists its own warnings only
    for role in ("index", "vision"):
        up = "" if role == "index" else "../"
        assert _banners(found[role]) == [f"{up}index.html#warn-plan", f"{up}index.html#warn-certified-nothing"], role
    assert _banners(found["language"]) == [] and _warning_boxes(found["language"]) == 0
    # the overview: results first, then the warnings, one collapsed block per kind; the class page: its own
    # warnings, collapsed, right after its setting
    index = (out / "index.html").read_text()
    assert index.index("<section>") < index.index('id="warnings"') < index.index('id="warn-plan"')
    assert "<details" in index[index.index('id="warnings"') - 200:] and " open" not in index
    vision = next(p.read_text() for p in out.glob("*/*.html") if "circuit-data" in p.read_text())
    assert vision.index("class=meta") < vision.index('<details class="warning">') < vision.index("<h2>Circuit per layer")
    # the task page's settings table says which setting has warnings (here: none)
    language = found["language"]
    assert "warnings" in language.all_text and "none" in language.all_text


def test_a_language_setting_with_a_plan_warning_is_flagged_on_its_task_page(tmp_path):
    attrs = {"plan_verdict": "marginal", "plan_warnings": "radius 0: at tau 0.6 and p_del 0.6 a certificate survives "
             "no edit of the dataset (p_del^1 < 1.5 - tau). Fix: raise p_del to >= 0.9 or tau to >= 0.9."}
    out = build(tmp_path, language_cert_attrs=attrs)
    found = pages(out)
    assert _warning_boxes(found["language"]) == 1 and _warning_boxes(found["vision"]) == 0
    text = found["language"].all_text
    assert "plan marginal: radius 0: at tau 0.6" in text and "raise p_del to >= 0.9 or tau to >= 0.9." in text
    assert "plan" in text.split("warnings", 1)[1]  # the settings table names the flag code of the setting
    assert "radius 0: at tau 0.6" in found["index"].all_text


def test_the_overview_lists_each_kind_once_with_every_place_a_click_away():
    from certified_circuits.reports.explorer import overview
    from certified_circuits.reports.flags import Flag

    same = [Flag("plan", f"world / class {i}", "plan marginal: p_empty = 0.1 > 0.05.", "use more examples.")
            for i in range(7)]
    other = Flag("high-fpr", "world / class 0 / eval_set id", "the false-positive rate reaches 1.", "read `balanced`.")
    page = Page(overview([], {}, {}, {}, [], [*same, other]))
    blocks = [dict(attrs)["id"] for tag, attrs in page.tags if tag == "details"]
    assert blocks == ["warn-plan", "warn-high-fpr"]  # most severe first, one block per kind
    items = [tag for tag, _ in page.tags if tag == "li"]
    text = page.all_text
    assert len(items) == 8 and "Warnings: 7 plan, 1 high-fpr" in text  # every place, in the collapsed blocks
    assert "plan (7): world / class 0; world / class 1; world / class 2; and 4 more." in text  # the kind's one line
    assert "world / class 6" in text  # a click away
    assert ("code", []) in page.tags  # a Markdown code span of a fix shown as <code>


# ---------------------------------------------------------------------------------------------- scorer switch (issue 29)


def _build_two_scorers(tmp_path):
    """The escaping test's tiny explorer with a second scorer for its class (``activation``: another circuit,
    which certifies nothing in, and its own curves), given after the main scorer (``relevance``)."""
    import pandas as pd

    from certified_circuits.reports.explorer import Circuit, Experiment, build_explorer
    from certified_circuits.storage.store import write_certificates, write_votes

    from .test_explorer_escaping import K_GRID, SETTING, TEST, _write_circuit

    build(tmp_path)  # writes the h5 files and tables of the one-scorer run
    tables = tmp_path / "tables" / "v"
    main = _write_circuit(tmp_path / "h5" / "v", "vision", "circle",
                          ["layer1.0", "layer1.1", "layer1.2", "layer2.0", "layer2.1", "layer2.2"],
                          np.array([0, 0, 0, 1, 1, 1]), np.array([[1, -1, -1, 0, 1, 0], [1, 1, -1, -1, 0, 0]]),
                          {"experiment": "world", "concept": "circle"})
    folder = tmp_path / "h5" / "activation"
    folder.mkdir()
    baseline = np.array([[0, 0, 0, 1, 1, 1]] * 2, bool)
    counts = np.tile(np.linspace(0, 20, 6).astype(np.int32), (2, 1))
    votes = write_votes(folder / "votes.h5", Votes(k_grid=K_GRID, baseline=baseline, selection_counts=counts,
                                                   certification_counts=counts, groups=np.array([0, 0, 0, 1, 1, 1]),
                                                   attrs={**SETTING, "scorer": "activation", "model": "m"}))
    certificates = write_certificates(folder / "certificates.h5", Certificates(
        k_grid=K_GRID, decision=np.array([[0, 0, -1, -1, -1, -1], [0, 0, 0, -1, -1, -1]], np.int8), majority=baseline,
        pvalue=np.zeros((2, 6)), attrs={**SETTING, **TEST, "scorer": "activation", "model": "m", "experiment": "world",
                                        "concept": "circle"}))
    curves = pd.read_csv(tables / "sufficiency.csv")
    other = curves.assign(scorer="activation", accuracy=curves.accuracy / 4)
    pd.concat([curves, other]).to_csv(tables / "sufficiency.csv", index=False)
    circuits = [Circuit("world", "circle", main.attributions, main.votes, main.certificates),
                Circuit("world", "circle", main.attributions, votes, certificates),
                Circuit("tiny_gpt2", "ioi", *(tmp_path / "h5" / "l" / f for f in
                                               ("attributions.h5", "votes.h5", "certificates.h5")))]
    from certified_circuits.reports.flags import run_flags

    out = tmp_path / "explorer2"
    build_explorer(out, [Experiment("vision", "world", tables), Experiment("language", "tiny_gpt2", tmp_path / "tables" / "l")],
                   circuits, flags=run_flags(certificates=[main.certificates, certificates]))
    return out


def test_a_class_with_two_scorers_has_a_switch_between_their_circuits(tmp_path):
    """Each scorer's circuit (its page data), its certified counts, curves and flags are on the class page, with a
    switch between them; the main scorer's panel is shown first. A one-scorer run has no switch."""
    out = _build_two_scorers(tmp_path)
    text = (out / "world" / "circle.html").read_text()
    page = Page(text)
    buttons = [dict(attrs) for tag, attrs in page.tags if tag == "button"]
    assert [b["data-name"] for b in buttons] == ["relevance", "activation"]
    assert [b["aria-pressed"] for b in buttons] == ["true", "false"]
    panels = [dict(attrs) for tag, attrs in page.tags if tag == "div" and "panel" in (dict(attrs).get("class") or "")]
    assert [("hidden" in p) for p in panels] == [False, True]
    main, other = json.loads(page.scripts["circuit-data"]), json.loads(page.scripts["circuit-data-1"])
    assert [k["cat"] for k in main["k"]] == ["IAAOIO", "IIAXOO"]
    assert [k["cat"] for k in other["k"]] == ["OOXAAA", "OOOAAA"]
    # the scorer table: certified in, abstained and out of each scorer at its K (the middle of the grid: 50%)
    assert "<td>relevance</td><td>50</td><td class=num>2</td><td class=num>2</td><td class=num>2</td>" in text
    assert "<td>activation</td><td>50</td><td class=num>0</td><td class=num>3</td><td class=num>3</td>" in text
    # curves of each scorer (its own sufficiency rows); the flags of each: activation certifies nothing in, the
    # scorer table says whose it is, and the page's warnings (collapsed) say where
    assert text.count('<svg class="chart"') == 2
    assert "world / concept circle / scorer activation / tau 0.6" in page.all_text and "certified-nothing" in page.all_text
    assert "<td class=num>3</td><td>certified-nothing</td>" in text and "<td class=num>2</td><td>none</td>" in text
    assert "scorers relevance, activation (main: relevance)" in page.all_text
    index = (out / "index.html").read_text()
    assert "world / concept circle / scorer activation" in index  # the overview lists the second scorer's flag
    single = build(tmp_path / "single")
    for path in single.rglob("*.html"):
        assert "<button" not in path.read_text() and 'class="switched"' not in path.read_text()


CHROMIUM = __import__("shutil").which("chromium") or __import__("shutil").which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium to run the page's script")
def test_the_switch_shows_the_other_scorers_circuit_in_a_browser(tmp_path):
    """In headless Chromium: the page draws the main scorer's circuit; ``#scorer=activation`` presses the
    activation button (the click handler), which hides the main panel and draws the activation circuit."""
    import re
    import subprocess

    out = _build_two_scorers(tmp_path)
    url = (out / "world" / "circle.html").resolve().as_uri()

    def dom(address):
        done = subprocess.run([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                               "--v=0", "--virtual-time-budget=3000", "--dump-dom", address],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and "Uncaught" not in done.stderr, done.stderr[-2000:]
        assert '<div id="errors" hidden="">' in done.stdout
        return done.stdout

    def drawn(text, panel):
        part = text.split(f'data-panel="{panel}"', 2)[-1].split('class="panel"')[0]
        return re.findall(r'class="c (\w+)"', part)

    first = dom(url)
    # K = 50% (the middle of the grid): relevance IIAXOO, activation OOOAAA
    assert drawn(first, 0) == ["in", "in", "abs", "oth", "out", "out"] and drawn(first, 1) == []
    switched = dom(url + "#scorer=activation")
    assert 'data-panel="0" hidden=""' in switched and 'data-name="activation" aria-pressed="true"' in switched
    assert drawn(switched, 1) == ["out", "out", "out", "abs", "abs", "abs"] and drawn(switched, 0) == []


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium to run the page's script")
def test_the_error_box_lists_each_missing_image_on_its_own_line(tmp_path):
    """The explorer's script (explorer_static/explorer.js, as build_explorer writes it) reports every image that
    failed to load in the page's error box, one per line: a newline in the script, not a backslash and an n."""
    import subprocess

    from certified_circuits.reports.explorer import JS

    (tmp_path / "explorer.js").write_text(JS)
    (tmp_path / "page.html").write_text('<!doctype html><html><body><div id="errors" hidden></div>'
                                        '<img src="first.png"><img src="second.png">'
                                        '<script src="explorer.js"></script></body></html>')
    done = subprocess.run([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=3000",
                           "--dump-dom", (tmp_path / "page.html").resolve().as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Missing image: first.png\nMissing image: second.png\n</div>" in done.stdout


def test_a_task_with_two_methods_has_a_switch_and_a_circuit_json_for_each(tmp_path):
    """A language task whose circuits come from two attribution methods (two score matrices of one attribution
    file): one panel each, with its own graph, settings table and circuit JSON; the first is shown."""
    from certified_circuits.reports.explorer import Circuit, Experiment, build_explorer
    from certified_circuits.storage.store import write_attributions, write_certificates, write_votes

    from .test_explorer_escaping import EDGES, K_GRID, SETTING, TEST

    tables = tmp_path / "tables"
    tables.mkdir()
    rng = np.random.default_rng(0)
    attributions = write_attributions(
        tmp_path / "attributions.h5", {m: rng.normal(size=(4, 6)) for m in ("eap_ig", "grad_x_act")}, np.zeros(6, int),
        EDGES, [f"e{i}" for i in range(4)], {"model": "m", "concept": "ioi", "n_layers": 1, "n_heads": 2, "d_model": 8},
        rankings={"eap_ig": "absolute", "grad_x_act": "absolute"})
    circuits = []
    for method, decision in (("eap_ig", [1, 1, -1, 0, -1, -1]), ("grad_x_act", [0, 0, 1, -1, -1, 0])):
        counts = np.tile(np.arange(6, dtype=np.int32), (2, 1))
        baseline = np.zeros((2, 6), bool)
        votes = write_votes(tmp_path / f"{method}_votes.h5", Votes(
            k_grid=K_GRID, baseline=baseline, selection_counts=counts, certification_counts=counts,
            groups=np.zeros(6, np.int32), attrs={**SETTING, "scorer": method, "model": "m"}))
        certificates = write_certificates(tmp_path / f"{method}_certificates.h5", Certificates(
            k_grid=K_GRID, decision=np.array([decision] * 2, np.int8), majority=baseline, pvalue=np.zeros((2, 6)),
            attrs={**SETTING, **TEST, "scorer": method, "model": "m"}))
        circuits.append(Circuit("tiny_gpt2", "ioi", attributions, votes, certificates))
    out = tmp_path / "explorer"
    build_explorer(out, [Experiment("language", "tiny_gpt2", tables)], circuits)
    page = Page((out / "tiny_gpt2" / "ioi.html").read_text())
    assert [dict(a)["data-name"] for t, a in page.tags if t == "button"] == ["eap_ig", "grad_x_act"]
    assert page.names.count("svg") == 2 and "methods eap_ig, grad_x_act (main: eap_ig)" in page.all_text
    links = [dict(a)["href"] for t, a in page.tags if t == "a" and "download" in dict(a)]
    assert links == ["ioi_circuit.json", "ioi_grad_x_act_circuit.json"]
    main, other = (json.loads((out / "tiny_gpt2" / link).read_text()) for link in links)
    assert main["edges"]["input->a0.h0<q>"]["in_graph"] and not other["edges"]["input->a0.h0<q>"]["in_graph"]
    assert other["edges"]["a0.h0->m0"]["in_graph"]


def test_the_overview_line_gives_each_methods_recovery_of_the_known_circuit(tmp_path) -> None:
    import pandas as pd

    from certified_circuits.reports.explorer import recovery_html

    assert recovery_html(tmp_path) == ""  # no ground truth, no line
    (tmp_path / "testbed").mkdir()
    rows = [dict(concept=c, scorer=s, method=m, auroc=a, precision=p, recall=0.5, at_selected_setting=True, k_target=k)
            for c in ("a", "b") for s in ("relevance", "activation")
            for m, a, p, k in (("baseline", 0.9 if c == "a" else 0.7, 0.6, 0.2),
                               ("certified_in_abstain", 0.85, 1.0, 0.1 if c == "a" else 0.4))]
    pd.DataFrame(rows).to_csv(tmp_path / "testbed" / "recovery_auroc.csv", index=False)
    line = recovery_html(tmp_path)
    assert "(relevance)" in line and "baseline AUROC 0.800, precision 0.60 / recall 0.50 at K 20%" in line
    # the method's name in words, and each concept's held-out K where they differ
    assert "certified in + abstain AUROC 0.850, precision 1.00 / recall 0.50 at K 10%, 40%" in line
    # a selected K of 100% is the whole model: its precision (the truth's share) and recall (1) are not shown
    pd.DataFrame([{**r, "k_target": 1.0, "precision": 0.2, "recall": 1.0} if r["method"] == "baseline" else r
                  for r in rows]).to_csv(tmp_path / "testbed" / "recovery_auroc.csv", index=False)
    line = recovery_html(tmp_path)
    assert "baseline AUROC 0.800 (its selected K is 100%, the whole model: no comparison there)" in line
    assert "precision 0.20" not in line
