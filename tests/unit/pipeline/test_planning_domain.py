"""The planner never proposes a value outside its domain (issue 35, item 5).

Over a grid of settings (hypothesis), every value a plan's fixes name (``raise p_del to >= X``, ``lower tau
to <= X``, ``raise n to >= X``, ``at least N examples``) and every suggestion lies in its domain:
``0 < p_del < 1``, ``0.5 < tau < 1``, ``n`` within config.schema.yaml's bounds for ``samples``. Where no
in-domain value works, the fix says so instead of proposing one.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import certified_circuits as cc
from certified_circuits.core.planning import MAX_SAMPLES, SUGGEST_MAX_N

SCHEMA = yaml.safe_load((Path(__file__).resolve().parents[3] / "config.schema.yaml").read_text())
N_MIN = SCHEMA["definitions"]["samples"]["minimum"]
N_MAX = SCHEMA["definitions"]["samples"]["maximum"]

#: a value a fix proposes: "raise p_del to >= 0.6", "lower tau to <= 0.987", "raise n to >= 296"
PROPOSED = re.compile(r"\b(?:(?:raise|lower) )?(p_del|tau|n) to (?:>=|<=) ([0-9][0-9.e+-]*)")
EXAMPLES = re.compile(r"use at least ([0-9,]+) examples")


def in_domain(name: str, value: float) -> bool:
    if name == "p_del":
        return 0.0 < value < 1.0
    if name == "tau":
        return 0.5 < value < 1.0
    return value == int(value) and N_MIN <= value <= N_MAX


def proposals(text: str) -> list[tuple[str, float]]:
    """Every (parameter, value) a fix of ``text`` proposes."""
    found = []
    for fix in re.findall(r"Fix: (.*?)(?:\.$|\.\s|$)", text, flags=re.M):
        found += [(name, float(value.rstrip("."))) for name, value in PROPOSED.findall(fix)]
        found += [("examples", float(count.replace(",", ""))) for count in EXAMPLES.findall(fix)]
    return found


def check_plan_text(p: cc.Plan) -> None:
    text = "\n".join(p.problems())
    for name, value in proposals(text):
        if name == "examples":
            assert value >= 1 and value == int(value), text
        else:
            assert in_domain(name, value), f"{name} {value} proposed:\n{text}"
    assert "tau 1," not in text and "tau 1 " not in text


def check_suggestions(p: cc.Plan, radius: int) -> None:
    for s in p.suggest(radius=radius):
        assert in_domain("p_del", s.p_del) and in_domain("tau", s.tau) and in_domain("n", s.n), s
        assert s.radius >= radius


def test_the_schema_bounds_n_as_the_planner_does() -> None:
    assert (N_MIN, N_MAX) == (1, MAX_SAMPLES) and SUGGEST_MAX_N <= MAX_SAMPLES


def test_the_reported_bugs_propose_no_impossible_tau() -> None:
    # p_del 0.3 at tau 0.9 (radius 0): "tau >= 1.2" before; radius 1 needs p_del >= 0.6 at tau 0.9
    low = cc.plan(50, 3840, cc.Setting(p_del=0.3, tau=0.9))
    [problem] = [q for q in low.problems() if q.startswith("radius 0")]
    assert "Fix: raise p_del to >= 0.6." in problem and "tau to" not in problem
    # p_del 0.5 at tau 0.9: "tau >= 1" before (1.5 - 0.5); still only p_del can reach radius 1
    half = cc.plan(50, 3840, cc.Setting(p_del=0.5, tau=0.9))
    [problem] = [q for q in half.problems() if q.startswith("radius 0")]
    assert "Fix: raise p_del to >= 0.6." in problem and "tau to" not in problem
    # tau 0.5: no p_del below 1 gives radius 1 (1.5 - tau = 1); at p_del 0.5 no tau either: said, with a pair that works
    neither = cc.plan(50, 3840, cc.Setting(p_del=0.5, tau=0.5))
    [problem] = [q for q in neither.problems() if q.startswith("radius 0")]
    assert "no p_del below 1 gives radius 1 at tau 0.5" in problem and "no tau below 1 gives it at p_del 0.5" in problem
    assert "raise p_del to >= 0.6 and tau to >= 0.9" in problem
    assert cc.certified_radius(0.9, 0.6) == 1  # the pair it names works


def test_a_tau_just_below_one_is_printed_apart_from_one() -> None:
    p = cc.plan(50, 3840, cc.Setting(p_del=0.6, tau=0.9999999, n=1000))
    assert "tau 0.9999999" in str(p) and "tau 1," not in str(p) and "tau 1 " not in str(p)
    [problem] = p.problems()
    # min_samples is far above the schema's n: only lowering tau is proposed, to the largest that n = 1000 passes
    assert "raise n" not in problem and "lower tau to <= 0.984." in problem
    assert p.max_tau >= 0.984 and cc.plan(50, 3840, cc.Setting(p_del=0.6, tau=0.984, n=1000)).can_certify_out


def test_when_neither_n_nor_tau_alone_works_it_says_what_does() -> None:
    # U = 10^9 components at alpha 1e-9: n = 10 passes no tau above 0.5, and tau 0.9999 needs n > 100,000
    p = cc.plan(50, 10**9, cc.Setting(p_del=0.6, tau=0.9999, n=10, alpha=1e-9))
    assert p.min_samples > MAX_SAMPLES and p.max_tau < 0.5
    [problem] = [q for q in p.problems() if q.startswith("nothing can be certified")]
    assert "no n up to 100,000" in problem and "lower tau to <= " in problem
    [(_, n), (_, tau)] = proposals(problem)
    assert n == MAX_SAMPLES and 0.5 < tau < 0.9999
    assert cc.plan(50, 10**9, cc.Setting(p_del=0.6, tau=tau, n=MAX_SAMPLES, alpha=1e-9)).can_certify_out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n_examples=st.integers(1, 5000),
    n_components=st.sampled_from([1, 7, 48, 262, 3840, 32491, 10**6]),
    p_del=st.floats(0.001, 0.999),
    tau=st.floats(0.5, 0.9999999),
    n=st.integers(1, 5000),
    n0=st.integers(1, 200),
    alpha=st.sampled_from([1e-6, 0.001, 0.05, 0.5]),
)
def test_every_fix_of_any_setting_proposes_values_in_their_domain(n_examples, n_components, p_del, tau, n, n0, alpha):
    p = cc.plan(n_examples, n_components, cc.Setting(p_del=p_del, tau=tau, n=n, n0=n0, alpha=alpha))
    check_plan_text(p)


@pytest.mark.parametrize("n_examples", [4, 50, 1000])
@pytest.mark.parametrize("p_del", [0.3, 0.5, 0.85, 0.99, 0.9999])
@pytest.mark.parametrize("tau", [0.5, 0.5001, 0.95, 0.9999999])
def test_every_fix_and_suggestion_on_the_grid_is_in_domain(n_examples, p_del, tau):
    p = cc.plan(n_examples, 3840, cc.Setting(p_del=p_del, tau=tau, n=1000))
    check_plan_text(p)
    assert "tau 1," not in str(p) and "tau 1 " not in str(p)
    for radius in (1, 3):
        check_suggestions(p, radius)
    for line in str(p).splitlines():  # the plan's own report: its suggestions too
        match = re.match(r"\s+p_del ([0-9.]+), tau ([0-9.]+), n ([0-9]+):", line)
        if match:
            assert in_domain("p_del", float(match[1])) and in_domain("tau", float(match[2]))
            assert in_domain("n", float(match[3]))


def test_lower_tau_is_proposed_only_where_a_tau_above_one_half_makes_in_possible() -> None:
    # 0.99^100 = 0.366: IN needs tau < 0.634, so "lower tau to <= 0.633"; 0.95^10 = 0.599: no tau above 0.5 works
    [possible] = [q for q in cc.plan(100, 262, cc.Setting(p_del=0.99, tau=0.9)).problems() if q.startswith("IN cannot")]
    assert possible.endswith("or lower tau to <= 0.633.")
    assert cc.plan(100, 262, cc.Setting(p_del=0.99, tau=0.633)).can_certify_in
    [impossible] = [q for q in cc.plan(10, 262, cc.Setting(p_del=0.95, tau=0.9)).problems() if q.startswith("IN cannot")]
    assert "no tau above 0.5 makes IN possible at p_del 0.95 and |D| = 10" in impossible and "tau to" not in impossible
    assert not cc.plan(10, 262, cc.Setting(p_del=0.95, tau=0.5)).can_certify_in
