"""Reporting stages end to end on small inputs; settings come from columns and attributes, never paths."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from certified_circuits.core.certification import certify_votes
from certified_circuits.cli.main import main
from certified_circuits.analysis.evaluation import operating_points
from certified_circuits.core.smoothing import compute_votes
from certified_circuits.storage.store import write_attributions, write_certificates, write_votes

SETTING = "p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni"


def _sufficiency(root: Path, concept: str, certified_boost: float) -> Path:
    rows = []
    for method, base in (("baseline", 0.6), ("majority", 0.65), ("certified", 0.6 + certified_boost)):
        for k, bump in ((0.2, 0.0), (0.5, 0.1)):
            rows.append(dict(experiment="world", concept=concept, eval_set="id", method=method, k_target=k,
                             k_effective=k * (0.5 if method == "certified" else 1), accuracy=base + bump,
                             false_positive_rate=0.2, balanced_accuracy=(base + bump + 0.8) / 2, n_images=50))
    rows.append(dict(experiment="world", concept=concept, eval_set="id", method="full", k_target=1.0, k_effective=1.0,
                     accuracy=0.5, false_positive_rate=0.3, balanced_accuracy=0.6, n_images=50))
    path = root / "anywhere" / f"{concept}.csv"  # the name carries nothing: settings are columns
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).assign(scorer="relevance", split="concept", setting=SETTING, p_del=0.6, tau=0.95,
                              radius=1).to_csv(path, index=False)
    return path


def test_sufficiency_without_settings_is_rejected(tmp_path: Path) -> None:
    path = _sufficiency(tmp_path, "c0", 0.1)
    pd.read_csv(path).drop(columns=["setting", "tau"]).to_csv(path, index=False)
    with pytest.raises(SystemExit) as exc:
        main(["report-sufficiency", "--inputs", str(path), "--by", "scorer", "--out-dir", str(tmp_path / "t")])
    assert exc.value.code == 2


def test_report_sufficiency_writes_tables_and_figures(tmp_path: Path) -> None:
    inputs = [str(_sufficiency(tmp_path, f"c{i}", 0.1 + 0.05 * i)) for i in range(4)]
    out = tmp_path / "tables"
    assert main(["report-sufficiency", "--inputs", *inputs, "--by", "scorer", "--out-dir", str(out)]) == 0
    raw = pd.read_csv(out / "peaks_cacc_raw.csv").iloc[0]
    # certified peak at K 0.5: mean of 0.6 + [0.1, 0.15, 0.2, 0.25] + 0.1 = 0.875; baseline 0.7
    assert raw["certified"] == pytest.approx(0.875) and raw["baseline"] == pytest.approx(0.7)
    assert raw["delta"] == pytest.approx(0.875 / 0.7 - 1) and raw["n_concepts"] == 4
    markdown = (out / "peaks_cacc.md").read_text()
    assert "87.5 (25.0)" in markdown and "70.0 (50.0)" in markdown
    assert raw["setting"] == SETTING  # the table names the setting it came from
    for name in ("curves_cacc.png", "curves_balanced_accuracy.pdf", "curves_false_positive_rate.png", "peaks_balanced.tex"):
        assert (out / name).stat().st_size > 0
    points = pd.read_csv(out / "operating_points.csv")
    peak = points[points.criterion == "certified_peak"].iloc[0]
    gap = points[points.criterion == "max_gap"].iloc[0]
    # certified beats baseline by 0.175 at K 0.5 and by 0.175 at K 0.2: ties go to the smaller K
    assert peak.k_target == 0.5 and gap.k_target == 0.2 and peak.selected_on == "id" and peak.scorer == "relevance"


def _votes_and_certificates(root: Path, name: str, seed: int, shift: float, concept: str = "c0",
                            split: str = "concept") -> tuple[Path, Path, Path]:
    rng = np.random.default_rng(seed)
    signal = np.zeros(20)
    signal[[0, 1, 10, 11]] = 3.0  # exactly the top 2 of each group at K = 0.2
    scores = signal + shift * rng.normal(size=20) + rng.normal(size=(40, 20))
    attributions = write_attributions(root / f"{name}.h5", {"relevance": scores}, np.repeat([0, 1], 10),
                                      [f"u{i}" for i in range(20)], [str(i) for i in range(40)], {"concept": concept},
                                      extras={"spurious_index": np.linspace(0, 1, 20)})
    votes = compute_votes(scores, np.repeat([0, 1], 10), [0.2, 0.5], 0.6, 50, 200, seed=seed,
                          attrs={"concept": concept, "split": split, "experiment": "world", "scorer": "relevance"})
    votes_path = write_votes(root / f"{name}_votes.h5", votes)
    cert_path = write_certificates(root / f"{name}_cert.h5", certify_votes(votes, 0.9, 0.01))
    return attributions, votes_path, cert_path


def _operating_points(tmp_path: Path, curves: pd.DataFrame) -> Path:
    path = tmp_path / "operating_points.csv"
    operating_points(curves, ["experiment", "scorer", "eval_set"]).to_csv(path, index=False)
    return path


@pytest.mark.slow
def test_iou_seeds_spurious_and_theory(tmp_path: Path) -> None:
    curves = pd.DataFrame(
        [dict(experiment="world", scorer="relevance", eval_set=e, method=m, k_target=k, k_effective=k, cacc=c)
         for e in ("id", "shift") for m, k, c in (("baseline", 0.2, 0.5), ("baseline", 0.5, 0.6),
                                                  ("certified", 0.2, 0.9), ("certified", 0.5, 0.7))]
    )
    points = str(_operating_points(tmp_path, curves))
    a_id, v_id, c_id = _votes_and_certificates(tmp_path, "id", 0, 0.0)
    _, v_ood, c_ood = _votes_and_certificates(tmp_path, "ood", 1, 0.5, split="shift")
    _, v_s1, c_s1 = _votes_and_certificates(tmp_path, "s1", 2, 0.0)
    out = tmp_path / "out"
    common = ["--operating-points", points, "--scorer", "relevance"]
    assert main(["report-iou", *common, "--circuits", str(v_id), str(c_id), "--circuits", str(v_ood), str(c_ood),
                 "--out-dir", str(out)]) == 0
    iou = pd.read_csv(out / "iou.csv")
    assert set(iou.method) == {"baseline", "certified"} and (iou.k_target == 0.2).all()  # gap 0.4 at K 0.2
    # the report returns its metrics (the CLI logs them): the mean IoU per method of the table it wrote
    from certified_circuits.reports.paper import iou_report

    returned = iou_report(Path(points), "relevance", [(v_id, c_id), (v_ood, c_ood)], tmp_path / "again")
    assert returned == {f"iou_mean_{m}": pytest.approx(v) for m, v in iou.groupby("method")["iou"].mean().items()}
    assert (iou.eval_set == "shift").all() and iou.iou.between(0, 1).all()
    assert main(["report-seeds", *common, "--circuits", str(v_id), str(c_id), "--circuits", str(v_s1), str(c_s1),
                 "--out-dir", str(out)]) == 0
    seeds = pd.read_csv(out / "seed_stability.csv")
    assert len(seeds) == 2 and seeds.k_target.iloc[0] == 0.2 and set(seeds.seed_a) == {0}
    assert main(["report-spurious", *common, "--attributions", str(a_id), "--circuits", str(v_id), str(c_id),
                 "--out-dir", str(out)]) == 0
    channels = pd.read_csv(out / "spurious_channels.csv")
    assert set(channels.category) <= {"certified_in", "abstained", "certified_out"}
    assert "certified_in" in set(channels.category)
    assert main(["report-theory", "--out-dir", str(out)]) == 0
    assert (out / "radius_vs_pdel.png").exists() and (out / "samples_vs_tau.pdf").exists()


def test_operating_k_comes_from_the_chosen_scorer(tmp_path: Path) -> None:
    # relevance peaks at K 0.2, activation at K 0.5: mixing the scorers would pick the wrong K
    rows = [dict(experiment="world", scorer=s, eval_set="id", method="certified", k_target=k, k_effective=k, cacc=c)
            for s, k, c in (("relevance", 0.2, 0.9), ("relevance", 0.5, 0.5), ("activation", 0.2, 0.1),
                            ("activation", 0.5, 0.95))]
    points = str(_operating_points(tmp_path, pd.DataFrame(rows)))
    _, v, c = _votes_and_certificates(tmp_path, "id", 0, 0.0)
    out = tmp_path / "out"
    assert main(["report-seeds", "--operating-points", points, "--scorer", "relevance", "--circuits", str(v), str(c),
                 "--circuits", str(v), str(c), "--out-dir", str(out)]) == 0
    assert (pd.read_csv(out / "seed_stability.csv").k_target == 0.2).all()
    with pytest.raises(SystemExit) as exc:  # a scorer without an operating point: a message, not a traceback
        main(["report-seeds", "--operating-points", points, "--scorer", "rank", "--circuits", str(v), str(c),
              "--out-dir", str(out)])
    assert exc.value.code == 2


def test_a_report_of_a_scorer_the_results_do_not_hold_is_refused_before_writing(tmp_path: Path, capsys) -> None:
    """Asked for a scorer that the operating points or the circuits do not hold, every report stage stops with
    the scorers that are there, and writes nothing (it once wrote an empty table and exited 0)."""
    rows = [dict(experiment="world", scorer=s, eval_set=e, method="certified", k_target=0.2, k_effective=0.2, cacc=0.9)
            for s in ("relevance", "activation") for e in ("id", "shift")]
    points = str(_operating_points(tmp_path, pd.DataFrame(rows)))
    a, v, c = _votes_and_certificates(tmp_path, "id", 0, 0.0)  # circuits of scorer 'relevance'
    out = tmp_path / "out"
    for stage, extra in (("report-seeds", []), ("report-iou", []), ("report-spurious", ["--attributions", str(a)])):
        with pytest.raises(SystemExit) as exc:
            main([stage, "--operating-points", points, "--scorer", "rank", *extra, "--circuits", str(v), str(c),
                  "--out-dir", str(out)])
        assert exc.value.code == 2
        err = capsys.readouterr().err  # whichever input the stage reads first names the scorers it holds
        assert ("the operating points hold no scorer 'rank': they hold ['activation', 'relevance']" in err
                or f"{v} holds the circuits of scorer 'relevance', not 'rank' as asked" in err), err
    with pytest.raises(SystemExit) as exc:  # operating points of 'activation' exist, but the circuits are 'relevance''s
        main(["report-seeds", "--operating-points", points, "--scorer", "activation", "--circuits", str(v), str(c),
              "--out-dir", str(out)])
    assert exc.value.code == 2
    assert f"{v} holds the circuits of scorer 'relevance', not 'activation' as asked" in capsys.readouterr().err
    assert not out.exists() or not any(out.iterdir())


def test_circuits_certified_from_other_votes_are_rejected(tmp_path: Path) -> None:
    rows = [dict(experiment="world", scorer="relevance", eval_set="id", method="certified", k_target=0.2,
                 k_effective=0.2, cacc=0.9)]
    points = str(_operating_points(tmp_path, pd.DataFrame(rows)))
    _, v0, _ = _votes_and_certificates(tmp_path, "a", 0, 0.0, concept="c0")
    _, _, c1 = _votes_and_certificates(tmp_path, "b", 1, 0.0, concept="c1")
    with pytest.raises(SystemExit) as exc:
        main(["report-seeds", "--operating-points", points, "--scorer", "relevance", "--circuits", str(v0), str(c1),
              "--out-dir", str(tmp_path / "out")])
    assert exc.value.code == 2


def test_model_seed_summary_reports_spread_and_wins(tmp_path: Path) -> None:
    """Three runs with different model seeds: mean and sd per row, and in how many seeds certified wins."""
    base = dict(experiment="world", scorer="relevance", eval_set="id_test", full=0.9, baseline_k=0.5, certified_k=0.3)
    runs = []
    for seed, (certified, baseline) in enumerate([(0.8, 0.7), (0.6, 0.7), (0.9, 0.7)]):
        path = tmp_path / f"s{seed}.csv"
        pd.DataFrame([{**base, "certified": certified, "baseline": baseline}]).to_csv(path, index=False)
        runs += ["--run", str(seed), str(path)]
    out = tmp_path / "out"
    assert main(["report-model-seeds", *runs, "--name", "world_selected_cacc", "--out-dir", str(out)]) == 0
    row = pd.read_csv(out / "world_selected_cacc_model_seeds_raw.csv").iloc[0]
    assert row.certified_mean == pytest.approx(0.7667, abs=1e-4) and row.certified_std == pytest.approx(np.std([0.8, 0.6, 0.9], ddof=1))
    assert row.n_seeds == 3 and row.certified_wins == 2 and row.baseline_wins == 1
    assert "2/3" in (out / "world_selected_cacc_model_seeds.md").read_text()


def test_model_seed_summary_counts_significant_wins_per_example(tmp_path: Path) -> None:
    """With per-example p-values, a seed counts as a significant win only where p < 0.05 and the
    difference has that sign: seed 0 certified (p 0.01), seed 1 baseline (p 0.03), seed 2 neither."""
    base = dict(experiment="world", scorer="relevance", eval_set="id_test", full=0.9, baseline_k=0.5, certified_k=0.3)
    runs = []
    for seed, (certified, baseline, p) in enumerate([(0.8, 0.7, 0.01), (0.6, 0.7, 0.03), (0.9, 0.7, 0.2)]):
        path = tmp_path / f"s{seed}.csv"
        pd.DataFrame([{**base, "certified": certified, "baseline": baseline, "pvalue_examples": p}]).to_csv(path, index=False)
        runs += ["--run", str(seed), str(path)]
    out = tmp_path / "out"
    assert main(["report-model-seeds", *runs, "--name", "t", "--out-dir", str(out)]) == 0
    row = pd.read_csv(out / "t_model_seeds_raw.csv").iloc[0]
    assert row.certified_wins == 2 and row.certified_significant == 1 and row.baseline_significant == 1
    shown = pd.read_csv(out / "t_model_seeds.csv").iloc[0]
    assert shown["significant: certified / baseline"] == "1/1" and shown["baseline_k"] == "50.0 ± 0.0"


def test_operating_points_without_their_columns_stop_report_iou_before_writing(tmp_path: Path, capsys) -> None:
    """Issue 21: report-iou took an operating-points CSV without the needed columns and wrote empty outputs."""
    bad = tmp_path / "points.csv"
    pd.DataFrame({"eval_set": ["shift"], "k": [0.2]}).to_csv(bad, index=False)
    _, v, c = _votes_and_certificates(tmp_path, "id", 0, 0.0)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_info:
        main(["report-iou", "--operating-points", str(bad), "--scorer", "relevance", "--circuits", str(v), str(c),
              "--out-dir", str(out)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "points.csv is missing column(s) 'criterion', 'k_target'" in err and "report-sufficiency" in err
    assert not out.exists()


def test_an_operating_point_k_outside_the_unit_interval_is_refused_by_row(tmp_path: Path, capsys) -> None:
    """Issue 53: every K read from a table goes through the one parser (storage/tables.parse_k_column)."""
    bad = tmp_path / "points.csv"
    pd.DataFrame({"eval_set": ["shift", "shift"], "criterion": ["peak", "gap"], "k_target": [0.2, 1.5]}).to_csv(
        bad, index=False)
    _, v, c = _votes_and_certificates(tmp_path, "id", 0, 0.0)
    with pytest.raises(SystemExit) as exit_info:
        main(["report-iou", "--operating-points", str(bad), "--scorer", "relevance", "--circuits", str(v), str(c),
              "--out-dir", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    assert "points.csv: column 'k_target' holds 1.5 (row 3), not a K in (0, 1]" in capsys.readouterr().err


def _summary_inputs(tmp_path: Path) -> tuple[Path, Path]:
    """Sufficiency tables whose false-positive rate varies with K (nothing degenerate), through report-sufficiency."""
    inputs = []
    for i in range(2):
        path = _sufficiency(tmp_path, f"c{i}", 0.1 + 0.05 * i)
        table = pd.read_csv(path)
        table["false_positive_rate"] = np.where(table.method == "full", 0.3, 0.2 + 0.1 * table.k_target)
        table.to_csv(path, index=False)
        inputs.append(str(path))
    out = tmp_path / "tables" / "world"
    assert main(["report-sufficiency", "--inputs", *inputs, "--by", "scorer", "--out-dir", str(out)]) == 0
    return out / "peaks_cacc_raw.csv", out / "curves.csv"


def _summary(tmp_path: Path, curves: Path, *certificates: Path, plans: Path | None = None) -> tuple[str, Path]:
    """report-warnings, then report-summary of the one world experiment (as the workflow calls them)."""
    warnings = tmp_path / "warnings.json"
    plan = ["--plan-warnings", str(plans)] if plans else []
    assert main(["report-warnings", "--curves", str(curves), "--certificates", *map(str, certificates), *plan,
                 "--out", str(warnings)]) == 0
    out = tmp_path / "summary.md"
    assert main(["report-summary", "--experiment", "world", str(curves.parent), "--warnings", str(warnings),
                 "--out", str(out)]) == 0
    return out.read_text(), warnings


def test_summary_says_when_nothing_is_degenerate(tmp_path: Path) -> None:
    peaks, curves = _summary_inputs(tmp_path)
    _, _, certificates = _votes_and_certificates(tmp_path, "id", 0, 0.0)
    text, warnings = _summary(tmp_path, curves, certificates)
    assert "## Warnings\n\nNone: no degenerate result found" in text
    assert json.loads(warnings.read_text())["flags"] == []
    # the sufficiency family: the peak table's numbers (no held-out selection in this run), linked to its full table
    row = pd.read_csv(peaks).iloc[0]
    assert text.index("## Results") < text.index("### Sufficiency") < text.index("## Warnings")
    assert "`tables/world/peaks_cacc.md`" in text  # no held-out selection in this run: the peak table
    assert (f"| world | {row.eval_set} | {row.scorer} | the peak on the same set | {100 * row.full:.1f} (FPR "
            f"{100 * row.full_fpr:.1f}) | {100 * row.baseline:.1f} ({100 * row.baseline_k:.1f}, {100 * row.baseline_fpr:.1f}) | "
            f"{100 * row.certified:.1f} ({100 * row.certified_k:.1f}, {100 * row.certified_fpr:.1f}) |") in text


def test_the_warning_list_names_every_flag_and_tags_them(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from certified_circuits.pipeline.tracking import collected_tags
    from certified_circuits.storage.store import read_certificates

    peaks, curves = _summary_inputs(tmp_path)
    table = pd.read_csv(curves)
    table.loc[table.method == "majority", "cacc"] = 0.9412  # a constant curve
    table.to_csv(curves, index=False)
    _, _, healthy = _votes_and_certificates(tmp_path, "id", 0, 0.0)
    certificate = read_certificates(healthy)
    certificate.decision[:] = -1  # every component abstains at every K
    certificate.attrs.update(plan_verdict="marginal", plan_warnings="radius 0: no edit survives. Fix: raise p_del.")
    nothing = write_certificates(tmp_path / "nothing_cert.h5", certificate)
    plans = tmp_path / "plan_warnings.json"  # the parse-time plans: the same warning once more, and a sweep's own
    records = [{"where": "vision world, every class", "key": "vision.certification", "experiment": "world", "radius": 0,
                "message": "radius 0: no edit survives.", "fix": "raise p_del."},
               {"where": "vision world, radius sweep |D| = 50", "key": "vision.radius_sweep (size 50, p_del 0.948)",
                "experiment": "world", "radius": 11, "n_examples": 50, "p_del": 0.948,
                "message": "IN cannot be certified: p_empty = 0.0692.", "fix": "use at least 57 examples."}]
    assert main(["report-plan-warnings", "--records", json.dumps(records), "--out", str(plans)]) == 0
    text, warnings = _summary(tmp_path, curves, healthy, nothing, plans=plans)
    section = text[text.index("## Warnings"):]
    # one line per kind: its count, its places, the first one's message and fix
    assert ("- **plan** (2): world / concept c0 / split concept / scorer relevance / tau 0.9, p_del 0.6; vision world, "
            "radius sweep |D| = 50 (vision.radius_sweep (size 50, p_del 0.948), radius 11). plan marginal: radius 0: "
            "no edit survives. Fix: raise p_del.") in section
    assert "- **certified-nothing** (1): " in section and "every component abstained" in section
    assert "- **constant-quantity** (1): " in section and "cacc = 0.9412 at every K" in section
    assert len([line for line in section.splitlines() if line.startswith("- ")]) == 3 and "None:" not in section
    doc = json.loads(warnings.read_text())
    assert doc["counts"] == {"plan": 2, "certified-nothing": 1, "constant-quantity": 1}
    assert "**certified-nothing** (1)" in caplog.text  # logged (on the job's stderr) too, one line per kind
    tags = collected_tags()  # the MLflow tags: the same list
    assert tags["cc.flag.plan"].startswith("2: world / concept c0") and tags["cc.flag.certified-nothing"].startswith("1: ")
    assert tags["cc.flag.constant-quantity"].startswith("1: ")


def test_report_plan_warnings_refuses_records_it_cannot_read(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["report-plan-warnings", "--records", '[{"where": "x"}]', "--out", str(tmp_path / "p.json")])
    assert exit_info.value.code == 2 and "'where' and 'message'" in capsys.readouterr().err
    assert not (tmp_path / "p.json").exists()


def test_theory_figures_use_the_runs_u_and_d(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from certified_circuits import plan
    from certified_circuits.core.setting import Setting
    from certified_circuits.reports import figures

    captured = {}
    monkeypatch.setattr(figures, "save_figure", lambda fig, stem: captured.setdefault(Path(stem).name, fig) and [])
    assert main(["report-theory", "--n-components", "336", "--n-examples", "40", "--label", "vision world",
                 "--out-dir", str(tmp_path)]) == 0
    samples = captured["samples_vs_tau"].axes[0]
    assert samples.get_title() == "vision world: U = 336 components, |D| = 40 examples"
    assert captured["radius_vs_pdel"].axes[0].get_title() == samples.get_title()
    line = next(l for l in samples.get_lines() if l.get_label() == r"$\alpha$ = 0.001, Bonferroni (N = 336)")
    taus, drawn = line.get_xdata(), line.get_ydata()
    exact = [plan(40, 336, Setting(tau=float(t), alpha=0.001)).min_samples for t in taus]
    assert list(drawn) == exact  # min_samples over U = 336, not 3,840
    assert exact[-1] != plan(40, 3840, Setting(tau=float(taus[-1]), alpha=0.001)).min_samples
    assert plan(40, 336, Setting(tau=0.95, alpha=0.001)).min_samples == 249  # the planner's example (docs/architecture.md section 6)
    # radius vs p_del: IN is impossible from p_del = (1 - tau)^(1/|D|) on (p_del^|D| >= 1 - tau), drawn dotted
    radius = captured["radius_vs_pdel"].axes[0]
    boundaries = sorted(l.get_xdata()[0] for l in radius.get_lines() if l.get_linestyle() == ":" and
                        len(l.get_xdata()) == 2 and l.get_xdata()[0] == l.get_xdata()[1])
    assert boundaries == pytest.approx(sorted((1 - t) ** (1 / 40) for t in (0.6, 0.7, 0.8, 0.9, 0.95)))
    assert any("IN impossible at |D| = 40" in t.get_text() for t in radius.get_legend().get_texts())


def test_theory_figures_default_to_the_papers_u(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from certified_circuits.reports import figures

    captured = {}
    monkeypatch.setattr(figures, "save_figure", lambda fig, stem: captured.setdefault(Path(stem).name, fig) and [])
    assert main(["report-theory", "--out-dir", str(tmp_path)]) == 0
    assert captured["samples_vs_tau"].axes[0].get_title() == "U = 3,840 components"
