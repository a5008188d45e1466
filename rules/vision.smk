# Vision half: concept world and model (embedded) or ImageNet folders and torchvision models (paper),
# attributions per (split, class), sufficiency evaluation per (class, scorer, setting).

VISION = config["vision"]
VX = VISION.get("experiment", "vision")
VDIR = f"{RESULTS}/vision"
WORLD = f"{VDIR}/world"
WORLD_SPLITS = ["train", "concept", "id_test", "context_shift", "corruption", "adversarial_pool",
                "anomaly_pool", "counterfactual"]
EMBEDDED_VISION = VISION["enabled"] and VISION["source"] == "embedded"


def vision_concepts(selection="all"):
    """Class names (embedded) or WordNet ids (paper) to certify."""
    if selection != "all":
        return list(selection)
    if VISION["concepts"] != "all":
        return list(VISION["concepts"])
    if EMBEDDED_VISION:
        from certified_circuits.vision.world import CLASS_SHAPES

        return list(CLASS_SHAPES[: VISION["world"].get("n_classes", 10)])
    from certified_circuits.vision.imagenet import list_classes, select_classes

    imagenet = VISION["imagenet"]
    return select_classes(list_classes(imagenet["val_root"]), imagenet.get("n_classes", 100), imagenet.get("class_seed", 0))


def vision_eval_data(name):
    """Data file or folder of an eval set."""
    if EMBEDDED_VISION:
        return {"id": f"{WORLD}/concept.npz", "id_test": f"{WORLD}/id_test.npz",
                "adversarial": f"{VDIR}/adversarial.npz", "anomaly": f"{VDIR}/anomaly.npz"}.get(name, f"{WORLD}/{name}.npz")
    imagenet = VISION["imagenet"]
    return imagenet["val_root"] if name == "id" else imagenet["ood_roots"][name]


def vision_split_data(split):
    """(data, n_examples) of a discovery split: the concept set, an OOD re-discovery set, or |D| = size."""
    size = VISION["world"].get("n_concept_per_class", 50) if EMBEDDED_VISION else 50
    if split == "concept":
        return vision_eval_data("id"), size
    if split.startswith("concept_n"):
        return (f"{VDIR}/world_large/concept.npz" if EMBEDDED_VISION else vision_eval_data("id")), int(split[len("concept_n"):])
    return vision_eval_data(split), size


def vision_model_args():
    if EMBEDDED_VISION:
        return f"--model world --checkpoint {VDIR}/model.pt"
    imagenet = VISION["imagenet"]
    weights = f" --weights {imagenet['weights']}" if imagenet.get("weights") else ""
    return f"--model {imagenet['model']} --class-index {imagenet['class_index']}{weights}"


def vision_model_inputs():
    return [f"{VDIR}/model.pt"] if EMBEDDED_VISION else []


def local_file(path):
    """Only files the workflow builds are inputs; user folders (ImageNet) are checked at parse time."""
    return [path] if path.startswith(RESULTS) else []


if EMBEDDED_VISION:

    rule vision_world:
        """Render the concept world: one .npz per split (deterministic in the seed)."""
        output:
            expand(f"{WORLD}/{{split}}.npz", split=WORLD_SPLITS),
            meta=f"{WORLD}/world.json",
        params:
            options=cli_options(VISION["world"]),
        log:
            f"{RESULTS}/logs/vision/world.log",
        priority: 20  # critical path first
        threads: 1
        resources:
            mem_mb=4000,
            runtime=15,
        shell:
            tracked("certified-circuits vision-world {params.options} --out {WORLD} 2> {log}")

    rule vision_world_large:
        """Larger concept datasets for the radius x |D| sweep (App. D)."""
        output:
            f"{VDIR}/world_large/concept.npz",
        params:
            options=cli_options({k: v for k, v in VISION["world"].items() if k != "n_concept_per_class"}),
            size=max(VISION.get("radius_sweep", {}).get("sizes", [50])),
        log:
            f"{RESULTS}/logs/vision/world_large.log",
        priority: 5  # critical path first
        threads: 1
        resources:
            mem_mb=4000,
            runtime=15,
        shell:
            tracked("certified-circuits vision-world {params.options} --n-concept-per-class {params.size} "
                    "--splits concept --out {VDIR}/world_large 2> {log}")

    rule vision_train:
        """Train the world ResNet (torchvision BasicBlock ResNet, hooks at layer1..layer4)."""
        input:
            expand(f"{WORLD}/{{split}}.npz", split=["train", "id_test", "context_shift", "corruption"]),
        output:
            model=f"{VDIR}/model.pt",
            metrics=f"{VDIR}/train_metrics.json",
        params:
            options=cli_options(VISION.get("train", {})),
        log:
            f"{RESULTS}/logs/vision/train.log",
        benchmark:
            f"{RESULTS}/benchmarks/vision/train.tsv"
        priority: 20  # critical path first
        threads: 2
        resources:
            mem_mb=4000,
            runtime=30,
        shell:
            tracked("certified-circuits vision-train --world {WORLD} {params.options} --threads {threads} "
                    "--out-model {output.model} --out-metrics {output.metrics} 2> {log}")

    checkpoint vision_filter_ood:
        """Natural-adversarial and semantic-anomaly sets by filtration against the trained model.

        A checkpoint: how many images each class keeps is known only afterwards, and the OOD
        re-discovery jobs (Fig. IoU) are created only for classes with enough of them."""
        input:
            model=f"{VDIR}/model.pt",
            pools=expand(f"{WORLD}/{{split}}.npz", split=["adversarial_pool", "anomaly_pool", "concept", "id_test"]),
        output:
            adversarial=f"{VDIR}/adversarial.npz",
            anomaly=f"{VDIR}/anomaly.npz",
            metrics=f"{VDIR}/calibration.json",
        log:
            f"{RESULTS}/logs/vision/filter_ood.log",
        priority: 15  # critical path first
        threads: 1
        resources:
            mem_mb=4000,
            runtime=15,
        shell:
            tracked("certified-circuits vision-filter-ood --world {WORLD} --checkpoint {input.model} --threads {threads} "
                    "--out-adversarial {output.adversarial} --out-anomaly {output.anomaly} "
                    "--out-metrics {output.metrics} 2> {log}")


