"""The testbed end to end (configs/testbed_smoke.yaml): a 3-class planted world ResNet (2 classes certified) and the
compiled induction GPT-2, their causally verified ground truths, recovery of the truth per method, bootstrap
stability and its equal footing at the truth's size, the headline that opens summary.md, the explorer and the end
of the run, and the explorer's recovery line. Tiny data: the numbers checked are the ones that hold by
construction (the truth's size, the induction circuit's verification, the baseline recovering the 3 true edges), the
rest are checked for shape and range."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import workflow
from tests.helpers.paths import TESTBED_SMOKE as CONFIG

pytestmark = pytest.mark.slow  # runs the workflow
METHODS = {"baseline", "majority", "certified_in", "certified_in_abstain"}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    results = tmp_path_factory.mktemp("testbed") / "results"
    done = workflow.snakemake("--cores", "2", "--configfile", CONFIG, "--config", f"results_dir={results}",
                              env=workflow.environment(CC_PROGRESS_SECONDS="5"), timeout=1200)
    assert done.returncode == 0, done.stderr[-6000:]
    (results.parent / "workflow.stderr").write_text(done.stderr)  # what the terminal showed
    return results


def test_the_ground_truths_name_the_planted_components_and_pass_their_checks(run: Path) -> None:
    vision = json.loads((run / "ground_truth" / "world.json").read_text())
    assert vision["format"] == "certified-circuits/ground-truth/1" and vision["kind"] == "vision"
    # widths 3 * own + shared = 5, 8, 8, 6 (27 channels); a class's truth: its own 1 + 2 + 2 + 2 and the 2 + 2 + 2 shared
    assert vision["n_components"] == 27 and sorted(vision["concepts"]) == ["circle", "square", "triangle"]
    # the truth is verified per component too: the planted channels that move their class logit (a dead one, with
    # no effect of its own, is dropped); nothing else reaches the logit (clean regime: epsilon exactly 0)
    for concept in vision["concepts"].values():
        block = concept["verification"]["per_component"]
        assert len(concept["components"]) + len(block["dropped"]) == 13 and len(concept["components"]) >= 1
        assert block["epsilon"] == 0.0 and block["passed"] is True
    assert all("passed" in c["verification"] for c in vision["concepts"].values())
    language = json.loads((run / "ground_truth" / "tiny_gpt2.json").read_text())
    truth = language["concepts"]["induction"]
    assert len(truth["components"]) == 3 and truth["verification"]["passed"] is True
    head = truth["verification"]["headline"]
    assert head["circuit_only"] >= 0.9 and head["circuit_removed"] <= 0.1  # the thresholds, on 20 prompts


def test_recovery_scores_every_method_at_every_k_against_the_truth(run: Path) -> None:
    import pandas as pd

    for experiment, concepts, n_k in (("world", 2, 3), ("tiny_gpt2", 1, 3)):
        recovery = pd.read_csv(run / "tables" / experiment / "testbed" / "recovery.csv")
        assert set(recovery["method"]) == METHODS and recovery["concept"].nunique() == concepts
        assert len(recovery) == concepts * len(METHODS) * n_k
        assert ((recovery.tp + recovery.fn) == recovery.n_true).all()
        assert ((recovery.tp + recovery.fp + recovery.fn + recovery.tn) == recovery.n_components).all()
        auroc = pd.read_csv(run / "tables" / experiment / "testbed" / "recovery_auroc.csv")
        held_out = "id_test" if experiment == "world" else "validation"  # named by its metric and held-out set
        metric = "balanced accuracy" if experiment == "world" else "cACC"
        assert auroc["auroc"].between(0, 1).all() and len(set(auroc["k_source"])) == 1
        source = auroc["k_source"].iloc[0]
        assert source.startswith(f"chosen by max {metric}") and source.endswith(f" on {held_out}"), source
    language = pd.read_csv(run / "tables" / "tiny_gpt2" / "testbed" / "recovery.csv")
    # EAP-IG ranks the compiled circuit's 3 edges first: the baseline's 6-edge circuit (K 0.05 of 110) holds all 3
    at = language[(language.method == "baseline") & (language.k_target == 0.05)]
    assert at["tp"].tolist() == [3] and at["fp"].tolist() == [3]


def test_stability_resamples_each_dataset_twenty_times(run: Path) -> None:
    import pandas as pd

    stability = pd.read_csv(run / "tables" / "world" / "testbed" / "stability.csv")
    assert set(stability["resamples"]) == {20} and stability["concept"].nunique() == 2
    for column in ("baseline_change_share", "certified_change_share", "certified_flip_share", "baseline_jaccard_mean"):
        assert stability[column].between(0, 1).all(), column
    assert (run / "tables" / "tiny_gpt2" / "testbed" / "stability_summary.md").is_file()


def test_the_summary_opens_with_the_headline_and_the_explorer_shows_it_and_recovery(run: Path) -> None:
    """The headline (reports/findings.py): per experiment one table at the truth's size, each circuit beside the
    baseline's circuit of its size, at most two lines under them; written once (findings.json) and shown with the
    same cells on the explorer's first screen."""
    import html
    import re

    from certified_circuits.reports.findings import MAX_HEADLINE_LINES, read_headline

    summary = (run / "summary.md").read_text()
    assert summary.index("## What this run shows") < summary.index("## Results") < summary.index("## Warnings")
    first = summary.split("## What this run shows", 1)[1].split("## Results", 1)[0]
    bullets = [line for line in first.splitlines() if line.startswith("- ")]
    assert 1 <= len(bullets) <= MAX_HEADLINE_LINES
    assert first.count("at the truth's size, |T| = ".replace("|", "\\|")) == 2  # one table per experiment
    assert first.count("| baseline (top \\|T\\|) | -- |") == 2
    assert "H1a" not in first  # one run's concepts are not independent pairs: the seed tests are in the docs
    found = read_headline(run / "findings.json")
    assert [t.experiment for t in found.tables] == ["world", "tiny_gpt2"] and list(found.lines) == [b[2:] for b in bullets]
    index = (run / "explorer" / "index.html").read_text()
    lead = index.split('<section class="lead">', 1)[1].split("</section>", 1)[0]
    cells = [html.unescape(c) for c in re.findall(r"<td(?: class=num)?>(.*?)</td>", lead)]
    assert cells == [cell for table in found.tables for row in table.rows for cell in row]
    assert "Recovery of the known circuit" in index and "recovery.png" in index
    assert (run / "tables" / "world" / "mean_ablation" / "selected_balanced_raw.csv").is_file()


