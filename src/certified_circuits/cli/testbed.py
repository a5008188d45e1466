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
from typing import TYPE_CHECKING

from certified_circuits.cli.stages import InputError, Stages, add_decision_setting, add_k_grid, add_setting_tag
from certified_circuits.cli.stages import add_votes_setting, check_distinct_inputs, check_distinct_outputs
from certified_circuits.cli.stages import existing_file, k_fraction
from certified_circuits.cli.stages import output_file, positive_int, seed, setting_of_args
from certified_circuits.pipeline.tracking import add_metrics

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from certified_circuits.analysis.equal_footing import FootingProtocol
    from certified_circuits.core.setting import Setting

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
    add_decision_setting(p)
    add_setting_tag(p, "setting")
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
    p.add_argument("--out-truth-size-equal", type=output_file, default=None,
                   help="with --ground-truth: the certificate at the truth's size beside the comparators that abstain "
                        "as much (matched cut, bootstrap interval, consensus) on the same resamples (CSV, output; "
                        "analysis/equal_footing.py; no population, so no contested set)")
    footing = p.add_argument_group("the equal footing (--out-truth-size-equal; testbed.equal_footing in the config)")
    footing.add_argument("--inner-resamples", type=int, default=20,
                         help="inner bootstrap resamples of each resampled dataset, for the interval and consensus "
                              "(2 to 10000; default 20)")
    footing.add_argument("--inner-seed", type=seed, default=1, help="seed the inner resamples' streams are spawned from")
    footing.add_argument("--consensus-q", type=float, default=0.9,
                         help="consensus: in where >= q of the inner circuits keep it, out where <= 1 - q (in (0.5, 1])")
    footing.add_argument("--interval-z", type=float, default=1.96, help="the bootstrap interval's normal quantile (> 0)")
    footing.add_argument("--tie-seed", type=seed, default=0, help="seed of the contested-set detector's tie order")


def truth_size_tables(attributions: Path, scorer: str, setting: "Setting", mask_seed: int, ground_truth: Path,
                      protocol: "FootingProtocol") -> tuple["pd.DataFrame", "pd.DataFrame"]:  # fmt: skip
    """The ``stability`` stage's truth-size table (:func:`~certified_circuits.analysis.size_matched.concept_truth_size`)
    and its equal-footing table (:func:`equal_footing_rows`, no population: no contested set), from one pass of
    ``A_T``'s certificate over D and the ``protocol.n_resamples`` bootstrap resamples (seed ``protocol.bootstrap_seed``):
    the labellings' rows are the size-matched stage's resampled labels, so the two tables share every vote count.

    Returns:
        ``(truth_size, equal)``: the first equal to ``concept_truth_size``'s with the same resamples and seed; the
        second one row per method (``THREE_VALUED`` then ``TWO_VALUED``), labelled as the first (plus
        ``bootstrap_seed``, ``inner_seed``, ``q``, ``z`` and ``tie_seed``, the protocol), columns
        ``EQUAL_FOOTING_COLUMNS`` after the labels (analysis/equal_footing.py).

    Raises:
        ValueError: as ``concept_truth_size`` (an unknown scorer, a truth of another experiment, names that do not
            match).
    """
    import numpy as np
    import pandas as pd

    from certified_circuits.analysis.equal_footing import equal_footing_rows, labellings
    from certified_circuits.analysis.recovery import grey_mask
    from certified_circuits.analysis.size_matched import truth_size_rows
    from certified_circuits.core.discovery import GroupIndex, group_counts
    from certified_circuits.analysis.stability import concept_inputs, stability_labels

    attr, concept, known, truth = concept_inputs(attributions, scorer, ground_truth)
    scores, absolute = np.asarray(attr.scores[scorer], dtype=np.float64), attr.absolute(scorer)
    grey = grey_mask(known, concept, attr.names)
    counts = group_counts(np.asarray(truth, dtype=bool), GroupIndex.from_groups(attr.groups))
    found = labellings(scores, attr.groups, counts, setting, protocol, absolute=absolute, mask_seed=mask_seed)
    assert found.kept is not None  # labellings() keeps A_T
    rows = truth_size_rows(scores, attr.groups, truth, setting, absolute=absolute, exclude=grey, mask_seed=mask_seed,
                           n_resamples=protocol.n_resamples, bootstrap_seed=protocol.bootstrap_seed,
                           certificate=found.certificate,
                           resampled=(found.kept[1:], found.three["certified"][1:]))  # fmt: skip
    equal = equal_footing_rows(scores, attr.groups, truth, setting, None, absolute=absolute, exclude=grey,
                               mask_seed=mask_seed, protocol=protocol, found=found)  # fmt: skip
    labels = {**stability_labels(attr.attrs, concept, scorer, setting, mask_seed),
              "truth_verified": known.verified(concept), "n_examples": int(scores.shape[0])}
    footing = {"bootstrap_seed": protocol.bootstrap_seed, "inner_seed": protocol.inner_seed, "q": protocol.q,
               "z": protocol.z, "tie_seed": protocol.tie_seed}  # fmt: skip
    return (pd.DataFrame([{**labels, **row} for row in rows]),
            pd.DataFrame([{**labels, **footing, **row} for row in equal]))  # fmt: skip


