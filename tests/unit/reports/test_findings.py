"""The run's headline (reports/findings.py): one table per experiment at the truth's size, at most two lines, its
cells the tables' numbers; one function, rendered three ways (summary.md, the explorer, the end of the run) to the
same cells."""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from certified_circuits.reports import flags as fl
from certified_circuits.reports.findings import (
    END_LINES,
    HEADLINE_COLUMNS,
    MAX_HEADLINE_LINES,
    NO_HEADLINE,
    Column,
    end_message,
    headline,
    headline_markdown,
    headline_section,
    headline_text,
    read_headline,
    truth_finding,
    write_headline,
)


def _truth(tmp_path: Path, experiment: str = "world", passed: tuple[bool, bool] = (True, False)) -> Path:
    head = {"metric": "class accuracy", "chance": 0.1}
    doc = {
        "format": "certified-circuits/ground-truth/1",
        "experiment": experiment,
        "kind": "vision",
        "n_components": 150,
        "concepts": {
            "a": {
                "components": [f"layer1.{i}" for i in range(30)],
                "verification": {
                    "passed": passed[0],
                    "headline": {**head, "full": 0.9, "circuit_only": 0.8, "circuit_removed": 0.0},
                },
            },
            "b": {
                "components": [f"layer2.{i}" for i in range(34)],
                "verification": {
                    "passed": passed[1],
                    "headline": {**head, "full": 0.7, "circuit_only": 0.6, "circuit_removed": 0.2},
                },
            },
        },
    }
    path = tmp_path / f"{experiment}.json"
    path.write_text(json.dumps(doc))
    return path


def test_the_truth_line_counts_passed_concepts_and_averages_the_check(tmp_path: Path) -> None:
    line = truth_finding(_truth(tmp_path))
    assert "32 of 150 components per concept" in line and "1 of 2 concepts" in line
    assert "class accuracy 0.80 with the full model, 0.70 with the true circuit alone, 0.10 with it removed" in line
    assert "(chance 0.10)" in line


def test_a_selected_k_is_named_by_its_metric_and_its_held_out_set() -> None:
    from certified_circuits.reports.tables import selection_name

    assert selection_name({"metric": "balanced_accuracy", "selected_on": "id_test", "ablation": "mean"}) == (
        "chosen by max balanced accuracy (mean ablation) on id_test")
    assert selection_name(pd.Series({"metric": "cacc", "selected_on": "val", "ablation": "zero"})) == (
        "chosen by max cACC on val")
    assert selection_name({"selected_on": "val"}) == "chosen on val"
    assert selection_name({"metric": "cacc", "selected_on": float("nan")}) == "selected"


SETTINGS = ("p0.95_n0100_n1000_s0/t0.9_a0.001_bonferroni", "p0.9_n0100_n1000_s0/t0.9_a0.001_bonferroni")


def _truth_size(folder: Path, experiment: str = "tiny", scorer: str = "eap_ig") -> Path:
    """Two concepts, two settings: certified IN (2 of 4 true) beside the baseline's top 2 (1 of 2 true); majority
    vote perfect, and so the baseline's circuit of its size."""
    rows = []
    for concept in ("a", "b"):
        for setting in SETTINGS:
            for method, size, precision, recall, bp, br in (
                    ("baseline", 4, 0.75, 0.75, 0.75, 0.75), ("certified_in", 2, 1.0, 0.5, 0.5, 0.25),
                    ("certified_in_abstain", 5, 0.8, 1.0, 0.6, 0.75), ("majority", 4, 1.0, 1.0, 1.0, 1.0)):
                rows.append(dict(experiment=experiment, concept=concept, scorer=scorer, setting=setting,
                                 method=method, size=size, precision=precision, recall=recall, baseline_precision=bp,
                                 baseline_recall=br, n_true=4, n_grey=0, n_components=20, resamples=20,
                                 baseline_jaccard_mean=0.7, baseline_change_share=0.05, certified_change_share=0.02,
                                 certified_flip_share=0.0, can_certify_in=True))
    path = folder / experiment / "testbed" / "truth_size.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_the_headline_puts_each_circuit_beside_the_baseline_of_its_size(tmp_path: Path) -> None:
    found = headline([_truth_size(tmp_path)])
    (table,) = found.tables
    assert table.title == ("tiny at the truth's size, |T| = 4 of 20 components (eap_ig; mean over 2 concepts; "
                           "`tables/tiny/testbed/truth_size.csv`)")
    assert table.header == tuple(c.header for c in HEADLINE_COLUMNS)
    assert table.rows == (
        ("baseline (top |T|)", "--", "4.0", "0.75", "0.75", "--", "--", "--"),
        ("certified IN", "p_del 0.95, tau 0.9", "2.0", "1.00", "0.50", "0.50 / 0.25", "n/a", "n/a"),
        ("certified IN", "p_del 0.9, tau 0.9", "2.0", "1.00", "0.50", "0.50 / 0.25", "n/a", "n/a"),
        ("certified IN + abstain", "p_del 0.95, tau 0.9", "5.0", "0.80", "1.00", "0.60 / 0.75", "n/a", "n/a"),
        ("certified IN + abstain", "p_del 0.9, tau 0.9", "5.0", "0.80", "1.00", "0.60 / 0.75", "n/a", "n/a"),
    )  # majority vote: 1.00 beside the baseline's 1.00, nothing told apart: left out, and said so; no equal-footing
    # table beside truth_size.csv (an older run): its cells n/a
    assert found.lines == (
        "Each circuit sits beside the baseline's circuit of its own size, so none wins by being smaller.",
        "Left out, precision 1.00 as is the baseline's circuit of that size (nothing told apart): tiny majority vote "
        "(2 settings).")


