# Circuits with a known answer (docs/embedded_default.md): the ground truth of each testbed model, causally verified;
# recovery of it by every method (report-recovery); stability of the circuits under bootstrap resamples of each
# concept dataset (stability, report-stability). Which experiments have a ground truth, and which jobs they get:
# pipeline/plans/testbed.py (ground_truth_experiments, stability_jobs, testbed_outputs).

TESTBED = config["testbed"]
for _note in testbed.testbed_notes(config) if workflow.is_main_process else []:  # a key that runs nothing is said
    print(f"Note: {_note}", file=sys.stderr)


if GROUND_TRUTHS.get(VX) == "vision":

    rule vision_ground_truth:
        """The planted world model's class circuits (own channels + shared channels), verified by mean and zero
        ablation: keeping only them preserves each class, removing them drops it to chance."""
        input:
            model=f"{VDIR}/model.pt",
            world=expand(f"{WORLD}/{{split}}.npz", split=["train", "id_test", "concept"]),
        output: PATHS.ground_truth(VX)
        params:
            job=job_env("vision_ground_truth"),
            world=input_dir("world"),
            experiment=VX,
            seed=VSETTING.seed,
        log: log_path("vision_ground_truth")
        conda: ENV
        priority: 15
        resources: **WORLD_JOB,
        shell:
            stage_command("vision-ground-truth --checkpoint {input.model:q} --world {params.world:q} "
                          "--experiment {params.experiment:q} --seed {params.seed} --threads {threads} "
                          "--out {output:q}")


if GROUND_TRUTHS.get(LX) == "language":

    rule language_ground_truth:
        """The embedded model's induction circuit: previous-token and induction heads found by their attention
        scores, the edge set verified by interchange patching (alone it recovers the logit difference, removed it
        leaves chance)."""
        input:
            model=language_model_inputs(),
            examples=f"{LDIR}/tasks/{testbed.GROUND_TRUTH_TASK}/id_test.jsonl",
        output: PATHS.ground_truth(LX)
        params:
            job=job_env("language_ground_truth"),
            model=input_dir("model"),
            task=testbed.GROUND_TRUTH_TASK,
            experiment=LX,
            seed=LANGUAGE["task_seed"],
            device=q(DEVICE),
        log: log_path("language_ground_truth")
        conda: ENV
        priority: 15
        resources: **LANGUAGE_MODEL_JOB,
        shell:
            stage_command("language-ground-truth --model-path {params.model:q} --examples {input.examples:q} "
                          "--task {params.task} --experiment {params.experiment:q} --seed {params.seed} "
                          "--device {params.device} --out {output:q}")


if STABILITY_JOBS:

    rule stability:
        """One concept's baseline and certified circuits over bootstrap resamples of its dataset (Wu, Tonin and
        Cevher 2026): Jaccard against the full-data circuit, label changes between resamples, recovery of the truth;
        at the truth's size, each circuit beside the baseline's of its size and the certificate beside the
        comparators that abstain as much (the equal footing, testbed.equal_footing)."""
        input:
            attributions=partial(testbed.stability_job_attributions, STABILITY_JOBS, PATHS),
            truth=partial(testbed.ground_truth_job_path, PATHS),
        output:
            table=PATHS.stability(),
            truth_size=PATHS.truth_size(),
            truth_size_equal=PATHS.truth_size_equal(),
        params:
            job=job_env("stability"),
            options=partial(testbed.stability_job_options, STABILITY_JOBS, PATHS, TESTBED),
        log: log_path("stability", PER_CERTIFICATE)
        conda: ENV
        resources: **VOTES_JOB,
        shell:
            stage_command("stability --attributions {input.attributions:q} {params.options} "
                          "--ground-truth {input.truth:q} --out {output.table:q} "
                          "--out-truth-size {output.truth_size:q} --out-truth-size-equal {output.truth_size_equal:q}")


# the recovery and stability tables of each experiment with a ground truth (pipeline/plans/testbed.py testbed_outputs)
TESTBED_OUTPUTS = testbed.testbed_outputs(config, PATHS, VCONCEPTS)
for _experiment, _kind in GROUND_TRUTHS.items():
    _recovery = TESTBED_OUTPUTS[f"recovery_{_kind}"]
    _inputs = testbed.recovery_inputs(config, PATHS, VCONCEPTS, _experiment)

    rule:
        name: f"recovery_{_kind}"
        input: **_inputs,
        output:
            table=_recovery["table"],
            auroc=_recovery["auroc"],
            summary=_recovery["summary"],
            figure=report(_recovery["figure"], caption="../report/recovery.rst", category="Testbed"),
        params:
            job=job_env(f"recovery_{_kind}"),
            circuits=pair_options("--circuits", _inputs["circuits"]),
            selected=f"--selected {q(_inputs['selected'][0])}" if _inputs["selected"] else "",
            experiment=_experiment,
            out=output_dir,
        log: log_path(f"recovery_{_kind}")
        conda: ENV
        shell:
            stage_command("report-recovery --ground-truth {input.truth:q} {params.circuits} {params.selected} "
                          "--experiment {params.experiment:q} --out-dir {params.out:q}")

    if f"stability_{_kind}" in TESTBED_OUTPUTS:
        _stability = TESTBED_OUTPUTS[f"stability_{_kind}"]

        rule:
            name: f"stability_{_kind}"
            input: **testbed.stability_table_inputs(config, PATHS, VCONCEPTS, _experiment),
            output: **_stability,
            params:
                job=job_env(f"stability_{_kind}"),
                out=output_dir,
            log: log_path(f"stability_{_kind}")
            conda: ENV
            shell:
                stage_command("report-stability --inputs {input.tables:q} --truth-size {input.truth_size:q} "
                              "--truth-size-equal {input.truth_size_equal:q} --out-dir {params.out:q}")
