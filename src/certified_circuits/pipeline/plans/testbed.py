"""The testbed's jobs (``rules/testbed.smk``; docs/embedded_default.md): which experiments have a ground truth (a
model whose circuit is known), the stability jobs (bootstrap resamples of each concept dataset), the recovery and
stability tables, and the testbed's targets.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from certified_circuits.pipeline.layout import Layout, number
from certified_circuits.pipeline.plans.certification import setting_options
from certified_circuits.pipeline.plans.common import Config, q, rule_files, words
from certified_circuits.pipeline.plans.language import embedded_language, language_selected_table, language_settings
from certified_circuits.pipeline.plans.tables import mean_ablation_tables
from certified_circuits.pipeline.plans.vision import (embedded_vision, vision_circuits, vision_main_scorer,
                                                      vision_scorers, vision_setting)

__all__ = [
    "GROUND_TRUTH_TASK", "ground_truth_experiments", "testbed_notes", "stability_jobs", "stability_options",
    "stability_job", "stability_job_attributions", "equal_footing_options", "stability_job_options", "ground_truth_job_path",
    "recovery_inputs", "stability_table_inputs", "testbed_outputs", "testbed_targets",
]

#: the language task whose circuit the embedded model's ground truth names (language/ground_truth.py)
GROUND_TRUTH_TASK = "induction"


def ground_truth_experiments(config: Config) -> dict[str, str]:
    """The experiments whose model has a ground truth, and the stage that writes it.

    Args:
        config: the run's config.

    Returns:
        experiment name -> ``vision`` (the embedded world model compiled by hand, ``vision.train.compiled``, or
        trained with ``vision.train.planted_own``: its class circuits are set by construction) or ``language`` (the
        embedded model, when ``induction`` is among its tasks: the circuit is found by diagnostics and verified by
        patching). Empty for every other source.
    """
    found = {}
    vision, language = config["vision"], config["language"]
    if vision["enabled"] and embedded_vision(config) and (vision["train"].get("planted_own")
                                                          or vision["train"].get("compiled")):
        found[vision["experiment"]] = "vision"
    if language["enabled"] and embedded_language(config) and GROUND_TRUTH_TASK in language["tasks"]:
        found[language["experiment"]] = "language"
    return found


def testbed_notes(config: Config) -> list[str]:
    """What the ``testbed`` block asks for that this run will not do, in words, for the run's stderr.

    ``testbed.resamples`` > 0 with no experiment that has a ground truth (:func:`ground_truth_experiments`: the
    paper's models, a user's own) is not a config error: ``config.yaml`` sets it for the embedded default and every
    layered config inherits it. It runs no job, and the run says so instead of ignoring it in silence.

    Args:
        config: the run's checked config.

    Returns:
        One line per note ([] when every testbed key applies).
    """
    resamples = int(config.get("testbed", {}).get("resamples", 0))
    if resamples and not ground_truth_experiments(config):
        return [f"testbed.resamples is {resamples}, but no enabled experiment has a ground truth (the embedded world "
                f"model with vision.train.compiled or planted_own, or the embedded language model with the {GROUND_TRUTH_TASK} "
                f"task), so no stability jobs run; set testbed.resamples: 0 to say so in the config"]
    return []


def stability_jobs(config: Config, paths: Layout, concepts: Sequence[str]) -> list[dict[str, Any]]:
    """One stability job per concept and setting of each experiment with a ground truth (``testbed.resamples`` > 0).

    Args:
        config: the run's config.
        paths: the run's layout.
        concepts: the vision classes the config certifies.

    Returns:
        Dicts with ``experiment``, ``concept``, ``scorer``, ``setting``, ``attributions``, ``out``, ``truth_size``
        (the stage's second table, at the truth's size), ``truth_size_equal`` (its third, the equal footing) and
        ``k_grid``: vision, every class at the main scorer and
        setting; language, the ground-truth task at every setting of it (the held-out selection picks among them).
    """
    if not int(config["testbed"]["resamples"]):
        return []
    rows = []
    for experiment, kind in ground_truth_experiments(config).items():
        if kind == "vision":
            setting, scorer, split = vision_setting(config), vision_main_scorer(config), "concept"
            pairs = [(c, setting) for c in concepts]
            grid = config["vision"]["k_grid"]
        else:
            scorer, split, grid = "eap_ig", "train", config["language"]["k_grid"]
            pairs = [(GROUND_TRUTH_TASK, s) for s in language_settings(config, GROUND_TRUTH_TASK)]
        for concept, setting in pairs:
            rows.append({"experiment": experiment, "concept": concept, "scorer": scorer, "setting": setting,
                         "k_grid": grid, "attributions": paths.attributions(experiment, split, concept),
                         "out": paths.stability(experiment, split, concept, scorer, setting),
                         "truth_size": paths.truth_size(experiment, split, concept, scorer, setting),
                         "truth_size_equal": paths.truth_size_equal(experiment, split, concept, scorer, setting)})
    return rows


def stability_options(job: Mapping[str, Any], testbed: Mapping[str, Any]) -> str:
    """The ``stability`` stage's options of one job of :func:`stability_jobs`.

    Args:
        job: a row of :func:`stability_jobs`.
        testbed: the config's ``testbed`` block (``resamples``, ``seed``, ``equal_footing``).

    Returns:
        ``--scorer S --k-grid ... --setting TAG --resamples B --bootstrap-seed s`` (the whole tag: :func:`setting_options`)
        and the equal footing's ``--inner-resamples --inner-seed --consensus-q --interval-z --tie-seed``
        (:func:`equal_footing_options`).
    """
    return (f"--scorer {q(job['scorer'])} --k-grid {words(job['k_grid'])} {setting_options(job['setting'])} "
            f"--resamples {int(testbed['resamples'])} --bootstrap-seed {int(testbed['seed'])} "
            f"{equal_footing_options(testbed)}")


def equal_footing_options(testbed: Mapping[str, Any]) -> str:
    """The ``stability`` stage's equal-footing options from ``testbed.equal_footing`` (the schema's defaults: the
    pre-registration's, experiments/fair_testbed.yaml), each number exactly (:func:`number`)."""
    block = testbed["equal_footing"]
    return (f"--inner-resamples {int(block['inner_resamples'])} --inner-seed {int(block['inner_seed'])} "
            f"--consensus-q {number(float(block['q']))} --interval-z {number(float(block['z']))} "
            f"--tie-seed {int(block['tie_seed'])}")


