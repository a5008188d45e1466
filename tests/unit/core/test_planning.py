"""The certification planner (``cc.plan``) against exact, independent computations on small cases.

Every expected number here is computed without the planner: the empty-sub-dataset probability by
enumerating all ``2^|D|`` deletion masks, p-values with exact rational arithmetic (``fractions``), the
smallest certifying ``n`` by running the engine's decision rule on unanimous votes, and IN's power by
summing the exact joint law of the selection and certification counts through that decision rule.
"""

from __future__ import annotations

import itertools
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

import certified_circuits as cc
from certified_circuits.core.certification import certify
from certified_circuits.core.planning import P_EMPTY_WARNING, check_plan, critical_counts


def exact_tail(k: int, n: int, p: Fraction) -> Fraction:
    """P[Bin(n, p) >= k], exactly."""
    return sum((Fraction(math.comb(n, j)) * p**j * (1 - p) ** (n - j) for j in range(max(k, 0), n + 1)), Fraction(0))


def exact_critical_count(n: int, tau: float, alpha: float, u: int) -> int:
    """The smallest k with P[Bin(n, tau) >= k] <= alpha / u (rational arithmetic); n + 1 if none."""
    level, t = Fraction(alpha) / u, Fraction(tau)
    for k in range(n + 1):
        if exact_tail(k, n, t) <= level:
            return k
    return n + 1


def enumerated_p_empty(n_examples: int, p_del: float) -> Fraction:
    """P[every example deleted], by enumerating every deletion mask with its exact probability."""
    p = Fraction(p_del)
    total = Fraction(0)
    for mask in itertools.product((0, 1), repeat=n_examples):  # 1 = kept
        kept = sum(mask)
        probability = (1 - p) ** kept * p ** (n_examples - kept)
        if kept == 0:
            total += probability
    return total


