"""Facts of the README that no other test pins (issue 44, item 6): its length, the files its examples write, the
model its plan example describes, and the pages it links."""

from __future__ import annotations

import re

import yaml

from certified_circuits.language.graph import build_graph
from tests.helpers.paths import ROOT

README = (ROOT / "README.md").read_text()


def test_the_readme_stays_at_most_250_lines() -> None:
    assert len(README.splitlines()) <= 250


def test_each_heredoc_writes_its_own_file() -> None:
    """A reader who pastes every block keeps every file: no two ``cat > FILE`` blocks write the same FILE."""
    written = re.findall(r"^cat > (\S+) <<", README, flags=re.M)
    assert len(written) >= 4 and len(written) == len(set(written)), written


def test_the_plan_example_is_the_embedded_model() -> None:
    """``cc.plan(100, 310, ...)``: the embedded induction task's 100 prompts a split and the default's compiled
    2-layer, 8-head GPT-2's 310 edges, as the comment says."""
    from certified_circuits.language.graph import COMPILED_SHAPES

    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    found = re.search(r"# the paper's p_del 0\.99 at \|D\| = (\d+) prompts, U = (\d+) edges \(the embedded "
                      r"(\d)-layer, (\d)-head GPT-2\)\nplan = cc\.plan\((\d+), (\d+),", README)
    assert found, "the README's plan example"
    examples, edges, layers, heads, called_examples, called_edges = map(int, found.groups())
    assert examples == called_examples == config["language"]["n_per_split"]
    assert (layers, heads) == COMPILED_SHAPES[config["language"]["train"]["compiled"]]
    assert edges == called_edges == build_graph(layers, heads).n_edges == 310


def test_the_readme_links_the_mib_page_and_times_its_commands() -> None:
    assert "(docs/mib.md)" in README
    for fact in ("bin/model-seeds", "3 here and by default", "2-4 min"):
        assert fact in README, fact
    head = README.split("# certified-circuits", 1)[0]
    assert re.search(r"\d+ min \d+ s on 2 idle cores, \d+ CPU-s", head), "the default's measured wall and CPU time"
    assert "[docs/testing.md](docs/testing.md) has its\ntime" in head, "where the suite's time is"
