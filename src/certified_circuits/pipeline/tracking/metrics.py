"""Metrics a stage reports in this process; the CLI collects them into the job record
(:func:`certified_circuits.pipeline.tracking.records.write_job_record`). Reports return their metrics and
the CLI adds them here.

See :mod:`certified_circuits.pipeline.tracking` for the design and the guarantees.
"""

from __future__ import annotations

import logging
from typing import Mapping


log = logging.getLogger("certified_circuits.pipeline.tracking")


_metrics: dict[str, float] = {}
_tags: dict[str, str] = {}


def add_metrics(metrics: Mapping[str, float]) -> None:
    """Stage handlers report key metrics (peaks, K, abstention, radius, timings) for the job record."""
    for key, value in metrics.items():
        try:
            _metrics[key] = float(value)
        except (TypeError, ValueError):
            log.debug("metric %s=%r is not numeric; skipped", key, value)


def collected_metrics() -> dict[str, float]:
    return dict(_metrics)


def add_tags(tags: Mapping[str, str]) -> None:
    """Stage handlers report flags for people (``cc.plan.verdict``, ``cc.flag.<name>``: one line saying what a
    result means and its fix) for the job record; the child run gets them as MLflow tags."""
    for key, value in tags.items():
        _tags[str(key)] = str(value)


def collected_tags() -> dict[str, str]:
    return dict(_tags)
