""" "What this run shows": the run's headline, one owner for the three places that show it (issue 50 and after).

The testbed (docs/embedded_default.md) is where a circuit has a known right answer: the planted class circuits of
the world model and the verified induction circuit of the language model. What a certificate buys is read at the
truth's size, where no selection is involved, so the run's headline is one short table per experiment (per half)
read from ``testbed/truth_size.csv`` (the stability stage's second table, analysis/size_matched.py): the baseline
keeps exactly ``|T|`` components; certified IN, IN + abstain and majority vote each sit beside the baseline's
circuit of their own size, so that no method wins by being smaller. Under the tables, at most
:data:`MAX_HEADLINE_LINES` lines: the truths and their causal checks (``ground_truth/<experiment>.json``), and the
rows left out because they tell nothing apart (a circuit and the baseline's circuit of its size both at precision
1.00).

One function computes it, :func:`headline` (a :class:`Headline`: tables of strings and the lines), and three render
it: :func:`headline_markdown` (the first screen of ``summary.md``), :func:`headline_text` (the end of the run in the
terminal, :func:`end_message`) and :func:`certified_circuits.reports.html.headline_html` (the explorer's first
screen). The ``summary`` rule writes it once, to ``findings.json`` (:func:`write_headline`), beside ``summary.md``;
the explorer and the end of the run read that file (:func:`read_headline`), so the three show the same cells.

Columns are :data:`HEADLINE_COLUMNS`, each a :class:`Column` (a header and the function that writes its cell from
the rows of one circuit): the extension point. A comparator's column (the equal-footing comparators of
analysis/equal_footing.py: e.g. each comparator's precision at the same size) is one more :class:`Column`, passed to
:func:`headline` (``columns=``) or appended to :data:`HEADLINE_COLUMNS`, whose cell reads the comparator's columns of
the rows (``truth_size.csv`` rows; a column the table lacks is shown ``n/a``); the renderers show every column and
need no change.

**The equal footing** (issue 59) is two such columns, read from ``truth_size_equal.csv`` beside ``truth_size.csv``
(analysis/equal_footing.py; joined by concept and setting, :func:`footing_column`): on the certificate's rows, the
share of labels that change between resamples (live components) of the certificate, the matched cut, the bootstrap
interval and consensus, and the in <-> out flips of the first two (``n/a`` for a run without that table).

A number that cannot tell methods apart is not cited as if it meant something: two perfect precisions are left out
(and named), an empty circuit is counted, a truth that failed its check is said to have failed, and every degenerate
result stays in the warning list (:mod:`certified_circuits.reports.flags`). The hypotheses tests are not here: one
run's concepts and settings share a model, so they are not independent pairs; the tests over model seeds are
``experiments/fair_testbed.py``'s (docs/fair_testbed.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from certified_circuits.reports.words import footing_header
from certified_circuits.storage.tables import parse_k_column, read_csv_table

__all__ = [
    "END_LINES",
    "HEADLINE_COLUMNS",
    "HEADLINE_FORMAT",
    "MAX_HEADLINE_LINES",
    "METHOD_WORDS",
    "NO_HEADLINE",
    "Column",
    "Headline",
    "HeadlineTable",
    "end_message",
    "headline",
    "headline_markdown",
    "headline_section",
    "headline_text",
    "read_headline",
    "truth_finding",
    "write_headline",
]

#: at most this many lines of text under the tables (a person reads them at a glance)
MAX_HEADLINE_LINES = 2
#: format of ``findings.json`` (:func:`write_headline`)
HEADLINE_FORMAT = "certified-circuits/findings/1"
#: the recovery methods, in the order the explorer names them, with their words
METHOD_WORDS = {
    "baseline": "baseline",
    "certified_in": "certified in",
    "certified_in_abstain": "certified in + abstain",
}
#: a cell with nothing to show (the baseline beside itself; a column the table lacks is ``n/a``)
NOT_APPLICABLE = "--"


def _num(value: float, digits: int = 2) -> str:
    return "n/a" if value is None or not np.isfinite(value) else f"{value:.{digits}f}"


#: what to do when a table the headline reads is refused
READ_FIX = "rerun the report stage that writes it (make reproduce reruns only what is missing)"


def _read(path: Path, columns: Sequence[str], k_columns: Mapping[str, bool], allow_empty: bool = False) -> pd.DataFrame:
    """A table the headline reads (:func:`~certified_circuits.storage.tables.read_csv_table`: UTF-8 CSV with
    ``columns``, no ragged row; concepts as text), each K column of ``k_columns`` a share in (0, 1]
    (:func:`~certified_circuits.storage.tables.parse_k_column`; ``{column: empty cell allowed}``)."""
    table = read_csv_table(path, str(path), columns, READ_FIX, {"concept": str}, allow_empty=allow_empty)
    for column, allow_missing in k_columns.items():
        table = parse_k_column(table, column, str(path), READ_FIX, allow_missing=allow_missing)
    return table


def truth_finding(path: Path) -> str:
    """One line on an experiment's ground truth: how many concepts passed their causal check, and its numbers (the
    headline's line for an experiment with a ground truth but no table at the truth's size: ``testbed.resamples``
    0).

    Args:
        path: a ground-truth JSON (format ``certified-circuits/ground-truth/1``), read and validated by
            :func:`certified_circuits.analysis.recovery.read_ground_truth`. Its ``verification`` blocks carry
            ``passed`` and, where the stage wrote them, a ``headline`` mapping of the check's numbers
            (``full``, ``circuit_only``, ``circuit_removed``, ``chance``, ``metric``).

    Returns:
        ``"world: the true circuits (22% of 150 components per concept, mean) passed their causal check for 10 of 10
        concepts: ..."``.

    Raises:
        ValueError: the file is not a valid ground truth (the reader's message: the file, the field and the fix).
    """
    from certified_circuits.analysis.recovery import read_ground_truth

    truth = read_ground_truth(path)  # validated: no concept twice, `passed` a JSON boolean
    passed = sum(truth.verified(concept) for concept in truth.concepts)
    sizes = [len(components) for components in truth.concepts.values()]
    n = int(truth.n_components or 0)
    share = f"{np.mean(sizes):.0f} of {n} components" if n else f"{np.mean(sizes):.0f} components"
    line = (
        f"**{truth.experiment}**: the true circuits ({share} per concept, mean) passed their causal "
        f"check for {passed} of {len(truth.concepts)} concepts"
    )
    heads = [checks["headline"] for checks in truth.verification.values() if "headline" in checks]
    if heads:
        metric = heads[0].get("metric", "metric")
        mean = {k: float(np.mean([h[k] for h in heads])) for k in ("full", "circuit_only", "circuit_removed")}
        chance = heads[0].get("chance")
        line += (
            f": {metric} {_num(mean['full'])} with the full model, {_num(mean['circuit_only'])} with the true "
            f"circuit alone, {_num(mean['circuit_removed'])} with it removed"
            + (f" (chance {_num(float(chance))})" if chance is not None else "")
        )
    return line + f" (`{Path(path).name}`)."


# ------------------------------------------------------------------------------ the headline: one owner


#: the truth-size table's rows: method -> words (the headline's first column)
TRUTH_SIZE_WORDS = {"baseline": "baseline (top |T|)", "certified_in": "certified IN",
                    "certified_in_abstain": "certified IN + abstain", "majority": "majority vote"}
TRUTH_SIZE_COLUMNS = ("experiment", "concept", "scorer", "setting", "method", "size", "precision", "recall",
                      "baseline_precision", "baseline_recall", "n_true", "n_grey")  # fmt: skip


def _words_setting(setting: str) -> str:
    """``p0.95_n0100_n1000_s0/t0.9_a0.001_bonferroni`` -> ``p_del 0.95, tau 0.9``."""
    votes, _, decision = str(setting).partition("/")
    p_del = votes.split("_", 1)[0].removeprefix("p")
    tau = decision.split("_", 1)[0].removeprefix("t")
    return f"p_del {p_del}, tau {tau}" if p_del and tau else str(setting)


@dataclass(frozen=True)
class Column:
    """One column of the headline table (:data:`HEADLINE_COLUMNS`, the extension point).

    Attributes:
        header: its header, plain text (each renderer escapes it).
        cell: the cell of one circuit from its rows: the ``truth_size.csv`` rows of one (method, setting) of the
            main scorer, one per concept; it returns plain text (:data:`NOT_APPLICABLE` where nothing applies).
        numeric: right-aligned (a number) or left-aligned (words).
    """

    header: str
    cell: Callable[[pd.DataFrame], str]
    numeric: bool = True


def _mean(part: pd.DataFrame, column: str, digits: int = 2) -> str:
    """The mean of a column over the rows (``n/a`` when the table lacks it or every value is missing)."""
    return _num(float(part[column].mean()), digits) if column in part and part[column].notna().any() else "n/a"


def _precision(part: pd.DataFrame) -> str:
    empty = int(part["precision"].isna().sum())  # an empty circuit's precision is undefined: counted, not averaged
    return _mean(part, "precision") + (f" ({empty} empty)" if empty else "")


def _beside(part: pd.DataFrame) -> str:
    if (part["method"] == "baseline").all():
        return NOT_APPLICABLE
    return f"{_mean(part, 'baseline_precision')} / {_mean(part, 'baseline_recall')}"


#: the equal footing's labellings whose label changes, and whose flips, the headline shows (the certificate first)
FOOTING_CHANGED = ("certified", "matched_cut", "interval", "consensus")
FOOTING_FLIPS = ("certified", "matched_cut")
#: the rows that carry them: the circuits read off the certificate's labels
FOOTING_ROWS = ("certified_in", "certified_in_abstain")


def footing_column(method: str, column: str) -> str:
    """``footing_<method>_<column>``: the equal-footing number (``truth_size_equal.csv``'s ``column`` of its
    ``method`` row) joined onto a truth-size row of the same concept and setting."""
    return f"footing_{method}_{column}"


def _footing(column: str, methods: Sequence[str], digits: int) -> Callable[[pd.DataFrame], str]:
    """Each method's mean over concepts of ``column``, ``" / "`` apart, on :data:`FOOTING_ROWS` (else ``--``)."""

    def cell(part: pd.DataFrame) -> str:
        if not part["method"].isin(FOOTING_ROWS).all():
            return NOT_APPLICABLE
        if footing_column(methods[0], column) not in part:
            return "n/a"  # the run wrote no equal-footing table
        return " / ".join(_mean(part, footing_column(m, column), digits) for m in methods)

    return cell


#: the headline's columns, in order (module docstring: add a comparator's column here or through ``columns=``)
HEADLINE_COLUMNS: tuple[Column, ...] = (
    Column("circuit", lambda part: TRUTH_SIZE_WORDS.get(str(part["method"].iloc[0]), str(part["method"].iloc[0])),
           numeric=False),
    Column("setting", lambda part: NOT_APPLICABLE if (part["method"] == "baseline").all()
           else _words_setting(str(part["setting"].iloc[0])), numeric=False),
    Column("size", lambda part: _mean(part, "size", 1)),
    Column("precision", _precision),
    Column("recall", lambda part: _mean(part, "recall")),
    Column("baseline of that size: precision / recall", _beside),  # the size-matched comparison (issue 50)
    Column(footing_header("labels changed (live)", FOOTING_CHANGED), _footing("change_share_live", FOOTING_CHANGED, 2)),
    Column(footing_header("in<->out flips (live)", FOOTING_FLIPS), _footing("flip_share_live", FOOTING_FLIPS, 3)),
)


@dataclass(frozen=True)
class HeadlineTable:
    """One experiment's table at the truth's size: strings only, the same for every renderer.

    Attributes:
        experiment: its name.
        title: one line above it (experiment, scorer, concepts, the table it is read from).
        header: the column headers (:data:`HEADLINE_COLUMNS`' or the ``columns`` given to :func:`headline`).
        numeric: per column, whether it is right-aligned.
        rows: the cells, one tuple per circuit.
    """

    experiment: str
    title: str
    header: tuple[str, ...]
    numeric: tuple[bool, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Headline:
    """The run's headline (:func:`headline`): one table per experiment with a truth-size table, then at most
    :data:`MAX_HEADLINE_LINES` lines of plain text (Markdown code spans allowed)."""

    tables: tuple[HeadlineTable, ...] = ()
    lines: tuple[str, ...] = field(default_factory=tuple)

    def __bool__(self) -> bool:
        return bool(self.tables or self.lines)


#: the headline of a run without a testbed (frozen: a safe default argument)
NO_HEADLINE = Headline()


def _circuits(rows: pd.DataFrame) -> list[pd.DataFrame]:
    """The rows of each circuit of one experiment, in the table's order: the baseline (at the first setting: it does
    not depend on the setting), then certified IN, IN + abstain and majority vote at each setting."""
    settings = list(dict.fromkeys(rows["setting"]))
    found = []
    for method in TRUTH_SIZE_WORDS:
        for setting in settings if method != "baseline" else settings[:1]:
            part = rows[(rows["method"] == method) & (rows["setting"] == setting)]
            if len(part):
                found.append(part)
    return found


def _blind(part: pd.DataFrame) -> bool:
    """A circuit whose precision and the baseline's at its size are both 1: it tells nothing apart (issue 50)."""
    if (part["method"] == "baseline").all():
        return False
    return bool(np.isclose(part["precision"].mean(), 1.0) and np.isclose(part["baseline_precision"].mean(), 1.0))


def _check_words(truth) -> str:
    """``"world for 10 of 10 concepts"``: how many concepts' truths passed their causal check."""
    passed = sum(truth.verified(c) for c in truth.concepts)
    return f"{truth.experiment} for {passed} of {len(truth.concepts)} concept{'s' if len(truth.concepts) > 1 else ''}"


def headline(truth_sizes: Sequence[Path], ground_truths: Sequence[Path] = (), main_scorer: str | None = None,
             columns: Sequence[Column] = HEADLINE_COLUMNS) -> Headline:
    """THE run's headline (module docstring): per experiment one table at the truth's size, then at most two lines.

    Args:
        truth_sizes: ``testbed/truth_size.csv`` of each experiment (``report-stability --truth-size``).
        ground_truths: the experiments' ground-truth JSONs (their causal checks, named in the first line; an
            experiment with a ground truth and no truth-size table gets its :func:`truth_finding` instead).
        main_scorer: the scorer to report where a table has several (vision's main scorer); default its first.
        columns: the columns (:data:`HEADLINE_COLUMNS`; the extension point).

    Returns:
        The :class:`Headline` (empty without a testbed).

    Raises:
        ValueError: a table or a ground truth is refused by its reader (the file, what is wrong, the fix).
    """
    from certified_circuits.analysis.recovery import read_ground_truth

    from certified_circuits.reports.testbed import TRUTH_SIZE_EQUAL_FILE, join_truth_size_equal

    truths = {t.experiment: (t, Path(p)) for p in ground_truths for t in [read_ground_truth(p)]}
    tables, blind, sizes = [], [], {}  # sizes: the experiments with a table
    footed: list[bool] = []  # per table: whether its run wrote the equal footing
    for path in map(Path, truth_sizes):
        table = _read(path, TRUTH_SIZE_COLUMNS, {}, allow_empty=True)
        if table.empty:
            continue
        table = join_truth_size_equal(table, path, FOOTING_CHANGED, ("change_share_live", "flip_share_live"),
                                      footing_column)
        used = main_scorer if main_scorer is not None and (table["scorer"] == main_scorer).any() else table["scorer"].iloc[0]
        rows = table[table["scorer"] == used]
        experiment, n_concepts = str(rows["experiment"].iloc[0]), rows["concept"].nunique()
        sizes[experiment] = True
        footed.append(footing_column("certified", "change_share_live") in rows)
        cells, hidden = [], {}
        for part in _circuits(rows):
            if _blind(part):  # counted by circuit, over its settings
                name = TRUTH_SIZE_WORDS.get(str(part["method"].iloc[0]), str(part["method"].iloc[0]))
                hidden[name] = hidden.get(name, 0) + 1
                continue
            cells.append(tuple(column.cell(part) for column in columns))
        if hidden:
            blind.append(f"{experiment} " + ", ".join(name + (f" ({n} settings)" if n > 1 else "")
                                                      for name, n in hidden.items()))
        grey = int(rows["n_grey"].max())
        of = f" of {int(rows['n_components'].iloc[0])}" if "n_components" in rows else ""
        title = (f"{experiment} at the truth's size, |T| = {_num(rows['n_true'].mean(), 0)}{of} components"
                 + (f", {grey} grey (neither hit nor miss)" if grey else "")
                 + f" ({used}; mean over {n_concepts} concept{'s' if n_concepts > 1 else ''}; "
                 f"`tables/{experiment}/testbed/{path.name}`"
                 + (f", `{TRUTH_SIZE_EQUAL_FILE}`" if footed[-1] else "") + ")")
        tables.append(HeadlineTable(experiment, title, tuple(c.header for c in columns),
                                    tuple(c.numeric for c in columns), tuple(cells)))
    lines = []
    checked = [_check_words(truth) for name, (truth, _) in truths.items() if name in sizes]
    if tables:
        footing = any(footed)
        lines.append("Each circuit sits beside the baseline's circuit of its own size, so none wins by being smaller"
                     + (", and the certificate's labels beside the matched cut, which abstains exactly as much, and the "
                        "bootstrap interval and consensus, on the same resamples (over 8 model seeds, and when a certificate "
                        "is worth its cost: docs/fair_testbed.md)" if footing else "")
                     + (f"; the truths passed their causal check (`ground_truth/`): {', '.join(checked)}."
                        if checked else "."))
    lines += [truth_finding(path).replace("**", "") for name, (_, path) in truths.items() if name not in sizes]
    if blind:
        lines.append(f"Left out, precision 1.00 as is the baseline's circuit of that size (nothing told apart): "
                     f"{'; '.join(blind)}.")
    return Headline(tuple(tables), tuple(lines[:MAX_HEADLINE_LINES]))


def write_headline(path: str | Path, found: Headline) -> Path:
    """Write ``findings.json`` (atomically): the headline's tables and lines, for the explorer and the end of the
    run (:func:`read_headline`)."""
    from certified_circuits.storage.atomic import write_json

    return write_json(path, {"format": HEADLINE_FORMAT, "tables": [asdict(t) for t in found.tables],
                             "lines": list(found.lines)})


#: what to do when a findings file is refused
HEADLINE_FIX = "pass the findings.json that report-summary wrote (the workflow's rule `summary` does)"


def read_headline(path: str | Path) -> Headline:
    """The headline of ``findings.json`` (:func:`write_headline`), read strictly (its ``format`` is
    :data:`HEADLINE_FORMAT`; every table has strings of one width per row).

    Raises:
        ValueError: naming the file (and the table), what is wrong and the fix.
    """
    from certified_circuits.storage.documents import read_json_document

    doc = read_json_document(path, HEADLINE_FIX, fmt=HEADLINE_FORMAT, what="findings file")
    tables, lines = doc.get("tables"), doc.get("lines")
    if not isinstance(tables, list) or not isinstance(lines, list) or not all(isinstance(x, str) for x in lines):
        raise ValueError(f"{path}: 'tables' must be a list and 'lines' a list of strings; {HEADLINE_FIX}")
    found = []
    for index, table in enumerate(tables):
        try:
            header = tuple(table["header"])
            rows = tuple(tuple(row) for row in table["rows"])
            numeric = tuple(bool(x) for x in table["numeric"])
            text = [table["experiment"], table["title"], *header, *(cell for row in rows for cell in row)]
            if not all(isinstance(x, str) for x in text) or len(numeric) != len(header) \
                    or any(len(row) != len(header) for row in rows):
                raise TypeError
        except (KeyError, TypeError):
            raise ValueError(f"{path}: tables[{index}] is not a headline table (experiment, title, header, numeric, "
                             f"rows of strings, one cell per header); {HEADLINE_FIX}") from None
        found.append(HeadlineTable(table["experiment"], table["title"], header, numeric, rows))
    return Headline(tuple(found), tuple(lines))


# ------------------------------------------------------------------------------ its three renderings


def _markdown_cell(text: str) -> str:
    return text.replace("|", "\\|")


def headline_markdown(found: Headline) -> list[str]:
    """The headline as Markdown lines (``summary.md``'s first screen): per table its title in bold and the table,
    then the lines as list items."""
    out: list[str] = []
    for table in found.tables:
        out += [f"**{_markdown_cell(table.title)}**", "",
                "| " + " | ".join(map(_markdown_cell, table.header)) + " |",
                "|" + "|".join("---:" if n else "---" for n in table.numeric) + "|",
                *("| " + " | ".join(map(_markdown_cell, row)) + " |" for row in table.rows), ""]
    return out + [f"- {line}" for line in found.lines]


def headline_text(found: Headline) -> list[str]:
    """The headline as plain text lines (the end of the run in a terminal): per table its title, then its columns
    padded to their widths (two spaces apart; numbers right-aligned) under a rule, then the lines; code spans
    without their backquotes."""
    out: list[str] = []
    for table in found.tables:
        grid = [table.header, *table.rows]
        widths = [max(len(row[i]) for row in grid) for i in range(len(table.header))]

        def line(row: Sequence[str]) -> str:
            return "  ".join(cell.rjust(w) if n else cell.ljust(w)
                             for cell, w, n in zip(row, widths, table.numeric)).rstrip()

        out += [table.title.replace("`", ""), line(table.header), "  ".join("-" * w for w in widths),
                *(line(row) for row in table.rows)]
    return out + [line.replace("`", "") for line in found.lines]


#: the section's heading and the sentence under it (``summary.md``)
HEADLINE_HEADING = "## What this run shows"
HEADLINE_INTRO = ("The testbed's models have a known right answer (docs/embedded_default.md); each table is read from "
                  "the file named in its title.")


def headline_section(found: Headline) -> list[str]:
    """The summary's opening section (Markdown lines): :data:`HEADLINE_HEADING`, one sentence and
    :func:`headline_markdown`; nothing when the run has no testbed."""
    if not found:
        return []
    return [HEADLINE_HEADING, "", HEADLINE_INTRO, "", *headline_markdown(found), ""]


# ------------------------------------------------------------------------------ the end of the run


#: the most lines the end of a run prints (issue 35)
END_LINES = 25


def end_message(results: str | Path) -> list[str]:
    """What the terminal shows when a run ends (at most :data:`END_LINES` lines): the paths of ``summary.md`` and of
    the explorer, the headline (``findings.json``, :func:`headline_text`: the same table as the summary's first
    screen and the explorer's) and one line of warning counts by kind from the run's one list (``warnings.json``,
    :func:`certified_circuits.reports.flags.counts_line`).

    Args:
        results: the results folder.

    Returns:
        The lines.
    """
    from certified_circuits.reports.flags import counts_line, read_flags

    results = Path(results)
    summary, explorer, warnings = results / "summary.md", results / "explorer" / "index.html", results / "warnings.json"
    found = results / "findings.json"
    lines = ["", "=" * 40 + " certified-circuits: done " + "=" * 40]
    lines.append(f"Summary:  {summary}" + ("" if summary.is_file() else " (not written by this run)"))
    lines.append(f"Explorer: {explorer}" + (" (open it in a browser)" if explorer.is_file() else " (not written by this run)"))
    top = read_headline(found) if found.is_file() else NO_HEADLINE
    tail = ([counts_line(read_flags(warnings)) + " (each with its places and fix: summary.md, the explorer)"]
            if warnings.is_file() else [])
    room = END_LINES - len(lines) - len(tail) - 1
    text = headline_text(top)
    if len(text) > room:  # whole tables only, never a table cut in the middle; the rest is named
        shown = max((n for n in range(len(top.tables) + 1)
                     if len(headline_text(Headline(top.tables[:n]))) < room), default=0)
        text = [*headline_text(Headline(top.tables[:shown])), "... the rest of the headline: summary.md"]
    if top:
        lines += ["What this run shows:", *text]
    return [*lines, *tail][:END_LINES]

