"""MIB's benchmark constants: its edge fractions, tasks, models, their shapes and the task/model pairs it evaluates.

One small module with no heavy import (no pandas, torch or datasets), so the workflow's config check
(:func:`certified_circuits.pipeline.config_language.check_language_mib`, run when the Snakefile is parsed) reads them without
loading the reports. It lives in ``analysis`` because the lowest layer that needs one of them is
:mod:`certified_circuits.analysis.faithfulness` (MIB's fractions); ``language.mib_data`` (MIB's datasets),
``language.evaluate``, ``reports.mib_submission`` (submissions) and ``pipeline.config`` import them from here
(docs/architecture.md, section 1; docs/mib.md).
"""

from __future__ import annotations

#: MIB's edge fractions: {0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100} % (``percentages`` of MIB's
#: ``evaluate_area_under_curve``; Mueller et al. 2025)
MIB_FRACTIONS: tuple[float, ...] = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
#: the 9 fractions of MIB's binary files (README: "no more than each of" 0.1% .. 50%; 100% is the full model)
SUBMISSION_FRACTIONS: tuple[float, ...] = tuple(p for p in MIB_FRACTIONS if p < 1.0)

#: MIB's tasks (``utils.py`` ``TASKS_TO_HF_NAMES``) -> the mib-bench dataset name
MIB_TASKS: dict[str, str] = {
    "ioi": "ioi", "mcqa": "copycolors_mcqa", "arithmetic_addition": "arithmetic_addition",
    "arithmetic_subtraction": "arithmetic_subtraction", "arc_easy": "arc_easy", "arc_challenge": "arc_challenge",
}
#: MIB's models: short name (the folder ``<task>_<model>``) -> the name MIB loads (``utils.py``
#: ``MODEL_NAME_TO_FULLNAME``)
MIB_MODELS: dict[str, str] = {"gpt2": "gpt2-small", "qwen2.5": "Qwen/Qwen2.5-0.5B", "gemma2": "google/gemma-2-2b",
                              "llama3": "meta-llama/Llama-3.1-8B"}
#: (layers, query heads) of each MIB model (its Hugging Face config): a circuit's ``cfg`` must match for MIB's
#: ``Graph.from_model`` to build the evaluated model's graph
MIB_MODEL_SHAPES: dict[str, tuple[int, int]] = {"gpt2": (12, 12), "qwen2.5": (24, 14), "gemma2": (26, 8),
                                                "llama3": (32, 32)}
#: the task/model pairs MIB evaluates: the folders of ``utils.py`` ``COL_MAPPING`` (less ``ioi_interpbench``,
#: which is scored against a reference graph, not by faithfulness), task ``_`` written ``-``
MIB_PAIRS: tuple[str, ...] = (
    "ioi_gpt2", "ioi_qwen2.5", "ioi_gemma2", "ioi_llama3", "mcqa_qwen2.5", "mcqa_gemma2", "mcqa_llama3",
    "arithmetic-addition_llama3", "arithmetic-subtraction_llama3", "arc-easy_gemma2", "arc-easy_llama3",
    "arc-challenge_llama3")


def mib_pair(task: str, model: str) -> str:
    """MIB's folder of a task and model: ``<task with '_' as '-'>_<model>`` (``run_evaluation.py``).

    Args:
        task: a task name (``arithmetic_addition`` or ``arithmetic-addition``).
        model: MIB's short model name (a key of :data:`MIB_MODELS`).

    Returns:
        ``"arithmetic-addition_llama3"``.
    """
    return f"{task.replace('_', '-')}_{model}"


def pair_problem(task: str, model: str) -> str | None:
    """Why MIB does not evaluate a task/model pair (None when it does).

    Args:
        task: a task name.
        model: MIB's short model name.

    Returns:
        A sentence naming the pair and listing MIB's valid pairs, or None for a pair of :data:`MIB_PAIRS`.
    """
    pair = mib_pair(task, model)
    if pair in MIB_PAIRS:
        return None
    return (f"MIB does not evaluate {pair} (task {task!r}, model {model!r}); its pairs are {', '.join(MIB_PAIRS)} "
            f"(hannamw/MIB-circuit-track utils.py COL_MAPPING)")
