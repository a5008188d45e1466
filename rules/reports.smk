# Aggregates: tables and figures of the paper, and the run summary. `rule all` asks for these.

TABLES = f"{RESULTS}/tables"
FIGURES = f"{RESULTS}/figures"
ALL_TARGETS = []
SUMMARY_PEAKS = []
TEST = config.get("tables", {}).get("test", "wilcoxon")

EXPERIMENTS = {}
if VISION["enabled"]:
    EXPERIMENTS[VX] = {"absolute": False, "k_grid": VISION["k_grid"]}
if LANGUAGE["enabled"]:
    EXPERIMENTS[LX] = {"absolute": True, "k_grid": LANGUAGE["k_grid"]}


def with_(cert, **changes):
    return {**cert, **changes}


def items_arg(rows):
    return " ".join("--item " + " ".join(map(str, row)) for row in rows)


if VISION["enabled"]:
    VCERT = VISION["certification"]
    VMAIN = VISION["main_scorer"]
    VCONCEPTS = vision_concepts()
    for key, listed in (("vision.feature_concepts", VISION.get("feature_concepts", "all")),
                        ("vision.seed_stability.concepts", VISION.get("seed_stability", {}).get("concepts", "all")),
                        ("vision.radius_sweep.concepts", VISION.get("radius_sweep", {}).get("concepts", "all"))):
        unknown = [] if listed == "all" else [c for c in listed if c not in VCONCEPTS]
        if unknown:
            config_error(key, unknown, f"every class listed must be certified, i.e. one of {VCONCEPTS}")

    rule vision_tables:
        """Table 1 / Table 3 (all scorers) and the cACC-K curves of the vision experiment."""
        input:
            [sufficiency_path(VX, "concept", c, s, VCERT) for c in VCONCEPTS for s in VISION["scorers"]],
        output:
            peaks=f"{TABLES}/{VX}/peaks_cacc_raw.csv",
            balanced=f"{TABLES}/{VX}/peaks_balanced_raw.csv",
            curves=f"{TABLES}/{VX}/curves.csv",
            curves_figure=report(f"{TABLES}/{VX}/curves_cacc.png", caption="../report/curves.rst", category="Vision"),
            balanced_figure=report(f"{TABLES}/{VX}/curves_balanced_accuracy.png", caption="../report/balanced.rst",
                                   category="Vision"),
        log:
            f"{RESULTS}/logs/reports/{VX}_tables.log",
        shell:
            tracked("certified-circuits report-sufficiency --inputs {input} --by scorer --test {TEST} "
                    "--title '{VX}' --out-dir {TABLES}/{VX} 2> {log}")

    ALL_TARGETS += rules.vision_tables.output
    SUMMARY_PEAKS += [rules.vision_tables.output.peaks, rules.vision_tables.output.balanced]

    if VISION.get("rediscovery_sets"):
        MIN_REDISCOVERY = VISION.get("rediscovery_min_images", 10)

        def iou_rows(wildcards=None):
            """(concept, eval set, ID votes, ID certificates, OOD votes, OOD certificates) for every class
            with at least `rediscovery_min_images` images in the OOD set (filtered sets can lack some)."""
            rows = []
            for e in VISION["rediscovery_sets"]:
                available = vision_images_per_class(e)
                for c in VCONCEPTS:
                    if available.get(c, 0) >= MIN_REDISCOVERY:
                        rows.append((c, e, votes_path(VX, "concept", c, VMAIN, VCERT),
                                     certificates_path(VX, "concept", c, VMAIN, VCERT),
                                     votes_path(VX, e, c, VMAIN, VCERT), certificates_path(VX, e, c, VMAIN, VCERT)))
            return rows

        rule vision_iou:
            """Fig. IoU: ID circuits vs circuits re-discovered on each OOD set."""
            input:
                curves=f"{TABLES}/{VX}/curves.csv",
                files=lambda w: [f for row in iou_rows() for f in row[2:]],
            output:
                f"{TABLES}/{VX}/iou.csv",
                report(f"{TABLES}/{VX}/iou.png", caption="../report/iou.rst", category="Vision"),
            params:
                rows=lambda w: items_arg(iou_rows()),
            log:
                f"{RESULTS}/logs/reports/{VX}_iou.log",
            shell:
                tracked("certified-circuits report-iou --experiment {VX} --curves {input.curves} --scorer {VMAIN} {params.rows} "
                        "--out-dir {TABLES}/{VX} 2> {log}")

        ALL_TARGETS += rules.vision_iou.output

    SEEDS = VISION.get("seed_stability", {})
    if SEEDS.get("n_seeds", 0) >= 2:
        SEED_ROWS = [
            (c, VCERT["seed"] + i, votes_path(VX, "concept", c, VMAIN, with_(VCERT, seed=VCERT["seed"] + i)),
             certificates_path(VX, "concept", c, VMAIN, with_(VCERT, seed=VCERT["seed"] + i)))
            for c in vision_concepts(SEEDS.get("concepts", "all")) for i in range(SEEDS["n_seeds"])
        ]

        rule vision_seed_stability:
            """Pairwise IoU of certified circuits across independent certification seeds."""
            input:
                curves=f"{TABLES}/{VX}/curves.csv",
                files=[f for row in SEED_ROWS for f in row[2:]],
            output:
                f"{TABLES}/{VX}/seed_stability.csv",
                report(f"{TABLES}/{VX}/seed_stability.png", caption="../report/seeds.rst", category="Vision"),
            params:
                rows=items_arg(SEED_ROWS),
            log:
                f"{RESULTS}/logs/reports/{VX}_seeds.log",
            shell:
                tracked("certified-circuits report-seeds --experiment {VX} --curves {input.curves} --scorer {VMAIN} {params.rows} "
                        "--out-dir {TABLES}/{VX} 2> {log}")

        ALL_TARGETS += rules.vision_seed_stability.output

    SWEEP = VISION.get("radius_sweep", {})
    if SWEEP.get("enabled", False):
        BASE_SIZE = VISION["world"].get("n_concept_per_class", 50) if EMBEDDED_VISION else 50
        RADIUS_ROWS = []
        for c in vision_concepts(SWEEP.get("concepts", "all")):
            for size in SWEEP["sizes"]:
                split = "concept" if size == BASE_SIZE else f"concept_n{size}"
                for p_del in SWEEP["p_del"]:
                    cert = with_(VCERT, p_del=p_del)
                    RADIUS_ROWS.append((c, size, votes_path(VX, split, c, VMAIN, cert),
                                        certificates_path(VX, split, c, VMAIN, cert),
                                        sufficiency_path(VX, split, c, VMAIN, cert)))

        rule vision_radius_sweep:
            """App. D: abstention, effective size and cACC across certified radii and |D|."""
            input:
                [f for row in RADIUS_ROWS for f in row[2:]],
            output:
                f"{TABLES}/{VX}/radius_sweep_fixed_k.csv",
                f"{TABLES}/{VX}/radius_sweep_best_k.csv",
                report(f"{TABLES}/{VX}/radius_sweep_best_k.png", caption="../report/radius.rst", category="Vision"),
            params:
                rows=items_arg(RADIUS_ROWS),
                k=SWEEP.get("fixed_k", 0.6),
            log:
                f"{RESULTS}/logs/reports/{VX}_radius.log",
            shell:
                tracked("certified-circuits report-radius --experiment {VX} --k {params.k} {params.rows} "
                        "--out-dir {TABLES}/{VX} 2> {log}")

        ALL_TARGETS += rules.vision_radius_sweep.output

    FEATURE_CONCEPTS = VISION.get("feature_concepts", VCONCEPTS[:2])
    FEATURE_CONCEPTS = VCONCEPTS if FEATURE_CONCEPTS == "all" else FEATURE_CONCEPTS

    rule vision_features:
        """Fig. 4: top-activating examples of certified-in, abstained and certified-out channels."""
        input:
            curves=f"{TABLES}/{VX}/curves.csv",
            attributions=attribution_path(VX, "concept", "{concept}"),
            votes=votes_path(VX, "concept", "{concept}", VMAIN, VCERT),
            certificates=certificates_path(VX, "concept", "{concept}", VMAIN, VCERT),
        output:
            report(f"{FIGURES}/{VX}/features_{{concept}}.png", caption="../report/features.rst", category="Vision"),
        params:
            data=vision_split_data("concept")[0],
        log:
            f"{RESULTS}/logs/reports/{VX}_features_{{concept}}.log",
        shell:
            tracked("certified-circuits report-features --curves {input.curves} --scorer {VMAIN} --attributions {input.attributions} "
                    "--votes {input.votes} --certificates {input.certificates} --data {params.data} "
                    "--out-stem {FIGURES}/{VX}/features_{wildcards.concept} 2> {log}")

    ALL_TARGETS += expand(f"{FIGURES}/{VX}/features_{{concept}}.png", concept=FEATURE_CONCEPTS)

    RUNTIME = VISION.get("runtime", {})
    if RUNTIME.get("n"):

        rule vision_runtime:
            """App. D: naive (A re-run per mask) vs cached certification cost for one class."""
            input:
                vision_model_inputs() + local_file(vision_split_data("concept")[0]),
            output:
                f"{TABLES}/{VX}/runtime.csv",
            params:
                model=vision_model_args(),
                data=vision_split_data("concept")[0],
                concept=RUNTIME.get("concept", VCONCEPTS[0]),
                n=" ".join(map(str, RUNTIME["n"])),
                k_grid=" ".join(fmt(k) for k in VISION["k_grid"]),
            log:
                f"{RESULTS}/logs/reports/{VX}_runtime.log",
            threads: 1
            resources:
                mem_mb=4000,
                runtime=60,
            shell:
                tracked("certified-circuits vision-runtime {params.model} --threads {threads} --data {params.data} "
                        "--concept {params.concept} --n {params.n} --k-grid {params.k_grid} --p-del {VCERT[p_del]} "
                        "--tau {VCERT[tau]} --alpha {VCERT[alpha]} --out-stem {TABLES}/{VX}/runtime 2> {log}")

        ALL_TARGETS += rules.vision_runtime.output

    if EMBEDDED_VISION:
        SPURIOUS_ROWS = [
            (c, attribution_path(VX, "concept", c), votes_path(VX, "concept", c, VMAIN, VCERT),
             certificates_path(VX, "concept", c, VMAIN, VCERT))
            for c in VCONCEPTS
        ]

        rule vision_spurious:
            """Spurious-cue index of certified-in vs abstained vs certified-out channels."""
            input:
                curves=f"{TABLES}/{VX}/curves.csv",
                files=[f for row in SPURIOUS_ROWS for f in row[1:]],
            output:
                f"{TABLES}/{VX}/spurious_summary.csv",
                report(f"{TABLES}/{VX}/spurious.png", caption="../report/spurious.rst", category="Vision"),
            params:
                rows=items_arg(SPURIOUS_ROWS),
            log:
                f"{RESULTS}/logs/reports/{VX}_spurious.log",
            shell:
                tracked("certified-circuits report-spurious --curves {input.curves} --scorer {VMAIN} {params.rows} "
                        "--out-dir {TABLES}/{VX} 2> {log}")

        ALL_TARGETS += rules.vision_spurious.output


