"""Issue 53, ``bin/model-seeds``: an output folder whose name holds `` #``, quotes or a backslash reaches the workflow
unchanged (each seed's overlay is JSON, which YAML reads the same); an output folder that holds another run's files
is refused unless ``MODEL_SEEDS_REUSE=1`` (the same command resumes); an empty or list-valued config overlay is named
before any job. Each refusal exits 2 and names the file or folder and the fix.

The script runs from a copy of the checkout's ``bin/`` with a fake ``bin/workflow`` (it reads the seed's overlay as
Snakemake does, JSON first, and writes one table where that config says) and a fake ``bin/certified-circuits`` (it
logs each report's arguments; ``check-config`` runs the real one), so no workflow runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.paths import ROOT

VENV = ROOT / ".venv"

FAKE_WORKFLOW = """#!/usr/bin/env bash
set -euo pipefail
printf '%s\\n' "$*" >> "$FAKE_LOG"
overlay=${@: -1}
"$VENV/bin/python" - "$overlay" <<'PY'
import json, pathlib, sys
import yaml
text = open(sys.argv[1]).read()
try:  # as Snakemake's load_configfile: JSON first, then YAML
    config = json.loads(text)
except ValueError:
    config = yaml.safe_load(text)
tables = pathlib.Path(config["results_dir"]) / "tables" / "world"
tables.mkdir(parents=True, exist_ok=True)
(tables / "peaks_cacc_raw.csv").write_text("seed\\n%d\\n" % config["vision"]["train"]["seed"])
PY
"""

FAKE_CLI = """#!/usr/bin/env bash
set -euo pipefail
if [ "$1" = check-config ]; then exec "$REAL_CLI" "$@"; fi
printf '%s\\n' "$*" >> "$FAKE_LOG"
"""


@pytest.fixture()
def checkout(tmp_path: Path) -> Path:
    """A copy of bin/model-seeds beside fake workflow and CLI scripts, with the checkout's config.yaml."""
    repo = tmp_path / "repo"
    (repo / "bin").mkdir(parents=True)
    shutil.copy(ROOT / "bin" / "model-seeds", repo / "bin" / "model-seeds")
    for name, text in (("workflow", FAKE_WORKFLOW), ("certified-circuits", FAKE_CLI)):
        (repo / "bin" / name).write_text(text)
        (repo / "bin" / name).chmod(0o755)
    shutil.copy(ROOT / "config.yaml", repo / "config.yaml")
    return repo


def _run(repo: Path, root: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "MODEL_SEEDS_DIR": str(root), "VENV": str(VENV), "FAKE_LOG": str(repo / "log"),
                   "REAL_CLI": str(ROOT / "bin" / "certified-circuits"), **env}
    if "MODEL_SEEDS_REUSE" not in env:
        environment.pop("MODEL_SEEDS_REUSE", None)
    return subprocess.run(["bash", str(repo / "bin" / "model-seeds"), *args], env=environment, capture_output=True,
                          text=True, timeout=120)


def _log(repo: Path) -> list[str]:
    path = repo / "log"
    return path.read_text().splitlines() if path.is_file() else []


# ------------------------------------------------------------------------------ a folder name YAML would cut


@pytest.mark.parametrize("name", ["runs #1", 'runs "quoted" \\ back: slash', "runs: {a}, [b] & *c"])
def test_an_output_folder_with_yaml_special_characters_reaches_the_workflow_unchanged(checkout: Path, tmp_path: Path,
                                                                                      name: str) -> None:
    root = tmp_path / name
    done = _run(checkout, root, "config.yaml", "0", "1")
    assert done.returncode == 0, done.stderr
    for seed in (0, 1):
        overlay = root / f"s{seed}.json"
        # the default compiles its vision model by hand: each model seed draws its own marked world too
        assert json.loads(overlay.read_text()) == {"results_dir": f"{root}/s{seed}",
                                                   "vision": {"train": {"seed": seed}, "world": {"seed": seed}},
                                                   "language": {"train": {"seed": seed}}}
        import yaml

        assert yaml.safe_load(overlay.read_text())["results_dir"] == f"{root}/s{seed}"  # read as YAML: the same
        assert (root / f"s{seed}" / "tables" / "world" / "peaks_cacc_raw.csv").read_text() == f"seed\n{seed}\n"
    log = _log(checkout)
    assert log[0].endswith(f"--configfile config.yaml {root}/s0.json") and log[1].endswith(f"{root}/s1.json")
    assert log[2] == (f"report-model-seeds --run 0 {root}/s0/tables/world/peaks_cacc_raw.csv --run 1 "
                      f"{root}/s1/tables/world/peaks_cacc_raw.csv --name world_peaks_cacc --out-dir {root}/tables")
    assert len(log) == 3


