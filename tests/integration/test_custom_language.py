"""Your own language model through Snakemake: configs/custom.yaml with a random-weight Llama (grouped-query
attention) and a Pythia (parallel attention) saved as local Hugging Face folders, task files in CSV and
JSONL, and the task-file errors a user meets before any job runs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from certified_circuits.pipeline.config_errors import ConfigError
from tests.helpers import config as config_check
from tests.helpers import workflow
from tests.helpers.family_fixtures import save_family, task_rows
from tests.helpers.paths import CUSTOM

pytestmark = pytest.mark.slow  # runs the workflow


def run(override: dict, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """``bin/workflow --cores 2 --configfile configs/custom.yaml OVERRIDE ARGS`` from a private checkout (the wrapper
    refuses to start beside another live run in its checkout; tests run in parallel)."""
    path = tmp_path / "override.yaml"
    path.write_text(yaml.safe_dump(override))
    checkout = workflow.private_checkout(tmp_path / "checkout")
    command = ["bin/workflow", "--cores", "2", "--configfile", str(CUSTOM), str(path), *args]
    return subprocess.run(command, cwd=checkout, env=workflow.environment(), capture_output=True, text=True, timeout=900)


def language_override(results: Path, model: Path, files: dict, **language) -> dict:
    return {"results_dir": str(results), "vision": {"enabled": False},
            "language": {"enabled": True, "model_path": str(model), "task_files": {k: str(v) for k, v in files.items()},
                         "k_grid": [0.05, 0.1, 0.2, 0.4, 0.7, 1.0], **language}}


@pytest.mark.parametrize("family,level", [("llama", "edge"), ("pythia", "node")])
def test_custom_language_run_writes_certified_graphs(tmp_path, family, level) -> None:
    model = save_family(family, tmp_path / family)
    rows = task_rows(40)
    if family == "llama":                       # CSV, no split column: the seeded 60/20/20 split
        task = tmp_path / "my_task.csv"
        pd.DataFrame(rows).to_csv(task, index=False)
    else:                                       # JSONL with a split column, ood_test included
        for i, row in enumerate(rows):          # per 8 rows: 5 train, 1 validation, 1 id_test, 1 ood_test
            row["split"] = (["train"] * 5 + ["validation", "id_test", "ood_test"])[i % 8]
        task = tmp_path / "my_task.jsonl"
        task.write_text("".join(json.dumps(r) + "\n" for r in rows))
    results = tmp_path / "results"
    done = run(language_override(results, model, {"my_task": task}, level=level), tmp_path)
    assert done.returncode == 0, (done.stdout + done.stderr)[-8000:]
    # every split file exists; the CSV split is 24/8/8, the JSONL one follows its column
    counts = {s: sum(1 for _ in open(results / "language" / "tasks" / "my_task" / f"{s}.jsonl"))
              for s in ("train", "validation", "id_test", "ood_test")}
    assert counts == ({"train": 24, "validation": 8, "id_test": 8, "ood_test": 0} if family == "llama"
                      else {"train": 25, "validation": 5, "id_test": 5, "ood_test": 5})
    sufficiency = pd.read_csv(results / "tables" / "my_lm" / "sufficiency.csv")
    assert set(sufficiency.eval_set) == ({"id_test", "validation"} if family == "llama"
                                         else {"id_test", "ood_test", "validation"})
    assert {"baseline", "majority", "certified", "full"} <= set(sufficiency.method)
    # Graph JSON: every method at its selected K, the certificate's sidecar and the scores-only file
    graphs = results / "graphs" / "my_lm" / "my_task"
    names = sorted(p.name for p in graphs.iterdir())
    assert "scores.json" in names and any(n.startswith("certified_K") and n.endswith(".decisions.json") for n in names)
    circuit = json.loads(next(graphs.glob("certified_K*[0-9].json")).read_text())
    assert set(circuit) == {"cfg", "nodes", "edges"}
    assert circuit["cfg"]["n_layers"] == 2 and circuit["cfg"]["parallel_attn_mlp"] == (family == "pythia")
    side = json.loads(next(graphs.glob("*.decisions.json")).read_text())
    if level == "edge":
        assert len(circuit["edges"]) == (110 if family == "llama" else 102)
        in_graph = {e for e, v in circuit["edges"].items() if v["in_graph"]}
        assert in_graph == set(side["in"])        # certified-in edges only; abstain and out are not in the graph


def test_task_file_errors_stop_before_any_job(tmp_path) -> None:
    """A two-token answer in a task file is refused at parse time with its file and line (in-process: the check the
    Snakefile calls)."""
    model = save_family("llama", tmp_path / "llama")
    rows = task_rows(10)
    rows[3]["answer"] = " Mary Anna"            # two tokens
    task = tmp_path / "bad.csv"
    pd.DataFrame(rows).to_csv(task, index=False)
    results = tmp_path / "results"
    with pytest.raises(ConfigError) as error:
        config_check.check(CUSTOM, overrides=language_override(results, model, {"my_task": task}))
    err = str(error.value)
    assert "bad.csv:5" in err and "Mary Anna" in err and "not one token" in err
    assert not results.exists()
