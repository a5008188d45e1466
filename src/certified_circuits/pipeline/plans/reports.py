"""The run's own reports (``rules/reports.smk``): the theory figures, the one warning list, summary.md and the
explorer, what each reads, and ``rule all``'s targets by domain (the Snakefile lists them in one place).

``rule all`` asks for :func:`theory_targets`, then the vision, language and testbed targets
(:func:`~certified_circuits.pipeline.plans.vision_reports.vision_targets`,
:func:`~certified_circuits.pipeline.plans.language_reports.language_targets`,
:func:`~certified_circuits.pipeline.plans.testbed.testbed_targets`), then :func:`run_targets`; the summary reads
every target before it (:func:`summary_targets`), the explorer the summary too (:func:`explorer_targets`).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Sequence

from certified_circuits.pipeline.layout import Layout
from certified_circuits.pipeline.plans.certification import attack_options
from certified_circuits.pipeline.plans.common import Config, q, rule_files, words
from certified_circuits.pipeline.plans.language import language_settings
from certified_circuits.pipeline.plans.language_reports import (
    language_attack_inputs,
    language_circuits,
    language_report_outputs,
    language_targets,
)
from certified_circuits.pipeline.plans.setting_plans import ConfigPlan
from certified_circuits.pipeline.plans.tables import sufficiency_tables
from certified_circuits.pipeline.plans.testbed import ground_truth_experiments, testbed_outputs, testbed_targets
from certified_circuits.pipeline.plans.vision import (
    vision_circuits,
    vision_concepts,
    vision_main_scorer,
    vision_scorers,
    vision_scorers_all,
    vision_setting,
)
from certified_circuits.pipeline.plans.vision_reports import (
    features_figure,
    vision_attack_inputs,
    vision_figure_job_inputs,
    vision_report_outputs,
    vision_targets,
)

__all__ = [
    "plan_warnings_file", "theory_outputs", "theory_options", "run_outputs", "theory_targets", "run_targets",
    "summary_targets", "explorer_targets", "warnings_inputs", "summary_inputs", "summary_testbed_options",
    "experiment_tables", "explorer_circuits", "explorer_features", "explorer_truth_option", "attack_jobs",
]


def plan_warnings_file(paths: Layout) -> str:
    """The parse-time plan warnings written into the results (rule ``plan_warnings``): ``R/plan/warnings.json``."""
    return f"{paths.root}/plan/warnings.json"


def theory_outputs(paths: Layout) -> dict[str, str]:
    """App. C's figures (report-theory): ``radius`` (certified radius vs p_del) and ``samples`` (minimum n vs tau),
    in ``R/figures/theory``."""
    folder = paths.figures("theory")
    return {"radius": f"{folder}/radius_vs_pdel.png", "samples": f"{folder}/samples_vs_tau.png"}


def theory_options(plans: Sequence[ConfigPlan]) -> str:
    """The (U, |D|) the theory figures are drawn for, as report-theory's options.

    Args:
        plans: the config's parse-time plans (:func:`~certified_circuits.pipeline.plans.setting_plans.config_plans`).

    Returns:
        ``--n-components U --n-examples D --label L`` of the vision experiment's main setting (every class shares
        its |D| and U), else of the first language setting; "" when no plan is known at parse time (a folders
        model), then the stage draws the paper's U = 3,840.
    """
    chosen = next((p for p in plans if p.key == "vision.certification"), None) or next(
        (p for p in plans if p.key.startswith("language.")), None)
    if chosen is None:
        return ""
    return (f"--n-components {chosen.plan.n_components} --n-examples {chosen.plan.n_examples} "
            f"--label {q(chosen.where.split(',')[0])}")


def run_outputs(paths: Layout) -> dict[str, dict[str, str]]:
    """The run-level reports after every table, in order: ``warnings`` (``R/warnings.json``), ``summary``
    (``R/summary.md`` and the headline it opens with, ``R/findings.json``, which the explorer and the end of the run
    show) and ``explorer`` (``R/explorer/index.html``; its other files are written beside it)."""
    return {"warnings": {"list": f"{paths.root}/warnings.json"},
            "summary": {"page": f"{paths.root}/summary.md", "findings": f"{paths.root}/findings.json"},
            "explorer": {"page": f"{paths.root}/explorer/index.html"}}


def theory_targets(paths: Layout) -> list[str]:
    """``rule all``'s first targets: :func:`theory_outputs`."""
    return list(theory_outputs(paths).values())


