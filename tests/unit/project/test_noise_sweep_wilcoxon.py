"""The noise sweep's own historical hypothesis test (experiments/noise_sweep_wilcoxon.py, moved out of
analysis/hypotheses.py by issue 52; the accepted test is analysis/seed_tests via ``report-hypotheses``): the pairing
of concepts x seeds x settings, the one-sided paired test against an exact enumeration of the signed-rank
distribution, when each claim holds, and the refusals it shares with the library's table checks."""

from __future__ import annotations

import itertools
import sys

import numpy as np
import pandas as pd
import pytest

from certified_circuits.analysis.evaluation import signed_rank_test as paired_test
from tests.helpers.scripts import load_script

wilcoxon = load_script("experiments/noise_sweep_wilcoxon.py")


def exact_greater_p(diff: list[float]) -> float:
    """P(W+ >= observed) under H0, by enumerating all 2^n sign patterns of the ranks (no ties, no zeros)."""
    ranks = pd.Series(np.abs(diff)).rank().to_numpy()
    observed = ranks[np.asarray(diff) > 0].sum()
    sums = [sum(r for r, s in zip(ranks, signs) if s) for signs in itertools.product([0, 1], repeat=len(diff))]
    return float(np.mean(np.asarray(sums) >= observed - 1e-12))


@pytest.mark.parametrize("diff", [[0.1, 0.2, 0.3, 0.4, 0.5], [0.3, -0.1, 0.2, 0.5, -0.05, 0.4], [-0.2, 0.1, -0.3]])
def test_the_one_sided_test_is_the_exact_signed_rank_test(diff: list[float]) -> None:
    statistic, p = paired_test(np.asarray(diff) + 1.0, np.ones(len(diff)), "greater")
    assert p == pytest.approx(exact_greater_p(diff), rel=1e-9)
    _, p_less = paired_test(np.asarray(diff) + 1.0, np.ones(len(diff)), "less")
    assert p_less == pytest.approx(exact_greater_p([-d for d in diff]), rel=1e-9)
    assert paired_test(np.ones(4), np.ones(4), "greater") == (0.0, 1.0)  # no difference: no evidence
    assert all(np.isnan(paired_test(np.ones(1), np.zeros(1), "greater")))


def _recovery(certified: list[float], baseline: list[float], recall_cia: list[float], recall_b: list[float]) -> pd.DataFrame:
    """5 pairs (concepts a-e, seed 0) at the truth's size K 0.2 (n_true 2 of 10) and a second K 0.5."""
    rows = []
    for i, concept in enumerate("abcde"):
        for k in (0.2, 0.5):
            shift = 0.0 if k == 0.2 else -0.5  # another K: must not be read
            for method, precision, recall in (("certified_in", certified[i] + shift, 0.5),
                                              ("baseline", baseline[i], recall_b[i]),
                                              ("certified_in_abstain", 0.3, recall_cia[i])):
                rows.append(dict(experiment="world", scorer="relevance", seed=0, concept=concept, setting="s",
                                 method=method, k_target=k, precision=precision, recall=recall, n_true=2,
                                 n_components=10))
    return pd.DataFrame(rows)


def _stability() -> pd.DataFrame:
    """The flip shares of concepts a-e (seed 0) at K 0.2 and 0.5: certified labels never flip, baseline memberships
    change in 2%-6% of resamples."""
    return pd.DataFrame([dict(experiment="world", scorer="relevance", seed=0, concept=c, setting="s", k_target=k,
                              baseline_change_share=0.02 + 0.01 * i, certified_flip_share=0.0)
                         for i, c in enumerate("abcde") for k in (0.2, 0.5)])


def test_h1a_and_h3_pair_the_concepts_at_the_truths_size() -> None:
    certified = [0.9, 0.8, 0.85, np.nan, 0.7]  # concept d: an empty certified circuit, left out of H1
    baseline = [0.5, 0.6, 0.4, 0.5, 0.65]
    table = wilcoxon.hypothesis_table(_recovery(certified, baseline, [0.6, 0.6, 0.6, 0.6, 0.6], [0.5, 0.5, 0.7, 0.5, 0.5]))
    h1 = table.set_index("hypothesis").loc["H1a"]
    assert h1["k"] == 0.2 and h1["n_pairs"] == 4 and h1["n_dropped"] == 1
    assert h1["certified"] == pytest.approx(np.mean([0.9, 0.8, 0.85, 0.7]))
    assert h1["mean_difference"] == pytest.approx(np.mean([0.4, 0.2, 0.45, 0.05]))
    assert h1["pvalue"] == pytest.approx(exact_greater_p([0.4, 0.2, 0.45, 0.05])) == pytest.approx(1 / 16)
    assert not h1["holds"]  # 4 pairs cannot reach p < 0.05 one-sided (the smallest exact p is 1/16)
    h3 = table.set_index("hypothesis").loc["H3"]  # recall differences 0.1, 0.1, -0.1, 0.1, 0.1: mean 0.06
    assert h3["n_pairs"] == 5 and h3["mean_difference"] == pytest.approx(0.06) and h3["alternative"] == "less"
    assert h3["holds"]  # not significantly lower, and higher on average


