"""The public API (``import certified_circuits as cc``): certify_algorithm, certify_scores, Certificate.

Expected values come from independent computations: the mask streams are re-drawn here from numpy's
documented SeedSequence/PCG64 recipe, and p-values from scipy.stats.binom, never from the package.
"""

from __future__ import annotations


import numpy as np
import pytest
from scipy import stats

import certified_circuits as cc
from tests.helpers.fresh import fresh_output

SETTING = cc.Setting(p_del=0.5, n0=20, n=200, seed=7, tau=0.75, alpha=0.05, correction="bonferroni")


def _independent_masks(n_examples: int, setting: cc.Setting) -> tuple[np.ndarray, np.ndarray]:
    """Selection and certification masks as the paper's recipe says: two spawned children of one seed."""
    sel_seed, cert_seed = np.random.SeedSequence(setting.seed).spawn(2)
    draw = lambda seed, count: np.random.Generator(np.random.PCG64(seed)).random((count, n_examples)) >= setting.p_del
    return draw(sel_seed, setting.n0), draw(cert_seed, setting.n)


class KeepsExampleZero:
    """A toy algorithm with a known vote: component 0 is in iff example 0 was kept, component 1 is
    always in, component 2 never (module level, so it pickles for workers > 1)."""

    def __call__(self, kept: np.ndarray) -> np.ndarray:
        return np.array([0 in kept, True, False])


def test_votes_p_values_and_decisions_match_an_independent_computation():
    cert = cc.certify_algorithm(KeepsExampleZero(), 5, SETTING, progress=False)
    sel, ver = _independent_masks(5, SETTING)
    np.testing.assert_array_equal(cert.selection_counts, [sel[:, 0].sum(), SETTING.n0, 0])
    np.testing.assert_array_equal(cert.certification_counts, [ver[:, 0].sum(), SETTING.n, 0])
    # agreeing votes with the guess: the guess is "in" iff the selection votes are a majority
    guess_in = sel[:, 0].sum() > SETTING.n0 / 2
    agree0 = ver[:, 0].sum() if guess_in else SETTING.n - ver[:, 0].sum()
    expected_p = [stats.binom.sf(k - 1, SETTING.n, SETTING.tau) for k in (agree0, SETTING.n, SETTING.n)]
    np.testing.assert_allclose(cert.pvalue, expected_p, rtol=1e-9, atol=1e-300)
    # example 0 is kept with probability 0.5 < tau: never certified; the others are (p = 0.75^200)
    assert cert.decision.tolist() == [cc.ABSTAIN, cc.IN, cc.OUT]
    assert cert.baseline.tolist() == [True, True, False]
    assert cert.decision.dtype == np.int8
    assert cert.radius == 0  # floor(log(1.5 - 0.75) / log(0.5)) = floor(0.415) = 0


def test_bonferroni_divides_alpha_by_the_number_of_components():
    """One component with p-value between alpha / U and alpha: certified alone, abstains among U = 40."""
    setting = cc.Setting(p_del=0.3, n0=10, n=30, seed=0, tau=0.9, alpha=0.05, correction="bonferroni")
    # P(Bin(30, 0.9) >= 30) = 0.9^30 = 0.042: below alpha = 0.05, above alpha / 40
    assert setting.alpha / 40 < 0.9**30 < setting.alpha
    # the planner says so before any sampling: U = 1 can certify, U = 40 cannot (and refuses by default)
    assert cc.plan(8, 1, setting).can_certify_in and cc.plan(8, 40, setting).vacuous
    alone = cc.certify_algorithm(lambda kept: np.array([True]), 8, setting, progress=False)
    with pytest.raises(cc.VacuousSettingError, match="min_samples = 64"):
        cc.certify_algorithm(lambda kept: np.ones(40, dtype=bool), 8, setting, progress=False)
    many = cc.certify_algorithm(lambda kept: np.ones(40, dtype=bool), 8, setting, progress=False, allow_vacuous=True)
    np.testing.assert_allclose(alone.pvalue, [0.9**30], rtol=1e-12)
    assert alone.decision.tolist() == [cc.IN]
    assert (many.decision == cc.ABSTAIN).all()


def test_certify_scores_equals_the_naive_path_exactly():
    rng = np.random.default_rng(3)
    scores = rng.normal(size=(25, 16)) + np.linspace(-1.0, 1.0, 16)
    groups = np.repeat([0, 1], 8)
    k_grid = np.array([0.25, 0.5, 0.75])
    setting = cc.Setting(p_del=0.4, n0=30, n=150, seed=11, tau=0.7, alpha=0.05, correction="holm")
    for absolute in (False, True):
        cached = cc.certify_scores(scores, groups, k_grid, setting, absolute=absolute)
        naive = cc.certify_algorithm(
            cc.TopKDiscovery(scores, groups, k_grid, absolute), 25, setting, k_grid=k_grid, progress=False
        )
        for name in ("decision", "selection_counts", "certification_counts", "baseline", "majority"):
            np.testing.assert_array_equal(getattr(cached, name), getattr(naive, name), err_msg=name)
        assert cached.decision.shape == (3, 16)
        assert {cc.IN, cc.OUT} <= set(np.unique(cached.decision).tolist())  # a non-trivial case


@pytest.mark.slow
def test_parallel_workers_give_the_same_counts():
    setting = cc.Setting(p_del=0.5, n0=12, n=40, seed=3, tau=0.75, alpha=0.05, correction="bonferroni")
    one = cc.certify_algorithm(KeepsExampleZero(), 6, setting, progress=False)
    two = cc.certify_algorithm(KeepsExampleZero(), 6, setting, workers=2, progress=False)
    np.testing.assert_array_equal(one.selection_counts, two.selection_counts)
    np.testing.assert_array_equal(one.certification_counts, two.certification_counts)


