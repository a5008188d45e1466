"""``certified-circuits report-recovery``, ``stability`` and ``report-stability``: the testbed's stages (issue 34).

``report-recovery`` scores every circuit of an experiment against its ground truth (the planted circuits),
``stability`` measures one concept's circuits under bootstrap resampling of its dataset (one job per concept and
setting), ``report-stability`` combines those tables. Implementations: :mod:`certified_circuits.reports.testbed`
(imports pandas and matplotlib, so only when a stage runs), :mod:`certified_circuits.analysis.recovery` and
:mod:`certified_circuits.analysis.stability`.
"""

from __future__ import annotations

import argparse
import logging
import warnings
from pathlib import Path

from certified_circuits.cli.stages import InputError, Stages, add_k_grid, add_votes_setting, existing_file, k_fraction
from certified_circuits.cli.stages import output_file, positive_int, probability, seed, setting_of_args
from certified_circuits.pipeline.tracking import add_metrics

log = logging.getLogger(__name__)
STAGES = Stages()

#: resamples of Wu, Tonin and Cevher's protocol; fewer run, with a warning
PROTOCOL_RESAMPLES = 20


def _recovery_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ground-truth", type=existing_file, required=True,
                   help="the experiment's ground-truth JSON (format certified-circuits/ground-truth/1)")
    p.add_argument("--circuits", nargs=2, action="append", required=True, type=existing_file, metavar=("VOTES", "CERTS"),
                   help="votes and certificates of one circuit (repeatable: every concept "
                        "and setting); the concept is the votes' attribute")
    p.add_argument("--experiment", required=True, help="the experiment's name (must be the ground truth's)")
    p.add_argument("--selected", type=existing_file, default=None,
                   help="selected_cacc_raw.csv of report-sufficiency --select-on: each method's K chosen on held-out "
                        "data (else --k)")
    p.add_argument("--k", type=k_fraction, default=None,
                   help="K of the grid at which precision and recall are reported when no --selected is given")
    p.add_argument("--out-dir", required=True, type=Path)


@STAGES.stage("report-recovery", _recovery_arguments,
              help="recovery of the planted circuits: precision, recall, FPR per K and AUROC per method")
def _cmd_recovery(args: argparse.Namespace) -> int:
    """Score the baseline, majority, certified-in and certified-in-or-abstain circuits of every concept against the
    ground truth: recovery.csv (TP, FP, FN, TN, precision, recall, FPR per method and K), recovery_auroc.csv (AUROC
    over the K grid, and the point at each method's selected K), recovery_summary.{csv,md,tex} and recovery.png.
    """
    from certified_circuits.reports.testbed import recovery_report

    if args.selected is not None and args.k is not None:
        raise InputError("give --selected (each method's held-out K) or --k (one K for all), not both")
    add_metrics(
        recovery_report(
            args.ground_truth,
            [tuple(pair) for pair in args.circuits],
            args.experiment,
            args.out_dir,
            selected=args.selected,
            k=args.k,
        )
    )
    return 0


def _stability_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--attributions", type=existing_file, required=True, help="one concept's attribution HDF5")
    p.add_argument("--scorer", required=True, help="score matrix to use, e.g. relevance or eap_ig")
    add_k_grid(p)
    add_votes_setting(p)
    p.add_argument("--tau", type=float, required=True, help="confidence threshold in [0.5, 1)")
    p.add_argument("--alpha", type=probability, default=0.001, help="family-wise failure probability")
    p.add_argument("--correction", choices=("bonferroni", "holm"), default="bonferroni")
    p.add_argument("--allow-vacuous", action="store_true", help="run even when the setting can certify nothing")
    p.add_argument("--resamples", type=positive_int, default=PROTOCOL_RESAMPLES,
                   help=f"bootstrap resamples B (default {PROTOCOL_RESAMPLES}; at least 2)")
    p.add_argument("--bootstrap-seed", type=seed, default=0, help="seed of the resampling (numpy default_rng)")
    p.add_argument("--ground-truth", type=existing_file, default=None,
                   help="ground-truth JSON: adds each resample's precision and recall")
    p.add_argument("--device", default="cpu", help="where votes are counted: cpu (numpy, default), auto, cuda[:N]")
    p.add_argument("--out", type=output_file, required=True, help="stability CSV (output)")
    p.add_argument("--out-truth-size", type=output_file, default=None,
                   help="with --ground-truth: the circuits at the truth's size, each against the baseline's circuit of "
                        "its own size, and their stability (CSV, output; analysis/size_matched.py)")