def run_targets(paths: Layout) -> list[str]:
    """``rule all``'s last targets: :func:`run_outputs` (the warning list, summary.md, the explorer)."""
    return rule_files(run_outputs(paths))


def summary_targets(config: Config, paths: Layout, concepts: Sequence[str]) -> list[str]:
    """Every target before summary.md, which it is made after: the theory figures, the vision, language and testbed
    targets, then the warning list (``rule all``'s order).

    Args:
        config, paths, concepts: the run's checked config, its layout and the vision classes it certifies.

    Returns:
        The paths, in ``rule all``'s order.
    """
    return (theory_targets(paths) + vision_targets(config, paths, concepts) + language_targets(config, paths)
            + testbed_targets(config, paths, concepts) + [run_outputs(paths)["warnings"]["list"]])


def explorer_targets(config: Config, paths: Layout, concepts: Sequence[str]) -> list[str]:
    """Every target before the explorer, which shows them: :func:`summary_targets`, then summary.md and its
    headline (findings.json)."""
    return summary_targets(config, paths, concepts) + list(run_outputs(paths)["summary"].values())


def warnings_inputs(config: Config, paths: Layout, concepts: Sequence[str]) -> dict[str, list[str]]:
    """What the run's one warning list checks (report-warnings; reports/flags.py ``run_flags``).

    Args:
        config, paths, concepts: the run's checked config, its layout and the vision classes it certifies.

    Returns:
        ``curves`` (every curves table: vision under mean ablation, vision, language), ``certificates`` (every
        certificate of the main settings: each class for every scorer of Table 3, then each task at every setting)
        and ``selected`` (the held-out selection tables, in the curves' order).
    """
    tables = sufficiency_tables(config, paths, concepts)
    order = [name for name in ("vision_tables_mean", "vision_tables", "language_tables") if name in tables]
    certificates = []
    if config["vision"]["enabled"]:
        vx, setting = config["vision"]["experiment"], vision_setting(config)
        certificates += [paths.certificates(vx, "concept", c, s, setting) for c in concepts
                         for s in vision_scorers(config, "concept", setting)]
    certificates += [row[4] for row in language_circuits(config, paths)]
    return {"curves": [tables[name].outputs["curves"] for name in order], "certificates": certificates,
            "selected": [path for name in order for path in tables[name].outputs["selected"]]}


def summary_inputs(config: Config, paths: Layout, concepts: Sequence[str]) -> dict[str, list[str]]:
    """The testbed's files that the run's headline reads (summary.md's first screen, findings.json).

    Args:
        config, paths, concepts: the run's checked config, its layout and the vision classes it certifies.

    Returns:
        ``ground_truths`` (one per experiment with a ground truth) and ``truth_size`` (their tables at the truth's
        size, ``testbed/truth_size.csv``; none with ``testbed.resamples`` 0).
    """
    outputs = testbed_outputs(config, paths, concepts)
    return {"ground_truths": [paths.ground_truth(x) for x in ground_truth_experiments(config)],
            "truth_size": [files["truth_size"] for name, files in outputs.items() if name.startswith("stability_")]}


def summary_testbed_options(config: Config, wildcards: Any, input: Any) -> str:  # noqa: A002 (Snakemake's name)
    """report-summary's testbed options: the params function of the summary rule.

    Args:
        config: the run's checked config.
        wildcards: the job's (none).
        input: the job's inputs, named as :func:`summary_inputs`.

    Returns:
        ``--ground-truth ... --truth-size ...`` (each only when it has files), then ``--main-scorer S`` with vision on.
    """
    named = (("ground-truth", input.ground_truths), ("truth-size", input.truth_size))
    options = " ".join(f"--{flag} {words(files)}" for flag, files in named if files)
    return options + (f" --main-scorer {q(vision_main_scorer(config))}" if config["vision"]["enabled"] else "")