def vision_images_per_class(eval_set):
    """{concept: number of images} of an eval set; for filtered sets this waits for the checkpoint."""
    if EMBEDDED_VISION:
        import json

        calibration = checkpoints.vision_filter_ood.get().output.metrics
        with open(calibration) as handle:
            counts = json.load(handle).get(f"per_class_{eval_set}")
        if counts is None:
            size = VISION["world"].get("n_ood_per_class", 100)
            return {c: size for c in vision_concepts("all")}
        from certified_circuits.vision.world import CLASS_SHAPES

        return dict(zip(CLASS_SHAPES, counts))
    from certified_circuits.vision.imagenet import list_class_images

    root = vision_eval_data(eval_set)
    return {c: len(list_class_images(root, c, min_images=0)) if os.path.isdir(os.path.join(root, c)) else 0
            for c in vision_concepts()}


def vision_attribute_inputs(wildcards):
    data, _ = vision_split_data(wildcards.split)
    inputs = vision_model_inputs() + local_file(data)
    if EMBEDDED_VISION and wildcards.split == "concept":
        inputs.append(f"{WORLD}/counterfactual.npz")
    return inputs


def vision_attribute_args_for(split):
    data, n_examples = vision_split_data(split)
    extra = f" --counterfactual {WORLD}/counterfactual.npz" if EMBEDDED_VISION and split == "concept" else ""
    return f"--data {data} --n-examples {n_examples}{extra}"


def vision_attribute_args(wildcards):
    return vision_attribute_args_for(wildcards.split)


REDISCOVERY = list(VISION.get("rediscovery_sets", []))
CLASS_SPLITS = ["concept"] + REDISCOVERY


rule vision_attribute_class:
    """Attributions of one class on its concept set and on every OOD re-discovery set, in one process
    (one torch start-up instead of one per split). A filtered set without images of the class gets a
    valid file with zero examples, which the IoU report skips."""
    input:
        lambda w: vision_model_inputs() + [f for split in CLASS_SPLITS for f in local_file(vision_split_data(split)[0])]
        + ([f"{WORLD}/counterfactual.npz"] if EMBEDDED_VISION else []),
    output:
        [attribution_path(VX, split, "{concept}") for split in CLASS_SPLITS],
    params:
        model=vision_model_args(),
        data=vision_attribute_args_for("concept"),
        also=lambda w: " ".join(f"--also {split} {vision_split_data(split)[0]} {attribution_path(VX, split, w.concept)}"
                                for split in REDISCOVERY),
    log:
        f"{RESULTS}/logs/vision/attribute/class/{{concept}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/vision/attribute_class/{{concept}}.tsv"
    priority: 10  # critical path first
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
        gpu=0 if EMBEDDED_VISION else 1,
    shell:
        tracked("certified-circuits vision-attribute {params.model} --threads {threads} {params.data} "
                "--concept {wildcards.concept} --split concept --experiment {VX} --out {output[0]} {params.also} 2> {log}")


ruleorder: vision_attribute_class > vision_attribute


