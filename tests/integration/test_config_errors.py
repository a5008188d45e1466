"""Config mistakes a careless user makes stop the workflow at parse time with one clear line that names
the key (and the file and line where that matters), before any job (issue 21).

What pipeline/config.py decides is tested in-process, through the one check the Snakefile calls
(``check_workflow_config``, via tests/helpers/config.py: milliseconds, not a ``snakemake`` parse each). Two real
``snakemake -n`` parses prove that the Snakefile calls it, a schema violation and a check of pipeline/config.py, and
that nothing is created before the refusal.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from certified_circuits.pipeline.config_errors import ConfigError
from certified_circuits.pipeline.config_files import check_before_schema, check_config_files
from tests.helpers import config as config_check
from tests.helpers.paths import ROOT, SMOKE
from tests.helpers.workflow import override, snakemake


@pytest.mark.slow  # two snakemake parses
@pytest.mark.parametrize("patch, message", [
    ({"vision": {"certification": {"tau": 1.5}}},
     "config is invalid: 1.5 is greater than or equal to the maximum of 1 (at vision.certification.tau)"),
    ({"vision": {"concepts": ["circle", "pentagon"]}}, "pentagon"),
])
def test_the_snakefile_refuses_a_bad_config_before_any_job(tmp_path: Path, patch: dict, message: str) -> None:
    """A real ``snakemake -n``: the schema (first case) and pipeline/config.py's checks (second) run at parse time,
    the run stops with the message and creates no results folder."""
    results = tmp_path / "results"
    done = snakemake("-n", "--cores", "1", "--configfile", SMOKE, override(tmp_path, "bad", patch), "--config",
                     f"results_dir={results}", timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode != 0 and message in output, output[-3000:]
    assert "definitions" not in output and not results.exists()


def rejection(tmp_path: Path, text: str) -> str:
    """The message the Snakefile's check gives the smoke config plus an override file holding ``text``."""
    with pytest.raises(ConfigError) as error:
        config_check.check_text(tmp_path, SMOKE, text=text)
    return str(error.value)


@pytest.mark.parametrize("text, message", [
    ("vision:\n  certification:\n    n: 1000000000\n", "1000000000 is greater than the maximum of 100000 (at vision.certification.n)"),
    ("vision:\n  certification:\n    n: 1e9\n", "'1e9' is not of type 'integer' (at vision.certification.n)"),
    ("vision:\n  world:\n    image_size: 100000\n", "100000 is greater than the maximum of 1024 (at vision.world.image_size)"),
    ("vision:\n  certification:\n    seed: 12345678901234567890123\n", "(at vision.certification.seed)"),
    ("language:\n  settings:\n    ioi: [[0.9, 0.95]]\n",
     "language.settings.ioi[0]: [0.9, 0.95] is the old (tau, p_del) pair form; write {tau: 0.9, p_del: 0.95}"),
    ("language:\n  settings:\n    ioi: [{tau: 0.7, p_del: 0.6}, {tau: 0.7, p_del: 0.6}]\n",
     "language.settings.ioi[1]"),
    ("bogus_key: 1\n", "unknown top-level config key(s) ['bogus_key']"),
    ("results_dir: a\nresults_dir: b\n", "override.yaml:2:1: duplicate key 'results_dir' (first at line 1)"),
])
def test_a_bad_config_gets_one_clear_line(tmp_path: Path, text: str, message: str) -> None:
    output = rejection(tmp_path, text)
    assert message in output
    assert "definitions" not in output and len(output) < 3000  # never the whole schema


@pytest.mark.parametrize("patch, message", [
    ({"vision": {"certification": {"tau": 1.5}}},
     "config is invalid: 1.5 is greater than or equal to the maximum of 1 (at vision.certification.tau)"),
    ({"vision": {"main_scorer": "rank"}}, "vision.main_scorer"),
    ({"vision": {"certification": {"p_del": math.nan}}}, "finite"),
    ({"language": {"settings": {"ioi": [{"tau": 0.7, "p_del": 0.6}], "ioii": [{"tau": 0.7, "p_del": 0.6}]}}}, "ioii"),
    ({"vision": {"scorers": ["relevance", "relevance"]}}, "scorers"),
    ({"vision": {"concepts": ["circle", "pentagon"]}}, "pentagon"),
    ({"vision": {"runtime": {"concept": "circle$(touch INJECTED)", "n": [10]}}}, "runtime"),
    ({"results_dir": "/"}, "results_dir"),
])
def test_bad_values_are_rejected_at_parse_time(patch: dict, message: str) -> None:
    """NaN, a typo'd task key, a duplicate scorer, an unknown class, '/' as results folder (as ``--config
    results_dir=/`` gives it) and a shell payload each stop the run before any job, with the key named
    (moved from tests/integration/test_workflow.py, where each was a ``snakemake -n``)."""
    with pytest.raises(ConfigError) as error:
        config_check.check(SMOKE, overrides=patch)
    assert message in str(error.value)
    assert not (ROOT / "INJECTED").exists()


def test_strict_reading_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("vision:\n  enabled: true\n   oops: [\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:3:\d+: mapping values are not allowed here"):
        check_config_files([bad])
    nested = tmp_path / "nested.yaml"
    nested.write_text("vision:\n  k_grid: [0.5]\n  k_grid: [0.25]\n")
    with pytest.raises(ConfigError, match=r"nested.yaml:3:3: duplicate key 'k_grid' \(first at line 2\)"):
        check_config_files([nested])
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump({"vision": {"k_grid": [0.5]}}))
    check_config_files([good, ROOT / "config.yaml", *sorted((ROOT / "configs").glob("*.yaml"))])


def test_the_shipped_configs_use_named_settings() -> None:
    for path in [ROOT / "config.yaml", *sorted((ROOT / "configs").glob("*.yaml"))]:
        check_before_schema(yaml.safe_load(path.read_text()), ["results_dir", "device", "vision", "language", "tables", "testbed",
                                                                "mlflow"])
