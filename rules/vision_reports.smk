# The vision half's figures and tables after the sufficiency tables (rules/reports.smk): the radius sweep, Fig. 4's
# features, the runtime table, and Fig. IoU, seed stability and the spurious-cue index (one rule each, from one table).
# Which of them this config runs and what each reads and writes: pipeline/plans/vision_reports.py
# (vision_report_outputs). The attack: rules/reports.smk.

VTABLES_OUT = tables.sufficiency_tables(config, PATHS, VCONCEPTS)["vision_tables"].outputs
VREPORTS = vision_reports.vision_report_outputs(config, PATHS, VCONCEPTS)


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
            stage_command("report-radius --k {params.k} {params.circuits} --sufficiency {input.sufficiency:q} "
                          "--plan-warnings {input.plan:q} --out-dir {params.out:q}")


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
        stage_command("report-features --operating-points {input.operating_points:q} --scorer {params.scorer} "
                      "--attributions {input.attributions:q} --votes {input.votes:q} "
                      "--certificates {input.certificates:q} --data {params.data:q} --out-stem {params.stem:q}")


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
            stage_command("vision-runtime {params.model} --threads {threads} --data {params.data:q} "
                          "--concept {params.concept:q} --n {params.n} --k-grid {params.k_grid} {params.setting} "
                          "--out-stem {params.stem:q}")


# Fig. IoU, seed stability and the spurious-cue index differ only in their stage, what they read beside the operating
# points and their caption (report/): each writes a table and a figure of certified circuits (votes and certificates
# files, in pairs) at the operating K of the main scorer. Fig. IoU compares each class's ID circuit with those
# re-discovered on each OOD set (they wait for the filter checkpoint: how many images each class keeps); seed
# stability, each class's circuits at independent certification seeds; the spurious-cue index reads each class's
# attributions beside its circuit.
CIRCUIT_REPORTS = {}  # rule: (stage, inputs beside the operating points, caption)
if "vision_iou" in VREPORTS:
    CIRCUIT_REPORTS["vision_iou"] = ("report-iou", {"circuits": partial(
        vision_reports.vision_figure_job_inputs, vision_reports.vision_iou_circuits, config, PATHS, VCONCEPTS,
        filter_metrics)}, "iou")
if "vision_seed_stability" in VREPORTS:
    CIRCUIT_REPORTS["vision_seed_stability"] = (
        "report-seeds", {"circuits": vision_reports.seed_stability_circuits(config, PATHS, VCONCEPTS)}, "seeds")
if "vision_spurious" in VREPORTS:
    CIRCUIT_REPORTS["vision_spurious"] = (
        "report-spurious", vision_reports.spurious_inputs(config, PATHS, VCONCEPTS), "spurious")
for _name, (_stage, _inputs, _caption) in CIRCUIT_REPORTS.items():

    rule:
        """Fig. IoU, seed stability or the spurious-cue index (CIRCUIT_REPORTS), at the operating K."""
        name: _name
        input: operating_points=VTABLES_OUT["operating_points"], **_inputs,
        output:
            table=VREPORTS[_name]["table"],
            figure=report(VREPORTS[_name]["figure"], caption=f"../report/{_caption}.rst", category="Vision"),
        params:  # what differs between the reports is a param: the shell expression is read when the job runs
            job=job_env(_name),
            stage=_stage,
            inputs=vision_reports.circuit_report_options("attributions" in _inputs),
            scorer=VMAIN_SCORER,
            out=output_dir,
        log: log_path(_name)
        conda: ENV
        shell:
            stage_command("{params.stage} --operating-points {input.operating_points:q} --scorer {params.scorer} "
                          "{params.inputs} --out-dir {params.out:q}")
