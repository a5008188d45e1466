"""A workflow config merged and checked in-process, the way the Snakefile does it at parse time, without starting
``snakemake`` (a parse costs seconds; this costs milliseconds). The Snakefile and these tests call the one check,
:func:`certified_circuits.pipeline.config.check_workflow_config`; ``tests/integration/test_config_errors.py`` keeps a
few real ``snakemake -n`` parses that prove the Snakefile calls it before any job."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from certified_circuits.pipeline.config import CheckedConfig, check_workflow_config
from tests.helpers.paths import ROOT, SCHEMA


def merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """``update`` deep-merged into a copy of ``base``, mapping by mapping (Snakemake's ``update_config``)."""
    from snakemake.utils import update_config

    merged = copy.deepcopy(base)
    update_config(merged, copy.deepcopy(update))
    return merged


def merged_config(*files: str | Path, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """What Snakemake's ``config`` holds for ``--configfile FILES... --config OVERRIDES`` (``config.yaml`` when no
    file is given), before the schema sets its defaults. A file that is not valid YAML adds nothing here: the strict
    reading of :func:`check` names it with its file and line."""
    config: dict[str, Any] = {}
    for path in files or (ROOT / "config.yaml",):
        try:
            loaded = yaml.safe_load(Path(path).read_text()) or {}
        except yaml.YAMLError:
            loaded = {}
        config = merge(config, loaded)
    return merge(config, overrides or {})


def check(*files: str | Path, overrides: dict[str, Any] | None = None) -> CheckedConfig:
    """The Snakefile's parse-time check of ``--configfile FILES... --config OVERRIDES``.

    Args:
        files: config files in order (``config.yaml`` when none).
        overrides: a last layer, as ``--config`` gives it.

    Raises:
        ConfigError: the rejection, worded as the user sees it.
    """
    paths = [Path(p) for p in files] or [ROOT / "config.yaml"]
    return check_workflow_config(merged_config(*paths, overrides=overrides), [str(p) for p in paths], SCHEMA)


def check_text(tmp: Path, *files: str | Path, text: str) -> CheckedConfig:
    """:func:`check` with a last config file of raw YAML ``text`` (``tmp/override.yaml``), read strictly as given."""
    override = tmp / "override.yaml"
    override.write_text(text)
    return check(*files, override)
