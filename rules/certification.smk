# Algorithm 2 (votes) and Algorithm 1 (certificates): one job per attribution file and setting.

# EAP-IG edges rank by |mean score|; vision channels by the signed mean.
EXPERIMENTS = {}
if VISION["enabled"]:
    EXPERIMENTS[VX] = {"ranking": "", "k_grid": words(VISION["k_grid"])}
if LANGUAGE["enabled"]:
    EXPERIMENTS[LX] = {"ranking": "--absolute", "k_grid": words(LANGUAGE["k_grid"])}


rule votes:
    """Deletion masks and vote counts for the whole K grid (cached per-example scores)."""
    input:
        attributions=PATHS.attributions(),
    output:
        PATHS.votes(),
    params:
        job=job_env("votes"),
        k_grid=lambda w: EXPERIMENTS[w.experiment]["k_grid"],
        ranking=lambda w: EXPERIMENTS[w.experiment]["ranking"],
        device=q(DEVICE),
    log:
        log_path("votes", f"{{experiment}}/{{split}}/{{concept}}/{{scorer}}/{VOTES_PATTERN}"),
    benchmark:
        benchmark_path("votes", f"{{experiment}}/{{split}}/{{concept}}/{{scorer}}/{VOTES_PATTERN}")
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "{params.job} certified-circuits votes --attributions {input.attributions:q} --scorer {wildcards.scorer} "
        "--k-grid {params.k_grid} --p-del {wildcards.p_del} --n0 {wildcards.n0} --n {wildcards.n} "
        "--seed {wildcards.seed} {params.ranking} --device {params.device} --out {output:q} 2> {log:q}"


rule certify:
    """Binomial test per component with family-wise error control; majority vote beside it."""
    input:
        votes=PATHS.votes(),
    output:
        PATHS.certificates(),
    params:
        job=job_env("certify"),
    log:
        log_path("certify", f"{{experiment}}/{{split}}/{{concept}}/{{scorer}}/{SETTING_PATTERN}"),
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "{params.job} certified-circuits certify --votes {input.votes:q} --tau {wildcards.tau} --alpha {wildcards.alpha} "
        "--correction {wildcards.correction} --out {output:q} 2> {log:q}"
