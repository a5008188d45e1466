# The workflow that wrote this fixture (Snakemake 9.27.1, `snakemake -s make_fixture.smk --cores 2` in a copy of this
# folder; snakemake.log is its .snakemake/log file): the project's rule names, log and benchmark paths
# (pipeline.plans.common.log_path / benchmark_path, results_dir "run") and the start-up line the vision stages log.
CONCEPTS = ["circle", "square"]
STARTUP = "{stamp} certified_circuits.cli.vision_common INFO {stage}: start-up {seconds}s before the first batch (imports, model, data index)"

rule all:
    input:
        "run/tables/world/peaks_cacc_raw.csv",

rule vision_train:
    output:
        "run/models/world.pt",
    log:
        "run/logs/vision_train/job.log",
    benchmark:
        "run/benchmarks/vision_train/job.tsv"
    shell:
        "sleep 1.5; echo model > {output}; echo '2026-11-28 00:20:01,101 certified_circuits.vision.train INFO epoch 10: loss 0.31' 2> {log}"

rule vision_attribute:
    input:
        "run/models/world.pt",
    output:
        "run/attributions/world/concept/{concept}.h5",
    log:
        "run/logs/vision_attribute/{concept}.log",
    benchmark:
        "run/benchmarks/vision_attribute/{concept}.tsv"
    params:
        line=lambda w: STARTUP.format(stamp="2026-11-28 00:20:03,512", stage="vision-attribute", seconds="0.52" if w.concept == "circle" else "0.61"),
    shell:
        "sleep 0.8; echo '{params.line}' > {log}; echo a > {output}"

rule vision_evaluate:
    input:
        "run/attributions/world/concept/{concept}.h5",
    output:
        "run/sufficiency/world/concept/{concept}.csv",
    log:
        "run/logs/vision_evaluate/concept/{concept}/p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni.log",
    benchmark:
        "run/benchmarks/vision_evaluate/concept/{concept}/p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni.tsv"
    params:
        line=lambda w: STARTUP.format(stamp="2026-11-28 00:20:05,020", stage="vision-evaluate", seconds="0.93" if w.concept == "circle" else "1.04"),
    shell:
        "sleep 2.2; echo '{params.line}' > {log}; echo '2026-11-28 00:20:07,244 certified_circuits.cli.vision_circuits INFO circle (relevance): 372 rows in 1.2s' >> {log}; echo x > {output}"

rule vision_tables:
    input:
        expand("run/sufficiency/world/concept/{concept}.csv", concept=CONCEPTS),
    output:
        "run/tables/world/peaks_cacc_raw.csv",
    log:
        "run/logs/vision_tables/job.log",
    shell:
        "sleep 3.1; echo t > {output}; echo '2026-11-28 00:20:10,377 certified_circuits.reports.paper INFO sufficiency report for 3720 rows -> run/tables/world' > {log}"
