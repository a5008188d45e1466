"""``certified-circuits report-*`` stages (declared with :mod:`certified_circuits.cli.stages`).

The implementations live in :mod:`certified_circuits.reports.paper` and :mod:`certified_circuits.reports.features`,
which import pandas and matplotlib (seconds; scipy.stats only where a report needs a test beyond the exact ones of
:mod:`certified_circuits.analysis.evaluation`); they are imported only when a report stage
runs, so every other ``certified-circuits`` stage starts fast. Circuits are given as ``--circuits
VOTES CERTS`` pairs (repeatable); their concept, split, seed and scorer come from the files.
"""

from __future__ import annotations

import argparse
import logging
import re
from pathlib import Path

from certified_circuits.pipeline.tracking import add_metrics, add_tags
from certified_circuits.cli.stages import InputError, Stages, existing_file, existing_path, k_fraction, positive_int
from certified_circuits.cli.stages import seed as seed_option

log = logging.getLogger(__name__)
STAGES = Stages()


def _circuit_arguments(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--circuits", nargs=2, action="append", required=required, default=[], type=existing_file,
                   metavar=("VOTES", "CERTS"), help="votes and certificates of one circuit (repeatable)")


def _operating_point_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--operating-points", type=existing_file, required=True,
                   help="operating_points.csv of report-sufficiency (where every report's K comes from)")
    p.add_argument("--scorer", required=True, help="scorer whose operating point is used")


def _sufficiency_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--inputs", nargs="+", required=True, type=existing_file, help="per-concept sufficiency CSVs")
    p.add_argument("--by", nargs="*", default=[], choices=("scorer", "concept", "setting"),
                   help="extra row keys: scorer, concept, setting")
    p.add_argument("--best-setting", action="store_true", help="keep the best certification setting per row")
    p.add_argument("--select-on", default=None, metavar="EVAL_SET",
                   help="also write selected_* tables: K (and setting) chosen on this held-out eval set")
    p.add_argument("--test", choices=("wilcoxon", "ttest"), default="wilcoxon", help="class-level paired test")
    p.add_argument("--bootstrap-seed", type=seed_option, default=0,
                   help="seed of the per-example paired bootstrap (balanced accuracy)")
    p.add_argument("--title", default="")
    p.add_argument("--ablation", choices=("zero", "mean"), default="zero",
                   help="which rows of the tables: zero (the paper's test, default) or mean ablation (vision-evaluate --ablation)")
    p.add_argument("--out-dir", required=True, type=Path)


@STAGES.stage("report-sufficiency", _sufficiency_arguments,
              help="Table 1/3, cACC-K curves and operating points from per-concept tables")
def _cmd_sufficiency(args: argparse.Namespace) -> int:
    from certified_circuits.reports.paper import sufficiency_report

    add_metrics(sufficiency_report(args.inputs, args.by, args.test, args.best_setting, args.title, args.out_dir,
                                   select_on=args.select_on, bootstrap_seed=args.bootstrap_seed, ablation=args.ablation))
    return 0


def _iou_arguments(p: argparse.ArgumentParser) -> None:
    _operating_point_arguments(p)
    _circuit_arguments(p, required=False)  # none when no class has enough images in an OOD set
    p.add_argument("--out-dir", required=True, type=Path)


@STAGES.stage("report-iou", _iou_arguments, help="IoU of ID vs OOD re-discovered circuits (Fig. IoU)")
def _cmd_iou(args: argparse.Namespace) -> int:
    from certified_circuits.reports.paper import iou_report

    add_metrics(iou_report(args.operating_points, args.scorer, args.circuits, args.out_dir))
    return 0


def _seeds_arguments(p: argparse.ArgumentParser) -> None:
    _operating_point_arguments(p)
    _circuit_arguments(p)
    p.add_argument("--eval-set", default="id")
    p.add_argument("--k", type=k_fraction, default=None, help="K target (default: the certified ID peak)")
    p.add_argument("--out-dir", required=True, type=Path)