def _footing_protocol(args: argparse.Namespace):
    """The equal footing's :class:`~certified_circuits.analysis.equal_footing.FootingProtocol` of the options: the
    outer resamples and their seed are the stage's (``--resamples``, ``--bootstrap-seed``), the rest its own.

    Raises:
        InputError: an option out of its range (named, with the range).
    """
    from certified_circuits.analysis.equal_footing import MAX_INNER_RESAMPLES, FootingProtocol

    if not 2 <= args.inner_resamples <= MAX_INNER_RESAMPLES:
        raise InputError(f"--inner-resamples {args.inner_resamples}: 2 to {MAX_INNER_RESAMPLES} (a standard deviation "
                         "needs two; the pre-registration uses 20)")
    if not 0.5 < args.consensus_q <= 1:
        raise InputError(f"--consensus-q {args.consensus_q}: must lie in (0.5, 1] (in and out must not both hold; "
                         "the pre-registration uses 0.9)")
    if not 0 < args.interval_z < float("inf"):
        raise InputError(f"--interval-z {args.interval_z}: must be positive and finite (the pre-registration uses 1.96)")
    return FootingProtocol(n_resamples=args.resamples, bootstrap_seed=args.bootstrap_seed,
                           n_inner=args.inner_resamples, inner_seed=args.inner_seed, q=args.consensus_q,
                           z=args.interval_z, tie_seed=args.tie_seed)


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
    check_distinct_outputs(args, ("--out", "--out-truth-size", "--out-truth-size-equal"),
                           inputs=("--attributions", "--ground-truth"))
    for given, name in ((args.out_truth_size, "--out-truth-size"), (args.out_truth_size_equal, "--out-truth-size-equal")):
        if given is not None and args.ground_truth is None:
            raise InputError(f"{name} needs --ground-truth: the truth's size is the ground truth's")
    protocol = _footing_protocol(args) if args.out_truth_size_equal is not None else None
    setting = setting_of_args(args)
    attributions = read_attributions(args.attributions)
    concept = str(attributions.attrs.get("concept", ""))
    if args.scorer in attributions.scores:  # else concept_stability names the scorers the file holds
        from certified_circuits.cli.main import check_votes_memory, masks_fix  # the votes stage's one estimate

        n_examples, n_components = attributions.scores[args.scorer].shape
        check_votes_memory(setting.n0 + setting.n, n_examples, n_components, masks_fix(args))
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
    if protocol is not None:
        at_truth, equal = truth_size_tables(args.attributions, args.scorer, setting, mask_seed(args.seed, concept),
                                            args.ground_truth, protocol)
        write_csv(args.out_truth_size_equal, equal)
        if args.out_truth_size is not None:
            write_csv(args.out_truth_size, at_truth)
    elif args.out_truth_size is not None:
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
    p.add_argument("--truth-size-equal", nargs="+", default=(), type=existing_file,
                   help="per-concept equal-footing CSVs (stability --out-truth-size-equal): truth_size_equal.csv and "
                        "its summary")
    p.add_argument("--out-dir", required=True, type=Path)


