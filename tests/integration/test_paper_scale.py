"""The paper path (configs/paper.yaml) through Snakemake on a fixture tree, on the CPU.

The tree (tests/helpers/paper_fixtures.py) has the real layouts and formats: ImageNet val and ImageNet-A, -O,
-C (defocus blur, severity 2) and OOD-CV as wnid folders, a 1,000-line LOC_synset_mapping.txt, a
random-weight ResNet-50 weights file and a random-weight GPT-2 saved with save_pretrained beside a
GPT-2-style byte-level BPE tokenizer. configs/paper_fixture.yaml is the second --configfile: it points
the paper config at the tree and reduces sizes. Everything else is configs/paper.yaml and the schema's
defaults, so nothing of the embedded default (config.yaml) may appear.

- a dry run checks the DAG: every paper stage, no embedded-only stage, every vision class a wnid
  drawn from the val folders, every model job with --device;
- a real run (--cores 2) must produce Tables 1 and 3 (peaks), IoU, seed stability, the radius
  tables, the runtime table and the language rows (its cost, in CPU seconds against a budget of
  3 minutes of 2 cores, is measured by benchmarks/bench_paper_fixture_run.py).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.helpers import paper_fixtures, workflow
from tests.helpers.paths import PAPER
from tests.helpers.workflow import dry_run_jobs

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("paper")]  # runs the workflow; one worker builds the tree

VX = "resnet50_imagenet"
LX = "gpt2_small"
#: every stage the paper config runs (vision_attribute_sized only when a radius-sweep |D| differs
#: from concept_size, which configs/paper.yaml does not do)
PAPER_STAGES = {"vision_attribute", "vision_evaluate", "votes", "certify", "vision_tables", "vision_iou",
                "vision_seed_stability", "vision_radius_sweep", "vision_features", "vision_runtime",
                "language_tasks", "language_attribute", "language_evaluate", "language_tables",
                "theory_figures", "summary", "all"}
EMBEDDED_STAGES = {"vision_world", "vision_world_large", "vision_train", "vision_filter_ood", "vision_spurious",
                   "language_train"}
VISION_MODEL_STAGES = {"vision_attribute", "vision_attribute_sized", "vision_evaluate", "vision_runtime"}
LANGUAGE_MODEL_STAGES = {"language_attribute", "language_evaluate"}
WNID = re.compile(r"n\d{8}")


@pytest.fixture(scope="session")
def paper_tree(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return paper_fixtures.build_paper_tree(tmp_path_factory.mktemp("paper_tree"))


def snakemake(override: Path, *args: str, timeout: int = 900, env: dict | None = None) -> subprocess.CompletedProcess:
    """``snakemake --cores 2 --configfile configs/paper.yaml OVERRIDE ARGS``."""
    return workflow.snakemake("--cores", "2", "--configfile", PAPER, override, *args,
                              env=workflow.environment(**(env or {})), timeout=timeout)


def test_paper_dag_on_fixture_tree(paper_tree: dict, tmp_path: Path) -> None:
    override = paper_fixtures.fixture_override(paper_tree, tmp_path / "results", tmp_path / "paper_fixture.yaml")
    done = snakemake(override, "-n", "--printshellcmds", timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    jobs = dry_run_jobs(done.stdout)
    rules = {job["rule"] for job in jobs}

    assert PAPER_STAGES <= rules, f"paper stages missing from the DAG: {sorted(PAPER_STAGES - rules)}"
    assert not rules & EMBEDDED_STAGES, f"embedded-only stages in a paper run: {sorted(rules & EMBEDDED_STAGES)}"

    # every vision class is a wnid, and exactly the classes drawn from the val folders
    vision_jobs = [j for j in jobs if j["rule"].startswith("vision_") or j["wildcards"].get("experiment") == VX]
    concepts = {j["wildcards"]["concept"] for j in vision_jobs if "concept" in j["wildcards"]}
    assert concepts and all(WNID.fullmatch(c) for c in concepts), f"vision concepts that are not wnids: {sorted(concepts)}"
    assert concepts == set(paper_tree["certified_wnids"])
    # paper.yaml serves 50 classes per attribution job: the fixture's classes share one process
    attribute = [j for j in jobs if j["rule"] == "vision_attribute"]
    assert [j["group_rule"] for j in attribute] == ["vision_attribute_group0"]
    assert "certified-circuits batch vision-attribute " in attribute[0]["shell"]
    assert sorted(re.findall(r"--concept (\S+)", attribute[0]["shell"])) == sorted(paper_tree["certified_wnids"])
    assert attribute[0]["shell"].count(" :: vision-attribute ") == len(paper_tree["certified_wnids"]) - 1
    assert attribute[0]["shell"].count("--device ") == len(paper_tree["certified_wnids"])
    runtime = next(j for j in jobs if j["rule"] == "vision_runtime")
    assert WNID.fullmatch(re.search(r"--concept (\S+)", runtime["shell"])[1])
    assert set(re.findall(r"features_(\w+)\.png", done.stdout)) == set(paper_tree["certified_wnids"])
    language = {j["wildcards"]["concept"] for j in jobs if j["rule"] in LANGUAGE_MODEL_STAGES}
    assert language == {"ioi", "greater_than"}

    # every model job runs the paper models on the configured device
    device = yaml.safe_load(override.read_text()).get("device") or yaml.safe_load(PAPER.read_text())["device"]
    model_jobs = [j for j in jobs if j["rule"] in VISION_MODEL_STAGES | LANGUAGE_MODEL_STAGES]
    assert {j["rule"] for j in model_jobs} >= {"vision_attribute", "vision_evaluate", "vision_runtime",
                                                "language_attribute", "language_evaluate"}
    for job in model_jobs:
        assert re.search(rf"--device {device}(\s|$)", job["shell"]), f"{job['rule']} {job['wildcards']} lacks --device: {job['shell']}"
        if job["rule"] in VISION_MODEL_STAGES:
            assert "--model resnet50 " in job["shell"] and f"--weights {paper_tree['weights']}" in job["shell"]
            assert f"--class-index {paper_tree['class_index']}" in job["shell"]
        else:
            assert f"--model gpt2 --model-path {paper_tree['model_path']}" in job["shell"]
    tasks = [j for j in jobs if j["rule"] == "language_tasks"]
    assert tasks and all(f"--gpt2-tokenizer {paper_tree['model_path']}" in j["shell"] for j in tasks)
    # nothing of the embedded default leaks in
    assert "--model world" not in done.stdout and "--model embedded" not in done.stdout
    assert not re.search(r"\b(circle|square|star)\b", done.stdout)


def test_home_relative_paths_reach_jobs_expanded(paper_tree: dict, tmp_path: Path) -> None:
    """configs/paper.yaml writes the weights as ~/.cache/...: every path a job gets must be one it can open
    (the config check expands ~, and so must the commands, which quote every path)."""
    override = paper_fixtures.fixture_override(paper_tree, tmp_path / "results", tmp_path / "paper_fixture.yaml")
    config = yaml.safe_load(override.read_text())
    root = paper_tree["root"]
    config["vision"]["imagenet"]["weights"] = "~/resnet50.pth"
    config["vision"]["imagenet"]["val_root"] = "~/val"
    config["language"]["model_path"] = "~/gpt2"
    override.write_text(yaml.safe_dump(config, sort_keys=False))
    done = snakemake(override, "-n", "--printshellcmds", timeout=300, env={"HOME": root})
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    for job in dry_run_jobs(done.stdout):
        for flag in ("--weights", "--data", "--model-path", "--gpt2-tokenizer"):
            for value in re.findall(rf"{flag} (\S+)", job["shell"]):
                assert "~" not in value, f"{job['rule']}: {flag} {value} reaches the job unexpanded"


def test_no_rediscovered_class_still_gives_a_runnable_iou_job(paper_tree: dict, tmp_path: Path) -> None:
    """When no class has rediscovery_min_images images in any OOD set (ImageNet-O holds ~10 per class),
    the IoU stage must either be left out or be a command its CLI accepts."""
    import shlex

    from certified_circuits.cli.main import build_parser

    results = tmp_path / "results"
    override = paper_fixtures.fixture_override(paper_tree, results, tmp_path / "paper_fixture.yaml")
    config = yaml.safe_load(override.read_text())
    config["vision"]["rediscovery_min_images"] = 3  # the tree holds at most 2 images of a class per OOD set
    override.write_text(yaml.safe_dump(config, sort_keys=False))
    done = snakemake(override, "-n", "--printshellcmds", timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    for job in (j for j in dry_run_jobs(done.stdout) if j["rule"] == "vision_iou"):
        argv = shlex.split(job["shell"].split(" 2> ")[0])
        argv = argv[argv.index("certified-circuits") + 1:]
        operating_points = Path(argv[argv.index("--operating-points") + 1])
        operating_points.parent.mkdir(parents=True, exist_ok=True)
        operating_points.write_text("")  # written by vision_tables in a real run
        try:
            build_parser().parse_args(argv)
        except SystemExit:
            pytest.fail(f"vision_iou with no re-discovered class is a command report-iou rejects: {job['shell']}")


def test_paper_run_on_fixture_tree(paper_tree: dict, tmp_path: Path) -> None:
    results = tmp_path / "results"
    override = paper_fixtures.fixture_override(paper_tree, results, tmp_path / "paper_fixture.yaml")
    done = snakemake(override, timeout=900)  # its cost: benchmarks/bench_paper_fixture_run.py
    assert done.returncode == 0, (done.stdout + done.stderr)[-8000:]

    vt, lt = results / "tables" / VX, results / "tables" / LX
    wnids = set(paper_tree["certified_wnids"])
    scorers = {"relevance", "activation", "rank"}
    eval_sets = {"id", "imagenet_a", "imagenet_o", "imagenet_c", "ood_cv"}

    # Table 1 (vision rows) and Table 3 (every scorer), cACC and balanced accuracy
    for name in ("peaks_cacc_raw.csv", "peaks_balanced_raw.csv"):
        peaks = pd.read_csv(vt / name)
        assert set(peaks.scorer) == scorers and set(peaks.eval_set) == eval_sets, name
        assert peaks[["full", "baseline", "majority", "certified"]].notna().all().all(), name
    sufficiency = pd.read_csv(vt / "sufficiency.csv")
    assert set(sufficiency.concept) == wnids
    # Fig. IoU: every OOD set re-discovers the certified class it holds >= 2 images of
    iou = pd.read_csv(vt / "iou.csv")
    assert set(iou.concept) <= wnids and set(iou.eval_set) == eval_sets - {"id"}
    assert iou.iou.between(0, 1).all()
    # seed stability: the two certification seeds of both classes
    seeds = pd.read_csv(vt / "seed_stability.csv")
    assert set(seeds.concept) == wnids and seeds.iou.between(0, 1).all()
    # radius tables: one row per p_del, radii 1 and 3 at tau 0.95
    for name in ("radius_sweep_fixed_k.csv", "radius_sweep_best_k.csv"):
        radius = pd.read_csv(vt / name)
        assert sorted(radius.radius) == [1, 3] and sorted(radius.p_del) == [0.6, 0.82], name
    assert set(pd.read_csv(vt / "runtime.csv").paradigm) >= {"baseline", "majority", "certified"}
    for wnid in wnids:
        assert (results / "figures" / VX / f"features_{wnid}.png").stat().st_size > 0
    # Table 1 (language rows): the best setting of each task on every eval set
    lpeaks = pd.read_csv(lt / "peaks_cacc_raw.csv")
    assert set(lpeaks.concept) == {"ioi", "greater_than"}
    assert set(lpeaks.eval_set) >= {"id_test", "ood_test"}
    # with |D| = 40 prompts the paper's language setting certifies edges in (vision's |D_c| = 2 cannot)
    from certified_circuits.storage.store import read_certificates

    for task in ("ioi", "greater_than"):
        (path,) = (results / "certificates" / LX / "train" / task).rglob("*.h5")
        assert (read_certificates(path).decision == 1).any(), f"{task}: no edge certified in"
    summary = (results / "summary.md").read_text()
    assert len(summary.splitlines()) <= 120 and "### Sufficiency" in summary and "## Warnings" in summary
