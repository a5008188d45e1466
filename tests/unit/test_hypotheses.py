"""H1-H3 of the testbed (analysis/hypotheses.py). Over model seeds from the workflow's truth-size tables
(``report-hypotheses``): the seed is the unit (concepts and settings averaged within it), p-values against the exact
enumeration of the 2^n sign vectors, Holm within each hypothesis, H2 on the certificates that can and do certify IN,
"untestable at n=3". The noise sweep's test (``hypothesis_table``): the pairing of concepts x seeds x settings, the
one-sided paired test against an exact enumeration of the signed-rank distribution, and when each claim holds."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from certified_circuits.analysis.evaluation import signed_rank_test as paired_test
from certified_circuits.analysis.hypotheses import hypothesis_table


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


def test_h1a_and_h3_pair_the_concepts_at_the_truths_size() -> None:
    certified = [0.9, 0.8, 0.85, np.nan, 0.7]  # concept d: an empty certified circuit, left out of H1
    baseline = [0.5, 0.6, 0.4, 0.5, 0.65]
    table = hypothesis_table(_recovery(certified, baseline, [0.6, 0.6, 0.6, 0.6, 0.6], [0.5, 0.5, 0.7, 0.5, 0.5]))
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
    table = hypothesis_table(pd.DataFrame(rows)).set_index("hypothesis")
    assert table.loc["H1a", "n_pairs"] == 12 and table.loc["H1a", "pvalue"] == pytest.approx(1 / 2**12)
    assert table.loc["H1a", "holds"] and not table.loc["H3", "holds"]  # recall 0.2 vs 0.6 in every pair


def test_h2_pairs_the_flip_shares_at_the_truths_size() -> None:
    recovery = _recovery([0.9, 0.8, 0.85, 0.9, 0.7], [0.5] * 5, [0.5] * 5, [0.5] * 5)
    stability = pd.DataFrame([dict(experiment="world", scorer="relevance", seed=0, concept=c, setting="s",
                                   k_target=k, baseline_change_share=0.02 + 0.01 * i,
                                   certified_flip_share=0.0) for i, c in enumerate("abcde") for k in (0.2, 0.5)])
    table = hypothesis_table(recovery, stability).set_index("hypothesis")
    assert list(table.index) == ["H1a", "H2", "H3"]
    assert table.loc["H2", "k"] == 0.2 and table.loc["H2", "n_pairs"] == 5
    assert table.loc["H2", "pvalue"] == pytest.approx(1 / 32, rel=1e-9)  # every pair lower: only all-minus reaches it
    assert table.loc["H2", "holds"] and table.loc["H2", "alternative"] == "less"


def test_a_table_without_its_columns_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="the recovery table is missing column"):
        hypothesis_table(pd.DataFrame({"experiment": ["world"]}))


# ------------------------------------------------------------------ over model seeds, from the truth-size tables

from certified_circuits.analysis.hypotheses import truth_size_hypotheses  # noqa: E402
from tests.helpers.truth_size_tables import certificate, write_seed  # noqa: E402

SEEDS = tuple(range(8))


def _by(table: pd.DataFrame, hypothesis: str, scorer: str, method: str) -> pd.Series:
    row = table[(table["hypothesis"] == hypothesis) & (table["scorer"] == scorer) & (table["method"] == method)]
    assert len(row) == 1
    return row.iloc[0]


def _hypotheses(tables: dict[int, pd.DataFrame]) -> pd.DataFrame:
    return truth_size_hypotheses(tables, {seed: f"s{seed}.csv" for seed in tables}, "fix")


def _two_scorers(seed: int) -> pd.DataFrame:
    """Two concepts and two scorers per seed. relevance: certified IN 0.6 against 0.5 in seeds 0-6, 0.4 in seed 7;
    H2 shares 0.01 against 0.03; recall 0.6 against 0.5. activation: certified IN 0.7 + 0.01 seed against 0.5; H2 0.01
    against 0.03 in seeds 0-6, 0.04 against 0.03 in seed 7; recall 0.4 against 0.5. IN + abstain 0.55 against 0.5."""
    rows = []
    for concept in ("a", "b"):
        rows += certificate(concept, "relevance", cert_in=(0.6 if seed < 7 else 0.4, 0.5), in_abstain=(0.55, 0.5),
                            recall=(0.6, 0.5), change=(0.01, 0.03))
        rows += certificate(concept, "activation", cert_in=(0.7 + 0.01 * seed, 0.5), in_abstain=(0.55, 0.5),
                            recall=(0.4, 0.5), change=(0.01 if seed < 7 else 0.04, 0.03))
    return pd.DataFrame(rows)


def test_seed_p_values_equal_the_enumeration_and_holm_spans_each_hypothesis() -> None:
    table = _hypotheses({seed: _two_scorers(seed) for seed in SEEDS})
    assert list(table["hypothesis"]) == ["H1"] * 4 + ["H2"] * 2 + ["H3"] * 2
    assert set(table["n_seeds"]) == {8} and set(table["n_dropped"]) == {0} and set(table["experiment"]) == {"world"}
    # relevance, certified IN: |d| = 0.1 in every seed, one negative: the signed sums >= 0.6 are those with at most
    # one minus, 1 + 8 of the 256 sign vectors
    h1 = _by(table, "H1", "relevance", "certified_in")
    assert h1["pvalue"] == pytest.approx(9 / 256, abs=1e-15) and h1["mean_difference"] == pytest.approx(0.075)
    for scorer, method in (("activation", "certified_in"), ("relevance", "certified_in_abstain"),
                           ("activation", "certified_in_abstain")):
        row = _by(table, "H1", scorer, method)
        assert row["pvalue"] == 1 / 256 and row["pvalue_holm"] == pytest.approx(4 / 256, abs=1e-15)  # Holm over 4
    assert h1["pvalue_holm"] == pytest.approx(9 / 256, abs=1e-15)  # the largest of 4: max(4 x 1/256, 1 x 9/256)
    assert set(table.loc[table["hypothesis"] == "H1", "status"]) == {"holds"}
    assert _by(table, "H1", "activation", "certified_in")["certified"] == pytest.approx(0.7 + 0.01 * 3.5)
    # H2: relevance's 8 differences are all -0.02 (p 1/256); activation's are -0.02 x 7 and +0.01: the sums <= -0.13
    # are all-minus (-0.15) and the observed one (-0.13), so p = 2/256; Holm over the 2 scorers doubles the smallest
    h2_rel, h2_act = _by(table, "H2", "relevance", "certified_labels"), _by(table, "H2", "activation", "certified_labels")
    assert h2_rel["pvalue"] == 1 / 256 and h2_act["pvalue"] == pytest.approx(2 / 256, abs=1e-15)
    assert h2_rel["pvalue_holm"] == pytest.approx(2 / 256, abs=1e-15) == h2_act["pvalue_holm"]
    assert h2_rel["alternative"] == "less" and h2_rel["status"] == h2_act["status"] == "holds"
    # H3 (non-inferiority, test of "lower"): relevance's recall is higher in every seed (p 1: holds); activation's is
    # lower in every seed (p 1/256, Holm 2/256: rejected, does not hold)
    h3_rel, h3_act = _by(table, "H3", "relevance", "certified_in_abstain"), _by(table, "H3", "activation",
                                                                                 "certified_in_abstain")
    assert h3_rel["pvalue"] == 1.0 and h3_rel["status"] == "holds"
    assert h3_act["pvalue_holm"] == pytest.approx(2 / 256, abs=1e-15) and h3_act["status"] == "does not hold"


def test_concepts_and_settings_are_averaged_within_a_seed_not_counted_as_pairs() -> None:
    def seed_table(seed: int, concepts: str, settings: tuple[str, ...]) -> pd.DataFrame:
        precision = {"a": 0.6 + 0.01 * seed, "b": 0.8, "c": 0.45}  # c is below its baseline 0.5 in every seed
        return pd.DataFrame([row for c in concepts for s in settings
                             for row in certificate(c, setting=s, cert_in=(precision[c], 0.5))])

    one = _by(_hypotheses({s: seed_table(s, "a", ("s",)) for s in SEEDS}), "H1", "relevance", "certified_in")
    many = _by(_hypotheses({s: seed_table(s, "abc", ("s1", "s2")) for s in SEEDS}), "H1", "relevance", "certified_in")
    assert one["n_seeds"] == many["n_seeds"] == 8 and one["min_pvalue"] == many["min_pvalue"] == 1 / 256
    assert many["pvalue"] == 1 / 256  # each seed's mean of a, b, c is above 0.5: 8 positive differences, not 48 pairs
    # seed s averages (0.6 + 0.01 s + 0.8 + 0.45) / 3; the mean over seeds 0-7 of it
    assert many["certified"] == pytest.approx((0.6 + 0.035 + 0.8 + 0.45) / 3, abs=1e-12)
    assert many["baseline"] == pytest.approx(0.5, abs=1e-12)


def test_h2_reads_only_certificates_that_can_and_do_certify_in() -> None:
    def seed_table(seed: int) -> pd.DataFrame:
        # seed 7 certifies nothing IN on any resample: no certificate of it is read by H2
        rows = certificate("a", change=(0.01, 0.03)) if seed < 7 else certificate("a", change=(0.5, 0.03),
                                                                                   certified_in_any=False)
        rows += certificate("b", change=(0.5, 0.03), can_certify_in=False)  # would reverse H2 if read
        rows += certificate("c", change=(0.9, 0.03), certified_in_any=False)
        return pd.DataFrame(rows)

    table = _hypotheses({seed: seed_table(seed) for seed in SEEDS})
    h2 = _by(table, "H2", "relevance", "certified_labels")
    assert h2["n_seeds"] == 7 and h2["n_dropped"] == 1 and h2["seeds"] == "0 1 2 3 4 5 6"
    assert h2["certified"] == pytest.approx(0.01) and h2["baseline"] == pytest.approx(0.03)
    assert h2["pvalue"] == 1 / 128 and h2["status"] == "holds"
    assert _by(table, "H1", "relevance", "certified_in")["n_seeds"] == 8  # H1 reads every certificate


def test_three_seeds_are_untestable_not_a_failure() -> None:
    table = _hypotheses({seed: _two_scorers(seed) for seed in (0, 1, 2)})
    assert set(table["n_seeds"]) == {3} and set(table["min_pvalue"]) == {1 / 8}
    assert set(table["status"]) == {"untestable at n=3"}
    assert _by(table, "H1", "activation", "certified_in")["pvalue"] == 1 / 8  # the smallest p 3 seeds allow


def test_report_hypotheses_writes_the_seed_table_and_says_what_the_unit_is(tmp_path) -> None:
    from certified_circuits.cli.main import main

    runs = []
    for seed in SEEDS:
        runs += ["--run", str(seed), str(write_seed(tmp_path / f"s{seed}" / "testbed", _two_scorers(seed).to_dict(
            "records")))]
    out = tmp_path / "out"
    assert main(["report-hypotheses", *runs, "--out-dir", str(out)]) == 0
    table = pd.read_csv(out / "hypotheses.csv")
    assert list(table.columns[:5]) == ["experiment", "hypothesis", "claim", "scorer", "method"]
    h1 = _by(table, "H1", "relevance", "certified_in")
    assert h1["pvalue"] == pytest.approx(9 / 256, abs=1e-15) and h1["n_seeds"] == 8 and h1["seeds"] == "0 1 2 3 4 5 6 7"
    assert _by(table, "H2", "activation", "certified_labels")["pvalue_holm"] == pytest.approx(2 / 256, abs=1e-15)
    text = (out / "hypotheses.md").read_text()
    assert f"The unit is the model seed, n = 8 (0: {tmp_path / 's0' / 'testbed'};" in text
    assert "(world: 2 concept(s) x 1 setting(s)), so each seed is one pair" in text
    assert "correction: Holm within each hypothesis (across its scorers and methods, per experiment)" in text
    assert "'untestable at n=...' means the test cannot reach p < 0.05 at that n" in text
    assert "| world | H1 | relevance | certified_in | 8 |" in text
