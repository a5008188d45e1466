# Vision half: concept world and model (embedded) or ImageNet folders and torchvision models (paper),
# attributions per class, sufficiency evaluation per (split, class, setting).

from certified_circuits.vision.data.world import SPLITS as WORLD_SPLITS
VSETTING = vision.vision_setting(config)  # the one builder of the vision setting (pipeline/plans/vision.py)
REDISCOVERY = vision.rediscovery_sets(config)
VLARGE = vision.vision_dirs(PATHS)["large"]


if EMBEDDED_VISION:

    rule vision_world:
        """Render the concept world: one .npz per split (deterministic in the seed)."""
        output:
            splits=expand(f"{WORLD}/{{split}}.npz", split=WORLD_SPLITS),
            meta=f"{WORLD}/world.json",
        params:
            job=job_env("vision_world"),
            options=cli_options(VISION["world"]),
            out=output_dir,
        log: log_path("vision_world")
        conda: ENV
        priority: 20  # critical path first
        resources: **WORLD_JOB,
        shell: stage_command("vision-world {params.options} --out {params.out:q}")

    use rule vision_world as vision_world_large with:
        """Larger concept datasets for the radius x |D| sweep (App. D): the concept split alone, at the largest |D|."""
        output: VLARGE
        params:
            job=job_env("vision_world_large"),
            options=cli_options({**{k: v for k, v in VISION["world"].items() if k != "n_concept_per_class"},
                                 "n_concept_per_class": max(VISION["radius_sweep"]["sizes"]), "splits": "concept"}),
        log: log_path("vision_world_large")
        priority: 5

    rule vision_train:
        """Build the world ResNet (torchvision BasicBlock ResNet, hooks at layer1..layer4): compiled by hand for a
        marked world (vision.train.compiled) or trained (plans/vision.py vision_model_command)."""
        input: expand(f"{WORLD}/{{split}}.npz", split=["train", "id_test", "context_shift", "corruption"])
        output:
            model=f"{VDIR}/model.pt",
            metrics=f"{VDIR}/train_metrics.json",
        params:
            job=job_env("vision_train"),
            command=vision.vision_model_command(config),
            world=input_dir(),
        log: log_path("vision_train")
        benchmark: benchmark_path("vision_train")
        conda: ENV
        priority: 20
        threads: 1  # the thread count changes the trained weights slightly: one thread everywhere, as calibrated
        resources:
            mem_mb=4000,
            runtime=30,
        shell:
            stage_command("{params.command} --world {params.world:q} --threads {threads} --out-model {output.model:q} "
                          "--out-metrics {output.metrics:q}")

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
        params:
            job=job_env("vision_filter_ood"),
            world=input_dir("pools"),
        log: log_path("vision_filter_ood")
        conda: ENV
        priority: 15
        resources: **WORLD_JOB,
        shell:
            stage_command("vision-filter-ood --world {params.world:q} --checkpoint {input.model:q} "
                          "--threads {threads} --out-adversarial {output.adversarial:q} "
                          "--out-anomaly {output.anomaly:q} --out-metrics {output.metrics:q}")


VISION_ATTRIBUTE_INPUTS = vision.vision_attribute_inputs(config, PATHS)
CLASSES_PER_JOB = int(VISION["classes_per_job"])


if CLASSES_PER_JOB == 1:

    rule vision_attribute:
        """Attributions of one class on its concept set and on every OOD re-discovery set, in one process
        (one model start-up for all splits). A set without images of the class gets a valid file with
        zero examples, which the IoU report skips."""
        input: VISION_ATTRIBUTE_INPUTS
        output:
            concept=PATHS.attributions(VX, "concept", "{concept}"),
            rediscovery=[PATHS.attributions(VX, split, "{concept}") for split in REDISCOVERY],
        params:
            job=job_env("vision_attribute"),
            invocation=partial(vision.vision_attribute_job_invocation, config, PATHS),
        log: log_path("vision_attribute", "{concept}")
        benchmark: benchmark_path("vision_attribute", "{concept}")
        conda: ENV
        priority: 10
        resources: **VISION_MODEL_JOB,
        shell: stage_command("{params.invocation}")

