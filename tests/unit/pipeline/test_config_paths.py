"""A dry run with several missing data paths lists every one at once, each with its layout and where to obtain
it (issue 35, item 6c; README "Paper scale on a GPU").

The Snakefile runs :func:`certified_circuits.pipeline.config.check_config` when it parses the config, dry
runs included; its first check is :func:`~certified_circuits.pipeline.config.check_paths`. One real ``snakemake -n``
shows what the user sees: the message alone, no Snakemake frame (issue 44).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate

from certified_circuits.pipeline.config import check_config
from certified_circuits.pipeline.config_errors import ConfigError
from tests.helpers.workflow import override, snakemake
from tests.helpers.paths import ROOT


def load(name: str) -> dict:
    config = yaml.safe_load((ROOT / name).read_text())
    validate(config, str(ROOT / "config.schema.yaml"), set_default=True)
    return config


def section_exists(reference: str) -> bool:
    """``docs/<page>.md, "Heading"`` names a heading of that page."""
    page, heading = re.fullmatch(r'(docs/[\w.]+), "([^"]+)"', reference).groups()
    return f"\n## {heading}\n" in (ROOT / page).read_text()


def test_every_missing_path_of_the_paper_config_is_listed_at_once(tmp_path: Path) -> None:
    config = load("configs/paper.yaml")
    absent = tmp_path / "absent"
    imagenet = config["vision"]["imagenet"]
    imagenet.update(weights=str(absent / "resnet101.pth"), class_index=str(absent / "LOC_synset_mapping.txt"),
                    val_root=str(absent / "val"), ood_roots={"imagenet_a": str(absent / "imagenet-a"),
                                                            "imagenet_o": str(absent / "imagenet-o")})
    config["language"]["model_path"] = str(absent / "gpt2")
    with pytest.raises(ConfigError) as caught:
        check_config(copy.deepcopy(config))
    text = str(caught.value)
    lines = [line for line in text.splitlines() if line.startswith("  - ")]
    assert text.startswith("6 input path(s) of this config do not exist; nothing was run.")
    expected = {
        "vision.imagenet.class_index": "the class index: the class names in logit order, one a line",
        "vision.imagenet.val_root": "the image folder, layout ROOT/<class>/* (ImageNet val: ROOT/<wnid>/*.JPEG)",
        "vision.imagenet.weights": "the weights file: the model's state dict",
        "vision.imagenet.ood_roots.imagenet_a": "the imagenet_a folder, layout ROOT/<class>/*",
        "vision.imagenet.ood_roots.imagenet_o": "the imagenet_o folder, layout ROOT/<class>/*",
        "language.model_path": "the GPT-2 Small folder (model and tokenizer, written by save_pretrained)",
    }
    assert [line.split(" = ")[0][4:] for line in lines] == list(expected)
    for line, (key, what) in zip(lines, expected.items()):
        assert f"{key} = '{absent}" in line and what in line, line
        reference = line.split("Where to get it: ", 1)[1]
        assert reference == 'docs/paper_scale.md, "Where to get the weights and data"' and section_exists(reference)


def test_own_models_paths_point_to_their_docs(tmp_path: Path) -> None:
    config = load("configs/custom.yaml")
    config["vision"]["folders"].update(class_index=str(tmp_path / "classes.txt"), root=str(tmp_path / "train"),
                                       weights=str(tmp_path / "model.pth"), ood_roots={})
    config["language"].update(enabled=True, source="hf", model_path=str(tmp_path / "lm"), tasks=["mine"],
                              task_files={"mine": str(tmp_path / "mine.csv")})
    with pytest.raises(ConfigError) as caught:
        check_config(config)
    lines = [line for line in str(caught.value).splitlines() if line.startswith("  - ")]
    assert [line.split(" = ")[0][4:] for line in lines] == [
        "vision.folders.class_index", "vision.folders.root", "vision.folders.weights", "language.model_path",
        "language.task_files.mine"]
    references = [line.split("Where to get it: ", 1)[1] for line in lines]
    assert references[:3] == ['docs/own_models.md, "Certify your own vision model"'] * 3
    assert references[3:] == ['docs/own_models.md, "Certify your own language model"'] * 2
    assert all(section_exists(reference) for reference in references)
    assert "columns clean, corrupted, answer, distractor" in lines[4]


def test_present_paths_are_not_listed(tmp_path: Path) -> None:
    config = load("configs/paper.yaml")
    config["language"]["enabled"] = False
    index = tmp_path / "LOC_synset_mapping.txt"
    index.write_text("n01440764 tench\n")
    config["vision"]["imagenet"].update(class_index=str(index), weights=None, val_root=str(tmp_path / "val"),
                                        ood_roots={})
    with pytest.raises(ConfigError) as caught:
        check_config(config)
    assert str(caught.value).startswith("1 input path(s)") and "vision.imagenet.val_root" in str(caught.value)
    assert "class_index" not in str(caught.value)


@pytest.mark.slow  # one snakemake parse (about 5 s)
def test_a_dry_run_prints_only_the_message_and_fails(tmp_path: Path) -> None:
    """A real ``snakemake -n`` on the paper config with a missing model folder: stderr is the project's message
    (what is missing, its key, where to get it), nothing else; no "WorkflowError in file Snakefile, line ..." and
    no traceback line; exit status 2; no results folder created."""
    absent, results = tmp_path / "absent" / "gpt2", tmp_path / "results"
    layer = override(tmp_path, "my_paths", {"results_dir": str(results), "vision": {"enabled": False},
                                            "language": {"model_path": str(absent)}})
    done = snakemake("-n", "--cores", "1", "--configfile", ROOT / "configs" / "paper.yaml", layer, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        "1 input path(s) of this config do not exist; nothing was run. Put each in place (or fix the path in your "
        "config) and run again:",
        f"  - language.model_path = '{absent}': the GPT-2 Small folder (model and tokenizer, written by "
        'save_pretrained). Where to get it: docs/paper_scale.md, "Where to get the weights and data"']
    assert "WorkflowError" not in done.stdout and "Snakefile" not in done.stdout and not results.exists()
