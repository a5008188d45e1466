"""The language half's outputs after the sufficiency tables (``rules/language_reports.smk``): which report rules
the config runs and what each reads and writes (Graph JSON at the selected K, MIB's faithfulness table and
submission files, the attack), the language circuits the explorer and the graphs show, and the language targets of
``rule all``.
"""

from __future__ import annotations

from typing import Any

from certified_circuits.pipeline.layout import Layout
from certified_circuits.pipeline.plans.common import Config, rule_files
from certified_circuits.pipeline.plans.language import language_settings
from certified_circuits.pipeline.plans.tables import sufficiency_tables

__all__ = ["language_report_outputs", "language_targets", "language_circuits", "language_attack_inputs"]


def language_report_outputs(config: Config, paths: Layout) -> dict[str, dict[str, Any]]:
    """The language report rules this config runs after the sufficiency tables, and what each writes.

    Args:
        config: the run's checked config.
        paths: the run's layout.

    Returns:
        Rule name -> named outputs, in ``rule all``'s order: ``language_graphs`` (a folder, with a selection set),
        ``language_faithfulness_mib_table`` (``faithfulness.grid: mib``), ``language_mib`` (a folder,
        ``mib.export``), ``language_attack`` (``attack.enabled``); {} with language off.
    """
    language = config["language"]
    if not language["enabled"]:
        return {}
    lx = language["experiment"]
    tables = paths.tables(lx)
    rules: dict[str, dict[str, Any]] = {}
    if language["selection_set"]:
        rules["language_graphs"] = {"folder": f"{paths.root}/graphs/{lx}"}
    if language["faithfulness"]["grid"] == "mib":
        rules["language_faithfulness_mib_table"] = {"table": f"{tables}/faithfulness_mib.csv",
                                                    "mean": f"{tables}/faithfulness_mib_mean.md"}
    if language["mib"]["export"]:
        rules["language_mib"] = {"folder": paths.mib(lx)}
    if language["attack"]["enabled"]:
        rules["language_attack"] = {"table": f"{tables}/attack/attack_raw.csv", "summary": f"{tables}/attack/attack.md",
                                    "figure": f"{tables}/attack/attack.png"}
    return rules


def language_targets(config: Config, paths: Layout) -> list[str]:
    """``rule all``'s language targets: the language sufficiency tables, then every output of
    :func:`language_report_outputs`, in order ([] with language off)."""
    tables = {name: job.outputs for name, job in sufficiency_tables(config, paths, []).items() if job.half == "language"}
    return rule_files(tables) + rule_files(language_report_outputs(config, paths))


def language_circuits(config: Config, paths: Layout) -> list[tuple[str, ...]]:
    """Every certified language circuit: each task at every setting (``eap_ig``, train split).

    Args:
        config: the run's checked config.
        paths: the run's layout.

    Returns:
        ``(experiment, task, attributions, votes, certificates)`` rows, by task, then setting (config order); [] with
        language off. The explorer shows them, the Graph JSON export writes them.
    """
    language = config["language"]
    if not language["enabled"]:
        return []
    lx = language["experiment"]
    return [(lx, task, paths.attributions(lx, "train", task), paths.votes(lx, "train", task, "eap_ig", setting),
             paths.certificates(lx, "train", task, "eap_ig", setting))
            for task in language["tasks"] for setting in language_settings(config, task)]


def language_attack_inputs(config: Config, paths: Layout) -> list[str]:
    """What the language attack reads: per task, its train attributions (the certified dataset) and its OOD
    attributions (the pool the edits are drawn from), flattened in task order."""
    lx = config["language"]["experiment"]
    return [f for task in config["language"]["tasks"]
            for f in (paths.attributions(lx, "train", task), paths.attributions(lx, "ood_test", task))]