@pytest.mark.parametrize("n_examples", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("p_del", [0.3, 0.6, 0.95])
def test_p_empty_equals_the_enumerated_mask_distribution(n_examples, p_del):
    expected = enumerated_p_empty(n_examples, p_del)
    assert cc.plan(n_examples, 10, cc.Setting(p_del=p_del)).p_empty == pytest.approx(float(expected), rel=1e-12)


@pytest.mark.parametrize("correction", ["bonferroni", "holm"])
@pytest.mark.parametrize("u", [1, 7, 336])
@pytest.mark.parametrize(("tau", "alpha"), [(0.6, 0.05), (0.75, 0.01), (0.9, 0.001)])
def test_min_samples_is_the_first_n_at_which_the_decision_rule_certifies_unanimous_votes(tau, alpha, u, correction):
    """Run the engine's Algorithm 1 on U unanimous components for n = 1, 2, ... and find the first n that
    certifies them (both IN and OUT): that is ``min_samples``; ``max_tau`` brackets tau there."""
    setting = cc.Setting(p_del=0.5, n0=1, n=1, tau=tau, alpha=alpha, correction=correction)
    first = None
    for n in range(1, 400):
        ones = np.full(u, n)
        decided_in = certify(np.ones(u, dtype=np.int64), ones, 1, n, tau, alpha, correction)
        decided_out = certify(np.zeros(u, dtype=np.int64), np.zeros(u, dtype=np.int64), 1, n, tau, alpha, correction)
        if (decided_in == cc.IN).all() and (decided_out == cc.OUT).all():
            first = n
            break
    assert first is not None
    p = cc.plan(50, u, setting.replace(n=first))
    assert p.min_samples == first
    assert p.can_certify_out and p.power_out == 1.0
    below = cc.plan(50, u, setting.replace(n=first - 1)) if first > 1 else None
    if below is not None:
        assert below.vacuous and not below.can_certify_out and below.power_out == 0.0
        assert below.max_tau < tau <= p.max_tau


@pytest.mark.parametrize("n", [5, 9, 13, 17, 22, 30])
@pytest.mark.parametrize(("tau", "alpha", "u"), [(0.6, 0.05, 1), (0.7, 0.05, 3), (0.8, 0.01, 2)])
def test_critical_count_matches_rational_arithmetic(n, tau, alpha, u):
    expected = exact_critical_count(n, tau, alpha, u)
    p = cc.plan(20, u, cc.Setting(p_del=0.5, n0=3, n=n, tau=tau, alpha=alpha))
    assert p.critical_count == expected
    assert int(critical_counts(np.array([n]), tau, alpha / u)[0]) == expected
    assert p.can_certify_out == (expected <= n)


@pytest.mark.parametrize("correction", ["bonferroni", "holm"])
@pytest.mark.parametrize("n", [5, 8, 12, 20, 30])
@pytest.mark.parametrize(("n_examples", "p_del", "tau", "n0", "u"), [(3, 0.3, 0.6, 3, 1), (2, 0.25, 0.7, 4, 2), (4, 0.4, 0.6, 5, 3)])
def test_power_in_is_the_exact_probability_of_certifying_a_component_in_every_nonempty_circuit(
    n_examples, p_del, tau, n0, u, n, correction
):
    """Sum over every (selection count, certification count) pair of its exact probability times the
    engine's decision on U such components (in on every non-empty sub-dataset, so each vote is in with
    probability 1 - p_empty, from the enumerated mask law)."""
    alpha = 0.05
    in_rate = 1 - enumerated_p_empty(n_examples, p_del)
    power = Fraction(0)
    for s in range(n0 + 1):
        p_s = Fraction(math.comb(n0, s)) * in_rate**s * (1 - in_rate) ** (n0 - s)
        for c in range(n + 1):
            decision = certify(np.full(u, s), np.full(u, c), n0, n, tau, alpha, correction)
            if (decision == cc.IN).all():
                power += p_s * Fraction(math.comb(n, c)) * in_rate**c * (1 - in_rate) ** (n - c)
    p = cc.plan(n_examples, u, cc.Setting(p_del=p_del, n0=n0, n=n, tau=tau, alpha=alpha, correction=correction))
    assert p.power_in == pytest.approx(float(power), abs=1e-12)
    assert p.can_certify_in == (float(in_rate) > tau and p.critical_count <= n)


def test_the_issue_settings_are_diagnosed_as_the_design_says():
    """The planner's examples (docs/architecture.md, section 6; the README's p_del 0.99 at 100 prompts), with their numbers."""
    language = cc.plan(100, 32491, cc.Setting(p_del=0.99, tau=0.9))
    assert language.p_empty == pytest.approx(0.99**100) and round(language.p_empty, 3) == 0.366
    assert not language.can_certify_in and language.can_certify_out and language.power_in == 0.0
    assert language.verdict == "marginal" and language.radius == 50
    for tau in (0.85, 0.9, 0.95):  # the paper's grid: IN impossible at every tau
        assert not cc.plan(100, 32491, cc.Setting(p_del=0.99, tau=tau)).can_certify_in
    prompts = cc.plan(38, 1000, cc.Setting(p_del=0.95, tau=0.9))
    assert round(prompts.p_empty, 3) == 0.142 and not prompts.can_certify_in and prompts.can_certify_out
    docs_fixture = cc.plan(4, 336, cc.Setting(n0=10, n=40))
    assert docs_fixture.vacuous and docs_fixture.min_samples == 249
    assert round(docs_fixture.p_empty, 2) == 0.13
    paper = cc.plan(50, 3840, cc.Setting())
    assert paper.verdict == "ok" and paper.radius == 1 and paper.min_samples == 296
    assert paper.max_tau == pytest.approx(0.98495, abs=1e-5)  # the paper's tau* = 0.985 (App. C.2)
    assert paper.power_in == pytest.approx(1.0) and paper.power_out == 1.0


def test_setting_defaults_are_the_papers_vision_setting():
    assert cc.Setting() == cc.Setting(p_del=0.6, n0=100, n=1000, seed=0, tau=0.95, alpha=0.001, correction="bonferroni")


def test_suggestions_reach_the_radius_with_both_sides_and_are_minimal_in_n():
    base = cc.plan(100, 2000, cc.Setting(p_del=0.99, tau=0.9))
    suggestions = base.suggest(radius=9)
    assert suggestions
    for s in suggestions:
        p = cc.plan(100, 2000, cc.Setting(p_del=s.p_del, tau=s.tau, n=s.n))
        assert p.radius >= 9 and p.can_certify_in and p.can_certify_out and p.verdict == "ok"
        assert p.power_in >= 0.9
        assert cc.plan(100, 2000, cc.Setting(p_del=s.p_del, tau=s.tau, n=s.n - 1)).power_in < 0.9
    assert [s.n for s in suggestions] == sorted(s.n for s in suggestions)


def test_no_suggestion_when_the_dataset_is_too_small_and_the_report_says_how_many_examples():
    small = cc.plan(100, 32491, cc.Setting(p_del=0.99, tau=0.9))
    assert small.suggest() == []  # radius 50 needs p_del >= 0.987: p_empty >= 0.27 at |D| = 100
    need = small.examples_needed()
    assert need is not None and need > 100
    assert cc.plan(need, 32491, cc.Setting(p_del=0.99, tau=0.9)).suggest()
    assert not cc.plan(need - 1, 32491, cc.Setting(p_del=0.99, tau=0.9)).suggest()
    text = str(small)
    assert f"needs at least {need} examples" in text and "IN cannot be certified" in text
    assert f"the largest radius with IN and OUT at |D| = 100 is {small.largest_radius()}" in text


def test_report_names_every_number_a_person_needs():
    text = str(cc.plan(4, 336, cc.Setting(n0=10, n=40)))
    for phrase in ("min_samples = 249", "max_tau", "p_empty", "verdict: vacuous", "Fix: raise n to >= 249"):
        assert phrase in text


def test_check_plan_refuses_vacuous_and_warns_marginal():
    with pytest.raises(cc.VacuousSettingError) as error:
        check_plan(cc.plan(4, 336, cc.Setting(n0=10, n=40)))
    assert isinstance(error.value, ValueError)
    check_plan(cc.plan(4, 336, cc.Setting(n0=10, n=40)), allow_vacuous=True)  # allowed: no raise
    with pytest.warns(cc.PlanWarning, match="IN cannot be certified"):
        check_plan(cc.plan(100, 32491, cc.Setting(p_del=0.99, tau=0.9)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_plan(cc.plan(50, 3840, cc.Setting()))  # ok: silent


def test_p_empty_threshold_warns_even_when_in_is_possible():
    # 0.95^60 = 0.046 < 0.05 < 0.95^55 = 0.060, both with IN possible at tau 0.85
    assert cc.plan(60, 100, cc.Setting(p_del=0.95, tau=0.85)).verdict == "ok"
    marginal = cc.plan(55, 100, cc.Setting(p_del=0.95, tau=0.85))
    assert marginal.can_certify_in and marginal.p_empty > P_EMPTY_WARNING and marginal.verdict == "marginal"


def test_certify_scores_checks_the_plan_before_drawing_any_mask(monkeypatch):
    import certified_circuits.api as api

    def no_votes(*args, **kwargs):
        raise AssertionError("votes were counted for a vacuous setting")

    monkeypatch.setattr(api, "compute_votes", no_votes)
    scores = np.zeros((4, 336))
    with pytest.raises(ValueError, match="min_samples = 249") as error:
        cc.certify_scores(scores, np.zeros(336, dtype=int), [0.5], cc.Setting(n0=10, n=40))
    for name in ("max_tau", "p_empty", "Fix"):
        assert name in str(error.value)


def test_certify_algorithm_checks_the_plan_before_sampling():
    calls = []

    def algorithm(kept):
        calls.append(len(kept))
        return np.ones(336, dtype=bool)

    with pytest.raises(cc.VacuousSettingError):
        cc.certify_algorithm(algorithm, 4, cc.Setting(n0=10, n=40), progress=False)
    assert calls == [4]  # only the baseline on the full dataset (it gives U), no sub-dataset


def test_a_planned_ok_setting_certifies_in_and_out_and_a_marginal_one_warns():
    """The planner's verdict holds in a real run: at an ok plan both sides are decided."""
    rng = np.random.default_rng(0)
    n_examples, u = 30, 40
    scores = rng.normal(0.0, 0.2, size=(n_examples, u)) + np.where(np.arange(u) < 10, 3.0, -3.0)
    setting = cc.Setting(p_del=0.6, n0=50, n=400, tau=0.9, alpha=0.01)
    assert cc.plan(n_examples, u, setting).verdict == "ok"
    cert = cc.certify_scores(scores, np.zeros(u, dtype=int), [0.25], setting)
    assert cert.certified_in[0, :10].all() and cert.certified_out[0, 10:].all()
    with pytest.warns(cc.PlanWarning, match="IN cannot be certified"):
        marginal = cc.certify_scores(scores[:3], np.zeros(u, dtype=int), [0.25], setting.replace(p_del=0.9))
    assert not marginal.certified_in.any()  # as planned: 1 - 0.9^3 = 0.271 < tau


@pytest.mark.parametrize(("tau", "n_examples"), [(0.9, 38), (0.95, 100), (0.85, 12)])
def test_in_becomes_impossible_exactly_from_the_boundary_p_del(tau, n_examples) -> None:
    """IN is possible iff p_del^|D| < 1 - tau: the plan's can_certify_in flips at (1 - tau)^(1/|D|)."""
    from certified_circuits.core.planning import in_impossible_from

    boundary = in_impossible_from(tau, n_examples)
    assert boundary ** n_examples == pytest.approx(1 - tau, rel=1e-12)
    below, above = boundary * (1 - 1e-6), min(boundary * (1 + 1e-6), 0.999999)
    setting = cc.Setting(p_del=below, n0=100, n=100_000, tau=tau, alpha=0.001)
    assert cc.plan(n_examples, 10, setting).can_certify_in
    assert not cc.plan(n_examples, 10, setting.replace(p_del=above)).can_certify_in
