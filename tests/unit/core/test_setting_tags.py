"""The inverses of a setting's tags (core/setting.py, issue 52): ``parse_votes_tag`` reads back exactly what
``Setting.votes_tag`` writes, ``parse_decision_tag`` what ``Setting.decision_tag`` writes, and ``Setting.from_tag``
is built from the two (one reader); anything the writers would not write is refused, naming the tag, the expected
form and the bad field."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from certified_circuits.core.setting import Setting, decision_tag, parse_decision_tag, parse_votes_tag, votes_tag

ROOT = Path(__file__).resolve().parents[3]

#: every field at its edges and at values a 6-digit %g would merge (0.6000001, 0.9999999)
P_DELS = (0.6, 0.6000001, 1e-05, 0.5, 0.99, 0.999999)
COUNTS = ((1, 1), (100, 1000), (20, 100), (5, 7))
SEEDS = (0, 3, 2**32 - 1, 2**62, 2**63 - 1)
TAUS = (0.5, 0.95, 0.9999999, 0.7000001)
ALPHAS = (1e-3, 1e-05, 0.05, 0.5, 0.999)
CORRECTIONS = ("bonferroni", "holm")


def test_the_parts_read_back_the_papers_settings_exactly() -> None:
    assert parse_votes_tag("p0.6_n0100_n1000_s0") == {"p_del": 0.6, "n0": 100, "n": 1000, "seed": 0}
    assert parse_votes_tag("p0.95_n020_n100_s3") == {"p_del": 0.95, "n0": 20, "n": 100, "seed": 3}
    assert parse_decision_tag("t0.95_a0.001_bonferroni") == {"tau": 0.95, "alpha": 1e-3, "correction": "bonferroni"}
    assert parse_decision_tag("t0.9_a1e-05_holm") == {"tau": 0.9, "alpha": 1e-05, "correction": "holm"}
    values = parse_votes_tag("p0.6_n0100_n1000_s0") | parse_decision_tag("t0.95_a0.001_bonferroni")
    assert [type(values[k]) for k in ("p_del", "n0", "n", "seed", "tau", "alpha", "correction")] == [
        float, int, int, int, float, float, str]


def test_the_votes_tag_round_trips_over_every_grid_setting() -> None:
    grid = list(itertools.product(P_DELS, COUNTS, SEEDS))
    for p_del, (n0, n), seed in grid:
        setting = Setting(p_del=p_del, n0=n0, n=n, seed=seed)
        read = parse_votes_tag(setting.votes_tag)
        assert read == {"p_del": p_del, "n0": n0, "n": n, "seed": seed}, setting.votes_tag
        assert votes_tag(**read) == setting.votes_tag and setting.replace(**read) == setting
    assert len(grid) == 120


def test_the_decision_tag_round_trips_over_every_grid_setting() -> None:
    grid = list(itertools.product(TAUS, ALPHAS, CORRECTIONS))
    for tau, alpha, correction in grid:
        setting = Setting(tau=tau, alpha=alpha, correction=correction)
        read = parse_decision_tag(setting.decision_tag)
        assert read == {"tau": tau, "alpha": alpha, "correction": correction}, setting.decision_tag
        assert decision_tag(**read) == setting.decision_tag
    assert len(grid) == 40


def test_random_floats_round_trip_bit_for_bit() -> None:
    """500 seeded draws of every float field over its whole range: the tags read back the same 64-bit floats."""
    rng = np.random.default_rng(52)
    p_dels = rng.uniform(1e-9, 1 - 1e-9, 500)
    taus = rng.uniform(0.5, 1 - 1e-9, 500)
    alphas = 10.0 ** rng.uniform(-12, -1e-9, 500)
    for p_del, tau, alpha in zip(p_dels, taus, alphas):
        setting = Setting(p_del=float(p_del), tau=float(tau), alpha=float(alpha), seed=int(rng.integers(2**63)))
        assert parse_votes_tag(setting.votes_tag)["p_del"] == p_del
        assert parse_decision_tag(setting.decision_tag) == {"tau": tau, "alpha": alpha, "correction": "bonferroni"}
        assert Setting.from_tag(setting.tag) == setting


def test_from_tag_is_the_two_parts_read_together() -> None:
    for p_del, tau in itertools.product(P_DELS, TAUS):
        setting = Setting(p_del=p_del, tau=tau, n0=5, n=7, seed=3, alpha=1e-05, correction="holm")
        parts = parse_votes_tag(setting.votes_tag) | parse_decision_tag(setting.decision_tag)
        assert Setting(**parts) == Setting.from_tag(setting.tag) == setting
    source = (ROOT / "src/certified_circuits/core/setting.py").read_text()
    assert "import re" not in source and "fullmatch" not in source  # one reader of every tag, no second pattern


FORM_VOTES = "p{p_del}_n0{n0}_n{n}_s{seed}"
FORM_DECISION = "t{tau}_a{alpha}_{correction}"


@pytest.mark.parametrize("reader, tag, parts", [
    # the form: the expected form, an example and what is wrong
    (parse_votes_tag, "p0.6_n0100_n1000", (FORM_VOTES, "e.g. p0.6_n0100_n1000_s0", "has 3 field(s)", "expected 4")),
    (parse_votes_tag, "p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni",
     ("is not a votes tag", "2 part(s) joined by '/', expected 1")),
    (parse_votes_tag, "p0.6_n100_n1000_s0", ("field n0 is 'n100', expected n0{n0}",)),
    (parse_votes_tag, "x0.6_n0100_n1000_s0", ("field p_del is 'x0.6', expected p{p_del}",)),
    (parse_decision_tag, "t0.95_a0.001", (FORM_DECISION, "e.g. t0.95_a0.001_bonferroni", "has 2 field(s)")),
    (parse_decision_tag, "p0.6_n0100_n1000_s0", ("is not a decision tag", "has 4 field(s)", "expected 3")),
    (parse_decision_tag, "t0.95_a0.001_", ("field correction is ''",)),
    (parse_decision_tag, "t0.95_b0.001_holm", ("field alpha is 'b0.001', expected a{alpha}",)),
    # a field that is no number, or out of the Setting's range
    (parse_votes_tag, "pabc_n0100_n1000_s0", ("does not name a valid setting", "p_del 'abc' is not a number")),
    (parse_votes_tag, "p0.6_n0100_n1.5_s0", ("n '1.5' is not an integer",)),
    (parse_votes_tag, "p1.5_n0100_n1000_s0", ("does not name a valid setting", "p_del=1.5 is invalid")),
    (parse_votes_tag, "pnan_n0100_n1000_s0", ("p_del=nan is invalid",)),
    (parse_votes_tag, "p0.6_n00_n1000_s0", ("n0=0 is invalid",)),
    (parse_votes_tag, "p0.6_n0100_n1000_s-1", ("seed=-1 is invalid",)),
    (parse_votes_tag, f"p0.6_n0100_n1000_s{2**63}", (f"seed={2**63} is invalid",)),
    (parse_decision_tag, "t0.4_a0.001_holm", ("tau=0.4 is invalid",)),
    (parse_decision_tag, "t0.95_a1_holm", ("alpha=1.0 is invalid",)),
    (parse_decision_tag, "t0.95_a0.001_sidak", ("correction='sidak' is invalid",)),
    # written otherwise than the writer writes it: the field and both spellings
    (parse_votes_tag, "p0.60_n0100_n1000_s0",
     ("as Setting.votes_tag writes it ('p0.6_n0100_n1000_s0')", "p_del is written '0.6', not '0.60'")),
    (parse_votes_tag, "p0.6_n0100_n1000_s007", ("seed is written '7', not '007'",)),
    (parse_votes_tag, "p0.6_n0100_n0100_s0", ("n is written '100', not '0100'",)),
    (parse_decision_tag, "t0.95_a1e-3_holm",
     ("as Setting.decision_tag writes it ('t0.95_a0.001_holm')", "alpha is written '0.001', not '1e-3'")),
    (parse_decision_tag, "t.95_a0.001_holm", ("tau is written '0.95', not '.95'",)),
    (Setting.from_tag, "p0.6_n0100_n1000_s0", ("is not a setting tag", f"{FORM_VOTES}/{FORM_DECISION}",
                                               "1 part(s) joined by '/', expected 2")),
    (Setting.from_tag, "p0.6_n0100_n1000_s0/t0.95_a1e-3_holm", ("as Setting.tag writes it", "alpha is written")),
])
def test_a_tag_the_writer_would_not_write_is_refused_naming_the_tag_form_and_field(reader, tag, parts) -> None:
    with pytest.raises(ValueError) as error:
        reader(tag)
    message = str(error.value)
    assert message.startswith(repr(tag)), message
    for part in parts:
        assert part in message, message


def test_a_tag_that_is_not_text_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^0.95 is not a decision tag .*expected a string, got float"):
        parse_decision_tag(0.95)  # type: ignore[arg-type]