def test_the_stability_stage_writes_the_equal_footing_and_the_headline_shows_it(run: Path) -> None:
    """Issue 59: each stability job's third table (the certificate at the truth's size beside the matched cut, the
    bootstrap interval and consensus on the same resamples), combined per experiment; the certificate's shares over
    all components are the truth-size table's (one pass of the certificate serves both); no population, so no
    contested set; the headline's two equal-footing columns read from it."""
    import re

    import pandas as pd

    from certified_circuits.analysis.equal_footing import THREE_VALUED, TWO_VALUED
    from certified_circuits.reports.findings import read_headline
    from certified_circuits.reports.testbed import read_truth_size_equal_table

    for experiment, concepts in (("world", 2), ("tiny_gpt2", 1)):
        folder = run / "tables" / experiment / "testbed"
        equal = read_truth_size_equal_table(folder / "truth_size_equal.csv")
        assert equal["concept"].nunique() == concepts and (folder / "truth_size_equal_summary.md").is_file()
        for _, rows in equal.groupby(["concept", "setting"]):
            assert rows["method"].tolist() == list(THREE_VALUED + TWO_VALUED)
        assert (equal["resamples"] == 20).all() and (equal["inner_resamples"] == 20).all()
        assert equal["detector_auroc"].isna().all() and (equal["population_samples"] == 0).all()
        three = equal[equal["values"] == 3]
        assert three["change_share_all"].between(0, 1).all() and three["flip_share_all"].between(0, 1).all()
        sizes = pd.read_csv(folder / "truth_size.csv", dtype={"concept": str})
        certified = three[three["method"] == "certified"].merge(
            sizes[sizes["method"] == "baseline"], on=["concept", "setting"], suffixes=("", "_t"))
        assert len(certified) == len(three) // len(THREE_VALUED)
        assert (certified["change_share_all"] - certified["certified_change_share"]).abs().max() < 1e-12
        assert (certified["flip_share_all"] - certified["certified_flip_share"]).abs().max() < 1e-12
    for table in read_headline(run / "findings.json").tables:
        assert table.header[-2:] == ("labels changed (live): certified / matched cut / interval / consensus",
                                     "in<->out flips (live): certified / matched cut")
        assert table.title.endswith(", `truth_size_equal.csv`)")
        for row in table.rows:
            if row[0].startswith("certified IN"):
                assert re.fullmatch(r"(\d\.\d\d|n/a)( / (\d\.\d\d|n/a)){3}", row[-2]), row
                assert re.fullmatch(r"(\d\.\d{3}|n/a) / (\d\.\d{3}|n/a)", row[-1]), row
            else:
                assert row[-2:] == ("--", "--")