@STAGES.stage("report-seeds", _seeds_arguments, help="pairwise IoU across certification seeds")
def _cmd_seeds(args: argparse.Namespace) -> int:
    from certified_circuits.reports.paper import seeds_report

    add_metrics(seeds_report(args.operating_points, args.scorer, args.circuits, args.out_dir, eval_set=args.eval_set, k=args.k))
    return 0


def _radius_arguments(p: argparse.ArgumentParser) -> None:
    _circuit_arguments(p)
    p.add_argument("--sufficiency", nargs="+", required=True, type=existing_file, help="sufficiency CSVs of the circuits")
    p.add_argument("--eval-set", default="id")
    p.add_argument("--k", type=k_fraction, default=0.6, help="fixed K of the fixed-K panel (paper: 0.6)")
    p.add_argument("--plan-warnings", type=existing_file, default=None,
                   help="plan/warnings.json: the sweep's settings the plan warned about are named on the figures")
    p.add_argument("--out-dir", required=True, type=Path)


@STAGES.stage("report-radius", _radius_arguments, help="abstention and cACC across radii and |D| (App. D)")
def _cmd_radius(args: argparse.Namespace) -> int:
    from certified_circuits.reports.flags import read_plan_records
    from certified_circuits.reports.paper import radius_report

    plans = read_plan_records(args.plan_warnings) if args.plan_warnings else []
    radius_report(args.circuits, args.sufficiency, args.k, args.out_dir, eval_set=args.eval_set, plan_warnings=plans)
    return 0


def _spurious_arguments(p: argparse.ArgumentParser) -> None:
    _operating_point_arguments(p)
    p.add_argument("--attributions", nargs="+", required=True, type=existing_file, help="attribution files of the classes")
    _circuit_arguments(p)
    p.add_argument("--eval-set", default="id")
    p.add_argument("--out-dir", required=True, type=Path)


@STAGES.stage("report-spurious", _spurious_arguments, help="spurious index by certification category")
def _cmd_spurious(args: argparse.Namespace) -> int:
    from certified_circuits.reports.features import spurious_report

    add_metrics(spurious_report(args.operating_points, args.scorer, args.attributions, args.circuits, args.out_dir,
                                eval_set=args.eval_set))
    return 0


def _features_arguments(p: argparse.ArgumentParser) -> None:
    _operating_point_arguments(p)
    p.add_argument("--eval-set", default="id")
    p.add_argument("--attributions", required=True, type=existing_file)
    p.add_argument("--votes", required=True, type=existing_file)
    p.add_argument("--certificates", required=True, type=existing_file)
    p.add_argument("--data", required=True, type=existing_path, help="the concept data the attributions were made from")
    p.add_argument("--channels", type=positive_int, default=3, help="channels per category")
    p.add_argument("--examples", type=positive_int, default=6, help="top-activating examples per channel")
    p.add_argument("--out-stem", required=True, type=Path)


@STAGES.stage("report-features", _features_arguments, help="feature grid of certified-in / abstained / out channels")
def _cmd_features(args: argparse.Namespace) -> int:
    from certified_circuits.reports.features import features_report

    features_report(args.operating_points, args.scorer, args.attributions, args.votes, args.certificates, args.data,
                    args.out_stem, eval_set=args.eval_set, channels=args.channels, examples=args.examples)
    return 0


def _model_seeds_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", nargs=2, action="append", required=True, metavar=("SEED", "TABLE"),
                   help="model-training seed and one of its runs' peaks_*/selected_*/faithfulness raw tables, or its "
                   "testbed/recovery.csv or testbed/stability.csv (repeatable)")
    p.add_argument("--name", required=True, help="output stem, e.g. world_selected_cacc")
    p.add_argument("--out-dir", required=True, type=Path)


@STAGES.stage("report-model-seeds", _model_seeds_arguments,
              help="mean ± spread of a table over runs with different model-training seeds")
