# Aggregates: tables and figures of the paper, the run's warning list and summary. `rule all` asks for these.

import json
# The operating K of every figure comes from one table, operating_points.csv, that report-sufficiency
# writes beside the peak tables; the later reports read it and never recompute it.

ALL_TARGETS = []
SUMMARY_MEAN_ABLATION = []  # the testbed's mean-ablation selection table (the summary's findings)
# what the run's one warning list (warnings.json, reports/flags.py run_flags) checks: every curves table and every
# certificate of the main settings, and the parse-time plan warnings (plan/warnings.json)
SUMMARY_CURVES = []
SUMMARY_SELECTED = []  # the selected_* tables: a K chosen on held-out data that is the whole model is flagged
SUMMARY_CERTIFICATES = []
PLAN_WARNINGS_FILE = f"{RESULTS}/plan/warnings.json"


rule plan_warnings:
    """The plan warnings the Snakefile printed at parse time (PLAN_RECORDS: every setting the config certifies, the
    radius sweep's included), written into the results: the warning list, the summary, the explorer and the
    radius-sweep figure show them. Rerun when they change (params)."""
    output:
        PLAN_WARNINGS_FILE,
    params:
        job=job_env("plan_warnings"),
        records=json.dumps(PLAN_RECORDS),
    log:
        log_path("plan_warnings"),
    conda:
        ENV
    shell:
        "{params.job} certified-circuits report-plan-warnings --records {params.records:q} --out {output:q} 2> {log:q}"


# The theory figures are drawn for one (U, |D|): the vision experiment's main setting (every class shares its |D| and
# U), else the first language setting's, from the parse-time plans (pipeline/plans.py); none when no plan is known
# at parse time (a folders model), then the paper's U = 3,840.
THEORY_PLAN = next((p for p in CHECKED.plans if p.key == "vision.certification"), None) or next(
    (p for p in CHECKED.plans if p.key.startswith("language.")), None)
THEORY_SIZES = (f"--n-components {THEORY_PLAN.plan.n_components} --n-examples {THEORY_PLAN.plan.n_examples} "
                f"--label {q(THEORY_PLAN.where.split(',')[0])}" if THEORY_PLAN else "")


rule theory_figures:
    """App. C: certified radius vs p_del (dotted where IN is impossible at the run's |D|), minimum n vs tau (with and
    without the correction over the run's U)."""
    output:
        radius=report(f"{FIGURES}/theory/radius_vs_pdel.png", caption="../report/theory.rst", category="Theory"),
        samples=report(f"{FIGURES}/theory/samples_vs_tau.png", caption="../report/theory.rst", category="Theory"),
    params:
        job=job_env("theory_figures"),
        sizes=THEORY_SIZES,
        out=lambda w, output: os.path.dirname(output.radius),
    log:
        log_path("theory_figures"),
    conda:
        ENV
    shell:
        "{params.job} certified-circuits report-theory {params.sizes} --out-dir {params.out:q} 2> {log:q}"


ALL_TARGETS += rules.theory_figures.output


