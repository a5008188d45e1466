"""Markup injection in the explorer (issue 28): names come from files any tool may write (component, layer,
edge, class, task and experiment names), so a hostile name must be shown as text, never run.

Every page of a tiny explorer built with one hostile name is parsed with :class:`html.parser.HTMLParser` and
compared with the same explorer built with clean names: the same elements in the same order (so the same
number of ``<script>`` elements, and no injected ``<img onerror>``), no event-handler attribute, the hostile
name shown as text, and the embedded page data giving back the hostile name exactly."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pandas as pd
import pytest

from certified_circuits.core.contracts import Certificates, Votes
from certified_circuits.reports.findings import NO_HEADLINE, Headline
from certified_circuits.reports.flags import run_flags
from certified_circuits.reports.explorer import (Circuit, Experiment, build_explorer, file_stem, figure_html,
                                                 frame_html, json_script, language_graph_svg, markdown_table_html,
                                                 svg_chart)
from certified_circuits.storage.store import write_attributions, write_certificates, write_votes

SCRIPT = "</script><script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
HOSTILE = f"x{SCRIPT}{IMG}<!--&amp;\u2028"
K_GRID = np.array([0.25, 0.5])
SETTING = {"p_del": 0.6, "n0": 10, "n": 20, "seed": 0, "n_examples": 4}
TEST = {"tau": 0.6, "alpha": 0.05, "correction": "bonferroni", "radius": 1}
EDGES = ["input->a0.h0<q>", "input->m0", "a0.h0->m0", "a0.h1->logits", "m0->logits", "input->logits"]


class Page(HTMLParser):
    """The start tags (with their attributes), the text and the ``<script>`` blocks' text of a page."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []
        self.scripts: dict[str, str] = {}
        self._script: str | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))
        if tag == "script":
            self._script = dict(attrs).get("id") or dict(attrs).get("src") or ""
            self.scripts[self._script] = ""

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, attrs))

    def handle_endtag(self, tag):
        if tag == "script":
            self._script = None

    def handle_data(self, data):
        if self._script is not None:
            self.scripts[self._script] += data
        else:
            self.text.append(data)

    @property
    def names(self) -> list[str]:
        return [tag for tag, _ in self.tags]

    @property
    def all_text(self) -> str:
        return "".join(self.text)

    def attribute_values(self) -> list[str]:
        return [value or "" for _, attrs in self.tags for _, value in attrs]


