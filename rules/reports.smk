# The run's reports: the plan warnings, the theory figures, the sufficiency tables of every experiment (which every
# later figure reads: the operating K comes from one table, operating_points.csv, never recomputed), the attack of
# each half, the run's warning list, summary.md and the explorer. What each reads and writes: pipeline/plans/reports.py and tables.py;
# `rule all` (the Snakefile) asks for their targets by domain.

import json

PLAN_WARNINGS_FILE = reports.plan_warnings_file(PATHS)
THEORY = reports.theory_outputs(PATHS)
RUN = reports.run_outputs(PATHS)
WARNINGS_INPUTS = reports.warnings_inputs(config, PATHS, VCONCEPTS)
SUMMARY_INPUTS = reports.summary_inputs(config, PATHS, VCONCEPTS)
EXPLORER_CIRCUITS = reports.explorer_circuits(config, PATHS, VCONCEPTS)
EXPERIMENT_TABLES = reports.experiment_tables(config, PATHS)


rule plan_warnings:
    """The plan warnings the Snakefile printed at parse time (PLAN_RECORDS: every setting the config certifies, the
    radius sweep's included), written into the results: the warning list, the summary, the explorer and the
    radius-sweep figure show them. Rerun when they change (params)."""
    output: PLAN_WARNINGS_FILE
    params:
        job=job_env("plan_warnings"),
        records=json.dumps(PLAN_RECORDS),
    log: log_path("plan_warnings")
    conda: ENV
    shell: stage_command("report-plan-warnings --records {params.records:q} --out {output:q}")


rule theory_figures:
    """App. C: certified radius vs p_del (dotted where IN is impossible at the run's |D|), minimum n vs tau (with and
    without the correction over the run's U), for the (U, |D|) of the first parse-time plan (reports.theory_options)."""
    output:
        radius=report(THEORY["radius"], caption="../report/theory.rst", category="Theory"),
        samples=report(THEORY["samples"], caption="../report/theory.rst", category="Theory"),
    params:
        job=job_env("theory_figures"),
        sizes=reports.theory_options(CHECKED.plans),
        out=output_dir,
    log: log_path("theory_figures")
    conda: ENV
    shell: stage_command("report-theory {params.sizes} --out-dir {params.out:q}")


# Table 1 / Table 3 (vision, every scorer), the same under mean ablation, Table 1's language rows (per task and eval
# set, the best setting's peak): the peaks, cACC-K curves, operating points and held-out selections of each.
for _name, _tables in tables.sufficiency_tables(config, PATHS, VCONCEPTS).items():

    rule:
        name: _name
        input: _tables.inputs
        output:
            **{key: report(path, caption=_tables.captions[key], category=_tables.category)
               if key in _tables.captions else path for key, path in _tables.outputs.items()},
        params:
            job=job_env(_name),
            options=_tables.options,
            out=output_dir,
        log: log_path(_name)
        conda: ENV
        shell: stage_command("report-sufficiency --inputs {input:q} {params.options} --out-dir {params.out:q}")


# Theorem 1 shown directly, in each half: edit each class's (task's) concept dataset by r, 2r, 4r examples (random and
# greedy adversarial) drawn from a pool (vision: the first re-discovery set; language: the OOD prompts), re-certify
# with the same seeds, count baseline and certified label flips (pipeline/plans/reports.py attack_jobs).
for _name, _attack in reports.attack_jobs(config, PATHS, VCONCEPTS, filter_metrics).items():

    rule:
        name: _name
        input: _attack["inputs"]
        output:
            table=_attack["outputs"]["table"],
            summary=_attack["outputs"]["summary"],
            figure=report(_attack["outputs"]["figure"], caption="../report/attack.rst", category=_attack["category"]),
        params:
            job=job_env(_name),
            classes=input_pairs("--class"),
            options=_attack["options"],
            out=output_dir,
        log: log_path(_name)
        conda: ENV
        shell: stage_command("report-attack {params.classes} {params.options} --out-dir {params.out:q}")


rule warnings:
    """The run's one warning list (reports/flags.py run_flags): every degenerate result of the curves tables and
    certificates (model at chance, empty circuits, certified nothing, ...) and the plan warnings. summary.md, the
    explorer, the MLflow tags (cc.flag.<kind>) and the end of the run all show this file."""
    input:
        curves=WARNINGS_INPUTS["curves"],
        certificates=WARNINGS_INPUTS["certificates"],
        plan=PLAN_WARNINGS_FILE,
        selected=WARNINGS_INPUTS["selected"],
    output: RUN["warnings"]["list"]
    params: job=job_env("warnings")
    log: log_path("warnings")
    conda: ENV
    shell:
        stage_command("report-warnings --curves {input.curves:q} --certificates {input.certificates:q} "
                      "--selected {input.selected:q} --plan-warnings {input.plan:q} --out {output:q}")


rule summary:
    """summary.md, the run's results in one page (reports/summary.py): the headline (one table per experiment at the
    truth's size, also written to findings.json, which the explorer and the end of the run show), one compact table
    per result family, the warnings grouped by kind; after every table."""
    input:
        targets=reports.summary_targets(config, PATHS, VCONCEPTS),
        warnings=RUN["warnings"]["list"],
        plan=PLAN_WARNINGS_FILE,
        **SUMMARY_INPUTS,
    output:
        page=RUN["summary"]["page"],
        findings=RUN["summary"]["findings"],
    params:
        job=job_env("summary"),
        experiments=item_options("--experiment", [row[1:] for row in EXPERIMENT_TABLES]),
        testbed=partial(reports.summary_testbed_options, config),
    log: log_path("summary")
    conda: ENV
    shell:
        stage_command("report-summary {params.experiments} --warnings {input.warnings:q} "
                      "--plan-warnings {input.plan:q} {params.testbed} --out {output.page:q} "
                      "--out-findings {output.findings:q}")


rule explorer:
    """The circuit explorer: RESULTS/explorer/index.html, a static folder that opens from disk (after every table
    and figure, which it shows)."""
    input:
        targets=reports.explorer_targets(config, PATHS, VCONCEPTS),
        warnings=RUN["warnings"]["list"],
        findings=RUN["summary"]["findings"],
        ground_truths=SUMMARY_INPUTS["ground_truths"],
        circuits=list(dict.fromkeys(path for row in EXPLORER_CIRCUITS for path in row[2:])),
    output:
        # the folder's other files (pages, figures, CSS, JS) are written beside index.html, atomically with it
        report(RUN["explorer"]["page"], caption="../report/explorer.rst", category="Explorer"),
    params:
        job=job_env("explorer"),
        experiments=item_options("--experiment", EXPERIMENT_TABLES),
        circuits=item_options("--circuit", EXPLORER_CIRCUITS),
        features=item_options("--features", reports.explorer_features(config, PATHS, VCONCEPTS)),
        theory=words(THEORY.values()),
        truth=reports.explorer_truth_option,
        out=output_dir,
    log: log_path("explorer")
    conda: ENV
    shell:
        stage_command("report-explorer {params.experiments} {params.circuits} {params.features} "
                      "--theory {params.theory} --warnings {input.warnings:q} "
                      "--findings {input.findings:q} {params.truth} --out-dir {params.out:q}")
