# Checks that run when the workflow is parsed, before any job: every bad value or missing path stops
# the run with a message naming the key, the value and what is expected.

from pathlib import Path

from snakemake.exceptions import WorkflowError


def config_error(key, value, expected):
    raise WorkflowError(f"config key {key} = {value!r} is invalid: {expected}")


def require_path(key, value, what, how):
    if not value or not Path(os.path.expanduser(value)).exists():
        config_error(key, value, f"{what} not found. {how}")


def check_config(cfg):
    vision, language = cfg["vision"], cfg["language"]
    if vision["enabled"]:
        for key in ("experiment", "source", "concepts", "scorers", "main_scorer", "eval_sets", "k_grid", "certification"):
            if key not in vision:
                config_error(f"vision.{key}", None, "required when vision.enabled is true")
        if vision["main_scorer"] not in vision["scorers"]:
            config_error("vision.main_scorer", vision["main_scorer"], f"must be one of vision.scorers {vision['scorers']}")
        unknown = set(vision.get("rediscovery_sets", [])) - set(vision["eval_sets"])
        if unknown:
            config_error("vision.rediscovery_sets", sorted(unknown), f"each must also be in vision.eval_sets {vision['eval_sets']}")
        if vision["source"] == "imagenet":
            imagenet = vision.get("imagenet")
            if not imagenet:
                config_error("vision.imagenet", None, "required for source imagenet (model, class_index, val_root)")
            require_path("vision.imagenet.class_index", imagenet["class_index"], "the ImageNet class index",
                         "Give LOC_synset_mapping.txt from the ImageNet devkit (one 'wnid name' line per class, in class order).")
            require_path("vision.imagenet.val_root", imagenet["val_root"], "ImageNet validation folder",
                         "Expected layout ROOT/<wnid>/*.JPEG (see README: 'Paper scale').")
            if imagenet.get("weights"):
                require_path("vision.imagenet.weights", imagenet["weights"], "the IMAGENET1K_V1 weights file",
                             "Download it once with torchvision on a connected machine (README: 'Paper scale').")
            for name, root in imagenet.get("ood_roots", {}).items():
                require_path(f"vision.imagenet.ood_roots.{name}", root, f"the {name} folder",
                             "Expected layout ROOT/<wnid>/*; see README for ImageNet-A/O/C and OOD-CV preparation.")
    if language["enabled"]:
        for key in ("experiment", "source", "tasks", "k_grid", "settings", "certification"):
            if key not in language:
                config_error(f"language.{key}", None, "required when language.enabled is true")
        missing = [t for t in language["tasks"] if t not in language["settings"]]
        if missing:
            config_error("language.settings", sorted(language["settings"]), f"needs [tau, p_del] pairs for tasks {missing}")
        if language["source"] == "gpt2":
            require_path("language.model_path", language.get("model_path"), "the GPT-2 Small directory",
                         "Save it once on a connected machine with transformers' save_pretrained (README: 'Paper scale').")


check_config(config)