@STAGES.stage("stability", _stability_arguments,
              help="one concept's circuits under bootstrap resampling of its dataset (Jaccard, label changes, flips)")
def _cmd_stability(args: argparse.Namespace) -> int:
    """Draw B bootstrap resamples of the concept's examples; for each, the baseline circuit and the certified labels
    with the votes/certify stages' algorithm, setting and mask seed; write per K the Jaccard of the resampled
    baseline with the full-data one, the pairwise change shares of baseline memberships and certified labels, the
    in<->out flip share and the certified-in Jaccard between resamples.
    """
    from certified_circuits.core.planning import PlanWarning, VacuousSettingError
    from certified_circuits.core.setting import number
    from certified_circuits.core.smoothing import mask_seed
    from certified_circuits.storage.atomic import write_csv
    from certified_circuits.storage.store import read_attributions

    from certified_circuits.analysis.stability import MAX_RESAMPLES, concept_stability

    if args.resamples < 2:
        raise InputError(
            f"--resamples {args.resamples}: the pairwise shares need at least 2 resamples "
            f"(the protocol uses {PROTOCOL_RESAMPLES})"
        )
    if args.resamples > MAX_RESAMPLES:
        raise InputError(f"--resamples {args.resamples} is above {MAX_RESAMPLES}: each resample reruns the votes (the "
                         f"pairwise shares grow with its square); the protocol uses {PROTOCOL_RESAMPLES}")
    if args.resamples < PROTOCOL_RESAMPLES:
        log.warning("stability: %d resamples, fewer than the protocol's %d", args.resamples, PROTOCOL_RESAMPLES)
    if args.out_truth_size is not None and args.ground_truth is None:
        raise InputError("--out-truth-size needs --ground-truth: the truth's size is the ground truth's")
    setting = setting_of_args(args)
    concept = str(read_attributions(args.attributions).attrs.get("concept", ""))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", PlanWarning)
            table = concept_stability(
                args.attributions,
                args.scorer,
                args.k_grid,
                setting,
                mask_seed(args.seed, concept),
                args.resamples,
                args.bootstrap_seed,
                ground_truth=args.ground_truth,
                device=args.device,
                allow_vacuous=args.allow_vacuous,
            )
    except VacuousSettingError as exc:
        raise InputError(f"{exc}\nChange the setting as suggested, or pass --allow-vacuous to run anyway.") from exc
    for warning in caught:
        log.warning("plan (%s, tau %s): %s", concept, number(args.tau), warning.message)
    if args.out_truth_size is not None:
        from certified_circuits.analysis.size_matched import concept_truth_size

        at_truth = concept_truth_size(args.attributions, args.scorer, setting, mask_seed(args.seed, concept),
                                      args.ground_truth, args.resamples, args.bootstrap_seed)  # fmt: skip
        write_csv(args.out_truth_size, at_truth)
    write_csv(args.out, table)
    seconds = float(table["seconds"].iloc[0])
    add_metrics(
        {
            "stability_seconds": seconds,
            "stability_baseline_jaccard": float(table["baseline_jaccard_mean"].mean()),
            "stability_certified_change": float(table["certified_change_share"].mean()),
            "stability_certified_flips": float(table["certified_flip_share"].mean()),
        }
    )
    log.info(
        "stability: %s, %d resamples x %d K in %.2fs -> %s",
        concept,
        args.resamples,
        len(args.k_grid),
        seconds,
        args.out,
    )
    return 0


