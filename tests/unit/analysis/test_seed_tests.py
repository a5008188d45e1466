"""Hypotheses over model seeds (analysis/seed_tests.py): the exact sign-flip test on cases enumerated by hand, Holm
against the engine's rule and statsmodels, the seed as the unit, and "untestable" where no p can reach alpha."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from certified_circuits.analysis.seed_tests import (
    holm_adjust,
    min_pvalue,
    seed_hypothesis_table,
    seed_values,
    sign_flip_test,
)
from certified_circuits.core.certification import reject


def test_sign_flip_p_values_equal_the_hand_enumeration():
    # |d| = (1, 2, 3): the 8 signed sums are 6, 0, 2, -4, 4, -2, 0, -6; d = (1, -2, 3) sums to 2
    assert sign_flip_test([1, -2, 3], "greater") == (pytest.approx(2 / 3), 3 / 8)  # sums >= 2: 6, 2, 4
    assert sign_flip_test([1, -2, 3], "less")[1] == 6 / 8  # sums <= 2: 0, 2, -4, -2, 0, -6
    assert sign_flip_test([1, 2, 3], "greater")[1] == 1 / 8  # only all plus reaches 6
    assert sign_flip_test([0.5] * 8, "greater")[1] == 1 / 256
    assert sign_flip_test([-0.5] * 8, "greater")[1] == 1.0


def test_zero_differences_bound_the_smallest_p():
    assert sign_flip_test([0, 0, 1], "greater")[1] == 0.5  # the zeros' signs do not change the sum
    assert min_pvalue([0, 0, 1]) == 0.5 and min_pvalue([0.1] * 8) == 1 / 256 and min_pvalue([0, 0]) == 1.0
    assert sign_flip_test([0, 0, 0], "greater")[1] == 1.0


@pytest.mark.parametrize("bad, message", [([], "non-empty"), ([1, np.nan], "finite"), ([1] * 21, "n <= 20")])
def test_the_test_refuses_what_it_cannot_enumerate(bad, message):
    with pytest.raises(ValueError, match=message):
        sign_flip_test(bad)


def test_holm_adjusted_p_values_by_hand_and_against_the_engine_and_statsmodels(multipletests):
    np.testing.assert_allclose(holm_adjust([0.01, 0.04, 0.03]), [0.03, 0.06, 0.06])
    assert np.isnan(holm_adjust([0.01, np.nan])[1]) and holm_adjust([0.01, np.nan])[0] == 0.01  # NaN not counted
    rng = np.random.default_rng(0)
    for _ in range(50):
        p = rng.random(int(rng.integers(1, 12))) ** 3
        np.testing.assert_allclose(holm_adjust(p), multipletests(p, method="holm")[1], rtol=1e-12)
        assert ((holm_adjust(p) < 0.05) == reject(p, 0.05, "holm")).all()


def _matched(n_seeds: int, lift: float) -> pd.DataFrame:
    """Two concepts x two settings per seed; certified precision above the baseline's by ``lift`` (+ seed jitter)."""
    rows = []
    for seed in range(n_seeds):
        for concept in ("a", "b"):
            for setting in ("s1", "s2"):
                for scorer in ("EAP-IG", "EAP"):
                    for method in ("certified_in", "certified_in_abstain"):
                        base = 0.5 + 0.01 * seed
                        rows.append({"seed": seed, "concept": concept, "setting": setting, "scorer": scorer,
                                     "method": method, "precision": base + lift, "baseline_precision": base,
                                     "recall": base, "baseline_recall": base})
    return pd.DataFrame(rows)


def _stability(n_seeds: int) -> pd.DataFrame:
    return pd.DataFrame([{"seed": s, "scorer": sc, "certified_change_share": 0.01, "baseline_change_share": 0.02,
                          "can_certify_in": setting == "s1", "certified_in_any": True}
                         for s in range(n_seeds) for sc in ("EAP-IG", "EAP") for setting in ("s1", "s2")])


def test_the_seed_is_the_unit_and_holm_spans_scorers_and_methods():
    table = seed_hypothesis_table(_matched(8, 0.1), _stability(8), list(range(8)))
    h1 = table[table["hypothesis"] == "H1"]
    assert len(h1) == 4 and set(h1["n_seeds"]) == {8}  # 2 concepts x 2 settings per seed are one pair
    assert set(h1["pvalue"]) == {1 / 256} and set(h1["pvalue_holm"]) == {4 / 256}
    assert set(h1["status"]) == {"holds"}
    h2 = table[table["hypothesis"] == "H2"]
    assert set(h2["pvalue_holm"]) == {2 / 256} and set(h2["status"]) == {"holds"}
    h3 = table[table["hypothesis"] == "H3"]
    assert set(h3["mean_difference"]) == {0.0} and set(h3["status"]) == {"untestable at n=8"}  # no non-zero pair


def test_three_seeds_are_untestable_not_a_failure():
    table = seed_hypothesis_table(_matched(3, 0.1), _stability(3), [0, 1, 2])
    assert set(table[table["hypothesis"] == "H1"]["status"]) == {"untestable at n=3"}
    assert set(table["min_pvalue"][table["hypothesis"] == "H1"]) == {1 / 8}


def test_empty_certified_circuits_drop_their_seed_and_are_counted():
    matched = _matched(8, 0.1)
    matched.loc[matched["seed"] == 5, "precision"] = np.nan
    per_seed, dropped = seed_values(matched[matched["method"] == "certified_in"], "precision", "baseline_precision",
                                    list(range(8)))
    assert per_seed["seed"].tolist() == [0, 1, 2, 3, 4, 6, 7] and dropped == 1
    with pytest.raises(ValueError, match="repeat a seed"):
        seed_hypothesis_table(matched, _stability(8), [0, 0, 1])