else:
    # vision.classes_per_job > 1 (paper scale on a GPU): one job, one process, one model start-up per
    # group of classes (``certified-circuits batch``); outputs stay per class, so every later stage is
    # unchanged. Groups follow the config's class order: adding a class reruns the last group only.
    for group_index, group in enumerate(chunked(vision_concepts(), CLASSES_PER_JOB)):

        rule:
            name: f"vision_attribute_group{group_index}"
            input: VISION_ATTRIBUTE_INPUTS
            output: [path for concept in group for path in vision.vision_attribute_outputs(config, PATHS, concept)]
            params:
                job=job_env("vision_attribute"),
                invocation=" :: ".join(vision.vision_attribute_invocation(config, PATHS, concept) for concept in group),
            log: log_path("vision_attribute", f"group{group_index}")
            benchmark: benchmark_path("vision_attribute", f"group{group_index}")
            conda: ENV
            priority: 10
            resources:
                mem_mb=VISION_MEM_MB,
                runtime=min(VISION_RUNTIME * len(group), 24 * 60),
                gpu=VISION_GPU,
            shell: stage_command("batch {params.invocation}")


rule vision_attribute_sized:
    """Attributions of one class on a concept dataset of another size |D| (radius x |D| sweep, App. D)."""
    input: vision_model_inputs() + ([VLARGE] if EMBEDDED_VISION else [])
    output: PATHS.attributions(VX, "concept_n{size}", "{concept}")
    params:
        job=job_env("vision_attribute_sized"),
        model=vision_model_args(),
        data=partial(vision.vision_sized_job_data, config, PATHS),
        experiment=VX,
    log: log_path("vision_attribute_sized", "{size}/{concept}")
    conda: ENV
    priority: 10
    resources: **VISION_MODEL_JOB,
    shell:
        stage_command("vision-attribute {params.model} --threads {threads} --data {params.data:q} "
                      "--n-examples {wildcards.size} --concept {wildcards.concept:q} "
                      "--split concept_n{wildcards.size} --experiment {params.experiment:q} --out {output:q}")


rule vision_evaluate:
    """Sufficiency of baseline, majority and certified circuits of one class (every scorer of the
    setting and every ablation, one process, one pass over each eval set) on every eval set: accuracy,
    false-positive rate, balanced accuracy. docs/workflow.md ("The vision evaluation jobs") states why
    one job per class."""
    input:
        circuits=partial(vision.vision_evaluate_job_circuits, config, PATHS),
        model=vision_model_inputs(),
        data=partial(vision.vision_evaluate_job_data, config, PATHS),
        reference=vision.vision_ablation_inputs(config, PATHS),
    output: PATHS.sufficiency(VX)
    params:
        job=job_env("vision_evaluate"),
        model=vision_model_args(),
        circuits=input_pairs("--circuits", "circuits"),
        eval_sets=partial(vision.vision_evaluate_job_set_options, config, PATHS),
        ablation=vision.vision_ablation_options(config, PATHS),
        experiment=VX,
    log: log_path("vision_evaluate", PER_SUFFICIENCY)
    benchmark: benchmark_path("vision_evaluate", PER_SUFFICIENCY)
    conda: ENV
    resources: **VISION_MODEL_JOB,
    shell:
        stage_command("vision-evaluate {params.model} --threads {threads} {params.circuits} "
                      "--concept {wildcards.concept:q} {params.eval_sets} {params.ablation} "
                      "--experiment {params.experiment:q} --out {output:q}")


if VDISCOVERY_SCORERS:

    rule vision_discover:
        """Votes of a black-box discovery plugin on one class's concept dataset: the function runs on the full
        dataset and on each of the n0 + n sub-datasets (the masks of the votes rule), in parallel processes."""
        input:
            model=vision_model_inputs(),
            data=local_inputs([vision_eval_data("id")]),
        output: PATHS.votes(VX, "concept", "{concept}", "{scorer}")
        wildcard_constraints: scorer="|".join(VDISCOVERY_SCORERS)
        params:
            job=job_env("vision_discover"),
            model=vision_model_args(),
            data=vision_eval_data("id"),
            size=vision.vision_concept_size(config),
            spec=partial(vision.vision_discover_job_spec, config),
            k_grid=words(VISION["k_grid"]),
            setting=partial(certification.votes_job_options, PATHS),
            experiment=VX,
        log: log_path("vision_discover", f"{{concept}}/{{scorer}}/{VOTES_PATTERN}")
        benchmark: benchmark_path("vision_discover", f"{{concept}}/{{scorer}}/{VOTES_PATTERN}")
        conda: ENV
        threads: VISION["discovery_workers"]
        resources: **VISION_MODEL_JOB,
        shell:
            stage_command("vision-discover {params.model} --threads 1 --data {params.data:q} "
                          "--n-examples {params.size} --concept {wildcards.concept:q} --scorer {params.spec:q} "
                          "--k-grid {params.k_grid} {params.setting} --workers {threads} "
                          "--experiment {params.experiment:q} --out {output:q}")

    ruleorder: vision_discover > votes
