"""Your own vision model through Snakemake: configs/custom.yaml on fixture trees (random weights, noise
images; tests/helpers/custom_fixtures.py), for three families beyond the paper's, with a plugin
scorer of each kind, and the errors a user meets before any job runs (in-process, through the check the Snakefile
calls at parse time; tests/integration/test_config_errors.py proves the Snakefile calls it before any job).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import h5py
import pandas as pd
import pytest
import yaml

from certified_circuits.pipeline.config_errors import ConfigError
from tests.helpers import config as config_check
from tests.helpers import custom_fixtures, workflow
from tests.helpers.paths import CUSTOM

pytestmark = pytest.mark.slow  # runs the workflow

#: model -> its first automatic component module and channel count (torchvision's architectures)
FAMILIES = {"convnext_tiny": ("features.1", 96), "efficientnet_b0": ("features.1", 16), "swin_t": ("features.1", 96)}
PLUGINS = ["relevance", "my_scorers:taylor", "my_scorers:median_activation"]
#: the classes the runs certify: two of the tree's three class folders (every job of the DAG is per class, so a third
#: certified class only repeated 9 of 34 jobs). fox has no blur folder, so an eval set lacking a certified class is
#: still run; cat, not certified, is the others' negatives on both eval sets and the head's third output. The random
#: model's full accuracy on id is at chance for dog and fox, so the model-at-chance warning is still raised.
CERTIFIED = ["dog", "fox"]


@pytest.fixture(scope="session")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return {model: custom_fixtures.build_custom_tree(tmp_path_factory.mktemp(model), model) for model in FAMILIES}


def snakemake(tree: dict, override: Path, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    # progress every 5 s (CC_PROGRESS_SECONDS): the runs' progress lines do not depend on how long the run takes
    env = workflow.environment(PYTHONPATH=tree["plugins_dir"], CC_PROGRESS_SECONDS="5")
    return workflow.snakemake("--cores", "2", "--configfile", CUSTOM, override, *args, env=env, timeout=timeout)


@pytest.mark.parametrize("model", sorted(FAMILIES))
def test_custom_run_certifies_every_class(trees, model, tmp_path):
    tree, results = trees[model], tmp_path / "results"
    scorers = PLUGINS if model == "convnext_tiny" else ["relevance"]
    override = custom_fixtures.custom_override(tree, results, tmp_path / "override.yaml", scorers=scorers,
                                               concepts=CERTIFIED)
    # the whole run for convnext_tiny; the other families run the attribution of one class through the workflow
    # (what depends on the family end to end: its automatic components and its scores), which keeps the suite in
    # CI's time. Their masked evaluation is tested per family in tests/unit/vision/test_families.py
    # (test_zero_ablation_applies_exactly_at_the_component_outputs), the rest of the run does not depend on it.
    target = results / "attributions" / "my_model" / "concept" / "dog.h5"
    done = snakemake(tree, override, *(() if model == "convnext_tiny" else ("--", str(target))))
    assert done.returncode == 0, (done.stdout + done.stderr)[-8000:]
    experiment = "my_model"
    classes = CERTIFIED

    # attributions: the family's automatic components, and the additive plugin's scores beside the built-ins
    first_module, width = FAMILIES[model]
    with h5py.File(target) as handle:
        names = [n.decode() for n in handle["components/name"][:]]
        assert names[0] == f"{first_module}.0" and names[width] != f"{first_module}.{width}"
        expected_scores = {"relevance", "activation", "rank"} | ({"taylor"} if model == "convnext_tiny" else set())
        assert set(handle["scores"]) == expected_scores
        assert handle["scores"]["relevance"].shape == (4, len(names))
    # every scorer of the config is certified and evaluated on both eval sets, for every class
    if model != "convnext_tiny":
        assert not (results / "sufficiency").exists()  # only the target's jobs ran
        return
    sufficiency = pd.read_csv(results / "tables" / experiment / "sufficiency.csv")
    assert set(sufficiency.concept) == set(classes)
    assert set(sufficiency.scorer) == {s.rsplit(":", 1)[-1] for s in scorers}
    assert set(sufficiency.eval_set) == {"id", "blur"}
    assert {"baseline", "majority", "certified", "full"} <= set(sufficiency.method)
    peaks = pd.read_csv(results / "tables" / experiment / "peaks_cacc_raw.csv")
    assert set(peaks.scorer) == set(sufficiency.scorer)
    for name in classes:
        assert (results / "figures" / experiment / f"features_{name}.png").stat().st_size > 0
    assert (results / "summary.md").is_file()
    assert {p.name for p in (results / "explorer" / experiment).glob("*.html")} == {f"{c}.html" for c in classes}
    # paper-only stages stay off; nothing of the embedded world ran
    assert not (results / "data").exists() and not (results / "tables" / experiment / "seed_stability.csv").exists()
    if model == "convnext_tiny":  # the black box ran through vision-discover, the additive one through votes
        logs = results / "logs"
        assert len(list((logs / "vision_discover").rglob("*.log"))) == len(classes)
        votes = next((results / "votes" / experiment / "concept" / "dog" / "median_activation").glob("*.h5"))
        with h5py.File(votes) as handle:
            assert handle.attrs["plugin"] == "my_scorers:median_activation" and handle.attrs["n_examples"] == 4
            assert handle["certification_counts"][:].max() <= 50  # n (tests/helpers/custom_fixtures.py)
        again = snakemake(tree, override, "-n")  # reruns only what changed: nothing
        assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr


def _break(tree: dict, tmp: Path, case: str) -> tuple[dict, dict]:
    """A copy of the tree and vision overrides with one thing wrong."""
    broken = dict(tree, root=str(tmp / "tree"))
    shutil.copytree(tree["root"], broken["root"])
    base = Path(broken["root"])
    broken.update(weights=str(base / "model.pth"), class_index=str(base / "classes.txt"),
                  data_root=str(base / "data" / "train"), ood_roots={"blur": str(base / "data" / "blur")})
    vision: dict = {}
    if case == "unknown_class":
        vision["concepts"] = ["cat", "wolf"]
    elif case == "folder_not_in_index":
        shutil.copytree(base / "data" / "train" / "cat", base / "data" / "blur" / "owl")
    elif case == "too_few_images":
        for image in sorted((base / "data" / "train" / "fox").iterdir())[1:]:
            image.unlink()
    elif case == "head":
        custom_fixtures.write_weights(base / "model.pth", tree["model"], 5)
    elif case == "layer":
        vision["folders_layers"] = ["features.1", "features.99"]
    elif case == "plugin_import":
        vision["scorers"] = ["relevance", "my_lab_scores:taylor"]
    elif case == "plugin_signature":
        vision["scorers"] = ["relevance", "numpy:stack"]
    return broken, vision


ERRORS = {
    "unknown_class": r"vision.concepts = \['wolf'\] is invalid: every class must be one of the class folders",
    "folder_not_in_index": r"class folders \['owl'\] under .*blur are not in the class index .*classes.txt",
    "too_few_images": r"vision.folders.concept_size = 4 is invalid: class folders under .* hold fewer images: \{'fox': 1\}",
    "head": r"the head classifier.2.weight has 5 outputs but the class index .*classes.txt lists 3 classes",
    "layer": r"convnext_tiny has no module \['features.99'\]",
    "plugin_import": r"cannot import my_lab_scores \(ModuleNotFoundError.*PYTHONPATH",
    "plugin_signature": r"stack\(.*\) has the wrong signature: an additive scorer is f\(activations, gradients, channel_dim\)",
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_a_broken_setup_stops_before_any_job(trees, case, tmp_path, monkeypatch):
    """Each broken setup is refused by the parse-time check, with the message (in-process: each was a ``snakemake
    -n`` of several seconds before)."""
    import re

    monkeypatch.syspath_prepend(trees["convnext_tiny"]["plugins_dir"])  # as the workflow's PYTHONPATH
    tree, vision = _break(trees["convnext_tiny"], tmp_path, case)
    results = tmp_path / "results"
    override = custom_fixtures.custom_override(tree, results, tmp_path / "override.yaml",
                                               **{k: v for k, v in vision.items() if k != "folders_layers"})
    if "folders_layers" in vision:
        config = yaml.safe_load(override.read_text())
        config["vision"]["folders"]["layers"] = vision["folders_layers"]
        override.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError) as error:
        config_check.check(CUSTOM, override)
    assert re.search(ERRORS[case], str(error.value)), str(error.value)
    assert not results.exists()