def stability_job(planned: Mapping[str, Mapping[str, Any]], paths: Layout, wildcards: Any) -> Mapping[str, Any]:
    """The planned stability job (``planned``: :func:`stability_jobs` by output path) whose output these wildcards
    name."""
    return planned[paths.stability().format(**dict(wildcards.items()))]


def stability_job_attributions(planned: Mapping[str, Mapping[str, Any]], paths: Layout, wildcards: Any) -> str:
    """The attributions file of the planned stability job whose output these wildcards name (:func:`stability_job`)."""
    return stability_job(planned, paths, wildcards)["attributions"]


def stability_job_options(planned: Mapping[str, Mapping[str, Any]], paths: Layout, testbed: Mapping[str, Any],
                          wildcards: Any) -> str:
    """:func:`stability_options` of the planned stability job whose output these wildcards name."""
    return stability_options(stability_job(planned, paths, wildcards), testbed)


def ground_truth_job_path(paths: Layout, wildcards: Any) -> str:
    """The ground truth of the experiment that a job's ``experiment`` wildcard names: ``R/ground_truth/<x>.json``."""
    return paths.ground_truth(wildcards.experiment)


# ------------------------------------------------------------------------ recovery and stability tables


def recovery_inputs(config: Config, paths: Layout, concepts: Sequence[str], experiment: str) -> dict[str, Any]:
    """What the recovery table of an experiment with a ground truth reads (report-recovery).

    Args:
        config, paths, concepts: the run's checked config, its layout and the vision classes it certifies.
        experiment: a key of :func:`ground_truth_experiments`.

    Returns:
        ``truth`` (its ground truth), ``circuits`` (votes, certificates, ...: vision, every class at the main setting
        for every scorer of Table 3; language, the ground-truth task at every setting) and ``selected`` (the
        held-out selection table, mean ablation's for vision when it runs; [] without a selection set).
    """
    if ground_truth_experiments(config)[experiment] == "vision":
        setting = vision_setting(config)
        circuits = [f for c in concepts for s in vision_scorers(config, "concept", setting)
                    for f in vision_circuits(config, paths, "concept", c, setting, scorer=s)]
        vision = config["vision"]
        tables = mean_ablation_tables(paths, experiment) if "mean" in vision["ablations"] else paths.tables(experiment)
        selected = [f"{tables}/selected_balanced_raw.csv"] if vision["selection_set"] else []
    else:
        task = GROUND_TRUTH_TASK
        circuits = [f for s in language_settings(config, task) for f in (
            paths.votes(experiment, "train", task, "eap_ig", s), paths.certificates(experiment, "train", task, "eap_ig", s))]
        selected = [language_selected_table(config, paths)] if config["language"]["selection_set"] else []
    return {"truth": paths.ground_truth(experiment), "circuits": circuits, "selected": selected}


