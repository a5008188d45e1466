"""What every rule shares: shell words, log and benchmark paths, the cluster resources of a model job and the
params functions that many rules use (the folder of an output, pairs of input files as options).

Every config string that reaches a shell goes through :func:`q` (``shlex.quote``); numbers are written exactly
(:func:`certified_circuits.core.setting.number`).
"""

from __future__ import annotations

import os
import shlex
from typing import Any, Callable, Iterable, Mapping, Sequence

from certified_circuits.core.setting import number
from certified_circuits.pipeline.layout import Layout
from certified_circuits.pipeline.tracking.records import encode_wildcards

__all__ = [
    "Config", "q", "words", "cli_options", "item_options", "pair_options", "chunked", "job_env", "stage_command", "log_path",
    "benchmark_path", "local_inputs", "model_resources", "vote_device_option", "output_dir", "output_stem", "input_dir", "input_pairs",
    "rule_files",
]

Config = Mapping[str, Any]


def q(value: Any) -> str:
    """One shell word: every config string that reaches a command goes through here (or Snakemake's ``:q``).

    Args:
        value: any value; it is converted with ``str``.

    Returns:
        ``shlex.quote(str(value))``: ``"a b"`` -> ``"'a b'"``, ``0.5`` -> ``"0.5"``.
    """
    return shlex.quote(str(value))


def words(values: Iterable[Any]) -> str:
    """A list as quoted shell words, the CLI's one list format (space-separated).

    Args:
        values: strings or numbers; floats are written exactly (``number``: ``1e-05``, never ``%g``).

    Returns:
        The quoted words joined by spaces: ``[0.25, "a b"]`` -> ``"0.25 'a b'"``.
    """
    return " ".join(q(number(v) if isinstance(v, float) else v) for v in values)


def cli_options(options: Mapping[str, Any]) -> str:
    """A config mapping as quoted options of a ``certified-circuits`` stage.

    Args:
        options: option name -> value; ``_`` in a name becomes ``-``; ``True`` is a bare flag and ``False``
            leaves the option out; a list is the flag followed by :func:`words`.

    Returns:
        The options in the mapping's order: ``{"n_classes": 3, "widths": [8, 16]}`` -> ``"--n-classes 3 --widths 8 16"``.
    """
    parts = []
    for key, value in options.items():
        flag = f"--{key.replace('_', '-')}"
        if isinstance(value, bool):
            parts.append(flag if value else "")
        elif isinstance(value, (list, tuple)):
            parts.append(f"{flag} {words(value)}")
        else:
            parts.append(f"{flag} {q(number(value) if isinstance(value, float) else value)}")
    return " ".join(p for p in parts if p)


def item_options(flag: str, rows: Iterable[Sequence[Any]]) -> str:
    """Repeated table rows as options.

    Args:
        flag: the option, e.g. ``--circuits``.
        rows: one sequence of values per repetition.

    Returns:
        ``flag`` and the row's :func:`words` per row: ``("--also", [("a", "b c")])`` -> ``"--also a 'b c'"``.
    """
    return " ".join(f"{flag} {words(row)}" for row in rows)


def pair_options(flag: str, files: Sequence[str]) -> str:
    """Consecutive pairs of a flat file list as repeated options (a circuit is its votes and certificates files).

    Args:
        flag: the option, e.g. ``--circuits``.
        files: ``[a1, b1, a2, b2, ...]`` (even length).

    Returns:
        ``"flag a1 b1 flag a2 b2 ..."`` (:func:`item_options` of the pairs).
    """
    return item_options(flag, zip(files[::2], files[1::2]))


def chunked(values: Iterable[Any], size: int) -> list[list[Any]]:
    """Consecutive groups of ``size`` values (the last may be shorter), in order.

    Args:
        values: any iterable.
        size: the group size (>= 1).

    Returns:
        The groups: ``chunked("abcde", 2)`` -> ``[["a", "b"], ["c", "d"], ["e"]]``.
    """
    values = list(values)
    return [values[i : i + size] for i in range(0, len(values), size)]


def job_env(rule_name: str) -> Callable[[Any], str]:
    """The environment prefix of a rule's command, which tells ``certified-circuits`` the rule and wildcards it
    serves, so that the job's MLflow record is tagged with them (the parent run id comes from the environment).

    Args:
        rule_name: the rule's name (class-group rules give their kind, ``vision_attribute``).

    Returns:
        A params function of the job's wildcards (anything with ``items()``: Snakemake's ``Wildcards``, a dict) and
        threads (Snakemake passes the job's) that returns ``CC_RULE=<rule> CC_WILDCARDS=<JSON of the wildcards>``,
        both quoted, then ``OPENBLAS_NUM_THREADS=<threads>``: numpy's BLAS otherwise starts a thread per core in every
        job, and on a machine whose cores the scheduler has already filled those threads wait on each other (vote
        counting 2-3x slower in wall time and about 2x in CPU time at a load of 4 on 2 cores, issue 51).
    """

    def prefix(wildcards: Any, threads: int = 1) -> str:
        return (f"CC_RULE={q(rule_name)} CC_WILDCARDS={q(encode_wildcards(dict(wildcards.items())))} "
                f"OPENBLAS_NUM_THREADS={int(threads)}")

    return prefix


def stage_command(command: str) -> str:
    """The shell command of a rule: one ``certified-circuits`` stage, run with the job's environment prefix
    (``params.job``, :func:`job_env`), its stderr to the job's log (stdout stays free for what a stage prints).

    Args:
        command: the stage and its options, a Snakemake shell template (``{input.votes:q}``, ``{params.k_grid}``, ...).

    Returns:
        ``"{params.job} certified-circuits <command> 2> {log:q}"``, for a rule with a ``job`` param and a ``log``:
        ``"certify --out {output:q}"`` -> ``"{params.job} certified-circuits certify --out {output:q} 2> {log:q}"``.
    """
    return f"{{params.job}} certified-circuits {command} 2> {{log:q}}"


