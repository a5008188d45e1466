"""The language half's checks of a workflow config (:func:`check_language`, which
:func:`certified_circuits.pipeline.config.check_config` runs): tasks and settings, the compiled model's task, the
attribution method, MIB's submission rules and, for ``source: hf``, the model folder and every task file, before any
job. Every error names the key, the value and what is expected (:class:`ConfigError`).
"""

from __future__ import annotations

from pathlib import Path

from certified_circuits.language.tasks import GENERATED_TASKS, TASKS  # the built-in prompt generators (embedded, gpt2)
from certified_circuits.pipeline.config_errors import ConfigError, config_error

__all__ = ["check_language", "check_compiled_tasks", "check_language_mib", "check_mib_shape", "check_language_method",
           "check_hf_language", "check_language_family", "hf_prompt_tokenizer"]


def check_language(language) -> dict[str, int] | None:
    """Tasks, settings and (source hf) the model folder and every task file, before any job.

    Fills ``tasks`` when not given: the three built-in tasks (embedded, gpt2) or every task file (hf).
    A task without a ``settings`` entry uses ``certification``'s ``tau`` and ``p_del``.

    Returns:
        (source hf) the train prompts of each task file, ``|D|`` of the plan check; None otherwise.
    """
    source = language["source"]
    if source == "hf":
        language.setdefault("tasks", list(language["task_files"]))
        unknown = [t for t in language["tasks"] if t not in language["task_files"]]
        if unknown:
            config_error("language.tasks", language["tasks"], f"tasks {unknown} have no entry in language.task_files "
                                                              f"{sorted(language['task_files'])}")
    else:
        language.setdefault("tasks", list(TASKS))
        if language.get("task_files"):
            config_error("language.task_files", sorted(language["task_files"]),
                         "task files need source: hf (any causal LM folder with its tokenizer; answers are tokenised "
                         "as written); the embedded and gpt2 sources generate the built-in tasks")
        generated = GENERATED_TASKS if source == "embedded" else TASKS  # induction: the embedded testbed's task
        unknown = [t for t in language["tasks"] if t not in generated]
        if unknown:
            config_error("language.tasks", language["tasks"], f"source {source} generates only {list(generated)}; "
                                                              f"for your own tasks use source: hf and task_files")
        check_compiled_tasks(language)
    check_language_method(language)
    check_language_mib(language)
    cert = language["certification"]
    known = set(language["task_files"]) if source == "hf" else set(GENERATED_TASKS if source == "embedded" else TASKS)
    stray = [t for t in language["settings"] if t not in known]
    if stray:
        config_error("language.settings", sorted(language["settings"]),
                     f"settings for {stray}, which are not tasks of this source ({sorted(known)}): a misspelt task?")
    missing = [t for t in language["tasks"] if t not in language["settings"]]
    if missing and not ("tau" in cert and "p_del" in cert):
        config_error("language.settings", sorted(language["settings"]),
                     f"needs a list of {{tau, p_del}} settings for tasks {missing}, or set language.certification.tau "
                     f"and p_del for every task without an entry")
    for task, settings in language["settings"].items():
        seen = set()
        for index, setting in enumerate(settings):
            pair = (float(setting["tau"]), float(setting["p_del"]))
            if pair in seen:
                config_error(f"language.settings.{task}[{index}]", setting,
                             "it repeats an earlier setting of the task (each setting is certified and evaluated "
                             "once): remove the duplicate")
            seen.add(pair)
    if source == "hf":
        return check_hf_language(language)
    return None


def check_compiled_tasks(language) -> None:
    """A compiled model (``language.train.compiled``) holds the circuit of its one task only: every task of
    ``language.tasks`` must be that task (another would be certified on a model with no circuit for it).

    Args:
        language: the config's language block (``tasks`` filled).

    Raises:
        ConfigError: naming ``language.tasks``, the tasks without a circuit and the fix.
    """
    from certified_circuits.language.graph import COMPILED_TASK

    compiled = (language.get("train") or {}).get("compiled")
    task = COMPILED_TASK.get(compiled, compiled)
    other = [t for t in language["tasks"] if compiled and t != task]
    if other:
        config_error("language.tasks", language["tasks"],
                     f"the compiled model (language.train.compiled: {compiled}) has the {task} circuit only, none "
                     f"for {other}: set language.tasks: [{task}], or drop train.compiled to train a model on them")


