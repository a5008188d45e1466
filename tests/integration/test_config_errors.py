"""Config mistakes a careless user makes stop the workflow at parse time with one clear line that names
the key (and the file and line where that matters), before any job (issue 21)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from certified_circuits.pipeline.config import ConfigError, check_before_schema, check_config_files

pytestmark = pytest.mark.slow  # runs the workflow or a real process tree

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SMOKE = ROOT / "configs" / "smoke.yaml"


def dry_run(tmp_path: Path, text: str) -> str:
    """``snakemake -n`` on the smoke config plus an override file holding ``text``; returns its output."""
    override = tmp_path / "override.yaml"
    override.write_text(text)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run([str(BIN / "snakemake"), "-n", "--cores", "1", "--configfile", str(SMOKE), str(override),
                           "--config", f"results_dir={tmp_path / 'results'}"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode != 0, "the config should have been rejected"
    assert not (tmp_path / "results").exists()
    return done.stdout + done.stderr


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
    output = dry_run(tmp_path, text)
    assert message in output
    assert "definitions" not in output and len(output) < 3000  # never the whole schema


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
