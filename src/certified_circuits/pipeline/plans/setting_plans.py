"""Every certification setting of a workflow config, planned exactly before any job (issue 26).

When the workflow is parsed, each setting that will be certified gets the exact plan of
:func:`certified_circuits.plan` for the number of training examples and components the config implies:

- vision: ``|D|`` is the concept-set size (``world.n_concept_per_class``, or ``concept_size`` of the
  folders and imagenet sources); ``U`` is the model's channels: the world ResNet's widths, the paper
  architecture's table entry (:data:`~certified_circuits.vision.networks.architectures.ARCHITECTURES`), or your
  folders model's, counted on the meta device by the config check. The settings are
  ``vision.certification`` and every ``radius_sweep`` (size, p_del) pair.
- language: ``|D|`` is the train split (``n_per_split``, or the task file's train rows); ``U`` is the EAP
  graph's edges (or heads and MLPs at ``level: node``) from the model's shape: the embedded tiny GPT-2's,
  or ``config.json``'s layers and heads. Parallel attention (L H fewer edges) is only known once the model
  is loaded, so for ``source: hf`` the count is the sequential graph's, an upper bound: the difference in
  ``log U`` is negligible, and the certify stage checks the plan again with the exact ``U``.

A config with a setting that can certify nothing is refused (:class:`ConfigError`, with the plan and its
fix); marginal settings come back as warnings, which the Snakefile prints and tags on the MLflow parent run.
The certify stage repeats the check with the exact ``|D|`` and ``U`` of each votes file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from certified_circuits import commands
from certified_circuits.core.planning import Plan, plan
from certified_circuits.core.setting import number
from certified_circuits.pipeline.plans.language import language_settings, language_shape
from certified_circuits.pipeline.plans.vision import vision_setting


class PlanConfigError(ValueError):
    """A config whose setting can certify nothing (the message holds every such plan and its fix)."""


@dataclass(frozen=True)
class ConfigPlan:
    """The plan of one setting of a config.

    Attributes:
        where: what is certified with it, in words (``"language tiny_gpt2, task ioi"``).
        key: the config key of the setting (``"language.settings.ioi[1]"``).
        plan: the exact :class:`~certified_circuits.core.planning.Plan`.
        note: how ``U`` was found, when it is not exact at parse time ("" otherwise).
    """

    where: str
    key: str
    plan: Plan
    note: str = ""

    def lines(self) -> list[str]:
        """One line per problem of the plan, naming the setting."""
        return [f"{self.where} ({self.key}, radius {self.plan.radius}): {problem}" for problem in self.plan.problems()]


def _vision_plans(config: Mapping[str, Any], folders_components: int | None) -> list[ConfigPlan]:
    vision = config["vision"]
    from certified_circuits.vision.networks.architectures import ARCHITECTURES, WORLD_WIDTHS

    source = vision["source"]
    if source == "embedded":
        from certified_circuits.vision.data.world import WorldConfig

        world = WorldConfig(**vision["world"])
        n_examples = world.n_concept_per_class
        train = vision.get("train", {})
        if train.get("compiled"):  # the compiled marked ResNet: 4 stages of n (1 + G) + D channels
            from certified_circuits.vision.networks.compiled import STAGES, stage_width

            n_components = len(STAGES) * stage_width(world.n_classes, world.cue_attributes * world.cue_values)
        elif train.get("planted_own"):  # the planted world ResNet: widths n_classes * own + shared (vision/networks/planted.py)
            from certified_circuits.vision.networks.planted import PlantedSpec, planted_widths

            own, shared = train["planted_own"], train.get("planted_shared") or [0] * 4
            n_components = sum(planted_widths(PlantedSpec(world.n_classes, tuple(own), tuple(shared))))
        else:
            n_components = sum(train.get("widths") or WORLD_WIDTHS)
    else:
        block = vision["imagenet"] if source == "imagenet" else vision["folders"]
        n_examples = int(block["concept_size"])
        if source == "imagenet":
            n_components = ARCHITECTURES[block["model"]].n_components
        elif folders_components is None:
            return []  # the model could not be described at parse time: the certify stage checks it
        else:
            n_components = folders_components
    setting = vision_setting(config)  # the one builder of the workflow's vision setting
    where = f"vision {vision['experiment']}"
    plans = [ConfigPlan(f"{where}, every class", "vision.certification", plan(n_examples, n_components, setting))]
    sweep = vision.get("radius_sweep") or {}
    if sweep.get("enabled"):
        for size in sweep["sizes"]:
            for p_del in sweep["p_del"]:
                plans.append(
                    ConfigPlan(
                        f"{where}, radius sweep |D| = {size}",
                        f"vision.radius_sweep (size {size}, p_del {number(float(p_del))})",
                        plan(int(size), n_components, setting.replace(p_del=float(p_del))),
                    )
                )
    return plans


def _language_plans(config: Mapping[str, Any], train_sizes: Mapping[str, int] | None) -> list[ConfigPlan]:
    language = config["language"]
    from certified_circuits.language.graph import n_components as graph_components

    shape = language_shape(language)
    if shape is None:
        return []
    level = language.get("level", "edge")
    n_components = graph_components(*shape, level=level)
    note = "sequential graph: an upper bound on U if the model has parallel attention" if language["source"] == "hf" else ""
    plans = []
    for task in language["tasks"]:
        n_examples = int(train_sizes[task]) if train_sizes and task in train_sizes else int(language["n_per_split"])
        for index, setting in enumerate(language_settings(config, task)):  # the one builder of a task's settings
            key = f"language.settings.{task}[{index}]" if language["settings"].get(task) else "language.certification"
            where = f"language {language['experiment']}, task {task}"
            plans.append(ConfigPlan(where, key, plan(n_examples, n_components, setting), note))
    return plans


def config_plans(
    config: Mapping[str, Any],
    folders_components: int | None = None,
    train_sizes: Mapping[str, int] | None = None,
) -> list[ConfigPlan]:
    """The plan of every setting a (schema-validated, checked) config will certify.

    Args:
        config: the workflow config.
        folders_components: ``U`` of a ``vision.source: folders`` model (from the config check), if known.
        train_sizes: train prompts per task of ``language.source: hf`` task files, if known.

    Returns:
        One :class:`ConfigPlan` per setting, vision first.
    """
    plans: list[ConfigPlan] = []
    if config["vision"]["enabled"]:
        plans += _vision_plans(config, folders_components)
    if config["language"]["enabled"]:
        plans += _language_plans(config, train_sizes)
    return plans


def check_config_plans(plans: list[ConfigPlan]) -> list[ConfigPlan]:
    """Refuse a config in which any setting can certify nothing.

    Args:
        plans: :func:`config_plans` of the config.

    Returns:
        The plans, unchanged; the marginal ones carry their warnings (:meth:`ConfigPlan.lines`).

    Raises:
        PlanConfigError: naming each vacuous setting's config key, its plan and the fix.
    """
    vacuous = [p for p in plans if p.plan.vacuous]
    if vacuous:
        lines = "\n".join(f"  - {line}" for p in vacuous for line in p.lines())
        raise PlanConfigError(
            f"{len(vacuous)} setting(s) of this config can certify nothing (every component would abstain); "
            f"change them as each line says:\n{lines}\nThe full plan, with settings that work: "
            f"{plan_command(vacuous[0].plan)}"
        )
    return plans


def plan_command(the_plan: Plan) -> str:
    """The command line that prints ``the_plan`` with its suggestions, runnable as printed in a fresh shell
    (:func:`certified_circuits.commands.plan_command`, which writes every plan command).

    Args:
        the_plan: the plan of a config's setting.

    Returns:
        The command, with ``--radius`` the plan's radius (at least 1) and every field of its setting.
    """
    s = the_plan.setting
    return commands.plan_command(
        the_plan.n_examples, the_plan.n_components, radius=max(the_plan.radius, 1), p_del=s.p_del, tau=s.tau,
        alpha=s.alpha, n=s.n, n0=s.n0, correction=s.correction,
    )


def plan_tags(plans: list[ConfigPlan]) -> dict[str, str]:
    """MLflow tags of a workflow's plans: the overall verdict, and each warning (one tag per setting)."""
    verdicts = {p.plan.verdict for p in plans}
    tags = {"cc.plan.verdict": "marginal" if "marginal" in verdicts else "ok"}
    for index, p in enumerate(q for q in plans if q.plan.problems()):
        tags[f"cc.plan.warning.{index}"] = " | ".join(p.lines())
    return tags


