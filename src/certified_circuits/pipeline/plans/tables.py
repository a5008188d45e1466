"""The sufficiency tables of every experiment (``report-sufficiency``; the loop in ``rules/reports.smk``): the vision
tables (Table 1 / Table 3, every scorer), the same under mean ablation, and the language tables (best setting per
task), each with its cACC-K curves and operating points, which every later figure reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from certified_circuits.pipeline.layout import Layout
from certified_circuits.pipeline.plans.common import Config, q
from certified_circuits.pipeline.plans.language import language_settings
from certified_circuits.pipeline.plans.vision import vision_setting

__all__ = ["TablesJob", "sufficiency_tables", "mean_ablation_tables"]


@dataclass(frozen=True)
class TablesJob:
    """One report-sufficiency job.

    Attributes:
        half: ``vision`` or ``language`` (whose targets its outputs are).
        inputs: the sufficiency tables it reads.
        outputs: its named outputs, in the rule's order (``selected`` is a list, empty without a selection set).
        options: the stage's options between ``--inputs`` and ``--out-dir`` (grouping, test, seed, selection, title).
        captions: output name -> its caption file in Snakemake's report (``../report/peaks.rst``: from ``rules/``).
        category: the report's category.
    """

    half: str
    inputs: list[str]
    outputs: dict[str, Any]
    options: str
    captions: dict[str, str] = field(default_factory=dict)
    category: str = ""


def _outputs(folder: str, metrics: Sequence[str], selection_set: str | None) -> dict[str, Any]:
    """report-sufficiency's files in ``folder``: peaks per metric, curves, operating points, a curves figure per
    metric, and the held-out selection per metric (with a selection set)."""
    balanced = "balanced" in metrics
    outputs: dict[str, Any] = {"peaks": f"{folder}/peaks_cacc_raw.csv"}
    if balanced:
        outputs["balanced"] = f"{folder}/peaks_balanced_raw.csv"
    outputs.update({"curves": f"{folder}/curves.csv", "operating_points": f"{folder}/operating_points.csv",
                    "curves_figure": f"{folder}/curves_cacc.png"})
    if balanced:
        outputs["balanced_figure"] = f"{folder}/curves_balanced_accuracy.png"
    outputs["selected"] = [f"{folder}/selected_{m}_raw.csv" for m in metrics] if selection_set else []
    return outputs


def _options(grouping: str, config: Config, selection_set: str | None, title: str) -> str:
    tables = config["tables"]
    select = f"--select-on {q(selection_set)}" if selection_set else ""
    return (f"{grouping} --test {tables['test']} --bootstrap-seed {tables['bootstrap_seed']} {select} "
            f"--title {q(title)}")


def _captions(**names: str) -> dict[str, str]:
    return {output: f"../report/{name}.rst" for output, name in names.items()}


def mean_ablation_tables(paths: Layout, experiment: str) -> str:
    """The folder of the vision tables under mean ablation: ``R/tables/<experiment>/mean_ablation``."""
    return f"{paths.tables(experiment)}/mean_ablation"


def sufficiency_tables(config: Config, paths: Layout, concepts: Sequence[str]) -> dict[str, TablesJob]:
    """Every report-sufficiency job of the config, by rule name.

    Args:
        config, paths, concepts: the run's checked config, its layout and the vision classes it certifies.

    Returns:
        ``vision_tables`` (every class at the main setting, ``--by scorer``), ``vision_tables_mean`` (the same
        under mean ablation, with ``mean`` in ``vision.ablations``) and ``language_tables`` (every task at every
        setting, ``--by concept setting --best-setting``), for the enabled halves, in that order.
    """
    jobs: dict[str, TablesJob] = {}
    vision, language = config["vision"], config["language"]
    if vision["enabled"]:
        vx, setting, selection = vision["experiment"], vision_setting(config), vision["selection_set"]
        inputs = [paths.sufficiency(vx, "concept", c, setting) for c in concepts]
        jobs["vision_tables"] = TablesJob(
            "vision", inputs, _outputs(paths.tables(vx), ("cacc", "balanced"), selection),
            _options("--by scorer", config, selection, vx),
            _captions(peaks="peaks", balanced="peaks", curves_figure="curves", balanced_figure="balanced"), "Vision")
        if "mean" in vision["ablations"]:
            jobs["vision_tables_mean"] = TablesJob(
                "vision", inputs, _outputs(mean_ablation_tables(paths, vx), ("cacc", "balanced"), selection),
                _options("--by scorer --ablation mean", config, selection, f"{vx} (mean ablation)"),
                _captions(curves_figure="curves", balanced_figure="balanced"), "Vision")
    if language["enabled"]:
        lx, selection = language["experiment"], language["selection_set"]
        inputs = [paths.sufficiency(lx, "train", task, setting) for task in language["tasks"]
                  for setting in language_settings(config, task)]
        jobs["language_tables"] = TablesJob(
            "language", inputs, _outputs(paths.tables(lx), ("cacc",), selection),
            _options("--by concept setting --best-setting", config, selection, lx),
            _captions(peaks="peaks", curves_figure="language_curves"), "Language")
    return jobs