def test_an_output_folder_with_a_newline_is_refused(checkout: Path, tmp_path: Path) -> None:
    done = _run(checkout, tmp_path / "a\nb", "config.yaml", "0")
    assert done.returncode == 2 and "MODEL_SEEDS_DIR holds a control character (a newline or tab)" in done.stderr
    assert _log(checkout) == [] and not (tmp_path / "a\nb").exists()


# ------------------------------------------------------------------------------ another run's folder


def test_the_same_command_resumes_and_another_runs_folder_is_refused_unless_reused(checkout: Path,
                                                                                   tmp_path: Path) -> None:
    root = tmp_path / "runs"
    assert _run(checkout, root, "config.yaml", "0", "1").returncode == 0
    assert (root / "model-seeds.record").read_text().endswith("\nseeds 0 1\n")
    assert _run(checkout, root, "config.yaml", "0", "1").returncode == 0  # the same run again: resumed
    calls = len(_log(checkout))
    assert calls == 6
    done = _run(checkout, root, "config.yaml", "0", "2")  # other seeds
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert (f"bin/model-seeds: output folder {root} (MODEL_SEEDS_DIR): it holds another run's files (its "
            "model-seeds.record names other config contents or other seeds than config.yaml and seeds 0 2); its old "
            "tables would be mixed into this run's cross-seed tables: set MODEL_SEEDS_DIR to a new folder, delete "
            f"{root}, or set MODEL_SEEDS_REUSE=1 to reuse it") in done.stderr
    overlay = checkout / "small.yaml"
    overlay.write_text("vision: {enabled: false}\n")
    done = _run(checkout, root, "config.yaml", str(overlay), "0", "1")  # another config
    assert done.returncode == 2 and "it holds another run's files" in done.stderr
    assert len(_log(checkout)) == calls  # no job was started by a refused run
    done = _run(checkout, root, "config.yaml", "0", "2", MODEL_SEEDS_REUSE="1")
    assert done.returncode == 0, done.stderr
    assert (root / "model-seeds.record").read_text().endswith("\nseeds 0 2\n")
    assert _log(checkout)[-1].startswith("report-model-seeds --run 0 ") and " --run 2 " in _log(checkout)[-1]


def test_a_folder_of_files_without_a_record_is_refused(checkout: Path, tmp_path: Path) -> None:
    root = tmp_path / "runs"
    (root / "tables").mkdir(parents=True)
    (root / "tables" / "world_peaks_cacc_model_seeds.csv").write_text("old\n")
    done = _run(checkout, root, "config.yaml", "0")
    assert done.returncode == 2
    assert (f"output folder {root} (MODEL_SEEDS_DIR): it holds files of a run without a record (an older run, or "
            "files put there by hand)") in done.stderr and "MODEL_SEEDS_REUSE=1" in done.stderr
    assert _log(checkout) == [] and not (root / "model-seeds.record").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _run(checkout, empty, "config.yaml", "0").returncode == 0  # an empty folder holds no run


def test_a_reuse_value_other_than_0_or_1_is_refused(checkout: Path, tmp_path: Path) -> None:
    done = _run(checkout, tmp_path / "runs", "config.yaml", "0", MODEL_SEEDS_REUSE="yes")
    assert done.returncode == 2 and "MODEL_SEEDS_REUSE=yes is not 0 or 1" in done.stderr
    assert not (tmp_path / "runs").exists()


# ------------------------------------------------------------------------------ overlays that are not mappings


@pytest.mark.parametrize("text, what", [
    ("", "empty"),
    ("# only a comment\n", "empty"),
    ("{}\n", "empty"),
    ("- vision\n- language\n", "a YAML list, not a mapping"),
    ("results\n", "a YAML str, not a mapping"),
])
def test_an_overlay_that_is_empty_or_not_a_mapping_is_named_before_any_job(checkout: Path, tmp_path: Path, text: str,
                                                                           what: str) -> None:
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(text)
    done = _run(checkout, tmp_path / "runs", "config.yaml", str(overlay), "0")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert (f"bin/model-seeds: config {overlay} is {what}: a config file (or overlay) maps config keys to values "
            "(vision: ..., language: ...); write its keys, or leave the file out") in done.stderr
    assert _log(checkout) == [] and not (tmp_path / "runs").exists()


