"""The vision half's figures and tables after the sufficiency tables (``rules/vision_reports.smk``): which report
rules the config runs and what each reads and writes (Fig. IoU, the attack, seed stability, the radius sweep, Fig. 4's
features, the runtime table, the spurious-cue index), and the vision targets of ``rule all``.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from certified_circuits.pipeline.layout import Layout
from certified_circuits.pipeline.plans.common import Config, input_pairs, rule_files, words
from certified_circuits.pipeline.plans.tables import sufficiency_tables
from certified_circuits.pipeline.plans.vision import (
    embedded_vision,
    vision_circuits,
    vision_concept_size,
    vision_concepts,
    vision_rediscovered,
    vision_setting,
)

__all__ = [
    "vision_report_outputs", "vision_targets", "features_figure", "features_job_stem", "vision_iou_circuits",
    "vision_attack_inputs", "vision_figure_job_inputs", "seed_stability_circuits", "radius_sweep_inputs",
    "spurious_inputs", "circuit_report_options",
]


def features_figure(paths: Layout, experiment: str, concept: str = "{concept}") -> str:
    """Fig. 4 of one class (report-features): ``R/figures/<experiment>/features_<concept>.png`` (a pattern by default)."""
    return f"{paths.figures(experiment)}/features_{concept}.png"


def features_job_stem(paths: Layout, experiment: str, wildcards: Any) -> str:
    """report-features' ``--out-stem`` of the class a vision_features job's ``concept`` wildcard names (the figure
    without ``.png``)."""
    return features_figure(paths, experiment, wildcards.concept).removesuffix(".png")


def vision_report_outputs(config: Config, paths: Layout, concepts: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The vision report rules this config runs after the sufficiency tables, and what each writes.

    Args:
        config, paths, concepts: the run's checked config, its layout and the vision classes it certifies.

    Returns:
        Rule name -> named outputs, in ``rule all``'s order: ``vision_iou`` (with re-discovery sets),
        ``vision_attack`` (``attack.enabled`` and re-discovery sets), ``vision_seed_stability`` (``n_seeds`` >= 2),
        ``vision_radius_sweep`` (``radius_sweep.enabled``), ``vision_features`` (a figure per class of
        ``feature_concepts``), ``vision_runtime`` (``runtime.n``), ``vision_spurious`` (the embedded world); {}
        with vision off.
    """
    vision = config["vision"]
    if not vision["enabled"]:
        return {}
    tables = paths.tables(vision["experiment"])
    rules: dict[str, dict[str, Any]] = {}
    if vision["rediscovery_sets"]:
        rules["vision_iou"] = {"table": f"{tables}/iou.csv", "figure": f"{tables}/iou.png"}
        if vision["attack"]["enabled"]:
            rules["vision_attack"] = {"table": f"{tables}/attack/attack_raw.csv", "summary": f"{tables}/attack/attack.md",
                                      "figure": f"{tables}/attack/attack.png"}
    if vision["seed_stability"]["n_seeds"] >= 2:
        rules["vision_seed_stability"] = {"table": f"{tables}/seed_stability.csv", "figure": f"{tables}/seed_stability.png"}
    if vision["radius_sweep"]["enabled"]:
        rules["vision_radius_sweep"] = {"fixed": f"{tables}/radius_sweep_fixed_k.csv",
                                        "best": f"{tables}/radius_sweep_best_k.csv",
                                        "figure": f"{tables}/radius_sweep_best_k.png"}
    rules["vision_features"] = {"figures": [features_figure(paths, vision["experiment"], c)
                                            for c in vision_concepts(concepts, vision["feature_concepts"])]}
    if vision["runtime"]["n"]:
        rules["vision_runtime"] = {"table": f"{tables}/runtime.csv"}
    if embedded_vision(config):
        rules["vision_spurious"] = {"table": f"{tables}/spurious_summary.csv", "figure": f"{tables}/spurious.png"}
    return rules


def vision_targets(config: Config, paths: Layout, concepts: Sequence[str]) -> list[str]:
    """``rule all``'s vision targets: the vision sufficiency tables (main, then mean ablation), then every output of
    :func:`vision_report_outputs`, in order ([] with vision off)."""
    tables = {name: job.outputs for name, job in sufficiency_tables(config, paths, concepts).items() if job.half == "vision"}
    return rule_files(tables) + rule_files(vision_report_outputs(config, paths, concepts))


def vision_iou_circuits(config: Config, paths: Layout, concepts: Sequence[str],
                        filter_metrics: Callable[[], str] | None = None) -> list[str]:
    """ID and re-discovered circuits (votes, certificates) of every (class, OOD set) pair of Fig. IoU, in pairs
    order: the class's concept circuit, then its circuit on the set. Arguments as :func:`vision_images_per_class`."""
    return [f for c, e in vision_rediscovered(config, paths, concepts, filter_metrics)
            for split in ("concept", e) for f in vision_circuits(config, paths, split, c)]


