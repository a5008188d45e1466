"""Dataset-edit attack (Theorem 1 shown directly): edits, greedy adversary, flip shares, report-attack."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

from certified_circuits.cli import main as cli
from certified_circuits.core.edits import COLUMNS, adversarial_edit, edit_dataset, top_k_rows
from certified_circuits.reports.attack import attack_table
from certified_circuits.core.certification import certified_radius
from certified_circuits.core.discovery import GroupIndex, count_table, top_k_circuit
from certified_circuits.core.smoothing import full_dataset_circuits
from certified_circuits.storage.store import write_attributions
from certified_circuits.pipeline.tracking import collected_metrics

ATTACK_MODULE = "certified_circuits.cli.attack"


# ------------------------------------------------------------------------------------------ edits


def _labelled(n_rows: int, n_components: int, offset: float) -> np.ndarray:
    """Row i holds offset + i in every column, so every row of an edited matrix names its origin."""
    return np.repeat(offset + np.arange(n_rows, dtype=np.float64)[:, None], n_components, axis=1)


def test_edit_dataset_shapes_and_contents() -> None:
    scores, pool = _labelled(12, 5, 0.0), _labelled(7, 5, 100.0)
    ids = lambda m: m[:, 0].astype(int)  # noqa: E731

    deleted = edit_dataset(scores, pool, "delete", 3, np.random.default_rng(1))
    assert deleted.shape == (9, 5)
    kept = ids(deleted)
    assert np.all(np.diff(kept) > 0) and set(kept) < set(range(12))  # an ordered subsequence, 3 rows gone
    assert np.array_equal(deleted, scores[kept])

    inserted = edit_dataset(scores, pool, "insert", 3, np.random.default_rng(1))
    assert inserted.shape == (15, 5) and np.array_equal(inserted[:12], scores)
    new = ids(inserted[12:])
    assert len(set(new)) == 3 and set(new) <= set(range(100, 107))  # three distinct pool rows appended
    assert np.array_equal(inserted[12:], pool[new - 100])

    substituted = edit_dataset(scores, pool, "substitute", 3, np.random.default_rng(1))
    assert substituted.shape == (12, 5)
    changed = np.flatnonzero(ids(substituted) != np.arange(12))
    assert changed.size == 3  # exactly three positions changed, in place, each to a distinct pool row
    assert len(set(ids(substituted)[changed])) == 3 and set(ids(substituted)[changed]) <= set(range(100, 107))

    # seeded: the same generator state gives the same edit; r = 0 is a copy
    again = edit_dataset(scores, pool, "substitute", 3, np.random.default_rng(1))
    assert np.array_equal(again, substituted)
    copy = edit_dataset(scores, pool, "insert", 0, np.random.default_rng(1))
    assert np.array_equal(copy, scores) and copy is not scores
    # a pool smaller than r is drawn with replacement (inserting an example twice is an edit too)
    assert edit_dataset(scores, pool[:2], "insert", 5, np.random.default_rng(1)).shape == (17, 5)
    with pytest.raises(ValueError, match="at least one example must remain"):
        edit_dataset(scores, pool, "delete", 12, np.random.default_rng(1))
    with pytest.raises(ValueError, match="at most"):
        edit_dataset(scores, pool, "substitute", 13, np.random.default_rng(1))
    with pytest.raises(ValueError, match="same components"):
        edit_dataset(scores, pool[:, :4], "insert", 1, np.random.default_rng(1))


def test_candidate_top_k_is_the_base_algorithm(rng: np.random.Generator) -> None:
    """The vectorised candidate circuits equal discovery.top_k_circuit row by row (ties included)."""
    values = np.round(rng.normal(size=(40, 30)), 1)  # rounding makes ties at the cuts
    groups = np.repeat([2, 0, 1], 10)
    index = GroupIndex.from_groups(groups)
    for k in (0.1, 0.25, 0.55, 1.0):
        kept = count_table(np.array([k]), index)[0]
        expected = np.stack([top_k_circuit(row, groups, k) for row in values])
        assert np.array_equal(top_k_rows(values, index, kept), expected)


# ------------------------------------------------------------------------------- greedy adversary


def _dominated() -> np.ndarray:
    """|D| = 20, U = 20, one group, K = 0.25 keeps 5.

    Example 0 scores 100 on components 0-4; examples 1-19 score 2 on components 5-9; all else 0.
    Means: components 0-4 at 100/20 = 5, 5-9 at 38/20 = 1.9, 10-19 at 0, so A(D) = {0..4}.
    Deleting example 0: 0-4 fall to 0, 5-9 rise to 2, A = {5..9}: 10 components flip.
    Deleting any other example: 0-4 at 100/19, 5-9 at 36/19: nothing flips.
    """
    scores = np.zeros((20, 20))
    scores[0, :5] = 100.0
    scores[1:, 5:10] = 2.0
    return scores


def _flips(scores: np.ndarray, edited: np.ndarray, k: float = 0.25) -> int:
    groups = np.zeros(scores.shape[1], dtype=int)
    before = full_dataset_circuits(scores, groups, [k])[0]
    return int((before != full_dataset_circuits(edited, groups, [k])[0]).sum())


def test_adversarial_deletion_beats_random_on_a_dominated_dataset() -> None:
    scores, groups = _dominated(), np.zeros(20, dtype=int)
    pool = np.zeros((3, 20))
    pool[1, 10:15] = 200.0  # inserting it: 10-14 at 200/21 = 9.52 > 0-4 at 100/21 = 4.76: 10 flips

    greedy = adversarial_edit(scores, pool, groups, 0.25, 1, "delete")
    assert np.array_equal(greedy, scores[1:])  # it deletes the dominating example
    assert _flips(scores, greedy) == 10
    inserted = adversarial_edit(scores, pool, groups, 0.25, 1, "insert")
    assert np.array_equal(inserted[-1], pool[1]) and _flips(scores, inserted) == 10

    # a uniformly random deletion: expected flips = 10 * P(example 0 deleted) = 10 / 20 = 0.5
    by_row = [_flips(scores, np.delete(scores, i, axis=0)) for i in range(20)]
    assert by_row == [10] + [0] * 19 and np.mean(by_row) == 0.5

    # the same through attack_table (r = 1 at tau 0.95, p_del 0.6)
    table = attack_table(scores, pool, groups, [0.25], p_del=0.6, n0=20, n=200, seed=3, tau=0.95, alpha=0.05,
                         multiples=(1,), kinds=("delete",), n_trials=8, attack_seed=11)
    adversarial = table[table["mode"] == "adversarial"]
    random = table[table["mode"] == "random"]
    assert adversarial["baseline_flips"].tolist() == [10] and adversarial["baseline_flip_share"].item() == 0.5
    assert set(random["baseline_flips"]) <= {0, 10} and random["baseline_flips"].mean() < 10
    # the certificates abstain on exactly the fragile components and no certified label flips:
    # p_u = P(example 0 kept) = 0.4 for 0-4 and 0.6 for 5-9 (abstain at tau 0.95); 10-19 are never in
    # (certified out: 0.95^200 < 0.05 / 20)
    assert table["n_certified"].eq(10).all() and table["certified_flips"].eq(0).all()


def test_greedy_ties_go_to_the_boundary_gap() -> None:
    """No single deletion flips anything; the gap tie-break finds the pair that does.

    Rows 16-19 score 10 on components 0-4 (mean 40/20 = 2), every row scores 1.4 on 5-9. Deleting a
    supporter leaves 0-4 at 30/19 = 1.58 > 1.4 (no flip, gap 0.18); deleting another row gives 40/19 = 2.1
    (gap 0.7). The greedy deletes supporter 16, then 17: 20/18 = 1.11 < 1.4, 10 components flip. Lower
    index alone would have deleted rows 0 and 1 and flipped nothing.
    """
    scores = np.zeros((20, 20))
    scores[16:, :5] = 10.0
    scores[:, 5:10] = 1.4
    edited = adversarial_edit(scores, np.zeros((1, 20)), np.zeros(20, dtype=int), 0.25, 2, "delete")
    assert np.array_equal(edited, np.delete(scores, [16, 17], axis=0))
    assert _flips(scores, edited) == 10
    assert _flips(scores, np.delete(scores, [0, 1], axis=0)) == 0


# ----------------------------------------------------------------------------- the guarantee


def test_certified_flips_within_the_radius_are_rare() -> None:
    """Frequency check of Theorem 1 on random data, every edit kind and mode at r edits.

    Per run, a certified label flips only if one of the two certifications (D or D') fails, so
    P[flip] <= 2 alpha; over T independent datasets the number X of runs with a flip is dominated by
    Bin(T, 2 alpha), and X <= its 0.999 quantile fails with probability < 0.001 if the theorem holds.
    In practice a flip needs a gross test error (a label certified at tau = 0.8 whose probability is
    below 1/2), so X is 0, far below alpha as well.
    """
    alpha, n_datasets = 0.05, 25
    assert certified_radius(0.8, 0.9) == 3
    groups = np.repeat([0, 1], 12)
    rows = []
    for t in range(n_datasets):
        data = np.random.default_rng([7, t])
        mu = np.tile(np.linspace(2.0, -2.0, 12), 2)
        scores = mu + data.normal(size=(24, 24))
        pool = mu + 0.5 + data.normal(size=(30, 24))  # shifted candidates (an "OOD" pool)
        rows.append(attack_table(scores, pool, groups, [0.25], p_del=0.9, n0=20, n=150, seed=t, tau=0.8,
                                 alpha=alpha, multiples=(1,), n_trials=1, attack_seed=t))
    table = pd.concat(rows, ignore_index=True)
    assert list(table.columns) == list(COLUMNS)
    assert table["within_radius"].all() and table["r_edits"].eq(3).all()
    assert table["n_certified"].mean() > 5  # the check is not vacuous: certificates exist
    bound = binom.ppf(0.999, n_datasets, 2 * alpha)
    for (edit, mode), part in table.groupby(["edit", "mode"]):
        assert len(part) == n_datasets
        assert part["any_certified_flip"].sum() <= bound, (edit, mode)
    assert table["any_certified_flip"].mean() <= alpha
    assert table["certified_flip_share"].mean() <= alpha


def test_strong_signal_keeps_every_certified_label() -> None:
    """Components 0-4 score 10 in every example, the rest noise: all 20 certified, nothing flips within r
    (nor at 4r: a handful of edits cannot move a mean this far), however the edits are chosen."""
    data = np.random.default_rng(5)
    scores = 0.1 * data.normal(size=(30, 20))
    scores[:, :5] += 10.0
    pool = 0.1 * data.normal(size=(20, 20))
    pool[:, 5:10] += 3.0  # candidates that push components 5-9 up
    table = attack_table(scores, pool, np.zeros(20, dtype=int), [0.25], p_del=0.6, n0=20, n=200, seed=1,
                         tau=0.95, alpha=0.05, multiples=(1, 4), n_trials=2, attack_seed=2)
    assert table["radius"].eq(1).all() and table["n_certified"].eq(20).all()
    assert table["certified_flips"].eq(0).all() and table["certified_flip_share"].eq(0.0).all()
    assert table.loc[table["within_radius"], "abstain_share"].eq(0.0).all()


def test_each_k_is_independent_of_the_grid(rng: np.random.Generator) -> None:
    """Rows for a K grid equal the rows computed for each K alone (adversarial edits certify one K)."""
    scores, pool = rng.normal(size=(16, 20)), rng.normal(size=(8, 20))
    groups = np.repeat([0, 1], 10)
    settings = dict(p_del=0.7, n0=20, n=100, seed=4, tau=0.8, alpha=0.1, correction="holm", absolute=True,
                    multiples=(1, 2), kinds=("insert", "substitute"), n_trials=2, attack_seed=3)
    keys = ["edit", "mode", "trial", "r_multiple", "k_target"]
    grid = attack_table(scores, pool, groups, [0.5, 0.2], **settings).sort_values(keys, ignore_index=True)
    alone = pd.concat([attack_table(scores, pool, groups, [k], **settings) for k in (0.5, 0.2)])
    pd.testing.assert_frame_equal(grid, alone.sort_values(keys, ignore_index=True))


def test_radius_zero_uses_single_edits() -> None:
    data = np.random.default_rng(0)
    scores, pool = data.normal(size=(20, 20)), data.normal(size=(10, 20))
    assert certified_radius(0.6, 0.5) == 0
    table = attack_table(scores, pool, np.zeros(20, dtype=int), [0.3], p_del=0.5, n0=20, n=100, seed=0, tau=0.6,
                         alpha=0.05, multiples=(1, 2), kinds=("insert",), modes=("random",))
    assert table["unit"].eq("1 edit (r = 0)").all() and table["r_edits"].tolist() == [1, 2]
    assert not table["within_radius"].any()
    assert table["n_examples_edited"].tolist() == [21, 22]


# --------------------------------------------------------------------------------------------- CLI


def _main(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    if ATTACK_MODULE not in cli.PLUGIN_MODULES:  # until the stage is registered in cli.py
        monkeypatch.setattr(cli, "PLUGIN_MODULES", (*cli.PLUGIN_MODULES, ATTACK_MODULE))
    return cli.main(argv)


def _attributions(path: Path, concept: str, split: str, scores: np.ndarray, n_components: int = 20) -> Path:
    groups = np.repeat([0, 1], n_components // 2)
    write_attributions(path, {"relevance": scores}, groups, [f"c{u}" for u in range(n_components)],
                       [f"{split}{i}" for i in range(scores.shape[0])],
                       {"concept": concept, "split": split, "model": "toy"})
    return path


def test_report_attack_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = np.random.default_rng(9)
    args = []
    for c in range(2):
        mu = np.linspace(2.0, -2.0, 20)
        concept = _attributions(tmp_path / f"c{c}.h5", f"c{c}", "concept", mu + data.normal(size=(24, 20)))
        ood_a = _attributions(tmp_path / f"c{c}_a.h5", f"c{c}", "ood_a", mu + data.normal(size=(6, 20)))
        ood_b = _attributions(tmp_path / f"c{c}_b.h5", f"c{c}", "ood_b", mu + data.normal(size=(6, 20)))
        args += ["--class", str(concept), str(ood_a), str(ood_b)]
    out = tmp_path / "attack"
    status = _main(["report-attack", *args, "--scorer", "relevance", "--k-grid", "0.2", "0.5", "--p-del", "0.8",
                    "--n0", "20", "--n", "120", "--tau", "0.75", "--alpha", "0.05", "--multiples", "1", "2",
                    "--trials", "2", "--out-dir", str(out)], monkeypatch)
    assert status == 0
    raw = pd.read_csv(out / "attack_raw.csv")
    # radius floor(log 0.75 / log 0.8) = 1; 2 classes x 2 K x 3 kinds x 2 multiples x (2 random + 1 adversarial)
    assert raw["radius"].eq(1).all() and len(raw) == 2 * 2 * 3 * 2 * 3
    assert set(raw["concept"]) == {"c0", "c1"} and raw["scorer"].eq("relevance").all()
    assert raw.loc[raw["edit"] == "insert", "n_examples_edited"].isin([25, 26]).all()
    summary = pd.read_csv(out / "attack.csv")
    assert len(summary) == 3 * 2 * 2 and summary["Runs"].tolist()[0] == 2 * 2 * 2  # classes x K x trials
    assert "Certified flip %" in (out / "attack.md").read_text()
    assert r"\begin{tabular}" in (out / "attack.tex").read_text()
    for name in ("attack.png", "attack.pdf"):
        assert (out / name).stat().st_size > 0
    metrics = collected_metrics()
    assert metrics["radius"] == 1 and metrics["n_classes"] == 2
    assert metrics["max_certified_flip_share_within_r"] <= 0.05


def test_report_attack_rejects_mismatched_pools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = np.random.default_rng(1)
    concept = _attributions(tmp_path / "c.h5", "c0", "concept", data.normal(size=(10, 20)))
    other = _attributions(tmp_path / "o.h5", "c1", "ood", data.normal(size=(4, 20)))
    smaller = _attributions(tmp_path / "s.h5", "c0", "ood", data.normal(size=(4, 10)), n_components=10)
    common = ["--scorer", "relevance", "--k-grid", "0.2", "--p-del", "0.6", "--tau", "0.9",
              "--out-dir", str(tmp_path / "out")]
    for files in ([concept], [concept, other], [concept, smaller]):
        with pytest.raises(SystemExit) as exc:
            _main(["report-attack", "--class", *map(str, files), *common], monkeypatch)
        assert exc.value.code == 2
    assert not (tmp_path / "out").exists()


def test_report_attack_checks_its_setting_with_the_setting_before_any_work(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    concept = _attributions(tmp_path / "c.h5", "c0", "concept", np.random.default_rng(2).normal(size=(10, 20)))
    for flag, value, message in (("--tau", "1.0", "tau=1.0"), ("--tau", "0.4", "tau=0.4")):
        with pytest.raises(SystemExit) as exc:
            _main(["report-attack", "--class", str(concept), "--scorer", "relevance", "--k-grid", "0.2", "--p-del",
                   "0.6", "--tau", "0.9", flag, value, "--out-dir", str(tmp_path / "out")], monkeypatch)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert "invalid setting" in err and message in err, err
    assert not (tmp_path / "out").exists()