def test_an_overlay_with_a_yaml_error_is_named_with_its_line(checkout: Path, tmp_path: Path) -> None:
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("vision:\n  enabled: false\n  enabled: true\n")
    done = _run(checkout, tmp_path / "runs", "config.yaml", str(overlay), "0")
    assert done.returncode == 2 and f"{overlay}:3:3: duplicate key 'enabled'" in done.stderr
    assert _log(checkout) == [] and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("text, key, shown", [
    ("vision: 5\n", "vision", "5 (a YAML int)"),
    ("vision:\n  train: [1]\n", "vision.train", "[1] (a YAML list)"),
    ("vision:\n  world: seed\n", "vision.world", "'seed' (a YAML str)"),
    ("language: true\n", "language", "True (a YAML bool)"),
    ("language:\n  train: 3\n", "language.train", "3 (a YAML int)"),
])  # fmt: skip
def test_a_section_that_is_not_a_mapping_is_named_and_leaves_nothing_behind(checkout: Path, tmp_path: Path,
                                                                            text: str, key: str, shown: str) -> None:
    """Issue 61: ``vision: 5`` raised AttributeError after the run's record was written, so the corrected command
    was refused as another run's files."""
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(text)
    root = tmp_path / "runs"
    done = _run(checkout, root, "config.yaml", str(overlay), "0")
    assert done.returncode == 2 and "Traceback" not in done.stderr and "Error" not in done.stderr
    assert f"bin/model-seeds: config {overlay}: key {key} is {shown}, not a mapping" in done.stderr
    assert _log(checkout) == [] and not root.exists()
    overlay.write_text("vision:\n  train: {compiled: true}\n")  # the corrected command runs
    assert _run(checkout, root, "config.yaml", str(overlay), "0").returncode == 0


def test_a_folder_left_by_a_refused_workflow_does_not_block_the_corrected_command(checkout: Path,
                                                                                  tmp_path: Path) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    (root / "model-seeds.record").write_text("configs 0123\nseeds 0\n")  # another config's record, no results
    (root / "s0.json").write_text("{}\n")
    assert _run(checkout, root, "config.yaml", "0").returncode == 0
    other = tmp_path / "other"
    other.mkdir()
    (other / "model-seeds.record").write_text("configs 0123\nseeds 0\n")
    (other / "notes.json").write_text("{}\n")  # anything else is another run's file
    done = _run(checkout, other, "config.yaml", "0")
    assert done.returncode == 2 and "it holds another run's files" in done.stderr


# ------------------------------------------------------------------------------ the hypotheses across seeds

TESTBED_TABLES = """results=$("$VENV/bin/python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["results_dir"])' \\
    "$overlay")
mkdir -p "$results/tables/world/testbed" "$results/tables/tiny_gpt2/testbed"
touch "$results/tables/world/testbed/truth_size.csv" "$results/tables/tiny_gpt2/testbed/recovery.csv"
"""


def test_the_hypotheses_read_each_seeds_testbed_folder_where_it_holds_truth_size(checkout: Path,
                                                                                tmp_path: Path) -> None:
    (checkout / "bin" / "workflow").write_text(FAKE_WORKFLOW + TESTBED_TABLES)
    root = tmp_path / "runs #1"
    done = _run(checkout, root, "config.yaml", "0", "1")
    assert done.returncode == 0, done.stderr
    hypotheses = [line for line in _log(checkout) if line.startswith("report-hypotheses")]
    # tiny_gpt2's testbed has no truth_size.csv (no stability jobs): no hypotheses for it
    assert hypotheses == [f"report-hypotheses --run 0 {root}/s0/tables/world/testbed --run 1 "
                          f"{root}/s1/tables/world/testbed --out-dir {root}/tables/world_hypotheses"]


def test_a_trained_vision_model_keeps_the_world_of_the_config(checkout: Path, tmp_path: Path) -> None:
    """With ``vision.train.compiled: null`` (an overlay after config.yaml) the seed trains the model and the world
    stays the config's: the overlay sets no world seed."""
    overlay = tmp_path / "trained.yaml"
    overlay.write_text("vision:\n  train:\n    compiled: null\n")
    root = tmp_path / "runs"
    done = _run(checkout, root, "config.yaml", str(overlay), "3")
    assert done.returncode == 0, done.stderr
    assert json.loads((root / "s3.json").read_text())["vision"] == {"train": {"seed": 3}}
