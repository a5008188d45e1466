# Circuits with a known answer (docs/embedded_default.md): the ground truth of each testbed model, causally verified;
# recovery of it by every method (report-recovery); stability of the circuits under bootstrap resamples of each
# concept dataset (stability, report-stability). Which experiments have a ground truth, and which jobs they get:
# pipeline/jobs.py (ground_truth_experiments, stability_jobs).

GROUND_TRUTHS = jobs.ground_truth_experiments(config)
TESTBED = config["testbed"]
for _note in jobs.testbed_notes(config) if workflow.is_main_process else []:  # a key that runs nothing is said
    print(f"Note: {_note}", file=sys.stderr)


if GROUND_TRUTHS.get(VX) == "vision":

    rule vision_ground_truth:
        """The planted world model's class circuits (own channels + shared channels), verified by mean and zero
        ablation: keeping only them preserves each class, removing them drops it to chance."""
        input:
            model=f"{VDIR}/model.pt",
            world=expand(f"{WORLD}/{{split}}.npz", split=["train", "id_test", "concept"]),
        output:
            PATHS.ground_truth(VX),
        params:
            job=job_env("vision_ground_truth"),
            world=lambda w, input: os.path.dirname(input.world[0]),
            seed=VSETTING.seed,
            experiment=VX,
        log:
            log_path("vision_ground_truth"),
        conda:
            ENV
        priority: 15
        threads: 1
        resources:
            mem_mb=4000,
            runtime=15,
        shell:
            "{params.job} certified-circuits vision-ground-truth --checkpoint {input.model:q} --world {params.world:q} "
            "--experiment {params.experiment:q} --seed {params.seed} --threads {threads} --out {output:q} 2> {log:q}"


if GROUND_TRUTHS.get(LX) == "language":

    rule language_ground_truth:
        """The embedded model's induction circuit: previous-token and induction heads found by their attention
        scores, the edge set verified by interchange patching (alone it recovers the logit difference, removed it
        leaves chance)."""
        input:
            model=language_model_inputs(),
            examples=f"{LDIR}/tasks/{jobs.GROUND_TRUTH_TASK}/id_test.jsonl",
        output:
            PATHS.ground_truth(LX),
        params:
            job=job_env("language_ground_truth"),
            model=lambda w, input: os.path.dirname(input.model[0]),
            task=jobs.GROUND_TRUTH_TASK,
            experiment=LX,
            seed=LANGUAGE["task_seed"],
            device=q(DEVICE),
        log:
            log_path("language_ground_truth"),
        conda:
            ENV
        priority: 15
        threads: 1
        resources:
            mem_mb=LANGUAGE_MEM_MB,
            runtime=LANGUAGE_RUNTIME,
        shell:
            "{params.job} certified-circuits language-ground-truth --model-path {params.model:q} --examples {input.examples:q} "
            "--task {params.task} --experiment {params.experiment:q} --seed {params.seed} --device {params.device} "
            "--out {output:q} 2> {log:q}"


if STABILITY_JOBS:

    rule stability:
        """One concept's baseline and certified circuits over bootstrap resamples of its dataset (Wu, Tonin and
        Cevher 2026): Jaccard against the full-data circuit, label changes between resamples, recovery of the truth."""
        input:
            attributions=lambda w: stability_job(w)["attributions"],
            truth=lambda w: PATHS.ground_truth(w.experiment),
        output:
            table=PATHS.stability(),
            truth_size=PATHS.truth_size(),
        params:
            job=job_env("stability"),
            options=lambda w: jobs.stability_options(stability_job(w), TESTBED),
        log:
            log_path("stability", f"{{experiment}}/{{split}}/{{concept}}/{{scorer}}/{SETTING_PATTERN}"),
        conda:
            ENV
        threads: 1
        resources:
            mem_mb=2000,
            runtime=10,
        shell:
            "{params.job} certified-circuits stability --attributions {input.attributions:q} {params.options} "
            "--ground-truth {input.truth:q} --out {output.table:q} --out-truth-size {output.truth_size:q} 2> {log:q}"