def log_path(paths: Layout, rule_name: str, pattern: str = "") -> str:
    """The log file of a rule's job.

    Args:
        paths: the run's layout.
        rule_name: the rule.
        pattern: the job's name under the rule's folder (wildcards allowed); empty for a rule with one job.

    Returns:
        ``RESULTS/logs/<rule>/<pattern or "job">.log``.
    """
    return paths.log(rule_name, pattern or "job")


def benchmark_path(paths: Layout, rule_name: str, pattern: str = "") -> str:
    """The benchmark file of a rule's job: ``RESULTS/benchmarks/<rule>/<pattern or "job">.tsv`` (as :func:`log_path`)."""
    return paths.benchmark(rule_name, pattern or "job")


def local_inputs(paths: Layout, candidates: Iterable[Any]) -> list[Any]:
    """Only files the workflow builds are inputs; user folders (ImageNet) are checked at parse time.

    Args:
        paths: the run's layout.
        candidates: data paths of a job.

    Returns:
        Those under the results folder, in order.
    """
    return [p for p in candidates if str(p).startswith(f"{paths.root}/")]


def model_resources(embedded: bool, device: str) -> tuple[int, int, int]:
    """What a model job of one half asks the cluster for (profiles/slurm routes gpu > 0 to the GPU partition).

    Args:
        embedded: the half runs its embedded model (``vision.embedded_vision``, ``language.embedded_language``).
        device: the config's ``device``.

    Returns:
        ``(gpu, mem_mb, runtime)``: an embedded model 4000 MB and 60 minutes, a torchvision or Hugging Face model
        16000 MB and 120 minutes. One GPU where the job needs one: a torchvision or Hugging Face model unless
        ``device: cpu``, and any model when the device names CUDA (``cuda``, ``cuda:N``), since its stage then
        refuses to run without CUDA (``core.devices.resolve_device``); an embedded model at ``auto`` asks for none
        (the embedded default runs on CPU nodes).
    """
    gpu = int(device.startswith("cuda") or (not embedded and device != "cpu"))
    return (gpu, 4000, 60) if embedded else (gpu, 16000, 120)


def vote_device_option(device: str) -> str:
    """The ``--device`` of a ``votes`` job (the testbed's ``stability`` counts with numpy, its stage's default).

    Votes run no model, and their jobs ask the cluster for no GPU (counting takes about a second on a CPU), so
    they never pass the config's ``cuda``/``cuda:N``, which would stop them on a CPU node. They count with
    ``core.devices.vote_device``'s ``auto`` (CUDA where the machine has it, else numpy; the counts are the same),
    or with numpy when the config says ``device: cpu``.

    Args:
        device: the config's ``device`` (``auto``, ``cpu``, ``cuda`` or ``cuda:N``).

    Returns:
        ``"cpu"`` for ``cpu``, else ``"auto"``.
    """
    return "cpu" if device == "cpu" else "auto"


def output_dir(wildcards: Any, output: Sequence[str]) -> str:
    """The params function of a stage that writes a folder: the folder of the rule's first output.

    Args:
        wildcards: the job's wildcards (unused: the folder is the output's).
        output: the job's outputs.

    Returns:
        ``os.path.dirname(output[0])``: ``R/tables/world/iou.csv`` -> ``R/tables/world``.
    """
    return os.path.dirname(output[0])


def output_stem(wildcards: Any, output: Sequence[str]) -> str:
    """The params function of a stage that writes files beside one stem: the rule's first output without its
    extension (``R/tables/world/runtime.csv`` -> ``R/tables/world/runtime``)."""
    return os.path.splitext(output[0])[0]


def input_dir(name: str | None = None, up: int = 1) -> Callable[[Any, Any], str]:
    """A params function that passes the folder of a job's input (a stage that reads a folder, not one file).

    Args:
        name: the named input whose first file is used; None: the job's first input.
        up: how many folders up: 1 is the file's folder, 2 its parent.

    Returns:
        A function of ``(wildcards, input)``: ``input_dir(up=2)`` on ``R/language/tasks/ioi/train.jsonl`` gives
        ``R/language/tasks``.
    """

    def folder(wildcards: Any, input: Any) -> str:  # noqa: A002 (Snakemake passes the inputs by this name)
        path = (input if name is None else getattr(input, name))[0]
        for _ in range(up):
            path = os.path.dirname(path)
        return path

    return folder


def input_pairs(flag: str, name: str | None = None) -> Callable[[Any, Any], str]:
    """A params function that passes a job's input files two by two (:func:`pair_options`).

    Args:
        flag: the option, e.g. ``--circuits`` (votes, certificates) or ``--class`` (concept, pool attributions).
        name: the named input that holds the pairs; None: every input file.

    Returns:
        A function of ``(wildcards, input)`` that returns ``"flag a1 b1 flag a2 b2 ..."``.
    """

    def pairs(wildcards: Any, input: Any) -> str:  # noqa: A002 (Snakemake passes the inputs by this name)
        return pair_options(flag, list(input if name is None else getattr(input, name)))

    return pairs


def rule_files(rules: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Every output of planned rules, flattened: what ``rule all`` asks of them.

    Args:
        rules: rule name -> its named outputs (a path or a list of paths each), in the order the rules declare them.

    Returns:
        The paths in rule order, then output order (a list output's paths in place): ``{"r": {"a": "x", "b": ["y",
        "z"]}}`` -> ``["x", "y", "z"]``.
    """
    return [path for outputs in rules.values() for value in outputs.values()
            for path in ([value] if isinstance(value, str) else value)]