@STAGES.stage("report-stability", _report_stability_arguments,
              help="combine per-concept stability tables: stability.csv and stability_summary.{csv,md,tex}")
def _cmd_report_stability(args: argparse.Namespace) -> int:
    """Concatenate the stability CSVs (stability.csv) and write the mean over concepts per K (stability_summary),
    with every concept at --k when given; likewise the truth-size (truth_size.csv) and equal-footing
    (truth_size_equal.csv) tables when given."""
    from certified_circuits.reports.testbed import read_stability_table, read_truth_size_equal_table
    from certified_circuits.reports.testbed import read_truth_size_table, stability_report, truth_size_equal_report
    from certified_circuits.reports.testbed import truth_size_report

    for option_name in ("--inputs", "--truth-size", "--truth-size-equal"):
        check_distinct_inputs([(option_name, path) for path in getattr(args, option_name[2:].replace("-", "_"))])
    for path in args.inputs:  # every table checked before the first output is written
        read_stability_table(path)
    for path in args.truth_size:
        read_truth_size_table(path)
    for path in args.truth_size_equal:
        read_truth_size_equal_table(path)
    add_metrics(stability_report(args.inputs, args.out_dir, k=args.k))
    if args.truth_size:
        add_metrics(truth_size_report(args.truth_size, args.out_dir))
    if args.truth_size_equal:
        add_metrics(truth_size_equal_report(args.truth_size_equal, args.out_dir))
    return 0


def _hypotheses_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", nargs=2, action="append", required=True, metavar=("SEED", "TESTBED_DIR"),
                   help="one model seed's testbed folder (tables/<experiment>/testbed, whose truth_size.csv the "
                        "stability jobs wrote); repeat per seed, each seed and folder once, at most 20 seeds")
    p.add_argument("--include-unverified", action="store_true",
                   help="include concepts whose truth failed verification (truth_verified False; refused by default: "
                        "a circuit scored against a truth that does not hold tests nothing); hypotheses.md names them")
    p.add_argument("--out-dir", required=True, type=Path, help="writes hypotheses.csv and hypotheses.md")


#: what to do when a seed's folder has no truth-size table
HYPOTHESES_FIX = ("pass the testbed folder of a finished run whose testbed ran its stability jobs "
                  "(tables/<experiment>/testbed with truth_size.csv; testbed.resamples > 0)")


