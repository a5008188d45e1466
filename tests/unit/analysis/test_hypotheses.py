"""H1-H3 of the testbed (analysis/hypotheses.py), over model seeds from the workflow's truth-size tables
(``report-hypotheses``): the seed is the unit (concepts and settings averaged within it), p-values against the exact
enumeration of the 2^n sign vectors, Holm within each hypothesis, H2 on the certificates that can and do certify IN,
"untestable at n=3". (The noise sweep's older test is tested in test_noise_sweep_wilcoxon.py.)"""

from __future__ import annotations

import pandas as pd
import pytest

from certified_circuits.analysis.hypotheses import truth_size_hypotheses
from tests.helpers.truth_size_tables import certificate, write_seed

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