if LANGUAGE["enabled"]:
    LANGUAGE_RUNS = [sufficiency_path(LX, "train", task, "eap_ig", cert)
                     for task in LANGUAGE["tasks"] for cert in language_settings(task)]

    rule language_tables:
        """Table 1 (language rows): per task and eval set, the best certification setting's peak."""
        input:
            LANGUAGE_RUNS,
        output:
            peaks=f"{TABLES}/{LX}/peaks_cacc_raw.csv",
            curves=f"{TABLES}/{LX}/curves.csv",
            curves_figure=report(f"{TABLES}/{LX}/curves_cacc.png", caption="../report/curves.rst", category="Language"),
        log:
            f"{RESULTS}/logs/reports/{LX}_tables.log",
        shell:
            tracked("certified-circuits report-sufficiency --inputs {input} --by concept setting --best-setting "
                    "--test {TEST} --title '{LX}' --out-dir {TABLES}/{LX} 2> {log}")

    ALL_TARGETS += rules.language_tables.output
    SUMMARY_PEAKS += [rules.language_tables.output.peaks]


rule theory_figures:
    """App. C: certified radius vs p_del, minimum n vs tau (with and without the correction)."""
    output:
        report(f"{FIGURES}/theory/radius_vs_pdel.png", caption="../report/theory.rst", category="Theory"),
        report(f"{FIGURES}/theory/samples_vs_tau.png", caption="../report/theory.rst", category="Theory"),
    log:
        f"{RESULTS}/logs/reports/theory.log",
    shell:
        tracked("certified-circuits report-theory --out-dir {FIGURES}/theory 2> {log}")


ALL_TARGETS += rules.theory_figures.output


rule summary:
    """Headline numbers of the run (printed at the end and written to summary.md)."""
    input:
        SUMMARY_PEAKS,
    output:
        f"{RESULTS}/summary.md",
    log:
        f"{RESULTS}/logs/reports/summary.log",
    shell:
        tracked("certified-circuits report-summary --peaks {input} --out {output} 2> {log}")


ALL_TARGETS += rules.summary.output
