"""The input paths of a workflow config: ``~`` expanded once (:func:`expand_user_paths`), every file and folder the
run needs before any job listed with its layout and where to obtain it (:func:`configured_paths`), and the missing
ones refused at once (:func:`check_paths`). :func:`vision_source` is the one reading of a torchvision source's
block (``vision.folders``, or the ``vision.imagenet`` preset), for these checks, the domain checks and the rules.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from certified_circuits.pipeline.config_errors import ConfigError


def vision_source(vision: dict[str, Any]) -> dict[str, Any]:
    """The model and data of a torchvision source as one mapping, the keys of ``vision.folders``: the
    ``imagenet`` block is the preset of the ``folders`` source (its val folders are the root, its model
    an architecture of the paper with automatic layers). The one place the rules read them from."""
    if vision["source"] == "imagenet":
        imagenet = vision["imagenet"]
        return {"model": imagenet["model"], "weights": imagenet.get("weights"), "class_index": imagenet["class_index"],
                "root": imagenet["val_root"], "ood_roots": imagenet["ood_roots"], "concept_size": imagenet["concept_size"],
                "n_classes": imagenet["n_classes"], "class_seed": imagenet["class_seed"], "layers": "auto"}
    return vision["folders"]


#: where each kind of data is obtained, and in which layout (the docs section of each missing path's message)
PAPER_DATA = 'docs/paper_scale.md, "Where to get the weights and data"'
OWN_VISION = 'docs/own_models.md, "Certify your own vision model"'
OWN_LANGUAGE = 'docs/own_models.md, "Certify your own language model"'


@dataclass(frozen=True)
class ConfiguredPath:
    """A file or folder a config names and the run needs before any job.

    Attributes:
        key: the config key (``"vision.imagenet.val_root"``).
        value: the path as configured (``~`` expanded).
        what: what it is, with its expected layout.
        docs: the docs section that says where to obtain it.
    """

    key: str
    value: Any
    what: str
    docs: str

    def line(self) -> str:
        return f"{self.key} = {self.value!r}: {self.what}. Where to get it: {self.docs}"


def configured_paths(config: dict[str, Any]) -> list[ConfiguredPath]:
    """Every input path of a (schema-validated) config that must exist before any job: the class index, image
    folders and weights of a folders or imagenet source, the GPT-2 or Hugging Face model folder and the task files.
    The one list the dry run's missing-path check reads (:func:`check_paths`).

    Args:
        config: the workflow config (schema defaults filled, ``~`` expanded).

    Returns:
        One :class:`ConfiguredPath` per path, vision first, in config order.
    """
    paths: list[ConfiguredPath] = []
    vision = config.get("vision") or {}
    if vision.get("enabled") and vision.get("source") in ("folders", "imagenet"):
        name = vision["source"]
        source, docs = vision_source(vision), (PAPER_DATA if name == "imagenet" else OWN_VISION)
        root_key = "val_root" if name == "imagenet" else "root"
        paths.append(ConfiguredPath(f"vision.{name}.class_index", source["class_index"],
                                    "the class index: the class names in logit order, one a line "
                                    "(ImageNet: LOC_synset_mapping.txt from the devkit)", docs))
        paths.append(ConfiguredPath(f"vision.{name}.{root_key}", source["root"],
                                    "the image folder, layout ROOT/<class>/* (ImageNet val: ROOT/<wnid>/*.JPEG)", docs))
        if source.get("weights"):
            paths.append(ConfiguredPath(f"vision.{name}.weights", source["weights"],
                                        "the weights file: the model's state dict, saved with "
                                        "torch.save(model.state_dict(), PATH)", docs))
        for set_name, root in (source.get("ood_roots") or {}).items():
            paths.append(ConfiguredPath(f"vision.{name}.ood_roots.{set_name}", root,
                                        f"the {set_name} folder, layout ROOT/<class>/*", docs))
    language = config.get("language") or {}
    if language.get("enabled") and language.get("source") == "gpt2":
        paths.append(ConfiguredPath("language.model_path", language.get("model_path"),
                                    "the GPT-2 Small folder (model and tokenizer, written by save_pretrained)", PAPER_DATA))
    if language.get("enabled") and language.get("source") == "hf":
        paths.append(ConfiguredPath("language.model_path", language.get("model_path"),
                                    "the model folder (config.json, weights and tokenizer, written by save_pretrained)",
                                    OWN_LANGUAGE))
        files = language.get("task_files") or {}
        for task in language.get("tasks") or list(files):
            if task in files:
                paths.append(ConfiguredPath(f"language.task_files.{task}", files[task],
                                            "the task file: a CSV or JSONL with columns clean, corrupted, answer, "
                                            "distractor[, split]", OWN_LANGUAGE))
    return paths


def check_paths(config: dict[str, Any]) -> None:
    """Every missing input path of a config at once (a dry run lists them all, not the first), each with its
    layout and where to obtain it.

    Args:
        config: the workflow config (schema defaults filled, ``~`` expanded).

    Raises:
        ConfigError: listing each missing path (:func:`configured_paths`).
    """
    missing = [p for p in configured_paths(config) if not p.value or not Path(os.path.expanduser(str(p.value))).exists()]
    if missing:
        lines = "\n".join(f"  - {p.line()}" for p in missing)
        raise ConfigError(f"{len(missing)} input path(s) of this config do not exist; nothing was run. Put each in "
                          f"place (or fix the path in your config) and run again:\n{lines}")


def expand_user_paths(config: dict[str, Any]) -> None:
    """``~`` in every configured path becomes the home folder, once, before any rule or check reads it
    (a quoted ``~`` would reach the jobs literally)."""
    config["results_dir"] = os.path.expanduser(config["results_dir"])
    for block in (config["vision"].get("imagenet"), config["vision"].get("folders")):
        if block:
            for key in ("weights", "class_index", "val_root", "root"):
                if block.get(key):
                    block[key] = os.path.expanduser(block[key])
            block["ood_roots"] = {name: os.path.expanduser(root) for name, root in block.get("ood_roots", {}).items()}
    if config["language"].get("model_path"):
        config["language"]["model_path"] = os.path.expanduser(config["language"]["model_path"])
    files = config["language"].get("task_files") or {}
    config["language"]["task_files"] = {name: os.path.expanduser(path) for name, path in files.items()}