def test_h1a_holds_on_enough_pairs_and_h3_fails_when_recall_drops() -> None:
    n = 12
    rows = []
    for i in range(n):
        for method, precision, recall in (("certified_in", 0.8 + 0.01 * i, 0.2), ("baseline", 0.5, 0.6),
                                          ("certified_in_abstain", 0.5, 0.2)):
            rows.append(dict(experiment="world", scorer="relevance", seed=i % 3, concept=f"c{i // 3}", setting="s",
                             method=method, k_target=0.2, precision=precision, recall=recall, n_true=2,
                             n_components=10))
    table = wilcoxon.hypothesis_table(pd.DataFrame(rows)).set_index("hypothesis")
    assert table.loc["H1a", "n_pairs"] == 12 and table.loc["H1a", "pvalue"] == pytest.approx(1 / 2**12)
    assert table.loc["H1a", "holds"] and not table.loc["H3", "holds"]  # recall 0.2 vs 0.6 in every pair


def test_h2_pairs_the_flip_shares_at_the_truths_size() -> None:
    recovery = _recovery([0.9, 0.8, 0.85, 0.9, 0.7], [0.5] * 5, [0.5] * 5, [0.5] * 5)
    table = wilcoxon.hypothesis_table(recovery, _stability()).set_index("hypothesis")
    assert list(table.index) == ["H1a", "H2", "H3"]
    assert table.loc["H2", "k"] == 0.2 and table.loc["H2", "n_pairs"] == 5
    assert table.loc["H2", "pvalue"] == pytest.approx(1 / 32, rel=1e-9)  # every pair lower: only all-minus reaches it
    assert table.loc["H2", "holds"] and table.loc["H2", "alternative"] == "less"


def test_a_table_without_its_columns_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="the recovery table is missing column"):
        wilcoxon.hypothesis_table(pd.DataFrame({"experiment": ["world"]}))


def _plain() -> pd.DataFrame:
    """A valid recovery table: certified-in precision 0.7-0.9 against 0.5, recall 0.6 against 0.5."""
    return _recovery([0.7, 0.75, 0.8, 0.85, 0.9], [0.5] * 5, [0.6] * 5, [0.5] * 5)


def test_an_empty_or_repeated_pairing_cell_or_a_contradicting_count_is_refused() -> None:
    recovery = _plain()
    recovery.loc[2, "k_target"] = np.nan
    with pytest.raises(ValueError, match=r"^the recovery table: column 'k_target' is empty in row 4 \(1 rows\)"):
        wilcoxon.hypothesis_table(recovery)
    stability = pd.concat([_stability(), _stability().iloc[[0]]], ignore_index=True)
    with pytest.raises(ValueError, match=r"^the stability table: row 12 repeats row 2 \(experiment 'world'"):
        wilcoxon.hypothesis_table(_plain(), stability)
    recovery = _plain()
    recovery.loc[3, "n_true"] = 3  # concept a's K 0.5 rows say 3 true components, its K 0.2 rows 2
    with pytest.raises(ValueError, match=r"the rows of concept 'a' disagree on n_true \(row 5: 3, its first row: 2\)"):
        wilcoxon.hypothesis_table(recovery)


def test_a_pair_the_stability_table_lacks_is_counted_dropped() -> None:
    stability = _stability()
    stability = stability[stability["concept"] != "e"]  # concept e has no stability row: H2 drops it, by count
    table = wilcoxon.hypothesis_table(_plain(), stability).set_index("hypothesis")
    assert table.loc["H2", "n_pairs"] == 4 and table.loc["H2", "n_dropped"] == 1
    # the 4 pairs all lower (flip 0 < change 0.02-0.05): only the all-minus sign vector reaches it, p = 1/16
    assert table.loc["H2", "pvalue"] == pytest.approx(1 / 16, rel=1e-9) and not table.loc["H2", "holds"]


def test_the_sweep_runs_this_modules_test() -> None:
    """experiments/noise_sweep.py records this module's verdicts (its cell_hypotheses), not those of another copy."""
    sweep = load_script("experiments/noise_sweep.py")
    assert sweep.hypothesis_table is sys.modules["noise_sweep_wilcoxon"].hypothesis_table