def test_the_headline_names_the_causal_checks_in_at_most_two_lines(tmp_path: Path) -> None:
    world = _truth_size(tmp_path, "world", "relevance")
    frame = pd.read_csv(world)
    pd.concat([frame, frame.assign(scorer="activation", precision=0.1)]).to_csv(world, index=False)
    found = headline([world, _truth_size(tmp_path)], [_truth(tmp_path), _truth(tmp_path, "tiny", (True, True))],
                     main_scorer="relevance")
    assert [t.experiment for t in found.tables] == ["world", "tiny"]
    assert "(relevance; mean over 2 concepts" in found.tables[0].title  # the main scorer's rows only
    assert found.tables[0].rows[1][3] == "1.00"
    assert len(found.lines) <= MAX_HEADLINE_LINES
    assert found.lines[0].endswith("the truths passed their causal check (`ground_truth/`): world for 1 of 2 "
                                   "concepts, tiny for 2 of 2 concepts.")
    # an experiment with a ground truth and no table at the truth's size (testbed.resamples 0): its truth line
    only = headline([], [_truth(tmp_path)])
    assert only.tables == () and only.lines[0].startswith("world: the true circuits (32 of 150 components")
    assert not headline([], []) and headline_section(NO_HEADLINE) == []


def test_a_comparators_column_is_added_without_touching_the_renderers(tmp_path: Path) -> None:
    """The extension point (analysis/equal_footing.py's comparators): a Column whose cell reads its own columns of
    the rows; a table without them shows n/a; every rendering shows the new column."""
    path = _truth_size(tmp_path)
    frame = pd.read_csv(path)
    frame["matched_cut_precision"] = 0.4
    frame.to_csv(path, index=False)
    extra = Column("matched cut: precision", lambda part: f"{part['matched_cut_precision'].mean():.2f}"
                   if "matched_cut_precision" in part else "n/a")
    found = headline([path], columns=(*HEADLINE_COLUMNS, extra))
    assert found.tables[0].header[-1] == "matched cut: precision" and found.tables[0].rows[1][-1] == "0.40"
    assert "| matched cut: precision |" in headline_markdown(found)[2]
    assert headline_text(found)[1].endswith("matched cut: precision")


def _equal_tables(folder: Path, experiment: str = "tiny", scorer: str = "eap_ig") -> list[Path]:
    """Per concept, the stability stage's equal-footing table (analysis/equal_footing.py's columns): the certificate's
    labels change 0.1 + 0.1 * concept (+ 0.2 at the second setting), the matched cut's 0.3, the interval's 0.4,
    consensus 0.5; flips 0.001 * (1 + concept) and 0.002; the two-valued rows with other numbers (never shown)."""
    from certified_circuits.analysis.equal_footing import EQUAL_FOOTING_COLUMNS, THREE_VALUED, TWO_VALUED

    paths = []
    for index, concept in enumerate(("a", "b")):
        rows = []
        for shift, setting in zip((0.0, 0.2), SETTINGS):
            changes = dict(zip(THREE_VALUED, (0.1 + 0.1 * index + shift, 0.3, 0.4, 0.5)))
            flips = dict(zip(THREE_VALUED, (0.001 * (1 + index), 0.002, 0.003, 0.004)))
            for method in THREE_VALUED + TWO_VALUED:
                row = dict.fromkeys(EQUAL_FOOTING_COLUMNS, float("nan"))
                three = method in THREE_VALUED
                row.update(method=method, values=3 if three else 2, change_share_live=changes.get(method, 0.9),
                           change_share_all=0.01, flip_share_live=flips.get(method, float("nan")), size_d=2,
                           n_live=18, n_components=20, n_true=4, n_grey=0, resamples=20, inner_resamples=20,
                           population_samples=0, can_certify_in=True, certified_in_any=True)
                rows.append(dict(experiment=experiment, concept=concept, scorer=scorer, setting=setting, **row))
        path = folder / "per_concept" / f"{concept}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).to_csv(path, index=False)
        paths.append(path)
    return paths