TESTBED_TABLES = []  # read by the summary's findings
TESTBED_TARGETS = []  # rule all (rules/reports.smk)
for _experiment, _kind in GROUND_TRUTHS.items():
    if _kind == "vision":
        _circuits = [f for c in VCONCEPTS for s in vision_scorers("concept", VSETTING)
                     for f in vision_circuits("concept", c, VSETTING, scorer=s)]
        _tables = f"{PATHS.tables(VX)}/mean_ablation" if "mean" in VISION["ablations"] else PATHS.tables(VX)
        _selected = [f"{_tables}/selected_balanced_raw.csv"] if VISION["selection_set"] else []
    else:
        _circuits = [f for s in language_settings(jobs.GROUND_TRUTH_TASK)
                     for f in (PATHS.votes(LX, "train", jobs.GROUND_TRUTH_TASK, "eap_ig", s),
                               PATHS.certificates(LX, "train", jobs.GROUND_TRUTH_TASK, "eap_ig", s))]
        _selected = [jobs.language_selected_table(config, PATHS)] if LANGUAGE["selection_set"] else []
    _out = f"{PATHS.tables(_experiment)}/testbed"

    rule:
        name:
            f"recovery_{_kind}"
        input:
            truth=PATHS.ground_truth(_experiment),
            circuits=_circuits,
            selected=_selected,
        output:
            table=f"{_out}/recovery.csv",
            auroc=f"{_out}/recovery_auroc.csv",
            summary=f"{_out}/recovery_summary.md",
            figure=report(f"{_out}/recovery.png", caption="../report/recovery.rst", category="Testbed"),
        params:
            job=job_env(f"recovery_{_kind}"),
            circuits=item_options("--circuits", zip(_circuits[::2], _circuits[1::2])),
            selected=f"--selected {q(_selected[0])}" if _selected else "",
            experiment=_experiment,
            out=lambda w, output: os.path.dirname(output.table),
        log:
            log_path(f"recovery_{_kind}"),
        conda:
            ENV
        shell:
            "{params.job} certified-circuits report-recovery --ground-truth {input.truth:q} {params.circuits} "
            "{params.selected} --experiment {params.experiment:q} --out-dir {params.out:q} 2> {log:q}"

    TESTBED_TABLES += [f"{_out}/recovery_auroc.csv"]
    TESTBED_TARGETS += [f"{_out}/recovery.csv", f"{_out}/recovery_auroc.csv", f"{_out}/recovery_summary.md", f"{_out}/recovery.png"]

    _stability = [path for path, job in STABILITY_JOBS.items() if job["experiment"] == _experiment]
    if _stability:

        rule:
            name:
                f"stability_{_kind}"
            input:
                tables=_stability,
                truth_size=[STABILITY_JOBS[path]["truth_size"] for path in _stability],
            output:
                table=f"{_out}/stability.csv",
                summary=f"{_out}/stability_summary.md",
                truth_size=f"{_out}/truth_size.csv",
                truth_size_summary=f"{_out}/truth_size_summary.md",
            params:
                job=job_env(f"stability_{_kind}"),
                out=lambda w, output: os.path.dirname(output.table),
            log:
                log_path(f"stability_{_kind}"),
            conda:
                ENV
            shell:
                "{params.job} certified-circuits report-stability --inputs {input.tables:q} --truth-size "
                "{input.truth_size:q} --out-dir {params.out:q} 2> {log:q}"

        TESTBED_TABLES += [f"{_out}/stability.csv", f"{_out}/truth_size.csv"]
        TESTBED_TARGETS += [f"{_out}/stability.csv", f"{_out}/stability_summary.md", f"{_out}/truth_size.csv",
                            f"{_out}/truth_size_summary.md"]
