# Algorithm 2 (votes) and Algorithm 1 (certificates): one job per attribution file and setting.


def absolute_ranking(wildcards):
    """EAP-IG edges rank by |mean score|; vision channels by the signed mean."""
    return "--absolute" if EXPERIMENTS[wildcards.experiment]["absolute"] else ""


def k_grid_arg(wildcards):
    return ",".join(fmt(k) for k in EXPERIMENTS[wildcards.experiment]["k_grid"])


rule votes:
    """Deletion masks and vote counts for the whole K grid (cached per-example scores)."""
    input:
        attributions=f"{RESULTS}/attributions/{{experiment}}/{{split}}/{{concept}}.h5",
    output:
        f"{RESULTS}/votes/{{experiment}}/{{split}}/{{concept}}/{{scorer}}/p{{p_del}}_n0{{n0}}_n{{n}}_s{{seed}}.h5",
    params:
        k_grid=k_grid_arg,
        absolute=absolute_ranking,
    log:
        f"{RESULTS}/logs/votes/{{experiment}}/{{split}}/{{concept}}/{{scorer}}/p{{p_del}}_n0{{n0}}_n{{n}}_s{{seed}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/votes/{{experiment}}/{{split}}/{{concept}}/{{scorer}}/p{{p_del}}_n0{{n0}}_n{{n}}_s{{seed}}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        tracked(
            "certified-circuits votes --attributions {input.attributions} --scorer {wildcards.scorer} "
            "--k-grid {params.k_grid} --p-del {wildcards.p_del} --n0 {wildcards.n0} --n {wildcards.n} "
            "--seed {wildcards.seed} {params.absolute} --out {output} 2> {log}"
        )


rule certify:
    """Binomial test per component with family-wise error control; majority vote beside it."""
    input:
        votes=f"{RESULTS}/votes/{{experiment}}/{{split}}/{{concept}}/{{scorer}}/p{{p_del}}_n0{{n0}}_n{{n}}_s{{seed}}.h5",
    output:
        f"{RESULTS}/certificates/{{experiment}}/{{split}}/{{concept}}/{{scorer}}/p{{p_del}}_n0{{n0}}_n{{n}}_s{{seed}}/t{{tau}}_a{{alpha}}_{{correction}}.h5",
    log:
        f"{RESULTS}/logs/certify/{{experiment}}/{{split}}/{{concept}}/{{scorer}}/p{{p_del}}_n0{{n0}}_n{{n}}_s{{seed}}/t{{tau}}_a{{alpha}}_{{correction}}.log",
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        tracked(
            "certified-circuits certify --votes {input.votes} --tau {wildcards.tau} --alpha {wildcards.alpha} "
            "--correction {wildcards.correction} --out {output} 2> {log}"
        )
