"""H1-H3 of the noisy testbed (analysis/hypotheses.py): the pairing of concepts x seeds x settings, the one-sided
paired test against an exact enumeration of the signed-rank distribution, and when each claim holds."""

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


def test_h1b_reads_both_circuits_at_the_certified_selections_k_and_h2_the_flip_shares() -> None:
    recovery = _recovery([0.9, 0.8, 0.85, 0.9, 0.7], [0.5] * 5, [0.5] * 5, [0.5] * 5)
    auroc = pd.DataFrame([dict(experiment="world", scorer="relevance", seed=0, concept=c, setting="s",
                               method="certified_in", k_target=0.5, at_selected_setting=True) for c in "abcde"])
    stability = pd.DataFrame([dict(experiment="world", scorer="relevance", seed=0, concept=c, setting="s",
                                   k_target=k, baseline_change_share=0.02 + 0.01 * i,
                                   certified_flip_share=0.0) for i, c in enumerate("abcde") for k in (0.2, 0.5)])
    table = hypothesis_table(recovery, stability, auroc).set_index("hypothesis")
    # at K 0.5 the certified precisions are 0.4, 0.3, 0.35, 0.4, 0.2 against 0.5: certified is lower everywhere
    assert table.loc["H1b", "k"] == 0.5 and table.loc["H1b", "certified"] == pytest.approx(0.33)
    assert table.loc["H1b", "pvalue"] == pytest.approx(1.0)  # W+ = 0: every sign pattern is at least as large
    assert not table.loc["H1b", "holds"]
    assert table.loc["H2", "n_pairs"] == 5 and table.loc["H2", "pvalue"] == pytest.approx(1 / 32)
    assert table.loc["H2", "holds"] and table.loc["H2", "alternative"] == "less"


def test_a_table_without_its_columns_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="the recovery table is missing column"):
        hypothesis_table(pd.DataFrame({"experiment": ["world"]}))


def test_report_hypotheses_pools_the_seeds_and_refuses_a_bad_seed(tmp_path, capsys) -> None:
    from certified_circuits.cli.main import main

    folders = []
    for seed in (0, 1):
        folder = tmp_path / f"s{seed}" / "testbed"
        folder.mkdir(parents=True)
        recovery = _recovery([0.9, 0.8, 0.85, 0.9, 0.7], [0.5] * 5, [0.5] * 5, [0.5] * 5)
        recovery.drop(columns="seed").to_csv(folder / "recovery.csv", index=False)
        pd.DataFrame([dict(experiment="world", scorer="relevance", concept=c, setting="s", method="certified_in",
                           auroc=0.5, k_target=0.2, at_selected_setting=True) for c in "abcde"]
                     ).to_csv(folder / "recovery_auroc.csv", index=False)
        folders.append(str(folder))
    out = tmp_path / "out"
    assert main(["report-hypotheses", "--run", "0", folders[0], "--run", "1", folders[1], "--out-dir", str(out)]) == 0
    table = pd.read_csv(out / "hypotheses.csv").set_index("hypothesis")
    assert list(table.index) == ["H1a", "H1b", "H3"]  # no stability table: no H2
    assert table.loc["H1a", "n_pairs"] == 10 and table.loc["H1a", "pvalue"] == pytest.approx(1 / 2**10)
    assert "| H1a | world | relevance |" in (out / "hypotheses.md").read_text()
    for bad in (["--run", "01", folders[0]], ["--run", "0", folders[0], "--run", "0", folders[1]]):
        with pytest.raises(SystemExit) as caught:
            main(["report-hypotheses", *bad, "--out-dir", str(tmp_path / "bad")])
        assert caught.value.code == 2 and "without leading zeros, each seed once" in capsys.readouterr().err