def plan_records(plans: Sequence[ConfigPlan]) -> list[dict[str, Any]]:
    """The parse-time plan warnings of a workflow as plain records (what ``<results>/plan/warnings.json`` holds,
    written by ``report-plan-warnings``; :func:`certified_circuits.reports.flags.plan_flags` reads them). Here, beside
    the plans, so that the Snakefile's parse imports no report (pandas).

    Args:
        plans: the config's :class:`ConfigPlan` objects (``where``, ``key``, ``plan``).

    Returns:
        One record per problem of a plan: ``where`` (``"vision world, radius sweep |D| = 50"``), ``key`` (its config
        key), ``experiment``, ``radius``, ``n_examples``, ``p_del``, ``tau``, ``message`` and ``fix`` (the problem
        split at ``" Fix: "``).
    """
    records = []
    for p in plans:
        head = str(p.where).split(",")[0].split(" ", 1)
        for problem in p.plan.problems():
            message, _, fix = problem.partition(" Fix: ")
            records.append({"where": str(p.where), "key": str(p.key), "experiment": head[-1],
                            "radius": int(p.plan.radius), "n_examples": int(p.plan.n_examples),
                            "p_del": float(p.plan.setting.p_del), "tau": float(p.plan.setting.tau),
                            "message": message.strip(), "fix": fix.strip()})
    return records