if VISION["enabled"]:
    VMAIN = VMAIN_SCORER
    VTABLES = PATHS.tables(VX)

    rule vision_tables:
        """Table 1 / Table 3 (all scorers), the cACC-K curves and the operating points."""
        input:
            [PATHS.sufficiency(VX, "concept", c, VSETTING) for c in VCONCEPTS],
        output:
            peaks=report(f"{VTABLES}/peaks_cacc_raw.csv", caption="../report/peaks.rst", category="Vision"),
            balanced=report(f"{VTABLES}/peaks_balanced_raw.csv", caption="../report/peaks.rst", category="Vision"),
            curves=f"{VTABLES}/curves.csv",
            operating_points=f"{VTABLES}/operating_points.csv",
            curves_figure=report(f"{VTABLES}/curves_cacc.png", caption="../report/curves.rst", category="Vision"),
            balanced_figure=report(f"{VTABLES}/curves_balanced_accuracy.png", caption="../report/balanced.rst", category="Vision"),
            selected=[f"{VTABLES}/selected_{m}_raw.csv" for m in ("cacc", "balanced")] if VISION["selection_set"] else [],
        params:
            job=job_env("vision_tables"),
            select=f"--select-on {q(VISION['selection_set'])}" if VISION["selection_set"] else "",
            test=config["tables"]["test"],
            bootstrap_seed=config["tables"]["bootstrap_seed"],
            title=VX,
            out=lambda w, output: os.path.dirname(output[0]),
        log:
            log_path("vision_tables"),
        conda:
            ENV
        shell:
            "{params.job} certified-circuits report-sufficiency --inputs {input:q} --by scorer --test {params.test} --bootstrap-seed {params.bootstrap_seed} "
            "{params.select} --title {params.title:q} --out-dir {params.out:q} 2> {log:q}"

    ALL_TARGETS += rules.vision_tables.output

    if "mean" in VISION["ablations"]:
        VMEAN_TABLES = f"{VTABLES}/mean_ablation"

        rule vision_tables_mean:
            """The same tables under mean ablation (non-circuit channels at their train-split mean): the evaluation
            a class-biased circuit cannot win, since every other class keeps its average logit."""
            input:
                [PATHS.sufficiency(VX, "concept", c, VSETTING) for c in VCONCEPTS],
            output:
                peaks=f"{VMEAN_TABLES}/peaks_cacc_raw.csv",
                balanced=f"{VMEAN_TABLES}/peaks_balanced_raw.csv",
                curves=f"{VMEAN_TABLES}/curves.csv",
                operating_points=f"{VMEAN_TABLES}/operating_points.csv",
                curves_figure=report(f"{VMEAN_TABLES}/curves_cacc.png", caption="../report/curves.rst", category="Vision"),
                balanced_figure=report(f"{VMEAN_TABLES}/curves_balanced_accuracy.png", caption="../report/balanced.rst", category="Vision"),
                selected=[f"{VMEAN_TABLES}/selected_{m}_raw.csv" for m in ("cacc", "balanced")] if VISION["selection_set"] else [],
            params:
                job=job_env("vision_tables_mean"),
                select=f"--select-on {q(VISION['selection_set'])}" if VISION["selection_set"] else "",
                test=config["tables"]["test"],
                bootstrap_seed=config["tables"]["bootstrap_seed"],
                title=f"{VX} (mean ablation)",
                out=lambda w, output: os.path.dirname(output[0]),
            log:
                log_path("vision_tables_mean"),
            conda:
                ENV
            shell:
                "{params.job} certified-circuits report-sufficiency --inputs {input:q} --by scorer --ablation mean --test {params.test} "
                "--bootstrap-seed {params.bootstrap_seed} {params.select} --title {params.title:q} --out-dir {params.out:q} 2> {log:q}"

        ALL_TARGETS += rules.vision_tables_mean.output
        SUMMARY_CURVES += [rules.vision_tables_mean.output.curves]
        SUMMARY_SELECTED += rules.vision_tables_mean.output.selected
        if VISION["selection_set"] and GROUND_TRUTHS.get(VX) == "vision":
            SUMMARY_MEAN_ABLATION += [f"{VMEAN_TABLES}/selected_balanced_raw.csv"]
    SUMMARY_CURVES += [rules.vision_tables.output.curves]
    SUMMARY_SELECTED += rules.vision_tables.output.selected
    SUMMARY_CERTIFICATES += [PATHS.certificates(VX, "concept", c, s, VSETTING) for c in VCONCEPTS
                             for s in vision_scorers("concept", VSETTING)]

    if REDISCOVERY:

        rule vision_iou:
            """Fig. IoU: ID circuits vs circuits re-discovered on each OOD set (at the max-gap K)."""
            input:
                operating_points=rules.vision_tables.output.operating_points,
                circuits=vision_iou_circuits,
            output:
                table=f"{VTABLES}/iou.csv",
                figure=report(f"{VTABLES}/iou.png", caption="../report/iou.rst", category="Vision"),
            params:
                job=job_env("vision_iou"),
                circuits=lambda w, input: item_options("--circuits", zip(input.circuits[::2], input.circuits[1::2])),
                scorer=VMAIN,
                out=lambda w, output: os.path.dirname(output[0]),
            log:
                log_path("vision_iou"),
            conda:
                ENV
            shell:
                "{params.job} certified-circuits report-iou --operating-points {input.operating_points:q} "
                "--scorer {params.scorer} {params.circuits} --out-dir {params.out:q} 2> {log:q}"

        ALL_TARGETS += rules.vision_iou.output

    VATTACK = VISION["attack"]
    if VATTACK["enabled"] and REDISCOVERY:

        rule vision_attack:
            """Theorem 1 shown directly: edit each class's concept dataset by r, 2r, 4r examples (random and
            greedy adversarial), re-certify with the same seeds, count baseline and certified label flips."""
            input:
                vision_attack_inputs,
            output:
                table=f"{VTABLES}/attack/attack_raw.csv",
                summary=f"{VTABLES}/attack/attack.md",
                figure=report(f"{VTABLES}/attack/attack.png", caption="../report/attack.rst", category="Vision"),
            params:
                job=job_env("vision_attack"),
                classes=lambda w, input: item_options("--class", zip(input[::2], input[1::2])),
                options=lambda w: attack_options(VATTACK, VSETTING, VMAIN_SCORER),
                out=lambda w, output: os.path.dirname(output.table),
            log:
                log_path("vision_attack"),
            conda:
                ENV
            shell:
                "{params.job} certified-circuits report-attack {params.classes} {params.options} "
                "--out-dir {params.out:q} 2> {log:q}"

        ALL_TARGETS += rules.vision_attack.output

    SEEDS = VISION["seed_stability"]
    if SEEDS["n_seeds"] >= 2:
        SEED_CIRCUITS = [f for c in vision_concepts(SEEDS["concepts"]) for i in range(SEEDS["n_seeds"])
                         for f in vision_circuits("concept", c, VSETTING.replace(seed=VSETTING.seed + i))]

        rule vision_seed_stability:
            """Pairwise IoU of certified circuits across independent certification seeds."""
            input:
                operating_points=rules.vision_tables.output.operating_points,
                circuits=SEED_CIRCUITS,
            output:
                table=f"{VTABLES}/seed_stability.csv",
                figure=report(f"{VTABLES}/seed_stability.png", caption="../report/seeds.rst", category="Vision"),
            params:
                job=job_env("vision_seed_stability"),
                circuits=item_options("--circuits", zip(SEED_CIRCUITS[::2], SEED_CIRCUITS[1::2])),
                scorer=VMAIN,
                out=lambda w, output: os.path.dirname(output[0]),
            log:
                log_path("vision_seed_stability"),
            conda:
                ENV
            shell:
                "{params.job} certified-circuits report-seeds --operating-points {input.operating_points:q} "
                "--scorer {params.scorer} {params.circuits} --out-dir {params.out:q} 2> {log:q}"

        ALL_TARGETS += rules.vision_seed_stability.output

    SWEEP = VISION["radius_sweep"]
    if SWEEP["enabled"]:
        RADIUS_CIRCUITS, RADIUS_SUFFICIENCY = [], []
        for c in vision_concepts(SWEEP["concepts"]):
            for size in SWEEP["sizes"]:
                split = "concept" if size == vision_concept_size() else f"concept_n{size}"
                for p_del in SWEEP["p_del"]:
                    setting = VSETTING.replace(p_del=p_del)
                    RADIUS_CIRCUITS += vision_circuits(split, c, setting)
                    RADIUS_SUFFICIENCY.append(PATHS.sufficiency(VX, split, c, setting))

        rule vision_radius_sweep:
            """App. D: abstention, effective size and cACC across certified radii and |D|."""
            input:
                circuits=RADIUS_CIRCUITS,
                sufficiency=RADIUS_SUFFICIENCY,
                plan=PLAN_WARNINGS_FILE,
            output:
                fixed=f"{VTABLES}/radius_sweep_fixed_k.csv",
                best=f"{VTABLES}/radius_sweep_best_k.csv",
                figure=report(f"{VTABLES}/radius_sweep_best_k.png", caption="../report/radius.rst", category="Vision"),
            params:
                job=job_env("vision_radius_sweep"),
                circuits=item_options("--circuits", zip(RADIUS_CIRCUITS[::2], RADIUS_CIRCUITS[1::2])),
                k=SWEEP["fixed_k"],
                out=lambda w, output: os.path.dirname(output[0]),
            log:
                log_path("vision_radius_sweep"),
            conda:
                ENV
            shell:
                "{params.job} certified-circuits report-radius --k {params.k} {params.circuits} "
                "--sufficiency {input.sufficiency:q} --plan-warnings {input.plan:q} --out-dir {params.out:q} 2> {log:q}"

        ALL_TARGETS += rules.vision_radius_sweep.output

    rule vision_features:
        """Fig. 4: top-activating examples of certified-in, abstained and certified-out channels."""
        input:
            operating_points=rules.vision_tables.output.operating_points,
            attributions=PATHS.attributions(VX, "concept", "{concept}"),
            votes=PATHS.votes(VX, "concept", "{concept}", VMAIN, VSETTING),
            certificates=PATHS.certificates(VX, "concept", "{concept}", VMAIN, VSETTING),
        output:
            report(f"{PATHS.figures(VX)}/features_{{concept}}.png", caption="../report/features.rst", category="Vision"),
        params:
            job=job_env("vision_features"),
            data=vision_eval_data("id"),
            scorer=VMAIN,
            stem=lambda w: f"{PATHS.figures(VX)}/features_{w.concept}",
        log:
            log_path("vision_features", "{concept}"),
        conda:
            ENV
        shell:
            "{params.job} certified-circuits report-features --operating-points {input.operating_points:q} "
            "--scorer {params.scorer} --attributions {input.attributions:q} --votes {input.votes:q} "
            "--certificates {input.certificates:q} --data {params.data:q} --out-stem {params.stem:q} 2> {log:q}"

    ALL_TARGETS += expand(f"{PATHS.figures(VX)}/features_{{concept}}.png", concept=vision_concepts(VISION["feature_concepts"]))

    RUNTIME = VISION["runtime"]
    if RUNTIME["n"]:

        rule vision_runtime:
            """App. D: naive (A re-run per mask) vs cached certification cost for one class."""
            input:
                vision_model_inputs() + local_inputs([vision_eval_data("id")]),
            output:
                f"{VTABLES}/runtime.csv",
            params:
                job=job_env("vision_runtime"),
                model=vision_model_args(),
                data=lambda w: vision_eval_data("id"),
                concept=RUNTIME.get("concept", VCONCEPTS[0]),
                n=words(RUNTIME["n"]),
                k_grid=words(VISION["k_grid"]),
                setting=VSETTING,  # the whole setting: p_del, seed, tau, alpha, correction (n0, n: per --n)
                stem=lambda w, output: output[0][: -len(".csv")],
            log:
                log_path("vision_runtime"),
            conda:
                ENV
            threads: 1
            resources:
                mem_mb=4000,
                runtime=60,
                gpu=VISION_GPU,
            shell:
                "{params.job} certified-circuits vision-runtime {params.model} --threads {threads} --data {params.data:q} "
                "--concept {params.concept:q} --n {params.n} --k-grid {params.k_grid} --p-del {params.setting.p_del} "
                "--seed {params.setting.seed} --tau {params.setting.tau} --alpha {params.setting.alpha} "
                "--correction {params.setting.correction} --out-stem {params.stem:q} 2> {log:q}"

        ALL_TARGETS += rules.vision_runtime.output

    if EMBEDDED_VISION:
        SPURIOUS_ATTRIBUTIONS = [PATHS.attributions(VX, "concept", c) for c in VCONCEPTS]
        SPURIOUS_CIRCUITS = [f for c in VCONCEPTS for f in vision_circuits("concept", c)]

        rule vision_spurious:
            """Spurious-cue index of certified-in vs abstained vs certified-out channels."""
            input:
                operating_points=rules.vision_tables.output.operating_points,
                attributions=SPURIOUS_ATTRIBUTIONS,
                circuits=SPURIOUS_CIRCUITS,
            output:
                table=f"{VTABLES}/spurious_summary.csv",
                figure=report(f"{VTABLES}/spurious.png", caption="../report/spurious.rst", category="Vision"),
            params:
                job=job_env("vision_spurious"),
                circuits=item_options("--circuits", zip(SPURIOUS_CIRCUITS[::2], SPURIOUS_CIRCUITS[1::2])),
                scorer=VMAIN,
                out=lambda w, output: os.path.dirname(output[0]),
            log:
                log_path("vision_spurious"),
            conda:
                ENV
            shell:
                "{params.job} certified-circuits report-spurious --operating-points {input.operating_points:q} "
                "--scorer {params.scorer} --attributions {input.attributions:q} {params.circuits} "
                "--out-dir {params.out:q} 2> {log:q}"

        ALL_TARGETS += rules.vision_spurious.output