def _report_stability_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--inputs", nargs="+", required=True, type=existing_file, help="per-concept stability CSVs")
    p.add_argument("--k", type=k_fraction, default=None, help="also list every concept at this K of the grid")
    p.add_argument("--truth-size", nargs="+", default=(), type=existing_file,
                   help="per-concept truth-size CSVs (stability --out-truth-size): truth_size.csv and its summary")
    p.add_argument("--out-dir", required=True, type=Path)


@STAGES.stage("report-stability", _report_stability_arguments,
              help="combine per-concept stability tables: stability.csv and stability_summary.{csv,md,tex}")
def _cmd_report_stability(args: argparse.Namespace) -> int:
    """Concatenate the stability CSVs (stability.csv) and write the mean over concepts per K (stability_summary),
    with every concept at --k when given."""
    from certified_circuits.reports.testbed import stability_report, truth_size_report

    add_metrics(stability_report(args.inputs, args.out_dir, k=args.k))
    if args.truth_size:
        add_metrics(truth_size_report(args.truth_size, args.out_dir))
    return 0


def _hypotheses_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", nargs=2, action="append", required=True, metavar=("SEED", "TESTBED_DIR"),
                   help="one model seed's testbed folder (tables/<experiment>/testbed: recovery.csv, "
                        "recovery_auroc.csv, and stability.csv in every seed's folder or in none); repeat per seed, "
                        "each seed and folder once")
    p.add_argument("--out-dir", required=True, type=Path, help="writes hypotheses.csv and hypotheses.md")


#: what to do when a seed's table is refused
HYPOTHESES_FIX = "pass the testbed folder of a finished run (tables/<experiment>/testbed)"
#: the columns report-hypotheses reads from each table (besides the pairing keys the checks name)
RECOVERY_READ = ("experiment", "scorer", "concept", "setting", "method", "k_target", "precision", "recall", "n_true",
                 "n_components")
AUROC_READ = ("experiment", "scorer", "concept", "setting", "method", "k_target", "at_selected_setting")
#: the stability columns the hypotheses read
STABILITY_READ = ("baseline_change_share", "certified_flip_share")


def _seed_tables(seed: int, folder: Path) -> dict:
    """One seed's recovery, AUROC and stability tables (stability None when the folder has none), each checked before
    any pair is formed: readable CSV with rows, every K a share in (0, 1] (an AUROC row may have none: no selected K),
    no empty pairing cell, no row twice, counts that agree (:mod:`certified_circuits.analysis.hypotheses`)."""
    from certified_circuits.analysis.hypotheses import check_auroc, check_recovery, check_stability
    from certified_circuits.reports.testbed import read_stability_table
    from certified_circuits.storage.tables import parse_k_column, read_csv_table

    text = {"experiment": str, "scorer": str, "concept": str, "setting": str, "method": str}
    found = {}
    for name, columns, check, allow_missing in (("recovery.csv", RECOVERY_READ, check_recovery, False),
                                                ("recovery_auroc.csv", AUROC_READ, check_auroc, True)):
        path = folder / name
        where = f"{path} (--run {seed})"
        table = read_csv_table(path, where, columns, HYPOTHESES_FIX, text)
        table = parse_k_column(table, "k_target", where, HYPOTHESES_FIX, allow_missing=allow_missing)
        check(table, where, HYPOTHESES_FIX)
        found[name] = table.assign(seed=seed)
    path = folder / "stability.csv"
    found["stability.csv"] = None
    if path.is_file():
        table = read_stability_table(path, option=f"--run {seed}", columns=STABILITY_READ)
        check_stability(table, f"{path} (--run {seed})", HYPOTHESES_FIX)
        found["stability.csv"] = table.assign(seed=seed)
    return found