def test_changing_n0_leaves_the_certification_stream_alone():
    a = cc.certify_algorithm(KeepsExampleZero(), 9, SETTING, progress=False)
    b = cc.certify_algorithm(KeepsExampleZero(), 9, cc.Setting(**{**SETTING.__dict__, "n0": 33}), progress=False)
    np.testing.assert_array_equal(a.certification_counts, b.certification_counts)
    assert a.selection_counts[0] != a.certification_counts[0]  # the two streams are not the same draw


def test_save_and_load_round_trip(tmp_path):
    cert = cc.certify_algorithm(KeepsExampleZero(), 5, SETTING, progress=False, attrs={"concept": "toy"})
    path = cert.save(tmp_path / "toy.h5")
    back = cc.Certificate.load(path)
    assert back.setting == SETTING and back.n_examples == 5 and back.k_grid is None
    # the caller's labels and the plan it ran under (radius 0 at tau 0.75, p_del 0.5: marginal)
    assert (
        back.attrs
        == cert.attrs
        == {"concept": "toy", "plan_verdict": "marginal", "plan_warnings": back.attrs["plan_warnings"]}
    )
    assert back.attrs["plan_warnings"].startswith("radius 0:")
    for name in ("decision", "pvalue", "selection_counts", "certification_counts", "baseline", "majority"):
        np.testing.assert_array_equal(getattr(back, name), getattr(cert, name), err_msg=name)
    assert back.radius == cert.radius


def test_a_grid_certificate_is_also_a_votes_and_certificates_file(tmp_path):
    from certified_circuits.storage.store import read_certificates, read_votes

    rng = np.random.default_rng(0)
    cert = cc.certify_scores(rng.normal(size=(10, 6)), np.zeros(6, int), [0.5, 1.0], SETTING)
    path = cert.save(tmp_path / "grid.h5")
    votes, certificates = read_votes(path), read_certificates(path)
    np.testing.assert_array_equal(votes.certification_counts, cert.certification_counts)
    np.testing.assert_array_equal(certificates.decision, cert.decision)
    assert certificates.attrs["tau"] == SETTING.tau and votes.attrs["n"] == SETTING.n


@pytest.mark.parametrize(
    "output, message",
    [
        (lambda kept: np.array([0.3, 0.9]), "values other than 0/1"),
        (lambda kept: np.ones(len(kept) + 1, dtype=bool), "same components"),
        (lambda kept: np.ones((2, 2, 2), dtype=bool), "must return a bool"),
    ],
)
def test_a_misbehaving_algorithm_is_named(output, message):
    with pytest.raises(ValueError, match=message):
        cc.certify_algorithm(output, 4, SETTING, progress=False)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"tau": 0.4}, "tau"),
        ({"p_del": 1.0}, "p_del"),
        ({"n": 0}, "n="),
        ({"alpha": 0.0}, "alpha"),
        ({"correction": "sidak"}, "correction"),
        ({"seed": -1}, "seed"),
    ],
)
def test_a_bad_setting_fails_on_construction(change, message):
    with pytest.raises(ValueError, match=message):
        cc.Setting(**{**SETTING.__dict__, **change})


def test_import_is_light():
    code = (
        "import sys, certified_circuits as cc; heavy = [m for m in ('torch', 'mlflow', 'snakemake', 'pandas', "
        "'matplotlib', 'transformers', 'h5py') if m in sys.modules]; print(heavy); "
        "assert sorted(cc.__all__) == sorted(set(cc.__all__)); [getattr(cc, n) for n in cc.__all__]"
    )
    assert fresh_output(code, timeout=60) == "[]"


def test_tau_is_checked_where_a_setting_is_built_and_not_again(monkeypatch):
    """``check_tau`` runs at the boundary: when a Setting is built (the API builds one from a raw tau), and in
    the public functions that take a raw tau; the planner, the decision rule and the radius of a validated Setting
    do not run it again (issue 43: a walk of tau from certify_votes ran it seven times)."""
    import sys as _sys

    from certified_circuits.core import certification, validation
    from certified_circuits.core.smoothing import compute_votes

    callers: list[str] = []
    original = validation.check_tau

    def counted(tau):
        callers.append(_sys._getframe(1).f_code.co_name)
        return original(tau)

    monkeypatch.setattr(validation, "check_tau", counted)  # Setting.__post_init__ imports it from here
    monkeypatch.setattr(certification, "check_tau", counted)
    scores = np.random.default_rng(0).normal(size=(12, 6))
    votes = compute_votes(scores, np.zeros(6, np.int32), [0.5], 0.5, 20, 200, 7)
    with pytest.warns(cc.PlanWarning):
        cert = cc.certify_votes(votes, 0.75, 0.05)
        cc.certify_scores(scores, np.zeros(6, np.int32), [0.5], SETTING)
    assert cert.radius == 0 and callers and set(callers) == {"__post_init__"}, callers
    callers.clear()
    # the public functions that take a raw tau still check it, once each
    for call in (
        lambda: cc.certified_radius(1.0, 0.5),
        lambda: cc.min_samples(0.4, 0.01),
        lambda: certification.pvalues(np.zeros(2, int), np.zeros(2, int), 2, 2, 1.5),
        lambda: certification.decide(np.zeros(2, int), np.zeros(2, int), 2, 2, 0.2, 0.05),
        lambda: certification.certify_votes(votes, 1.0, 0.05),
    ):
        with pytest.raises(ValueError, match="tau="):
            call()
    assert len(callers) == 5