def experiment_tables(config: Config, paths: Layout) -> list[tuple[str, str, str]]:
    """``(half, experiment, tables folder)`` of each enabled half, vision first (summary.md's and the explorer's
    ``--experiment`` rows; the summary leaves the half out)."""
    return [(half, config[half]["experiment"], paths.tables(config[half]["experiment"]))
            for half in ("vision", "language") if config[half]["enabled"]]


def explorer_circuits(config: Config, paths: Layout, concepts: Sequence[str]) -> list[tuple[str, ...]]:
    """Every circuit the explorer shows.

    Args:
        config: the run's config.
        paths: the run's layout.
        concepts: the vision classes the config certifies.

    Returns:
        ``(experiment, concept, attributions, votes, certificates)`` rows (``report-explorer --circuit``): each
        vision class at the main setting once per scorer of ``vision.scorers``, the main scorer first (the explorer
        groups a class's rows by scorer and shows a switch between them; the first is the main scorer), then the
        others in config order; then each language task at every setting (:func:`language_circuits`).
    """
    rows: list[tuple[str, ...]] = []
    if config["vision"]["enabled"]:
        vx = config["vision"]["experiment"]
        main = vision_main_scorer(config)
        scorers = [main] + [s for s in vision_scorers_all(config) if s != main]
        rows += [(vx, c, paths.attributions(vx, "concept", c), *vision_circuits(config, paths, "concept", c, scorer=s))
                 for c in concepts for s in scorers]
    return rows + language_circuits(config, paths)


def explorer_features(config: Config, paths: Layout, concepts: Sequence[str]) -> list[tuple[str, str, str]]:
    """``(experiment, class, Fig. 4 figure)`` of each class of ``vision.feature_concepts`` ([] with vision off)."""
    vision = config["vision"]
    if not vision["enabled"]:
        return []
    return [(vision["experiment"], c, features_figure(paths, vision["experiment"], c))
            for c in vision_concepts(concepts, vision["feature_concepts"])]


def explorer_truth_option(wildcards: Any, input: Any) -> str:  # noqa: A002 (Snakemake's name)
    """report-explorer's ``--ground-truth FILE ...`` of the job's ``ground_truths`` input ("" without one)."""
    return f"--ground-truth {words(input.ground_truths)}" if input.ground_truths else ""


def attack_jobs(config: Config, paths: Layout, concepts: Sequence[str],
                filter_metrics: Callable[[], str]) -> dict[str, dict[str, Any]]:
    """Every report-attack job (Theorem 1 shown directly: edit a concept dataset by r, 2r, 4r examples, re-certify
    with the same seeds, count label flips), by rule name.

    Args:
        config, paths, concepts: the run's checked config, its layout and the vision classes it certifies.
        filter_metrics: the vision_filter_ood checkpoint's metrics file (the vision attack's classes wait for it).

    Returns:
        ``vision_attack`` (each class with enough images in the first re-discovery set, the edits' pool, at the main
        setting and scorer) and ``language_attack`` (each task, edits from its OOD prompts, every task at the first
        task's first setting so that one radius holds for the table), when the config runs them: each with
        ``inputs`` (concept and pool attributions, pairwise; the vision one an input function), ``outputs``
        (``table``, ``summary``, ``figure``), ``options`` and ``category`` (Snakemake's report).
    """
    jobs: dict[str, dict[str, Any]] = {}
    vision_rules = vision_report_outputs(config, paths, concepts)
    if "vision_attack" in vision_rules:
        vision = config["vision"]
        jobs["vision_attack"] = {
            "inputs": partial(vision_figure_job_inputs, vision_attack_inputs, config, paths, concepts, filter_metrics),
            "outputs": vision_rules["vision_attack"], "category": "Vision",
            "options": attack_options(vision["attack"], vision_setting(config), vision_main_scorer(config))}
    language_rules = language_report_outputs(config, paths)
    if "language_attack" in language_rules:
        language = config["language"]
        jobs["language_attack"] = {
            "inputs": language_attack_inputs(config, paths), "outputs": language_rules["language_attack"],
            "category": "Language",
            "options": attack_options(language["attack"], language_settings(config, language["tasks"][0])[0], "eap_ig")}
    return jobs