def _cmd_model_seeds(args: argparse.Namespace) -> int:
    from certified_circuits.reports.paper import model_seeds_faithfulness, model_seeds_report

    runs: dict[str, list[Path]] = {}
    for seed, table in args.run:
        if not re.fullmatch(r"0|[1-9][0-9]*", seed):
            raise InputError(f"--run {seed} {table}: the seed {seed!r} is not a decimal integer without leading zeros "
                             f"(bin/model-seeds writes s<seed>/): write it as the run's seed, e.g. --run 1 {table}")
        path = Path(table)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: table not found; run the workflow for model seed {seed} first")
        runs.setdefault(seed, []).append(path)
    from certified_circuits.reports.testbed import model_seeds_recovery, model_seeds_stability

    names = {p.name for paths in runs.values() for p in paths}
    testbed = names & {"recovery.csv", "stability.csv"}
    if testbed and len(names) > 1:
        raise InputError(f"--run tables of different kinds: {sorted(names)}; one report combines one table across "
                         f"seeds: pass the {sorted(testbed)[0]} of every seed only")
    if names == {"recovery.csv"}:  # the testbed's tables (tables/<experiment>/testbed/)
        report = model_seeds_recovery
    elif names == {"stability.csv"}:
        report = model_seeds_stability
    elif all(name.startswith("faithfulness") for name in names):
        report = model_seeds_faithfulness
    else:
        report = model_seeds_report
    add_metrics(report(runs, args.out_dir, args.name))
    return 0


def _theory_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--n-components", type=positive_int, default=3840,
                   help="U: the run's tested components (default: the paper's ResNet, 3,840)")
    p.add_argument("--n-examples", type=positive_int, default=None,
                   help="|D|: the run's concept-set size (marks where p_del^|D| >= 1 - tau makes IN impossible)")
    p.add_argument("--label", default="", help="what U and |D| are of, for the titles (e.g. 'vision world')")
    p.add_argument("--out-dir", required=True, type=Path)


@STAGES.stage("report-theory", _theory_arguments, help="radius vs p_del and minimum n vs tau (App. C)")
def _cmd_theory(args: argparse.Namespace) -> int:
    from certified_circuits.reports.paper import theory_report

    add_metrics(theory_report(args.out_dir, n_components=args.n_components, n_examples=args.n_examples, label=args.label))
    return 0


def _plan_warnings_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--records", required=True,
                   help="the parse-time plan warnings as a JSON list (pipeline/plans/setting_plans.py plan_records; the Snakefile's)")
    p.add_argument("--out", required=True, type=Path, help="RESULTS/plan/warnings.json")


@STAGES.stage("report-plan-warnings", _plan_warnings_arguments,
              help="write the workflow's parse-time plan warnings into the results (plan/warnings.json)")
def _cmd_plan_warnings(args: argparse.Namespace) -> int:
    """Write the plan warnings the Snakefile printed at parse time, so the warning list, the summary, the explorer
    and the radius-sweep figure show them."""
    import json

    from certified_circuits.reports.flags import PLAN_FORMAT, check_plan_records
    from certified_circuits.storage.atomic import write_json
    from certified_circuits.storage.documents import unique_keys

    fix = "pass the records of pipeline/plans/setting_plans.py plan_records as JSON (the workflow's rule `plan_warnings` does)"
    try:
        records = json.loads(args.records, object_pairs_hook=unique_keys)
    except ValueError as error:
        raise InputError(f"--records is not JSON ({error}); {fix}") from None
    check_plan_records(records, "--records", fix)
    write_json(args.out, {"format": PLAN_FORMAT, "warnings": records})
    log.info("report-plan-warnings: %d warnings -> %s", len(records), args.out)
    return 0


def _warnings_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--curves", nargs="*", default=[], type=existing_file,
                   help="curves tables (curves.csv of report-sufficiency) checked for degenerate results")
    p.add_argument("--certificates", nargs="*", default=[], type=existing_file,
                   help="certificates files checked for degenerate results (plan warnings, certified IN nothing)")
    p.add_argument("--plan-warnings", type=existing_file, default=None,
                   help="the parse-time plan warnings (plan/warnings.json of report-plan-warnings)")
    p.add_argument("--selected", nargs="*", default=[], type=existing_file,
                   help="selected_*_raw.csv tables of report-sufficiency --select-on: a K chosen on held-out data "
                        "that is the whole model is flagged (full-model-k)")
    p.add_argument("--out", required=True, type=Path, help="RESULTS/warnings.json")


@STAGES.stage("report-warnings", _warnings_arguments,
              help="the run's one warning list (warnings.json): what the summary, explorer, MLflow and terminal show")