def _kinds(pairs) -> dict[str, int]:
    return {code: int(n) for code, n in pairs}


def test_one_warning_list_everywhere_and_a_summary_a_person_reads(run: Path) -> None:
    """Issue 35: summary.md within 120 lines, findings first, a compact table per family, the warnings grouped; the
    same counts by kind in warnings.json (the MLflow tags' source), summary.md, the explorer and the terminal; the run
    ends with both paths, the findings and the counts in at most 25 lines, after progress lines of running jobs."""
    import re

    from certified_circuits.reports.flags import flag_tags, read_flags

    summary = (run / "summary.md").read_text()
    lines = summary.splitlines()
    assert len(lines) <= 120
    assert summary.index("## What this run shows") < summary.index("## Results") < summary.index("## Warnings")
    for family in ("### Sufficiency", "### Faithfulness", "### Recovery", "### Stability", "### Spurious index"):
        assert family in summary, family
    assert all("`tables/" in line for line in lines if line.startswith("### "))  # each links its full table
    listed = read_flags(run / "warnings.json")
    record = json.loads((run / "warnings.json").read_text())["counts"]
    assert record and record.get("plan", 0) >= 2  # the smoke settings have radius 0: planned at parse time
    assert (run / "plan" / "warnings.json").is_file()
    tags = {key.removeprefix("cc.flag."): int(value.split(":")[0]) for key, value in flag_tags(listed).items()}
    in_summary = _kinds(re.findall(r"^- \*\*([a-z-]+)\*\* \((\d+)[^)]*\):", summary, re.M))
    index = (run / "explorer" / "index.html").read_text()
    banners = _kinds(re.findall(r'class="banner" href="index.html#warn-[a-z-]+"><b>([a-z-]+)</b> × (\d+)', index))
    stderr = (run.parent / "workflow.stderr").read_text()
    end = stderr[stderr.rindex("certified-circuits: done"):].splitlines()
    terminal = _kinds((code, n) for n, code in re.findall(r"(\d+) ([a-z-]+)", next(l for l in end if l.startswith("Warnings:"))))
    assert record == tags == in_summary == banners == terminal
    # a class or task page's banner: one line per kind of its own flags (its experiment's, naming its concept or none;
    # the smoke's classes and task are their own file names)
    from certified_circuits.reports.explorer import page_flags

    for experiment in ("world", "tiny_gpt2"):
        for page in (run / "explorer" / experiment).glob("*.html"):
            kinds = {f.code for f in page_flags(listed, experiment, page.stem)}
            assert page.read_text().count('class="banner"') == len(kinds), page
    # the explorer's first screen is results: the full warning list comes after them
    assert index.index("<section>") < index.index('id="warnings"')
    # the end: at most 25 lines, both paths, the findings, the counts
    assert len(end) <= 25
    assert any(l.startswith("Summary:  ") and l.endswith("summary.md") for l in end)
    assert any(l.startswith("Explorer: ") and "explorer/index.html" in l for l in end)
    from certified_circuits.reports.findings import headline_text, read_headline

    shown = headline_text(read_headline(run / "findings.json"))  # the headline's tables, the same cells
    at = end.index("What this run shows:")
    assert end[at + 1:at + 1 + len(shown)] == shown
    assert "Building DAG" not in "\n".join(end)  # nothing of the summary's body, no job blocks after it
    # progress: the latest log line of running jobs, while they run (every 5 s here: vision_train alone runs longer)
    assert re.search(r"^\[\d\d:\d\d:\d\d\] [a-z_]+( \(.*\))?, \d+ min: .+", stderr, re.M)