def vision_attack_inputs(config: Config, paths: Layout, concepts: Sequence[str],
                         filter_metrics: Callable[[], str] | None = None) -> list[str]:
    """(concept attributions, pool attributions) per class of the attack: the pool is the class's images in the
    first re-discovery set, for classes with enough of them. Arguments as :func:`vision_images_per_class`."""
    vx = config["vision"]["experiment"]
    pool_set = config["vision"]["rediscovery_sets"][0]
    return [f for c, e in vision_rediscovered(config, paths, concepts, filter_metrics) if e == pool_set
            for f in (paths.attributions(vx, "concept", c), paths.attributions(vx, e, c))]


def vision_figure_job_inputs(inputs: Callable[..., list[str]], config: Config, paths: Layout, concepts: Sequence[str],
                            filter_metrics: Callable[[], str], wildcards: Any = None) -> list[str]:
    """A rule's input function over the re-discovered classes (``inputs``: :func:`vision_iou_circuits` or
    :func:`vision_attack_inputs`, with the filter checkpoint's ``filter_metrics``); the wildcards name no class."""
    return inputs(config, paths, concepts, filter_metrics)


def seed_stability_circuits(config: Config, paths: Layout, concepts: Sequence[str]) -> list[str]:
    """The circuits of the seed-stability figure: each class of ``seed_stability.concepts`` certified at the main
    setting with seeds ``seed``, ``seed + 1``, ..., ``seed + n_seeds - 1``.

    Args:
        config, paths, concepts: the run's checked config, its layout and the vision classes it certifies.

    Returns:
        (votes, certificates) of the main scorer, flattened, by class, then seed.
    """
    seeds, setting = config["vision"]["seed_stability"], vision_setting(config)
    return [f for c in vision_concepts(concepts, seeds["concepts"]) for i in range(seeds["n_seeds"])
            for f in vision_circuits(config, paths, "concept", c, setting.replace(seed=setting.seed + i))]


def radius_sweep_inputs(config: Config, paths: Layout, concepts: Sequence[str]) -> dict[str, list[str]]:
    """What the radius sweep (App. D) reads: every class of ``radius_sweep.concepts`` at every |D| of ``sizes`` and
    every ``p_del``, the other fields from the main setting.

    Args:
        config, paths, concepts: the run's checked config, its layout and the vision classes it certifies.

    Returns:
        ``circuits`` ((votes, certificates) of the main scorer, flattened) and ``sufficiency`` (one table per
        circuit), by class, then size, then p_del; a size equal to the concept sets' is the ``concept`` split, another
        is ``concept_n<size>``.
    """
    sweep, setting = config["vision"]["radius_sweep"], vision_setting(config)
    circuits, sufficiency = [], []
    for c in vision_concepts(concepts, sweep["concepts"]):
        for size in sweep["sizes"]:
            split = "concept" if size == vision_concept_size(config) else f"concept_n{size}"
            for p_del in sweep["p_del"]:
                swept = setting.replace(p_del=p_del)
                circuits += vision_circuits(config, paths, split, c, swept)
                sufficiency.append(paths.sufficiency(config["vision"]["experiment"], split, c, swept))
    return {"circuits": circuits, "sufficiency": sufficiency}


def spurious_inputs(config: Config, paths: Layout, concepts: Sequence[str]) -> dict[str, list[str]]:
    """What the spurious-cue index reads: every class's concept attributions and its main circuit.

    Args:
        config, paths, concepts: the run's checked config, its layout and the vision classes it certifies.

    Returns:
        ``attributions`` (one per class) and ``circuits`` ((votes, certificates) per class, flattened), in class order.
    """
    vx = config["vision"]["experiment"]
    return {"attributions": [paths.attributions(vx, "concept", c) for c in concepts],
            "circuits": [f for c in concepts for f in vision_circuits(config, paths, "concept", c)]}


def circuit_report_options(with_attributions: bool) -> Callable[[Any, Any], str]:
    """The params function of a circuit report's input options (``rules/vision_reports.smk``, CIRCUIT_REPORTS).

    The report rules are made in a loop, and Snakemake evaluates a rule's ``shell:`` expression when the job runs, in
    the Snakefile's namespace, where the loop's variables hold their last values: what differs between the reports
    is therefore passed through params (evaluated per rule, at parse time), never through the shell expression.

    Args:
        with_attributions: the report reads each class's attributions too (the spurious-cue index).

    Returns:
        A function of ``(wildcards, input)``: ``"--attributions A1 A2 --circuits V1 C1 --circuits V2 C2"`` with
        attributions, else ``"--circuits V1 C1 --circuits V2 C2"`` (each file one quoted shell word).
    """
    pairs = input_pairs("--circuits", "circuits")

    def options(wildcards: Any, input: Any) -> str:  # noqa: A002 (Snakemake passes the inputs by this name)
        circuits = pairs(wildcards, input)
        return f"--attributions {words(input.attributions)} {circuits}" if with_attributions else circuits

    return options
