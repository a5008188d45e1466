"""What a ``snakemake`` command line will do, read from its arguments: whether it may run jobs
(:func:`snakemake_runs_jobs`; the Snakefile takes the results lock only then)."""

from __future__ import annotations

import re

#: Snakemake options after which no job runs and no result is written (the results lock is not taken)
_NO_JOB_OPTIONS = frozenset({
    "--dry-run", "--dryrun", "--unlock", "--lint", "--list", "--list-rules", "--list-target-rules", "--lt",
    "--summary", "--detailed-summary", "--report", "--dag", "--rulegraph", "--filegraph", "--d3dag",
    "--list-changes", "--lc", "--list-input-changes", "--li", "--list-params-changes", "--lp",
    "--list-code-changes", "--list-version-changes", "--list-untracked", "--lu", "--print-compilation",
    "--cleanup-metadata", "--cm", "--containerize", "--generate-unit-tests", "--archive", "--export-cwl",
    "--version", "--help", "--conda-create-envs-only", "--conda-cleanup-envs", "--cleanup-shadow",
    "--list-conda-envs", "--show-failed-logs", "--compile-only",
})
_NO_JOB_SHORT = frozenset("nlShDv")  # -n dry run, -l list, -S summary, -h help, -D detailed summary, -v version


def snakemake_runs_jobs(argv: list[str]) -> bool:
    """Whether a ``snakemake`` command line (its arguments) may run jobs, i.e. is not a dry run, an
    ``--unlock``, a lint, a listing or a report. When unsure, True: taking the results lock in a run
    that writes nothing costs nothing unless another run holds it."""
    for arg in argv:
        if arg == "--":
            break
        if arg.split("=", 1)[0] in _NO_JOB_OPTIONS:
            return False
        if re.fullmatch(r"-[A-Za-z]+", arg) and _NO_JOB_SHORT & set(arg[1:]):
            return False
    return True