def stability_table_inputs(config: Config, paths: Layout, concepts: Sequence[str], experiment: str) -> dict[str, list[str]]:
    """What the stability tables of an experiment read (report-stability): its stability jobs' two tables.

    Args:
        config, paths, concepts: the run's checked config, its layout and the vision classes it certifies.
        experiment: a key of :func:`ground_truth_experiments`.

    Returns:
        ``tables`` (the bootstrap tables), ``truth_size`` (the tables at the truth's size) and ``truth_size_equal``
        (their equal footing), in job order; all empty when ``testbed.resamples`` is 0.
    """
    rows = [job for job in stability_jobs(config, paths, concepts) if job["experiment"] == experiment]
    return {"tables": [job["out"] for job in rows], "truth_size": [job["truth_size"] for job in rows],
            "truth_size_equal": [job["truth_size_equal"] for job in rows]}


def testbed_outputs(config: Config, paths: Layout, concepts: Sequence[str]) -> dict[str, dict[str, str]]:
    """The testbed's report rules and what each writes, per experiment with a ground truth.

    Args:
        config, paths, concepts: the run's checked config, its layout and the vision classes it certifies.

    Returns:
        ``recovery_<kind>`` (``table``, ``auroc``, ``summary``, ``figure`` in ``R/tables/<x>/testbed``) and, when the
        experiment has stability jobs, ``stability_<kind>`` (``table``, ``summary``, ``truth_size``,
        ``truth_size_summary``, ``truth_size_equal``, ``truth_size_equal_summary``), by experiment (vision first),
        ``kind`` its ground truth's half.
    """
    rules: dict[str, dict[str, str]] = {}
    for experiment, kind in ground_truth_experiments(config).items():
        out = f"{paths.tables(experiment)}/testbed"
        rules[f"recovery_{kind}"] = {"table": f"{out}/recovery.csv", "auroc": f"{out}/recovery_auroc.csv",
                                     "summary": f"{out}/recovery_summary.md", "figure": f"{out}/recovery.png"}
        if stability_table_inputs(config, paths, concepts, experiment)["tables"]:
            rules[f"stability_{kind}"] = {"table": f"{out}/stability.csv", "summary": f"{out}/stability_summary.md",
                                          "truth_size": f"{out}/truth_size.csv",
                                          "truth_size_summary": f"{out}/truth_size_summary.md",
                                          "truth_size_equal": f"{out}/truth_size_equal.csv",
                                          "truth_size_equal_summary": f"{out}/truth_size_equal_summary.md"}
    return rules


def testbed_targets(config: Config, paths: Layout, concepts: Sequence[str]) -> list[str]:
    """``rule all``'s testbed targets: every output of :func:`testbed_outputs`, in its order."""
    return rule_files(testbed_outputs(config, paths, concepts))