if LANGUAGE["enabled"]:
    LTABLES = PATHS.tables(LX)

    rule language_tables:
        """Table 1 (language rows): per task and eval set, the best certification setting's peak."""
        input:
            [PATHS.sufficiency(LX, "train", task, setting) for task in LANGUAGE["tasks"] for setting in language_settings(task)],
        output:
            peaks=report(f"{LTABLES}/peaks_cacc_raw.csv", caption="../report/peaks.rst", category="Language"),
            curves=f"{LTABLES}/curves.csv",
            operating_points=f"{LTABLES}/operating_points.csv",
            curves_figure=report(f"{LTABLES}/curves_cacc.png", caption="../report/language_curves.rst", category="Language"),
            selected=[f"{LTABLES}/selected_cacc_raw.csv"] if LANGUAGE["selection_set"] else [],
        params:
            job=job_env("language_tables"),
            select=f"--select-on {q(LANGUAGE['selection_set'])}" if LANGUAGE["selection_set"] else "",
            test=config["tables"]["test"],
            bootstrap_seed=config["tables"]["bootstrap_seed"],
            title=LX,
            out=lambda w, output: os.path.dirname(output[0]),
        log:
            log_path("language_tables"),
        conda:
            ENV
        shell:
            "{params.job} certified-circuits report-sufficiency --inputs {input:q} --by concept setting --best-setting "
            "--test {params.test} --bootstrap-seed {params.bootstrap_seed} {params.select} --title {params.title:q} --out-dir {params.out:q} 2> {log:q}"

    ALL_TARGETS += rules.language_tables.output
    SUMMARY_CURVES += [rules.language_tables.output.curves]
    SUMMARY_SELECTED += rules.language_tables.output.selected
    SUMMARY_CERTIFICATES += [PATHS.certificates(LX, "train", task, "eap_ig", setting) for task in LANGUAGE["tasks"]
                             for setting in language_settings(task)]

    if LANGUAGE["selection_set"]:
        LANGUAGE_CIRCUITS = [row for row in explorer_circuits() if row[0] == LX]

        rule language_graphs:
            """Certified circuits as hannamw/EAP-IG Graph JSON at the K selected on held-out prompts (MIB files)."""
            input:
                selected=rules.language_tables.output.selected,
                circuits=[path for row in LANGUAGE_CIRCUITS for path in row[2:]],
            output:
                directory(f"{RESULTS}/graphs/{LX}"),
            params:
                job=job_env("language_graphs"),
                circuits=item_options("--circuit", LANGUAGE_CIRCUITS),
            log:
                log_path("language_graphs"),
            conda:
                ENV
            shell:
                "{params.job} certified-circuits report-graphs {params.circuits} --selected {input.selected:q} "
                "--out-dir {output:q} 2> {log:q}"

        ALL_TARGETS += rules.language_graphs.output

    if LANGUAGE["faithfulness"]["grid"] == "mib":

        rule language_faithfulness_mib_table:
            """CPR (signed ranking) and CMD (|score| ranking) on MIB's grid, per task and eval set (docs/mib.md)."""
            input:
                [PATHS.faithfulness_mib(LX, task) for task in LANGUAGE["tasks"]],
            output:
                table=f"{LTABLES}/faithfulness_mib.csv",
                mean=f"{LTABLES}/faithfulness_mib_mean.md",
            params:
                job=job_env("language_faithfulness_mib_table"),
                out=lambda w, output: os.path.dirname(output.table),
            log:
                log_path("language_faithfulness_mib_table"),
            conda:
                ENV
            shell:
                "{params.job} certified-circuits report-mib-faithfulness --inputs {input:q} --out-dir {params.out:q} 2> {log:q}"

        ALL_TARGETS += rules.language_faithfulness_mib_table.output

    if LANGUAGE["mib"]["export"]:
        # every setting of each task and the held-out selection table: the job exports the selected setting
        MIB_CIRCUITS = jobs.mib_circuits(config, PATHS)
        MIB_SELECTED_TABLE = jobs.language_selected_table(config, PATHS)

        rule language_mib:
            """Certified circuits as MIB circuit-track submission files: one Graph JSON per edge fraction, of each
            task's setting selected on held-out prompts (docs/mib.md)."""
            input:
                circuits=list(dict.fromkeys(path for row in MIB_CIRCUITS for path in row[1:])),
                selected=[MIB_SELECTED_TABLE] if MIB_SELECTED_TABLE else [],
            output:
                directory(PATHS.mib(LX)),
            params:
                job=job_env("language_mib"),
                circuits=item_options("--circuit", MIB_CIRCUITS),
                selected=f"--selected {q(MIB_SELECTED_TABLE)}" if MIB_SELECTED_TABLE else "",
                model=q(jobs.mib_model_name(config)),
                method=q(LANGUAGE["mib"]["method"]),
            log:
                log_path("language_mib"),
            conda:
                ENV
            shell:
                "{params.job} certified-circuits report-mib {params.circuits} {params.selected} --model-name {params.model} "
                "--method {params.method} --out-dir {output:q} 2> {log:q}"

        ALL_TARGETS += rules.language_mib.output

    LATTACK = LANGUAGE["attack"]
    if LATTACK["enabled"]:

        rule language_attack:
            """Theorem 1 shown directly on the tasks: edits drawn from the OOD prompts. Every task is
            certified at one setting, the first task's first (tau, p_del), so one radius r holds for
            the whole table (embedded: tau 0.90, p_del 0.95, r = 9)."""
            input:
                [f for task in LANGUAGE["tasks"] for f in (PATHS.attributions(LX, "train", task), PATHS.attributions(LX, "ood_test", task))],
            output:
                table=f"{LTABLES}/attack/attack_raw.csv",
                summary=f"{LTABLES}/attack/attack.md",
                figure=report(f"{LTABLES}/attack/attack.png", caption="../report/attack.rst", category="Language"),
            params:
                job=job_env("language_attack"),
                classes=lambda w, input: item_options("--class", zip(input[::2], input[1::2])),
                options=lambda w: attack_options(LATTACK, language_settings(LANGUAGE["tasks"][0])[0], "eap_ig"),
                out=lambda w, output: os.path.dirname(output.table),
            log:
                log_path("language_attack"),
            conda:
                ENV
            shell:
                "{params.job} certified-circuits report-attack {params.classes} {params.options} "
                "--out-dir {params.out:q} 2> {log:q}"

        ALL_TARGETS += rules.language_attack.output