def _cmd_warnings(args: argparse.Namespace) -> int:
    """Write warnings.json (reports/flags.py run_flags), tag the job with its ``cc.flag.<code>`` tags and log one
    line per kind on stderr."""
    from certified_circuits.reports.flags import by_kind, counts_line, flag_tags, kind_line, run_flags, write_flags

    found = run_flags(args.curves, args.certificates, args.plan_warnings, args.selected)
    write_flags(args.out, found)
    add_tags(flag_tags(found))
    add_metrics({"warnings": len(found)})
    log.info("report-warnings: %s -> %s", counts_line(found), args.out)
    for code, group in by_kind(found).items():
        log.warning("%s", kind_line(code, group))
    return 0


def _summary_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--experiment", nargs=2, action="append", required=True, metavar=("NAME", "TABLES"),
                   help="an experiment's name and its tables folder (repeatable)")
    p.add_argument("--warnings", type=existing_file, default=None, help="the run's warning list (warnings.json)")
    p.add_argument("--plan-warnings", type=existing_file, default=None,
                   help="plan/warnings.json: marks the radius sweep's settings the plan warned about")
    p.add_argument("--ground-truth", nargs="*", default=[], type=existing_file,
                   help="testbed: ground-truth JSONs (vision-ground-truth, language-ground-truth)")
    p.add_argument("--truth-size", nargs="*", default=[], type=existing_file,
                   help="testbed: testbed/truth_size.csv per experiment (report-stability): the headline's tables")
    p.add_argument("--main-scorer", default=None, help="the vision scorer the headline reports (vision.main_scorer)")
    p.add_argument("--out", required=True, type=Path, help="RESULTS/summary.md")
    p.add_argument("--out-findings", type=Path, default=None,
                   help="RESULTS/findings.json: the headline, which the explorer and the end of the run show")


@STAGES.stage("report-summary", _summary_arguments, help="the run's results for people, in one page (summary.md)")
def _cmd_summary(args: argparse.Namespace) -> int:
    """Write summary.md (reports/summary.py): the headline (reports/findings.py ``headline``, also written to
    ``--out-findings``), one compact table per result family, the warnings of warnings.json grouped by kind."""
    from certified_circuits.reports.findings import headline, write_headline
    from certified_circuits.reports.flags import read_flags, read_plan_records
    from certified_circuits.reports.summary import summary_report

    for name, tables in args.experiment:
        if not Path(tables).is_dir():
            raise InputError(f"--experiment {name}: tables folder {tables} does not exist; run the tables first")
    try:
        top = headline(args.truth_size, args.ground_truth, args.main_scorer)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    found = read_flags(args.warnings) if args.warnings else []
    plans = read_plan_records(args.plan_warnings) if args.plan_warnings else []
    n = summary_report(args.out, [(name, Path(tables)) for name, tables in args.experiment], found, top,
                       args.main_scorer, plans)
    if args.out_findings is not None:
        write_headline(args.out_findings, top)
    add_metrics({"summary_lines": n, "headline_tables": len(top.tables)})
    return 0


def _explorer_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--experiment", nargs=3, action="append", required=True, metavar=("KIND", "NAME", "TABLES"),
                   help="vision or language, the experiment's name and its tables folder (repeatable)")
    p.add_argument("--circuit", nargs=5, action="append", default=[],
                   metavar=("EXPERIMENT", "CONCEPT", "ATTRIBUTIONS", "VOTES", "CERTIFICATES"),
                   help="one concept's circuit files (repeatable; a language task once per setting)")
    p.add_argument("--features", nargs=3, action="append", default=[], metavar=("EXPERIMENT", "CONCEPT", "PNG"),
                   help="a class's feature grid (repeatable)")
    p.add_argument("--theory", nargs="*", default=[], type=existing_file, help="theory figures (PNG)")
    p.add_argument("--warnings", type=existing_file, default=None,
                   help="the run's warning list (warnings.json of report-warnings), shown on every page")
    p.add_argument("--ground-truth", nargs="*", default=[], type=existing_file,
                   help="testbed: ground-truth JSONs (one per experiment): the true components on its pages")
    p.add_argument("--findings", type=existing_file, default=None,
                   help="findings.json of report-summary: the headline that opens the overview (summary.md's too)")
    p.add_argument("--out-dir", required=True, type=Path, help="the explorer folder (RESULTS/explorer)")