def _cmd_hypotheses(args: argparse.Namespace) -> int:
    """Test H1-H3 over model seeds from each seed's ``truth_size.csv``
    (:func:`certified_circuits.analysis.hypotheses.truth_size_hypotheses`): certified circuits against the
    baseline's circuit of their own size, the model seed the unit (concepts and settings averaged within a seed),
    the exact sign-flip test, Holm within each hypothesis; one row per experiment, hypothesis, scorer and method.

    Refused before any seed mean is formed (issue 53): a seed that is not a decimal integer or is given twice, more
    seeds than the exact test enumerates, a folder given twice (by any spelling), a seed whose table is missing or
    unreadable, an empty key cell, a share outside [0, 1], a flag not True/False, a row given twice, counts that
    disagree (within a concept, or a certificate's stability between its rows), a certificate without a tested
    method's row, and seeds whose tables hold different certificates; issue 61: a seed's table that is a link to
    another's, and a concept whose truth failed verification (unless --include-unverified).
    """
    from certified_circuits.analysis.hypotheses import check_verified, truth_size_hypotheses
    from certified_circuits.analysis.seed_tests import ALPHA, MAX_SEEDS, TESTS
    from certified_circuits.reports.tables import markdown_table
    from certified_circuits.reports.testbed import TRUTH_SIZE_FIX, read_truth_size_table
    from certified_circuits.storage.atomic import write_csv, write_text
    from certified_circuits.storage.tables import check_distinct_files

    seeds: list[int] = []
    for seed_text, folder in args.run:
        if not seed_text.isdigit() or (len(seed_text) > 1 and seed_text.startswith("0")) or int(seed_text) in seeds:
            raise InputError(f"--run {seed_text} {folder}: the seed must be a decimal integer without leading zeros, "
                             "each seed once")
        seeds.append(int(seed_text))
    if len(seeds) > MAX_SEEDS:
        raise InputError(f"--run is given {len(seeds)} times: the exact sign-flip test enumerates all 2^n sign "
                         f"vectors of n model seeds, n <= {MAX_SEEDS}; pass at most {MAX_SEEDS} seeds")
    folders = [Path(folder) for _, folder in args.run]
    check_distinct_files(folders, "--run")
    tables, where = {}, {}
    for model_seed, folder in zip(seeds, folders):
        path = folder / "truth_size.csv"
        where[model_seed] = f"{path} (--run {model_seed})"
        if not path.is_file():
            raise InputError(f"{where[model_seed]} does not exist; {HYPOTHESES_FIX}")
    # a seed's table that is a symlink or hard link to another seed's would count one seed twice
    check_distinct_inputs([(f"--run {s}", folder / "truth_size.csv") for s, folder in zip(seeds, folders)],
                          "truth-size table of another seed,")
    for model_seed, folder in zip(seeds, folders):
        path = folder / "truth_size.csv"
        tables[model_seed] = read_truth_size_table(path, option=f"--run {model_seed}")
    table = truth_size_hypotheses(tables, where, TRUTH_SIZE_FIX, include_unverified=args.include_unverified)
    failed = {seed: check_verified(tables[seed], where[seed], True) for seed in seeds}
    unverified = "; ".join(f"seed {seed}: {', '.join(found)}" for seed, found in failed.items() if found)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    write_csv(args.out_dir / "hypotheses.csv", table)
    first = tables[seeds[0]]
    within = "; ".join(f"{experiment}: {part['concept'].nunique()} concept(s) x {part['setting'].nunique()} "
                       f"setting(s)" for experiment, part in first.groupby("experiment", sort=False))
    runs = "; ".join(f"{seed}: {folder}" for seed, folder in zip(seeds, folders))
    lines = [f"Table: H1-H3 (docs/embedded_default.md, the fair testbed's pre-registration) from each model seed's "
             f"truth_size.csv: every certified circuit against the baseline's circuit of its own size. The unit is "
             f"the model seed, n = {len(seeds)} ({runs}); within a seed the concepts and settings are averaged "
             f"({within}), so each seed is one pair. Test: the exact one-sided paired sign-flip test over the 2^n "
             f"sign vectors; correction: Holm within each hypothesis (across its scorers and methods, per "
             f"experiment), family-wise alpha {ALPHA}. 'untestable at n=...' means the test cannot reach p < {ALPHA} "
             "at that n (its smallest p, 2^-(seeds with a non-zero difference), is at least alpha: 4 seeds or "
             "fewer), not that the hypothesis fails. H2 reads only the certificates whose setting can certify IN "
             "and that certify something IN on some resample; H3 holds when its test of 'lower' is not rejected and "
             "the mean difference is >= 0. n_seeds: the seeds with a value; n_dropped: the seeds with none (every "
             "circuit empty, or no certificate H2 reads)." + (f" Included by --include-unverified, though their truth "
                                                              f"failed verification: {unverified}." if unverified
                                                              else ""), "",
             *markdown_table(table.drop(columns=["claim", "alternative"]), "{:.4g}"), "",
             *dict.fromkeys(f"- {name}, {method}: {claim} (alternative {alternative})"
                            for name, claim, method, _, _, alternative in TESTS)]
    write_text(args.out_dir / "hypotheses.md", "\n".join(lines) + "\n")
    holding = int((table["status"] == "holds").sum())
    untestable = int(table["status"].str.startswith("untestable").sum())
    add_metrics({"hypotheses_holding": holding, "hypotheses_untestable": untestable, "hypotheses": len(table)})
    log.info("report-hypotheses: %d of %d hold, %d untestable, over %d model seeds -> %s", holding, len(table),
             untestable, len(seeds), args.out_dir)
    return 0


STAGES.stage("report-hypotheses", _hypotheses_arguments,
             help="H1-H3 of docs/embedded_default.md over model seeds, size-matched: hypotheses.csv and hypotheses.md"
             )(_cmd_hypotheses)
