# Algorithm 2 (votes) and Algorithm 1 (certificates): one job per attribution file and setting.

# Each attribution file records how its scorers rank (EAP-IG: |mean score|); the votes stage reads it.
# The settings come from the parse-time table of every configured setting (PATHS.setting_of), never
# from the values in a path; pipeline/plans/certification.py passes each as one `--setting TAG` (its
# votes or decision tag), which the stage reads back exactly (core.setting).


rule votes:
    """Deletion masks and vote counts for the whole K grid (cached per-example scores)."""
    input: attributions=PATHS.attributions()
    output: PATHS.votes()
    params:
        job=job_env("votes"),
        k_grid=partial(certification.votes_job_k_grid, config),
        setting=partial(certification.votes_job_options, PATHS),
        device=common.vote_device_option(DEVICE),
    log: log_path("votes", PER_VOTES)
    benchmark: benchmark_path("votes", PER_VOTES)
    conda: ENV
    resources: **VOTES_JOB,
    shell:
        stage_command("votes --attributions {input.attributions:q} --scorer {wildcards.scorer} "
                      "--k-grid {params.k_grid} {params.setting} --device {params.device} --out {output:q}")


rule certify:
    """Binomial test per component with family-wise error control; majority vote beside it."""
    input: votes=PATHS.votes()
    output: PATHS.certificates()
    params: job=job_env("certify"), decision=partial(certification.decision_job_options, PATHS)
    log: log_path("certify", PER_CERTIFICATE)
    conda: ENV
    resources:
        mem_mb=1000,
        runtime=5,
    shell: stage_command("certify --votes {input.votes:q} {params.decision} --out {output:q}")
