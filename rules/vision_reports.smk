# The vision half's figures and tables after the sufficiency tables (rules/reports.smk): Fig. IoU, seed
# stability, the radius sweep, Fig. 4's features, the runtime table and the spurious-cue index. Which of them this
# config runs and what each reads and writes: pipeline/plans/vision_reports.py (vision_report_outputs). The attack:
# rules/reports.smk.

VTABLES_OUT = tables.sufficiency_tables(config, PATHS, VCONCEPTS)["vision_tables"].outputs
VREPORTS = vision_reports.vision_report_outputs(config, PATHS, VCONCEPTS)
# the figures over re-discovered classes wait for the filter checkpoint (how many images each class keeps)
VISION_IOU_CIRCUITS = partial(vision_reports.vision_figure_job_inputs, vision_reports.vision_iou_circuits, config, PATHS,
                              VCONCEPTS, filter_metrics)


if "vision_iou" in VREPORTS:

    rule vision_iou:
        """Fig. IoU: ID circuits vs circuits re-discovered on each OOD set (at the max-gap K)."""
        input:
            operating_points=VTABLES_OUT["operating_points"],
            circuits=VISION_IOU_CIRCUITS,
        output:
            table=VREPORTS["vision_iou"]["table"],
            figure=report(VREPORTS["vision_iou"]["figure"], caption="../report/iou.rst", category="Vision"),
        params:
            job=job_env("vision_iou"),
            circuits=input_pairs("--circuits", "circuits"),
            scorer=VMAIN_SCORER,
            out=output_dir,
        log: log_path("vision_iou")
        conda: ENV
        shell:
            "{params.job} certified-circuits report-iou --operating-points {input.operating_points:q} "
            "--scorer {params.scorer} {params.circuits} --out-dir {params.out:q} 2> {log:q}"


if "vision_seed_stability" in VREPORTS:
    SEED_CIRCUITS = vision_reports.seed_stability_circuits(config, PATHS, VCONCEPTS)

    rule vision_seed_stability:
        """Pairwise IoU of certified circuits across independent certification seeds."""
        input:
            operating_points=VTABLES_OUT["operating_points"],
            circuits=SEED_CIRCUITS,
        output:
            table=VREPORTS["vision_seed_stability"]["table"],
            figure=report(VREPORTS["vision_seed_stability"]["figure"], caption="../report/seeds.rst", category="Vision"),
        params:
            job=job_env("vision_seed_stability"),
            circuits=pair_options("--circuits", SEED_CIRCUITS),
            scorer=VMAIN_SCORER,
            out=output_dir,
        log: log_path("vision_seed_stability")
        conda: ENV
        shell:
            "{params.job} certified-circuits report-seeds --operating-points {input.operating_points:q} "
            "--scorer {params.scorer} {params.circuits} --out-dir {params.out:q} 2> {log:q}"


if "vision_radius_sweep" in VREPORTS:
    RADIUS = vision_reports.radius_sweep_inputs(config, PATHS, VCONCEPTS)

    rule vision_radius_sweep:
        """App. D: abstention, effective size and cACC across certified radii and |D|."""
        input:
            circuits=RADIUS["circuits"],
            sufficiency=RADIUS["sufficiency"],
            plan=reports.plan_warnings_file(PATHS),
        output:
            fixed=VREPORTS["vision_radius_sweep"]["fixed"],
            best=VREPORTS["vision_radius_sweep"]["best"],
            figure=report(VREPORTS["vision_radius_sweep"]["figure"], caption="../report/radius.rst", category="Vision"),
        params:
            job=job_env("vision_radius_sweep"),
            circuits=pair_options("--circuits", RADIUS["circuits"]),
            k=VISION["radius_sweep"]["fixed_k"],
            out=output_dir,
        log: log_path("vision_radius_sweep")
        conda: ENV
        shell:
            "{params.job} certified-circuits report-radius --k {params.k} {params.circuits} "
            "--sufficiency {input.sufficiency:q} --plan-warnings {input.plan:q} --out-dir {params.out:q} 2> {log:q}"


rule vision_features:
    """Fig. 4: top-activating examples of certified-in, abstained and certified-out channels."""
    input:
        operating_points=VTABLES_OUT["operating_points"],
        attributions=PATHS.attributions(VX, "concept", "{concept}"),
        votes=PATHS.votes(VX, "concept", "{concept}", VMAIN_SCORER, VSETTING),
        certificates=PATHS.certificates(VX, "concept", "{concept}", VMAIN_SCORER, VSETTING),
    output: report(vision_reports.features_figure(PATHS, VX), caption="../report/features.rst", category="Vision")
    params:
        job=job_env("vision_features"),
        data=vision_eval_data("id"),
        scorer=VMAIN_SCORER,
        stem=partial(vision_reports.features_job_stem, PATHS, VX),
    log: log_path("vision_features", "{concept}")
    conda: ENV
    shell:
        "{params.job} certified-circuits report-features --operating-points {input.operating_points:q} "
        "--scorer {params.scorer} --attributions {input.attributions:q} --votes {input.votes:q} "
        "--certificates {input.certificates:q} --data {params.data:q} --out-stem {params.stem:q} 2> {log:q}"


if "vision_runtime" in VREPORTS:
    RUNTIME = VISION["runtime"]

    rule vision_runtime:
        """App. D: naive (A re-run per mask) vs cached certification cost for one class."""
        input: vision_model_inputs() + local_inputs([vision_eval_data("id")])
        output: VREPORTS["vision_runtime"]["table"]
        params:
            job=job_env("vision_runtime"),
            model=vision_model_args(),
            data=partial(vision.vision_id_job_data, config, PATHS),
            concept=RUNTIME.get("concept", VCONCEPTS[0]),
            n=words(RUNTIME["n"]),
            k_grid=words(VISION["k_grid"]),
            setting=certification.runtime_options(VSETTING),  # the whole setting but n0 and n (per --n)
            stem=output_stem,
        log: log_path("vision_runtime")
        conda: ENV
        resources:
            mem_mb=4000,
            runtime=60,
            gpu=VISION_GPU,
        shell:
            "{params.job} certified-circuits vision-runtime {params.model} --threads {threads} --data {params.data:q} "
            "--concept {params.concept:q} --n {params.n} --k-grid {params.k_grid} {params.setting} "
            "--out-stem {params.stem:q} 2> {log:q}"


if "vision_spurious" in VREPORTS:
    SPURIOUS = vision_reports.spurious_inputs(config, PATHS, VCONCEPTS)

    rule vision_spurious:
        """Spurious-cue index of certified-in vs abstained vs certified-out channels."""
        input:
            operating_points=VTABLES_OUT["operating_points"],
            attributions=SPURIOUS["attributions"],
            circuits=SPURIOUS["circuits"],
        output:
            table=VREPORTS["vision_spurious"]["table"],
            figure=report(VREPORTS["vision_spurious"]["figure"], caption="../report/spurious.rst", category="Vision"),
        params:
            job=job_env("vision_spurious"),
            circuits=pair_options("--circuits", SPURIOUS["circuits"]),
            scorer=VMAIN_SCORER,
            out=output_dir,
        log: log_path("vision_spurious")
        conda: ENV
        shell:
            "{params.job} certified-circuits report-spurious --operating-points {input.operating_points:q} "
            "--scorer {params.scorer} --attributions {input.attributions:q} {params.circuits} "
            "--out-dir {params.out:q} 2> {log:q}"