ALL_TARGETS += TESTBED_TARGETS


rule warnings:
    """The run's one warning list (reports/flags.py run_flags): every degenerate result of the curves tables and
    certificates (model at chance, empty circuits, certified nothing, ...) and the plan warnings. summary.md, the
    explorer, the MLflow tags (cc.flag.<kind>) and the end of the run all show this file."""
    input:
        curves=SUMMARY_CURVES,
        certificates=SUMMARY_CERTIFICATES,
        plan=PLAN_WARNINGS_FILE,
        selected=SUMMARY_SELECTED,
    output:
        f"{RESULTS}/warnings.json",
    params:
        job=job_env("warnings"),
    log:
        log_path("warnings"),
    conda:
        ENV
    shell:
        "{params.job} certified-circuits report-warnings --curves {input.curves:q} --certificates {input.certificates:q} "
        "--selected {input.selected:q} --plan-warnings {input.plan:q} --out {output:q} 2> {log:q}"


ALL_TARGETS += rules.warnings.output
SUMMARY_EXPERIMENTS = ([(VX, PATHS.tables(VX))] if VISION["enabled"] else []) + (
    [(LX, PATHS.tables(LX))] if LANGUAGE["enabled"] else [])


rule summary:
    """summary.md, the run's results in one page (reports/summary.py): the findings, one compact table per result
    family, the warnings grouped by kind; after every table (the end of the run prints its findings)."""
    input:
        targets=list(ALL_TARGETS),
        warnings=rules.warnings.output[0],
        plan=PLAN_WARNINGS_FILE,
        ground_truths=[PATHS.ground_truth(x) for x in GROUND_TRUTHS],
        recovery=[p for p in TESTBED_TABLES if p.endswith("recovery_auroc.csv")],
        stability=[p for p in TESTBED_TABLES if p.endswith("stability.csv")],
        mean_ablation=SUMMARY_MEAN_ABLATION,
    output:
        f"{RESULTS}/summary.md",
    params:
        job=job_env("summary"),
        experiments=item_options("--experiment", SUMMARY_EXPERIMENTS),
        testbed=lambda w, input: " ".join(
            f"--{flag} {words(paths)}" for flag, paths in (("ground-truth", input.ground_truths), ("recovery", input.recovery),
                                                           ("stability", input.stability), ("mean-ablation", input.mean_ablation))
            if paths) + (f" --main-scorer {q(VMAIN_SCORER)}" if VISION["enabled"] else ""),
    log:
        log_path("summary"),
    conda:
        ENV
    shell:
        "{params.job} certified-circuits report-summary {params.experiments} --warnings {input.warnings:q} "
        "--plan-warnings {input.plan:q} {params.testbed} --out {output:q} 2> {log:q}"


