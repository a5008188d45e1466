"""summary.md for a person (reports/summary.py, issue 35): at most 120 lines, the findings first, one compact table
per result family with numbers read from its raw table, then the warnings grouped by kind; and the end of the run
(reports/findings.py end_message: tests/unit/reports/test_findings.py)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from certified_circuits.reports import flags as fl
from certified_circuits.reports.summary import MAX_LINES, summary_lines, summary_report

SETTING = "p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni"


def _world(folder: Path, n_eval_sets: int = 3) -> Path:
    """Raw tables of every result family of a vision experiment, with hand-picked numbers."""
    (folder / "testbed").mkdir(parents=True)
    (folder / "attack").mkdir()
    sets = [f"set{i}" for i in range(n_eval_sets)]
    pd.DataFrame([{"experiment": "world", "scorer": scorer, "eval_set": s, "metric": "cacc", "selected_on": "id",
                   "full": 0.9, "full_fpr": 0.1, "baseline": 0.8125, "baseline_k": 0.25, "baseline_fpr": 0.05,
                   "certified": 0.875, "certified_k": 0.2031, "certified_fpr": 0.025,
                   "pvalue_examples": 0.031} for scorer in ("relevance", "activation") for s in sets]
                 ).to_csv(folder / "selected_cacc_raw.csv", index=False)
    pd.DataFrame([{"scorer": "relevance", "eval_set": s, "setting": SETTING, "method": m, "CPR (higher better)": cpr,
                   "CMD (lower better)": 0.1} for s in sets for m, cpr in (("baseline", 0.75), ("certified", 0.5))]
                 ).to_csv(folder / "faithfulness_mean.csv", index=False)
    pd.DataFrame([{"experiment": "world", "concept": c, "scorer": "relevance", "at_selected_setting": True, "method": m,
                   "auroc": a + (0.1 if c == "b" else 0.0)} for c in ("a", "b") for m, a in (("baseline", 0.6), ("certified_in", 0.5))]
                 ).to_csv(folder / "testbed" / "recovery_auroc.csv", index=False)
    pd.DataFrame([{"experiment": "world", "concept": c, "scorer": "relevance", "resamples": 20, "k_target": k,
                   "baseline_jaccard_mean": 0.9, "baseline_change_share": 0.02, "certified_change_share": 0.04,
                   "certified_flip_share": 0.0} for c in ("a", "b") for k in (0.1, 0.2)]
                 ).to_csv(folder / "testbed" / "stability.csv", index=False)
    pd.DataFrame([{"experiment": "world", "concept": c, "eval_set": "shift", "method": m, "scorer": "relevance",
                   "iou": iou} for c, base in (("a", 0.5), ("b", 0.7)) for m, iou in (("baseline", base), ("certified", base + 0.2))]
                 ).to_csv(folder / "iou.csv", index=False)
    pd.DataFrame([{"seed_a": 0, "seed_b": 1, "iou": 1.0, "concept": "a", "method": "certified", "scorer": "relevance"}]
                 ).to_csv(folder / "seed_stability.csv", index=False)
    pd.DataFrame({"category": ["abstained", "certified_in"], "mean": [0.61, 0.42], "median": [0.66, 0.33],
                  "count": [23, 237]}).to_csv(folder / "spurious_summary.csv", index=False)
    pd.DataFrame({"within_radius": [True, True, False], "baseline_flip_share": [0.01, 0.03, 0.05],
                  "certified_flip_share": [0.0, 0.0, 0.0]}).to_csv(folder / "attack" / "attack_raw.csv", index=False)
    pd.DataFrame({"experiment": "world", "n_examples": [50, 50], "p_del": [0.6, 0.948], "tau": 0.95, "radius": [1, 11],
                  "plan_verdict": ["ok", "marginal"], "k_target": [0.1, 0.05], "cacc": [1.0, 0.0],
                  "abstain_rate": [0.0167, 0.0778]}).to_csv(folder / "radius_sweep_best_k.csv", index=False)
    return folder


SWEEP_WARNING = {"where": "vision world, radius sweep |D| = 50", "key": "vision.radius_sweep (size 50, p_del 0.948)",
                 "experiment": "world", "radius": 11, "n_examples": 50, "p_del": 0.948, "tau": 0.95,
                 "message": "IN cannot be certified: p_empty = 0.0692", "fix": "use at least 57 examples."}


def test_the_summary_has_a_compact_table_per_family_with_the_raw_numbers(tmp_path):
    world = _world(tmp_path / "tables" / "world")
    flags = [fl.Flag("plan", "vision world, radius sweep |D| = 50", "plan warning: IN cannot be certified.", "more.")]
    lines = summary_lines([("world", world)], flags, main_scorer="relevance", plan_warnings=[SWEEP_WARNING])
    text = "\n".join(lines)
    titles = [line.split(":")[0] for line in lines if line.startswith("### ")]
    assert titles == ["### Sufficiency", "### Faithfulness", "### Recovery", "### Stability", "### IoU",
                      "### Certification seeds", "### Spurious index", "### Attack", "### Radius sweep"]
    assert text.index("## Results") < text.index("## Warnings")
    # the main scorer's rows only, named, in percent, K and the false-positive rate beside, what chose the K
    assert ("| world | set0 | relevance | chosen by max cACC on id | 90.0 (FPR 10.0) | 81.2 (25.0, 5.0) | 87.5 (20.3, 2.5) "
            "| 0.031 |") in text and text.count("| world | set") == 3 + 3
    assert "| baseline (K %, FPR % where measured) | certified (K %, FPR % where measured) |" in text
    assert "| world | set0 | relevance | 0.75 | 0.5 |" in text  # CPR baseline, certified (every table names its scorer)
    assert "| world | relevance | 2 | 0.65 | 0.55 |" in text  # mean AUROC over the 2 concepts
    assert "| world | relevance | 20 | 0.9 | 2 | 4 | 0 |" in text  # stability: shares in percent
    assert "| world | shift | relevance | 2 | 0.6 | 0.8 |" in text  # IoU means over the classes
    assert "| world | within r | 2 | 0 | 0 | 2 |" in text and "| world | beyond r | 5 | 0 | 0 | 1 |" in text
    # the radius sweep names the plan's warning next to the setting it concerns
    assert "| world | 50 | 0.948 | 11 | marginal | 5 | 0 | 7.78 | IN cannot be certified |" in text
    assert "| world | 50 | 0.6 | 1 | ok | 10 | 100 | 1.67 |  |" in text
    # every section links to its full table
    for link in ("`tables/world/selected_cacc.md`", "`tables/world/faithfulness_mean.md`", "`tables/world/iou.csv`",
                 "`tables/world/testbed/recovery_summary.md`", "`tables/world/attack/attack.md`"):
        assert link in text
    assert "- **plan** (1): vision world, radius sweep |D| = 50." in text


def test_a_large_run_is_cut_to_120_lines_and_says_how_many_rows_are_left(tmp_path):
    world = _world(tmp_path / "tables" / "world", n_eval_sets=30)
    flags = [fl.Flag(code, f"place {i}", "m.", "f.") for code in fl.CODES for i in range(4)]
    out = tmp_path / "summary.md"
    n = summary_report(out, [("world", world)], flags, main_scorer="relevance")
    lines = out.read_text().splitlines()
    assert n == len(lines) <= MAX_LINES
    assert any(line.startswith("... ") and "more rows in the full table" in line for line in lines)
    warnings = lines[lines.index("## Warnings"):]
    assert len([line for line in warnings if line.startswith("- **")]) == len(fl.CODES)  # one line per kind
    assert "### Radius sweep" in "\n".join(lines)  # every family still has its table


def test_rows_that_cannot_tell_the_methods_apart_are_left_out_and_counted(tmp_path):
    """Issue 50: a whole-model K (either circuit at K 100%) or two perfect cACCs cannot discriminate: the compact table
    leaves the row out and its title says how many; the other rows stay."""
    world = _world(tmp_path / "tables" / "world")
    raw = pd.read_csv(world / "selected_cacc_raw.csv")
    raw.loc[(raw.scorer == "relevance") & (raw.eval_set == "set1"), ["baseline", "certified"]] = 1.0   # both perfect
    raw.loc[(raw.scorer == "relevance") & (raw.eval_set == "set2"), "certified_k"] = 1.0              # the whole model
    raw.loc[(raw.scorer == "relevance") & (raw.eval_set == "set0"), "baseline"] = 1.0                 # one perfect only
    raw.to_csv(world / "selected_cacc_raw.csv", index=False)
    text = "\n".join(summary_lines([("world", world)], [], main_scorer="relevance"))
    assert ("### Sufficiency: cACC % of each circuit" in text and "; 2 rows that cannot tell the methods apart (a "
            "whole-model K, or both circuits perfect) left out: see the warnings" in text)
    assert "| world | set0 | relevance | chosen by max cACC on id | 90.0 (FPR 10.0) | 100.0 (25.0, 5.0) |" in text
    assert "| world | set1 |" not in text.split("### Faithfulness")[0]
    assert "| world | set2 |" not in text.split("### Faithfulness")[0]
    raw.loc[raw.scorer == "relevance", ["baseline", "certified"]] = 1.0   # every row blind: the title alone
    raw.to_csv(world / "selected_cacc_raw.csv", index=False)
    lines = summary_lines([("world", world)], [], main_scorer="relevance")
    at = next(i for i, line in enumerate(lines) if line.startswith("### Sufficiency"))
    assert "3 rows that cannot tell the methods apart" in lines[at] and lines[at + 2].startswith("### Faithfulness")
