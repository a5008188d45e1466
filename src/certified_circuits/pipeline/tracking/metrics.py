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


def add_metrics(metrics: Mapping[str, float]) -> None:
    """Stage handlers report key metrics (peaks, K, abstention, radius, timings) for the job record."""
    for key, value in metrics.items():
        try:
            _metrics[key] = float(value)
        except (TypeError, ValueError):
            log.debug("metric %s=%r is not numeric; skipped", key, value)


def collected_metrics() -> dict[str, float]:
    return dict(_metrics)