def _write_circuit(folder: Path, kind: str, concept: str, names: list[str], groups: np.ndarray,
                   decision: np.ndarray, attrs: dict | None = None) -> Circuit:
    """One concept's attributions, votes and certificates files (decision: [nK, U])."""
    folder.mkdir(parents=True, exist_ok=True)
    n_components = len(names)
    scorer = "relevance" if kind == "vision" else "eap_ig"
    model = {"n_layers": 1, "n_heads": 2, "d_model": 8} if kind == "language" else {}
    rng = np.random.default_rng(0)
    attributions = write_attributions(
        folder / "attributions.h5", {scorer: rng.normal(size=(4, n_components))}, groups, names,
        [f"e{i}" for i in range(4)], {"model": "m", "concept": concept, **model},
        rankings={scorer: "signed" if kind == "vision" else "absolute"})
    baseline = np.zeros((len(K_GRID), n_components), bool)
    baseline[:, : n_components // 2] = True
    counts = np.tile(np.linspace(20, 0, n_components).astype(np.int32), (len(K_GRID), 1))
    votes = write_votes(folder / "votes.h5", Votes(
        k_grid=K_GRID, baseline=baseline, selection_counts=counts, certification_counts=counts, groups=groups,
        attrs={**SETTING, "scorer": scorer, "model": "m"}))
    certificates = write_certificates(folder / "certificates.h5", Certificates(
        k_grid=K_GRID, decision=np.asarray(decision, np.int8), majority=baseline, pvalue=np.zeros(decision.shape),
        attrs={**SETTING, **TEST, "scorer": scorer, "model": "m", **(attrs or {})}))
    return Circuit("", concept, attributions, votes, certificates)


def build(tmp_path: Path, *, concept="circle", layer="layer1", component="0", edge=None, task="ioi",
          vision="world", language="tiny_gpt2", cert_attrs: dict | None = None, language_cert_attrs: dict | None = None,
          decision: np.ndarray | None = None, tables: dict[str, pd.DataFrame] | None = None,
          ground_truths: tuple[Path, ...] = (), findings: Headline = NO_HEADLINE, flags: list | None = None) -> Path:
    """A tiny explorer: one vision class (6 channels in 2 layers) and one language task (6 edges of a 1-layer,
    2-head graph), with the names given (and the ground truths, headline and flags given to build_explorer;
    flags default to the run's list of the circuits); returns its folder."""
    vision_tables, language_tables = tmp_path / "tables" / "v", tmp_path / "tables" / "l"
    for folder in (vision_tables, language_tables):
        folder.mkdir(parents=True)
    names = [f"{layer}.{component}", f"{layer}.1", f"{layer}.2", "layer2.0", "layer2.1", "layer2.2"]
    decision = np.array([[1, -1, -1, 0, 1, 0], [1, 1, -1, -1, 0, 0]]) if decision is None else decision
    picture = _write_circuit(tmp_path / "h5" / "v", "vision", concept, names, np.array([0, 0, 0, 1, 1, 1]),
                             decision, {"experiment": vision, "concept": concept, **(cert_attrs or {})})
    edges = EDGES if edge is None else [edge, *EDGES[1:]]
    text = _write_circuit(tmp_path / "h5" / "l", "language", task, edges, np.zeros(len(edges), int),
                          np.array([[1, 1, -1, 0, -1, -1], [1, 1, 1, -1, 0, -1]]),
                          {"experiment": language, "concept": task, **(language_cert_attrs or {})})
    rows = []
    for name, kind in ((concept, "vision"), (task, "language")):
        for method in ("full", "certified", "baseline"):
            for k in K_GRID:
                rows.append({"concept": name, "eval_set": f"id{IMG}" if name == HOSTILE else "id", "method": method,
                             "k_effective": k, "k_target": k,
                             "accuracy": {"full": 0.9, "certified": 0.5 + k, "baseline": 0.4 + k / 2}[method],
                             "scorer": "relevance" if kind == "vision" else "eap_ig"})
    frame = pd.DataFrame(rows)
    frame[frame.scorer == "relevance"].to_csv(vision_tables / "sufficiency.csv", index=False)
    frame[frame.scorer == "eap_ig"].to_csv(language_tables / "sufficiency.csv", index=False)
    (vision_tables / "peaks_cacc.md").write_text(f"Table: Peak cACC of {concept}\n\n| class | Δ |\n|:---|---:|\n"
                                                 f"| {concept} | +1.5 |\n")
    for name, table in (tables or {}).items():
        table.to_csv(vision_tables / name, index=False)
    circuits = [Circuit(vision, picture.concept, picture.attributions, picture.votes, picture.certificates),
                Circuit(language, text.concept, text.attributions, text.votes, text.certificates)]
    out = tmp_path / "explorer"
    if flags is None:  # the run's list, as the workflow makes it
        flags = run_flags(certificates=[picture.certificates, text.certificates])
    metrics = build_explorer(out, [Experiment("vision", vision, vision_tables),
                                   Experiment("language", language, language_tables)], circuits, flags=flags,
                             ground_truths=ground_truths, findings=findings)
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    return out


def pages(out: Path) -> dict[str, Page]:
    """The explorer's pages by role: ``index``, ``vision`` (the class page), ``language`` (the task page)."""
    found = {"index": Page((out / "index.html").read_text())}
    for path in sorted(out.glob("*/*.html")):
        text = path.read_text()
        role = "vision" if 'id="circuit-data"' in text else "language"
        assert role not in found, f"two {role} pages: {path}"
        found[role] = Page(text)
    assert set(found) == {"index", "vision", "language"}
    return found


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> dict[str, Page]:
    return pages(build(tmp_path_factory.mktemp("clean")))


SOURCES = {
    "class": {"concept": HOSTILE},
    "layer": {"layer": HOSTILE},
    "component": {"component": HOSTILE},
    "task": {"task": HOSTILE},
    "vision experiment": {"vision": HOSTILE},
    "language experiment": {"language": HOSTILE},
}


@pytest.mark.parametrize("source", list(SOURCES))
def test_a_hostile_name_is_shown_as_text_and_never_runs(tmp_path, clean, source):
    out = build(tmp_path, **SOURCES[source])
    hostile = pages(out)
    for role, page in hostile.items():
        # the same elements in the same order as the clean build: no injected <script> or <img>, no closed block
        assert page.names.count("script") == clean[role].names.count("script"), role
        assert page.names == clean[role].names, role
        for tag, attrs in page.tags:
            assert not [name for name, _ in attrs if name.startswith("on")], (role, tag, attrs)
        # the data of every embedded block still parses (the page's script reads it)
        for key, block in page.scripts.items():
            if key == "circuit-data":
                json.loads(block)
            else:
                assert block == "", (role, key)
    # the name itself is shown, exactly, where it belongs
    text = {role: page.all_text for role, page in hostile.items()}
    if source == "class":
        assert HOSTILE in text["vision"] and HOSTILE in text["index"]
    if source == "task":
        assert HOSTILE in text["language"] and HOSTILE in text["index"]
    if source.endswith("experiment"):
        role = source.split()[0]
        assert HOSTILE in text[role] and HOSTILE in text["index"]
    if source in ("layer", "component"):
        data = json.loads(hostile["vision"].scripts["circuit-data"])
        shown = [layer["name"] for layer in data["layers"]] if source == "layer" else data["names"]
        assert HOSTILE in shown  # json.loads of the block gives the name back exactly
        assert HOSTILE not in text["vision"]  # only the page's script shows it (as DOM text)
    # every written file stays inside the explorer folder, named without markup
    for path in out.rglob("*"):
        assert path.resolve().is_relative_to(out.resolve())
        assert not set(path.name) & set("<>\"'&/\\"), path.name


def test_a_hostile_edge_name_never_reaches_a_page(tmp_path):
    """An edge name outside the model graph is refused before any page is written (the circuit's Graph JSON
    checks every edge against the graph), and the graph drawing escapes what it shows in its titles."""
    with pytest.raises(ValueError):
        build(tmp_path, edge=f"a0.h0->m0<q>{SCRIPT}")
    assert not (tmp_path / "explorer").exists()
    names = [f"a0.h0->m0{SCRIPT}{IMG}", *EDGES[1:]]  # node_of(m0</script>...) == m0: drawn, with a <title>
    svg, _ = language_graph_svg(names, np.array([1, 1, -1, 0, -1, -1]), np.zeros(6, bool), np.arange(6), 1, 2)
    reference, _ = language_graph_svg(EDGES, np.array([1, 1, -1, 0, -1, -1]), np.zeros(6, bool), np.arange(6), 1, 2)
    drawn = Page(svg)
    assert drawn.names == Page(reference).names and names[0] in drawn.all_text


def test_every_html_piece_escapes_what_it_shows():
    def pieces(name):
        return [
            markdown_table_html(f"Table: {name}\n\n| {name} | b |\n|:---|---:|\n| {name} | 1 |\n"),
            frame_html(pd.DataFrame({name: [name], "n": [1.5]}), name),
            svg_chart([(name, np.array([0.1, 0.5]), np.array([0.2, 0.4]))], name, name, full=0.9),
            figure_html(f"figures/{name}.png", name),
        ]

    for piece, reference in zip(pieces(HOSTILE), pieces("clean")):
        parsed = Page(piece)
        assert parsed.names == Page(reference).names  # no element added, none closed early
        assert not [name for _, attrs in parsed.tags for name, _ in attrs if name.startswith("on")]
        assert HOSTILE.strip() in parsed.all_text + "".join(parsed.attribute_values())  # Markdown cells are stripped
    # an image source stays one attribute and names its own file: '%', '#', '?' and line breaks percent-encoded
    for name in (HOSTILE, "a#b?c%d e", "golden retriever", "café"):
        src = dict(Page(figure_html(f"figures/{name}.png", "x")).tags[1][1])["src"]
        assert unquote(src) == f"figures/{name}.png" and not set(src) & set("#?\u2028"), src
    assert dict(Page(figure_html("figures/café a.png", "x")).tags[1][1])["src"] == "figures/café a.png"


def test_embedded_json_escapes_markup_and_round_trips():
    data = {"names": [HOSTILE, "a&b", "<!--", "\u2029"], "n": 3}
    block = json_script(data, "circuit-data")
    inner = block[block.index(">") + 1 : -len("</script>")]
    assert not set(inner) & set("<>&\u2028\u2029")
    assert json.loads(inner) == data
    parsed = Page(f"<body>{block}</body>")
    assert parsed.names == ["body", "script"] and json.loads(parsed.scripts["circuit-data"]) == data


def test_file_names_of_classes_tasks_and_experiments():
    assert [file_stem(n) for n in ("circle", "golden retriever", "n01440764", "ioi_v2.1", "a+b-c")] == [
        "circle", "golden retriever", "n01440764", "ioi_v2.1", "a+b-c"]
    for name in (HOSTILE, "../up", ".", "..", "a/b", "a\\b", "trailing ", "x?y#z"):
        stem = file_stem(name)
        assert stem and not set(stem) & set("/\\<>\"'& ?#") and stem not in (".", ".."), (name, stem)
    assert file_stem("a/b") != file_stem("a_b") and file_stem("a/b") != file_stem("a:b")