def test_the_headline_shows_the_equal_footing_read_from_its_table(tmp_path: Path) -> None:
    """Issue 59: report-stability's truth_size_equal.csv beside truth_size.csv (its writer and its one reader,
    reports/testbed.py); on the certificate's rows the labels changed (live) of the certificate, the matched cut, the
    interval and consensus and the flips of the first two, mean over concepts, per setting; nothing on the others."""
    from certified_circuits.reports.testbed import truth_size_equal_report
    from certified_circuits.reports.words import FOOTING_WORDS

    path = _truth_size(tmp_path)
    truth_size_equal_report(_equal_tables(tmp_path), path.parent)
    assert (path.parent / "truth_size_equal.csv").is_file() and (path.parent / "truth_size_equal_summary.md").is_file()
    (table,) = headline([path]).tables
    assert table.header[-2:] == ("labels changed (live): certified / matched cut / interval / consensus",
                                 "in<->out flips (live): certified / matched cut")
    assert all(FOOTING_WORDS[m] in table.header[-2] for m in ("matched_cut", "interval", "consensus"))
    assert table.title.endswith("`tables/tiny/testbed/truth_size.csv`, `truth_size_equal.csv`)")
    cells = {(row[0], row[1]): row[-2:] for row in table.rows}
    assert cells[("baseline (top |T|)", "--")] == ("--", "--")
    for circuit in ("certified IN", "certified IN + abstain"):  # both read off the certificate's labels
        assert cells[(circuit, "p_del 0.95, tau 0.9")] == ("0.15 / 0.30 / 0.40 / 0.50", "0.002 / 0.002")
        assert cells[(circuit, "p_del 0.9, tau 0.9")] == ("0.35 / 0.30 / 0.40 / 0.50", "0.002 / 0.002")
    found = headline([path])
    assert "the certificate's labels beside the matched cut, which abstains exactly as much" in found.lines[0]
    assert "when a certificate is worth its cost: docs/fair_testbed.md" in found.lines[0]
    assert len(found.lines) <= MAX_HEADLINE_LINES
    assert "| 0.15 / 0.30 / 0.40 / 0.50 | 0.002 / 0.002 |" in "\n".join(headline_markdown(found))
    # the table's one reader refuses a broken file, naming it
    equal = path.parent / "truth_size_equal.csv"
    frame = pd.read_csv(equal, dtype={"change_share_live": str})
    frame.loc[0, "change_share_live"] = "lots"
    frame.to_csv(equal, index=False)
    with pytest.raises(ValueError, match="truth_size_equal.csv .*'change_share_live'"):
        headline([path])


def test_findings_json_round_trips_and_is_read_strictly(tmp_path: Path) -> None:
    found = headline([_truth_size(tmp_path)])
    path = write_headline(tmp_path / "findings.json", found)
    assert read_headline(path) == found
    doc = json.loads(path.read_text())
    doc["tables"][0]["rows"][0] = doc["tables"][0]["rows"][0][:-1]  # one cell short
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"tables\[0\] is not a headline table .* one cell per header"):
        read_headline(path)
    (tmp_path / "warnings.json").write_text(json.dumps({"format": fl.FLAGS_FORMAT, "counts": {}, "flags": []}))
    with pytest.raises(ValueError, match="findings.json that report-summary wrote"):
        read_headline(tmp_path / "warnings.json")


