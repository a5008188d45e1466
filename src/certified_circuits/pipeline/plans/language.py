"""The language half's jobs (``rules/language.smk``): the config's language settings (their one builder), the tasks'
prompts, the model, the eval sets, and the circuits that MIB's grid and export choose from.

Functions of the checked config and the result layout; the ``*_job_*`` ones take a job's wildcards (bound with
:func:`functools.partial` in ``rules/common.smk``).
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any, Mapping

from certified_circuits.core.setting import Setting
from certified_circuits.pipeline.layout import Layout
from certified_circuits.pipeline.plans.common import Config, item_options, q

__all__ = [
    "embedded_language", "hf_language", "language_settings", "language_train_tasks", "language_shape",
    "language_dirs", "language_task_job_dir", "language_task_job_file", "language_model_args", "language_model_inputs",
    "language_eval_sets", "language_eval_job_files", "language_eval_job_options", "language_eval_job_inputs",
    "language_eval_job_params", "mib_model_name",
    "language_selected_table", "mib_circuits", "mib_task_circuits", "mib_job_attributions", "mib_job_circuit_files",
    "mib_job_circuit_options",
]

#: a task's circuits for MIB's grid: (attributions, [(votes, certificates) per setting])
TaskCircuits = Mapping[str, tuple[str, list[tuple[str, str]]]]


# ------------------------------------------------------------------------ config facts


def embedded_language(config: Config) -> bool:
    """Is the language half enabled with the embedded tiny GPT-2?"""
    return bool(config["language"]["enabled"] and config["language"]["source"] == "embedded")


def hf_language(config: Config) -> bool:
    """Is the language half enabled with your own model and task files (``source: hf``)?"""
    return bool(config["language"]["enabled"] and config["language"]["source"] == "hf")


def language_settings(config: Config, task: str) -> list[Setting]:
    """Certification settings of a task: the one place that builds them from a config.

    Args:
        config: the run's config.
        task: a language task.

    Returns:
        One :class:`Setting` per ``{tau, p_del}`` entry of ``language.settings[task]`` (the other fields from
        ``language.certification``), in config order; without entries, ``language.certification`` itself.
    """
    cert = config["language"]["certification"]
    entries = config["language"]["settings"].get(task) or [{"tau": cert["tau"], "p_del": cert["p_del"]}]
    return [Setting.from_config(cert, **setting) for setting in entries]


def language_train_tasks(language: Mapping[str, Any]) -> list[str]:
    """The tasks whose prompts the embedded model's training sees (and excludes from its training stream).

    Args:
        language: the config's ``language`` section.

    Returns:
        ``train.tasks`` when set; else the compiled model's task (``COMPILED_TASK``: ``induction`` for both
        ``induction`` and ``induction_noisy``, whose prompts are the induction task's); else the default mixture.
    """
    from certified_circuits.language.graph import COMPILED_TASK
    from certified_circuits.language.tasks import TASKS

    train = language.get("train") or {}
    if train.get("tasks"):
        return list(train["tasks"])
    if train.get("compiled"):
        return [COMPILED_TASK[train["compiled"]]]
    return list(TASKS)


def language_shape(language: Mapping[str, Any]) -> tuple[int, int] | None:
    """(layers, heads) of the configured language model, read without loading it; None when unknown."""
    from certified_circuits.language.graph import COMPILED_SHAPES, EMBEDDED_N_HEAD, EMBEDDED_N_LAYER

    if language["source"] == "embedded":
        train = language.get("train") or {}
        if train.get("compiled"):  # each compiled model has a fixed shape (language/compiled.py)
            return COMPILED_SHAPES[train["compiled"]]
        return int(train.get("n_layer", EMBEDDED_N_LAYER)), int(train.get("n_head", EMBEDDED_N_HEAD))
    path = Path(language.get("model_path") or "") / "config.json"
    try:
        cfg = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    text_cfg = cfg.get("text_config", cfg)  # multimodal configs nest the language model's
    layers = next((text_cfg[k] for k in ("num_hidden_layers", "n_layer", "num_layers") if k in text_cfg), None)
    heads = next((text_cfg[k] for k in ("num_attention_heads", "n_head", "num_heads") if k in text_cfg), None)
    if not isinstance(layers, int) or not isinstance(heads, int):
        return None
    return layers, heads


# ------------------------------------------------------------------------ data and model


def language_dirs(paths: Layout) -> dict[str, str]:
    """The language data the workflow builds: ``dir`` (RESULTS/language) and ``model`` (the embedded model's folder)."""
    ldir = paths.data("language")
    return {"dir": ldir, "model": f"{ldir}/model"}


def language_task_job_dir(paths: Layout, wildcards: Any) -> str:
    """The folder of the prompts of the task that a job's ``task`` wildcard names: ``R/language/tasks/<task>``."""
    return f"{language_dirs(paths)['dir']}/tasks/{wildcards.task}"


def language_task_job_file(config: Config, wildcards: Any) -> str:
    """Your task file (``language.task_files``) of the task that a language_task_file job's ``task`` wildcard names."""
    return config["language"]["task_files"][wildcards.task]


def language_model_args(config: Config, paths: Layout) -> str:
    """The model options of every language job: ``--model embedded|hf|gpt2 --model-path ... --device ...`` (quoted)."""
    device = config["device"]
    if embedded_language(config):
        return f"--model embedded --model-path {q(language_dirs(paths)['model'])} --device {q(device)}"
    kind = "hf" if hf_language(config) else "gpt2"
    return f"--model {kind} --model-path {q(config['language']['model_path'])} --device {q(device)}"


def language_model_inputs(config: Config, paths: Layout) -> list[str]:
    """The model file a language job needs as input: the embedded model's config.json, else none."""
    return [f"{language_dirs(paths)['model']}/config.json"] if embedded_language(config) else []


def language_eval_sets(config: Config, task: str) -> list[str]:
    """Eval sets of a task: ``id_test``, ``ood_test`` (a task file may have none: then left out) and ``validation``."""
    from certified_circuits.language.task_files import task_file_has_ood

    if hf_language(config) and not task_file_has_ood(config["language"]["task_files"][task]):
        return ["id_test", "validation"]
    return ["id_test", "ood_test", "validation"]


def language_eval_job_files(config: Config, paths: Layout, wildcards: Any) -> list[str]:
    """The prompt files of every eval set (:func:`language_eval_sets`) of the task a job's ``concept`` wildcard names.

    Args:
        config: the run's config.
        paths: the run's layout.
        wildcards: the job's ``concept`` (a task).

    Returns:
        ``R/language/tasks/<task>/<eval set>.jsonl`` per eval set, in order.
    """
    task = wildcards.concept
    return [f"{language_dirs(paths)['dir']}/tasks/{task}/{name}.jsonl" for name in language_eval_sets(config, task)]


def language_eval_job_options(config: Config, paths: Layout, wildcards: Any) -> str:
    """The ``--eval-set NAME=FILE`` options of the task a job's ``concept`` wildcard names, in
    :func:`language_eval_sets` order: ``"--eval-set id_test=R/language/tasks/ioi/id_test.jsonl ..."`` (quoted)."""
    files = language_eval_job_files(config, paths, wildcards)
    return item_options("--eval-set", [(f"{name}={file}",)
                                       for name, file in zip(language_eval_sets(config, wildcards.concept), files)])


def language_eval_job_inputs(config: Config, paths: Layout) -> dict[str, Any]:
    """What a job that runs the language model on a task's eval sets reads (``language_evaluate``,
    ``language_faithfulness_mib``): the rule's named inputs ``eval_sets`` and ``model``.

    Args:
        config: the run's config.
        paths: the run's layout.

    Returns:
        ``{"eval_sets": <input function>, "model": [...]}``: the eval sets' prompt files of the job's task
        (:func:`language_eval_job_files`, bound) and the model file (:func:`language_model_inputs`).
    """
    return {"eval_sets": partial(language_eval_job_files, config, paths), "model": language_model_inputs(config, paths)}


def language_eval_job_params(config: Config, paths: Layout) -> dict[str, Any]:
    """What such a job passes to its stage beside its own options: the rule's params ``model``, ``eval_sets`` and
    ``experiment`` (the shell writes ``{params.model} ... {params.eval_sets} --experiment {params.experiment:q}``).

    Args:
        config: the run's config.
        paths: the run's layout.

    Returns:
        ``{"model": "--model ...", "eval_sets": <params function>, "experiment": "tiny_gpt2"}``:
        :func:`language_model_args`, the ``--eval-set NAME=FILE`` options of the job's task
        (:func:`language_eval_job_options`, bound) and the language experiment's name.
    """
    return {"model": language_model_args(config, paths), "eval_sets": partial(language_eval_job_options, config, paths),
            "experiment": config["language"]["experiment"]}


# ------------------------------------------------------------------------ MIB (docs/mib.md)


def mib_model_name(config: Config) -> str:
    """MIB's short model name of the language model (the folder ``<task>_<model>``).

    Args:
        config: the run's config.

    Returns:
        ``language.mib.model`` (MIB's model), else ``language.mib.model_name``; else ``gpt2`` for source gpt2
        (MIB's name of GPT-2 Small); else the experiment name with ``-`` for ``_`` (MIB's folder joins task and
        model with ``_``).
    """
    language = config["language"]
    if language["mib"].get("model"):
        return str(language["mib"]["model"])
    if language["mib"].get("model_name"):
        return str(language["mib"]["model_name"])
    if language["source"] == "gpt2":
        return "gpt2"
    return str(language["experiment"]).replace("_", "-")


def language_selected_table(config: Config, paths: Layout) -> str | None:
    """The table of the language settings and K chosen on held-out prompts (``report-sufficiency --select-on``,
    written by the language_tables rule), or None without ``language.selection_set``."""
    if not config["language"]["selection_set"]:
        return None
    return f"{paths.tables(config['language']['experiment'])}/selected_cacc_raw.csv"


def mib_circuits(config: Config, paths: Layout) -> list[tuple[str, str, str, str]]:
    """The certified circuits MIB's grid and export choose from: one per task, chosen at run time.

    Which one: the task's certified setting selected on held-out prompts, the ``certified_setting`` of
    :func:`language_selected_table` (``reports.mib_submission.select_circuit``; the same table, and the same procedure for
    every method, as the language_graphs rule and the explorer). The task's first setting is not taken as such: in
    the embedded config it can certify nothing in (a vacuous or marginal plan). The choice is made by the jobs,
    which get every setting's files and the table; without ``language.selection_set`` there is no held-out
    choice and each task's first setting is the one (alone in the rows).

    Args:
        config: the run's config.
        paths: the run's layout.

    Returns:
        ``(task, attributions, votes, certificates)`` rows (``eap_ig``, train split), by task (config order), then
        setting (config order): every setting with a selection set, else the first only.
    """
    lx = config["language"]["experiment"]
    rows = []
    for task in config["language"]["tasks"]:
        settings = language_settings(config, task)
        for setting in settings if language_selected_table(config, paths) else settings[:1]:
            rows.append((task, paths.attributions(lx, "train", task), paths.votes(lx, "train", task, "eap_ig", setting),
                         paths.certificates(lx, "train", task, "eap_ig", setting)))
    return rows


def mib_task_circuits(config: Config, paths: Layout) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """:func:`mib_circuits` by task: what a language_faithfulness_mib job reads.

    Args:
        config: the run's config.
        paths: the run's layout.

    Returns:
        task -> (its attributions, [(votes, certificates) of each setting it chooses from]), in config order.
    """
    found: dict[str, tuple[str, list[tuple[str, str]]]] = {}
    for task, attributions, votes, certificates in mib_circuits(config, paths):
        found.setdefault(task, (attributions, []))[1].append((votes, certificates))
    return found


def mib_job_attributions(circuits: TaskCircuits, wildcards: Any) -> str:
    """The attributions of the task a language_faithfulness_mib job's ``concept`` wildcard names
    (``circuits``: :func:`mib_task_circuits`)."""
    return circuits[wildcards.concept][0]


def mib_job_circuit_files(circuits: TaskCircuits, wildcards: Any) -> list[str]:
    """The votes and certificates of every setting of the job's task, flattened (votes, certificates, ...)."""
    return [path for pair in circuits[wildcards.concept][1] for path in pair]


def mib_job_circuit_options(circuits: TaskCircuits, wildcards: Any) -> str:
    """``--circuits VOTES CERTIFICATES`` per setting of the job's task (:func:`mib_job_circuit_files` as options)."""
    return item_options("--circuits", circuits[wildcards.concept][1])