def _cmd_hypotheses(args: argparse.Namespace) -> int:
    """Pool each seed's recovery and stability tables (a ``seed`` column) and test H1-H3
    (:func:`certified_circuits.analysis.hypotheses.hypothesis_table`): one row per hypothesis, experiment and scorer,
    with the seeds whose pairs entered it.

    Refused before any pair is formed (issue 53): a seed that is not a decimal integer or is given twice, a folder
    given twice (by any spelling), a seed whose table is missing or unreadable, or lacks ``stability.csv`` while
    another seed has one, a K outside (0, 1], an empty cell in a column the pairs are formed on, a row given twice,
    and a row whose ``n_true`` disagrees with ``tp + fn`` or with its concept's other rows.
    """
    import pandas as pd

    from certified_circuits.analysis.hypotheses import hypothesis_table
    from certified_circuits.reports.tables import markdown_table
    from certified_circuits.storage.atomic import write_csv, write_text
    from certified_circuits.storage.tables import check_distinct_files

    seeds: list[int] = []
    for seed_text, folder in args.run:
        if not seed_text.isdigit() or (len(seed_text) > 1 and seed_text.startswith("0")) or int(seed_text) in seeds:
            raise InputError(f"--run {seed_text} {folder}: the seed must be a decimal integer without leading zeros, "
                             "each seed once")
        seeds.append(int(seed_text))
    folders = [Path(folder) for _, folder in args.run]
    check_distinct_files(folders, "--run")
    read = {seed: _seed_tables(seed, folder) for seed, folder in zip(seeds, folders)}
    with_stability = [seed for seed in seeds if read[seed]["stability.csv"] is not None]
    if with_stability and len(with_stability) < len(seeds):
        lacking = next(seed for seed in seeds if read[seed]["stability.csv"] is None)
        raise InputError(f"{folders[seeds.index(lacking)] / 'stability.csv'} (--run {lacking}) does not exist, while "
                         f"the folders of seeds {with_stability} hold one: H2 would silently drop seed {lacking}; "
                         "rerun that seed's stability jobs (or pass only seeds that all have it)")
    pooled = {name: pd.concat([read[s][name] for s in seeds], ignore_index=True) if name != "stability.csv"
              or with_stability else None for name in ("recovery.csv", "recovery_auroc.csv", "stability.csv")}
    table = hypothesis_table(pooled["recovery.csv"], pooled["stability.csv"], pooled["recovery_auroc.csv"])
    args.out_dir.mkdir(parents=True, exist_ok=True)
    write_csv(args.out_dir / "hypotheses.csv", table)
    shown = table.drop(columns=["claim", "alternative"]).assign(holds=table["holds"].map({True: "yes", False: "no"}))
    runs = "; ".join(f"{seed}: {folder}" for seed, folder in zip(seeds, folders))
    h2 = ("H2 from every seed's stability.csv" if with_stability else
          "H2 left out: no seed's folder holds stability.csv (testbed.resamples 0)")
    lines = ["Table: H1-H3 (docs/embedded_default.md): one-sided paired Wilcoxon signed-rank tests over concepts x "
             f"model seeds x settings, alpha 0.05; H3 holds when its test of 'lower' does not reject and the mean "
             f"difference is >= 0. Model seeds given ({len(seeds)}): {runs}. {h2}. Each row's pairs are n_pairs "
             "(concept x seed x setting with both values), from the model seeds in its seeds column; n_dropped pairs "
             "lacked a value (an empty certified circuit, no selected K, no stability row).", "",
             *markdown_table(shown, "{:.3g}")]
    write_text(args.out_dir / "hypotheses.md", "\n".join(lines) + "\n")
    add_metrics({"hypotheses_holding": int(table["holds"].sum()), "hypotheses": len(table)})
    log.info("report-hypotheses: %d of %d hold -> %s", int(table["holds"].sum()), len(table), args.out_dir)
    return 0


STAGES.stage("report-hypotheses", _hypotheses_arguments,
             help="H1-H3 of docs/embedded_default.md over concepts x model seeds: hypotheses.csv and hypotheses.md"
             )(_cmd_hypotheses)