class _Cells(HTMLParser):
    """The rows of every <table class="headline"> of a page, as lists of cell texts (header row first)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.inside = False
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table" and dict(attrs).get("class") == "headline":
            self.inside, _ = True, self.tables.append([])
        elif self.inside and tag == "tr":
            self.tables[-1].append([])
        elif self.inside and tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag == "table":
            self.inside = False
        elif self.inside and tag in ("td", "th") and self.cell is not None:
            self.tables[-1][-1].append("".join(self.cell))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def test_the_summary_the_explorer_and_the_terminal_show_the_same_table(tmp_path: Path) -> None:
    """One function's output (headline), three renderings: summary.md's first screen, the explorer's first screen
    (from findings.json, as the workflow passes it) and the end of the run (from findings.json): the same cells, row
    by row, and the same lines."""
    from certified_circuits.reports.explorer import lead_html
    from certified_circuits.reports.summary import summary_lines

    found = headline([_truth_size(tmp_path, "world", "relevance"), _truth_size(tmp_path)], [_truth(tmp_path)],
                     main_scorer="relevance")
    expected = [[list(t.header), *map(list, t.rows)] for t in found.tables]
    results = tmp_path / "results"
    results.mkdir()
    write_headline(results / "findings.json", found)
    shown = read_headline(results / "findings.json")
    # summary.md: its first screen is the headline (up to the next section), each table under its bold title
    summary = summary_lines([], [], shown)
    first = summary[summary.index("## What this run shows") + 1:]
    first = first[:next((i for i, line in enumerate(first) if line.startswith("## ")), len(first))]
    markdown: list[list[list[str]]] = []
    for line in first:
        if line.startswith("**"):
            markdown.append([])
        elif line.startswith("|") and not line.startswith("|---"):
            markdown[-1].append([c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]])
    assert markdown == expected
    assert [line[2:] for line in first if line.startswith("- ")] == list(found.lines)
    # the explorer's first screen
    parser = _Cells()
    lead = lead_html(shown, None)
    parser.feed(lead)
    assert parser.tables == expected
    paragraphs = re.findall(r"<p class=headline-line>(.*?)</p>", lead)
    assert [html.unescape(re.sub(r"</?code>", "`", p)) for p in paragraphs] == list(found.lines)
    # the end of the run in the terminal
    fl.write_flags(results / "warnings.json", [fl.Flag("saturated", "world / scorer relevance", "m.", "f.",
                                                       experiment="world")])
    lines = end_message(results)
    assert len(lines) <= END_LINES and lines[-1].startswith("Warnings: 1 saturated")
    text = lines[lines.index("What this run shows:") + 1:-1]
    cells, at = [], 0
    for table in found.tables:
        assert text[at] == table.title.replace("`", "")
        grid = [text[at + 1], *text[at + 3:at + 3 + len(table.rows)]]
        assert set(text[at + 2]) <= {"-", " "}  # the rule under the header
        cells.append([re.split(r"\s{2,}", row.strip()) for row in grid])
        at += 3 + len(table.rows)
    assert cells == expected
    assert text[at:] == [line.replace("`", "") for line in found.lines]


def test_the_end_of_the_run_without_a_headline_says_where_the_results_are(tmp_path: Path) -> None:
    results = tmp_path / "results"
    (results / "explorer").mkdir(parents=True)
    (results / "explorer" / "index.html").write_text("<html></html>")
    (results / "summary.md").write_text("# s\n")
    fl.write_flags(results / "warnings.json", [fl.Flag("plan", "a", "m.", "f."), fl.Flag("plan", "b", "m.", "f."),
                                               fl.Flag("high-fpr", "c", "m.", "f.")])
    lines = end_message(results)
    assert f"Summary:  {results / 'summary.md'}" in lines and "What this run shows:" not in lines
    assert f"Explorer: {results / 'explorer' / 'index.html'} (open it in a browser)" in lines
    assert lines[-1].startswith("Warnings: 2 plan, 1 high-fpr")
    empty = end_message(tmp_path / "nothing")  # a run that wrote nothing says so, and still fits
    assert "(not written by this run)" in empty[2] and len(empty) <= END_LINES


def test_the_end_of_the_run_shows_whole_tables_only(tmp_path: Path) -> None:
    """A headline longer than the end's 25 lines keeps the tables that fit, whole, and names where the rest is."""
    results = tmp_path / "results"
    results.mkdir()
    found = headline([_truth_size(tmp_path, name) for name in ("a", "b", "c", "d")])
    write_headline(results / "findings.json", found)
    lines = end_message(results)
    assert len(lines) <= END_LINES and lines[-1] == "... the rest of the headline: summary.md"
    shown = lines[lines.index("What this run shows:") + 1:-1]
    assert shown == headline_text(type(found)(found.tables[:len(shown) // 8]))  # 8 lines a table: title, 2, 5 rows
    assert len(shown) % 8 == 0 and shown