ALL_TARGETS += rules.summary.output


EXPLORER_EXPERIMENTS = ([("vision", VX, PATHS.tables(VX))] if VISION["enabled"] else []) + (
    [("language", LX, PATHS.tables(LX))] if LANGUAGE["enabled"] else [])
EXPLORER_FEATURES = ([(VX, c, f"{PATHS.figures(VX)}/features_{c}.png") for c in vision_concepts(VISION["feature_concepts"])]
                     if VISION["enabled"] else [])


rule explorer:
    """The circuit explorer: RESULTS/explorer/index.html, a static folder that opens from disk (after every table
    and figure, which it shows)."""
    input:
        targets=list(ALL_TARGETS),
        warnings=rules.warnings.output[0],
        summary=rules.summary.output[0],
        ground_truths=[PATHS.ground_truth(x) for x in GROUND_TRUTHS],
        circuits=list(dict.fromkeys(path for row in explorer_circuits() for path in row[2:])),
    output:
        # the folder's other files (pages, figures, CSS, JS) are written beside index.html, atomically with it
        report(f"{RESULTS}/explorer/index.html", caption="../report/explorer.rst", category="Explorer"),
    params:
        job=job_env("explorer"),
        experiments=item_options("--experiment", EXPLORER_EXPERIMENTS),
        circuits=item_options("--circuit", explorer_circuits()),
        features=item_options("--features", EXPLORER_FEATURES),
        theory=words(rules.theory_figures.output),
        truth=lambda w, input: f"--ground-truth {words(input.ground_truths)}" if input.ground_truths else "",
        out=lambda w, output: os.path.dirname(output[0]),
    log:
        log_path("explorer"),
    conda:
        ENV
    shell:
        "{params.job} certified-circuits report-explorer {params.experiments} {params.circuits} {params.features} "
        "--theory {params.theory} --warnings {input.warnings:q} --summary {input.summary:q} {params.truth} "
        "--out-dir {params.out:q} 2> {log:q}"


ALL_TARGETS += rules.explorer.output