@STAGES.stage("report-explorer", _explorer_arguments, help="the circuit explorer: a static HTML folder")
def _cmd_explorer(args: argparse.Namespace) -> int:
    """Write RESULTS/explorer/: an overview page and one page per vision class and language task, opening from disk."""
    from certified_circuits.reports.explorer import Circuit, Experiment, build_explorer

    experiments = []
    for kind, name, tables in args.experiment:
        if kind not in ("vision", "language"):
            raise InputError(f"--experiment {kind} {name}: the kind is vision or language")
        if not Path(tables).is_dir():
            raise InputError(f"--experiment {kind} {name}: tables folder {tables} does not exist; run the tables first")
        experiments.append(Experiment(kind, name, Path(tables)))
    features = {(e, c): Path(png) for e, c, png in args.features}
    circuits = []
    for experiment, concept, *paths in args.circuit:
        for path in paths:
            if not Path(path).is_file():
                raise InputError(f"--circuit {experiment} {concept}: {path} does not exist")
        circuits.append(Circuit(experiment, concept, *map(Path, paths), features=features.get((experiment, concept))))
    from certified_circuits.reports.findings import NO_HEADLINE, read_headline
    from certified_circuits.reports.flags import read_flags

    found = read_flags(args.warnings) if args.warnings else []
    try:
        top = read_headline(args.findings) if args.findings else NO_HEADLINE
    except ValueError as exc:
        raise InputError(str(exc)) from None
    metrics = build_explorer(args.out_dir, experiments, circuits, args.theory, found, args.ground_truth, top)
    add_metrics(metrics)
    log.info("report-explorer: %d pages -> %s/index.html", int(metrics["explorer_pages"]), args.out_dir)
    return 0


# ---------------------------------------------------------------------------------------------- graphs


def _graphs_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--circuit", nargs=5, action="append", required=True,
                   metavar=("EXPERIMENT", "TASK", "ATTRIBUTIONS", "VOTES", "CERTIFICATES"),
                   help="one task's circuit files at one setting (repeatable: every setting of every task)")
    p.add_argument("--selected", type=existing_file, required=True,
                   help="selected_cacc_raw.csv of report-sufficiency --select-on (the K and setting of each method)")
    p.add_argument("--out-dir", required=True, type=Path, help="graphs folder: <task>/<method>_K<k>.json")


@STAGES.stage(
    "report-graphs", _graphs_arguments,
    help="certified language circuits as hannamw/EAP-IG Graph JSON (MIB circuit-track files)",
)
def _cmd_graphs(args: argparse.Namespace) -> int:
    """For every task, write the baseline, majority and certified circuits at the K and setting selected on
    held-out prompts as EAP-IG Graph JSON (edge scores and in_graph), the certificate's sidecar and a scores-only
    file (reports/language_graphs.py).
    """
    from certified_circuits.reports.language_graphs import METHODS, write_task_graphs
    from certified_circuits.storage.tables import read_csv_table

    columns = ["concept"] + [f"{m}_{c}" for m in METHODS for c in ("setting", "k_target")]
    try:
        selected = read_csv_table(args.selected, f"{args.selected} (--selected)", columns,
                                  "pass the selected_cacc_raw.csv that report-sufficiency --select-on wrote",
                                  {"concept": str}, kind="selected table")
    except ValueError as exc:
        raise InputError(str(exc)) from None
    by_task: dict[str, list] = {}
    attributions: dict[str, str] = {}
    for _, task, attr, votes, certs in args.circuit:
        attributions[task] = attr
        by_task.setdefault(task, []).append((votes, certs))
    n = 0
    for task, circuits in by_task.items():
        n += len(write_task_graphs(args.out_dir, task, attributions[task], circuits, selected,
                                   where=f"{args.selected} (--selected)"))
    log.info("report-graphs: %d files for %d tasks -> %s", n, len(by_task), args.out_dir)
    return 0