def check_language_mib(language) -> None:
    """``language.mib``: a submission (``submission: true``) names MIB's model (``model``), every task forms a pair
    MIB evaluates with it, and the K grid holds MIB's 9 fractions (each binary file is then the certificate at
    K = p, not an empty or smaller circuit); refused before any job, listing the valid pairs (docs/mib.md)."""
    from certified_circuits.analysis.mib_constants import MIB_PAIRS, SUBMISSION_FRACTIONS, mib_pair, pair_problem

    mib = language["mib"]
    if mib.get("model") and mib.get("model_name"):
        config_error("language.mib.model_name", mib["model_name"], "only one of language.mib.model (MIB's model) and "
                                                                   "model_name (your own name): remove model_name")
    if mib.get("export") and language["level"] != "edge":
        config_error("language.mib.export", True, f"MIB's circuit files are edge circuits, but language.level is "
                                                  f"{language['level']!r}: set language.level: edge (or export: false)")
    if not mib.get("submission"):
        return
    if not mib.get("export"):
        config_error("language.mib.submission", True, "a submission writes the MIB files: set language.mib.export: true")
    model = mib.get("model")
    if not model:
        config_error("language.mib.model", None, "a submission names MIB's model: one of gpt2, qwen2.5, gemma2, llama3 "
                                                 f"(valid task/model pairs: {', '.join(MIB_PAIRS)})")
    bad = [mib_pair(t, model) for t in language["tasks"] if pair_problem(t, model)]
    if bad:
        config_error("language.mib.submission", True,
                     f"MIB does not evaluate {', '.join(bad)}: name the tasks after MIB's and pick a model MIB pairs "
                     f"them with; the valid task/model pairs are {', '.join(MIB_PAIRS)} (or set submission: false to "
                     f"export for local evaluation)")
    grid = [float(k) for k in language["k_grid"]]
    missing = [p for p in SUBMISSION_FRACTIONS if not any(abs(k - p) < 1e-9 for k in grid)]
    if missing:
        config_error("language.k_grid", grid, f"a submission certifies each of MIB's fractions: add {missing} to "
                                              f"language.k_grid (without them a file holds a smaller or empty circuit)")


def check_mib_shape(language) -> None:
    """A submission's graph must be MIB's model's (its layers and heads), known from the config before any job
    (:func:`certified_circuits.pipeline.plans.language.language_shape`): else only the last job, the export, refused it.

    Args:
        language: the config's language block (checked by :func:`check_language`).

    Raises:
        ConfigError: naming ``language.mib.submission``, both shapes and the fix.
    """
    from certified_circuits.analysis.mib_constants import MIB_MODEL_SHAPES, MIB_MODELS
    from certified_circuits.pipeline.plans.language import language_shape

    model = language["mib"].get("model")
    if not language["mib"].get("submission") or not model:
        return
    shape, wanted = language_shape(language), MIB_MODEL_SHAPES.get(model)
    if shape is not None and wanted is not None and tuple(shape) != tuple(wanted):
        config_error("language.mib.submission", True,
                     f"the configured model has {shape[0]} layers and {shape[1]} heads but MIB's {model} "
                     f"({MIB_MODELS[model]}) has {wanted[0]} and {wanted[1]}, so MIB would build another graph: "
                     f"certify MIB's own model (language.source: hf with its folder), or set submission: false")


def check_language_method(language) -> None:
    """``language.method`` names an entry of the method registry (``language/methods.py`` ``METHODS``, its one
    list: the schema does not repeat it, so a method is added with one entry) that has ``language.level``, and
    ``ig_steps`` and ``ig_integration`` are valid for it, before any job."""
    from certified_circuits.language.methods import check_method

    try:
        check_method(language["method"], language["level"], language["ig_steps"], language["ig_integration"])
    except ValueError as exc:
        config_error("language.method", language["method"], str(exc))


def check_hf_language(language) -> dict[str, int]:
    """The model folder (found by :func:`check_paths`, which :func:`check_config` runs first) has a config and a
    tokenizer, and every task file parses, splits and tokenises; returns each task's number of train prompts."""
    from certified_circuits.language.task_files import load_task_file

    folder = language["model_path"]
    if not (Path(folder) / "config.json").is_file():
        config_error("language.model_path", folder, "a Hugging Face model folder with config.json "
                                                    "(model.save_pretrained(DIR) and tokenizer.save_pretrained(DIR))")
    check_language_family(folder)
    tokenizer, max_len = hf_prompt_tokenizer(folder)
    train_sizes: dict[str, int] = {}
    for task in language["tasks"]:
        path = language["task_files"][task]
        try:
            splits = load_task_file(path, task, seed=language["task_seed"], tokenizer=tokenizer, max_len=max_len)
        except (ValueError, OSError) as exc:  # FileNotFoundError, IsADirectoryError
            raise ConfigError(f"config key language.task_files.{task}: {exc}") from None
        train_sizes[task] = len(splits["train"])
    return train_sizes


def check_language_family(folder) -> None:
    """Refuse a model family that cannot be attributed, from config.json's ``model_type`` and shape alone
    (``language.families``: OPT, GPT-Neo, the falcon-40b layout, sandwich-norm Gemma-2/3, ...), before any job;
    the message names the family, the reason and the fix."""
    from certified_circuits.language.families import UnsupportedFamilyError, check_family, read_config

    try:
        check_family(read_config(folder), where=f"the model at {folder}")
    except (UnsupportedFamilyError, ValueError) as exc:
        raise ConfigError(f"config key language.model_path = {folder!r}: {exc} (docs/language_families.md lists "
                          f"the families that can be attributed)") from None


def hf_prompt_tokenizer(folder):
    """(prompt tokenizer, context length) of a model folder, without loading the weights."""
    from transformers import AutoConfig, AutoTokenizer

    from certified_circuits.language.tokenizer import HFPromptTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        cfg = AutoConfig.from_pretrained(folder, local_files_only=True)
    except Exception as exc:  # transformers raises OSError, ValueError or its own types
        raise ConfigError(f"config key language.model_path = {folder!r}: the tokenizer or config cannot be loaded "
                          f"offline ({type(exc).__name__}: {str(exc)[:200]}); save both with save_pretrained(DIR)") from None
    max_len = getattr(cfg, "n_positions", None) or getattr(cfg, "max_position_embeddings", None)
    return HFPromptTokenizer(tok), max_len