rule vision_attribute:
    """Relevance, activation and rank of every channel for each image of one class (one pass)."""
    input:
        vision_attribute_inputs,
    output:
        f"{RESULTS}/attributions/{VX}/{{split}}/{{concept}}.h5",
    params:
        model=vision_model_args(),
        data=vision_attribute_args,
    log:
        f"{RESULTS}/logs/vision/attribute/{{split}}/{{concept}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/vision/attribute/{{split}}/{{concept}}.tsv"
    priority: 10  # critical path first
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
        gpu=0 if EMBEDDED_VISION else 1,
    shell:
        tracked("certified-circuits vision-attribute {params.model} --threads {threads} {params.data} "
                "--concept {wildcards.concept} --split {wildcards.split} --experiment {VX} --out {output} 2> {log}")


VSCORERS = VISION.get("scorers", [])
VMAIN_CERT = VISION.get("certification", {})


rule vision_evaluate_class:
    """Sufficiency of one class's circuits for every scorer at the main setting, in one process."""
    input:
        circuits=[f for scorer in VSCORERS for f in (votes_path(VX, "concept", "{concept}", scorer, VMAIN_CERT),
                                                      certificates_path(VX, "concept", "{concept}", scorer, VMAIN_CERT))],
        model=vision_model_inputs(),
        data=[f for name in VISION.get("eval_sets", []) for f in local_file(vision_eval_data(name))],
    output:
        [sufficiency_path(VX, "concept", "{concept}", scorer, VMAIN_CERT) for scorer in VSCORERS],
    params:
        model=vision_model_args(),
        eval_sets=" ".join(f"--eval-set {name}={vision_eval_data(name)}" for name in VISION.get("eval_sets", [])),
        circuits=lambda w: " ".join(
            f"--circuits {votes_path(VX, 'concept', w.concept, scorer, VMAIN_CERT)} "
            f"{certificates_path(VX, 'concept', w.concept, scorer, VMAIN_CERT)} "
            f"{sufficiency_path(VX, 'concept', w.concept, scorer, VMAIN_CERT)}"
            for scorer in VSCORERS),
    log:
        f"{RESULTS}/logs/vision/evaluate_class/{{concept}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/vision/evaluate_class/{{concept}}.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=0 if EMBEDDED_VISION else 1,
    shell:
        tracked("certified-circuits vision-evaluate {params.model} --threads {threads} {params.circuits} "
                "--concept {wildcards.concept} {params.eval_sets} --experiment {VX} 2> {log}")


ruleorder: vision_evaluate_class > vision_evaluate


def vision_eval_sets(wildcards):
    names = VISION["eval_sets"] if wildcards.split == "concept" else ["id"]
    return names


rule vision_evaluate:
    """Sufficiency of baseline, majority and certified circuits of one class on every eval set."""
    input:
        votes=f"{RESULTS}/votes/{VX}/{{split}}/{{concept}}/{{scorer}}/p{{p_del}}_n0{{n0}}_n{{n}}_s{{seed}}.h5",
        certificates=f"{RESULTS}/certificates/{VX}/{{split}}/{{concept}}/{{scorer}}/p{{p_del}}_n0{{n0}}_n{{n}}_s{{seed}}/t{{tau}}_a{{alpha}}_{{correction}}.h5",
        model=vision_model_inputs(),
        data=lambda w: [f for name in vision_eval_sets(w) for f in local_file(vision_eval_data(name))],
    output:
        f"{RESULTS}/sufficiency/{VX}/{{split}}/{{concept}}/{{scorer}}/p{{p_del}}_n0{{n0}}_n{{n}}_s{{seed}}/t{{tau}}_a{{alpha}}_{{correction}}.csv",
    params:
        model=vision_model_args(),
        eval_sets=lambda w: " ".join(f"--eval-set {name}={vision_eval_data(name)}" for name in vision_eval_sets(w)),
    log:
        f"{RESULTS}/logs/vision/evaluate/{{split}}/{{concept}}/{{scorer}}/p{{p_del}}_n0{{n0}}_n{{n}}_s{{seed}}/t{{tau}}_a{{alpha}}_{{correction}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/vision/evaluate/{{split}}/{{concept}}/{{scorer}}/p{{p_del}}_n0{{n0}}_n{{n}}_s{{seed}}/t{{tau}}_a{{alpha}}_{{correction}}.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
        gpu=0 if EMBEDDED_VISION else 1,
    shell:
        tracked("certified-circuits vision-evaluate {params.model} --threads {threads} --votes {input.votes} "
                "--certificates {input.certificates} --concept {wildcards.concept} {params.eval_sets} "
                "--experiment {VX} --out {output} 2> {log}")
