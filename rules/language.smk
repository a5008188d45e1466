# Language half: task prompts, the embedded tiny GPT-2 (or GPT-2 Small), EAP-IG attributions on the
# train split, interchange-patched sufficiency per (task, certification setting).

from certified_circuits.language.tasks import GENERATED_TASKS as ALL_TASKS, SPLITS as LANGUAGE_SPLITS

# the tasks whose prompts the embedded model's training sees (and excludes from its training stream): the configured
# train.tasks, the compiled model's task, or the default mixture
TRAIN_TASKS = language.language_train_tasks(LANGUAGE)
# what a job that runs the model on a task's eval sets reads and passes: the inputs eval_sets and model, the params
# model, eval_sets and experiment (language_evaluate, language_faithfulness_mib)
LANGUAGE_EVAL_JOB_INPUTS = language.language_eval_job_inputs(config, PATHS)
LANGUAGE_EVAL_JOB_PARAMS = language.language_eval_job_params(config, PATHS)


if HF_LANGUAGE:

    rule language_task_file:
        """Your own task: the task file checked against the model's tokenizer and split (ood_test may be empty)."""
        input: file=partial(language.language_task_job_file, config)
        output: expand(f"{LDIR}/tasks/{{{{task}}}}/{{split}}.jsonl", split=LANGUAGE_SPLITS)
        params:
            job=job_env("language_task_file"),
            model=q(LANGUAGE["model_path"]),
            seed=LANGUAGE["task_seed"],
            out=partial(language.language_task_job_dir, PATHS),
        log: log_path("language_task_file", "{task}")
        conda: ENV
        wildcard_constraints: task="|".join(re.escape(t) for t in LANGUAGE["tasks"])
        shell:
            stage_command("language-task-file --task {wildcards.task} --file {input.file:q} "
                          "--model-path {params.model} --seed {params.seed} --out-dir {params.out:q}")

else:

    rule language_tasks:
        """IOI / IOI-Hard / Greater-Than prompts: train, id_test and ood_test splits (seeded)."""
        output: expand(f"{LDIR}/tasks/{{{{task}}}}/{{split}}.jsonl", split=LANGUAGE_SPLITS)
        params:
            job=job_env("language_tasks"),
            n=LANGUAGE["n_per_split"],
            seed=LANGUAGE["task_seed"],
            tokenizer="" if EMBEDDED_LANGUAGE else f"--gpt2-tokenizer {q(LANGUAGE.get('model_path', ''))}",
            out=partial(language.language_task_job_dir, PATHS),
        log: log_path("language_tasks", "{task}")
        conda: ENV
        wildcard_constraints: task="|".join(ALL_TASKS)
        shell:
            stage_command("language-tasks --task {wildcards.task} --n-per-split {params.n} "
                          "--seed {params.seed} {params.tokenizer} --out-dir {params.out:q}")


if EMBEDDED_LANGUAGE:

    rule language_train:
        """Train the tiny GPT-2 on fresh prompts of its training tasks (default: the three-task mixture, whatever
        `tasks` certifies), or compile the induction model (`train.compiled`: weights set by construction). The
        training tasks' evaluation prompts are inputs so that training can exclude them."""
        input: expand(f"{LDIR}/tasks/{{task}}/{{split}}.jsonl", task=TRAIN_TASKS, split=LANGUAGE_SPLITS)
        output:
            model=f"{LDIR}/model/config.json",
            metrics=f"{LDIR}/train_metrics.json",
        params:
            job=job_env("language_train"),
            options=cli_options(LANGUAGE["train"]),
            tasks=input_dir(up=2),
            model=output_dir,
        log: log_path("language_train")
        benchmark: benchmark_path("language_train")
        conda: ENV
        priority: 20
        resources:
            mem_mb=4000,
            runtime=30,
        shell:
            stage_command("language-train --tasks-dir {params.tasks:q} {params.options} --threads {threads} "
                          "--out-dir {params.model:q} --metrics {output.metrics:q}")


rule language_attribute:
    """Signed per-example EAP-IG scores of every edge for one task and split."""
    input:
        examples=f"{LDIR}/tasks/{{concept}}/{{split}}.jsonl",
        model=language_model_inputs(),
    output: PATHS.attributions(LX)
    params:
        job=job_env("language_attribute"),
        model=language_model_args(),
        ig_steps=LANGUAGE["ig_steps"],
        integration=LANGUAGE["ig_integration"],
        method=LANGUAGE["method"],
        level=LANGUAGE["level"],
        experiment=LX,
    log: log_path("language_attribute", "{split}/{concept}")
    benchmark: benchmark_path("language_attribute", "{split}/{concept}")
    conda: ENV
    priority: 10
    resources: **LANGUAGE_MODEL_JOB,
    shell:
        stage_command("language-attribute {params.model} --threads {threads} --task {wildcards.concept} "
                      "--split {wildcards.split} --examples {input.examples:q} --ig-steps {params.ig_steps} "
                      "--integration {params.integration} --method {params.method} --level {params.level} "
                      "--experiment {params.experiment:q} --out {output:q}")


rule language_evaluate:
    """Interchange-patched sufficiency of baseline, majority and certified edge circuits."""
    input:
        votes=PATHS.votes(LX, scorer="eap_ig"),
        certificates=PATHS.certificates(LX, scorer="eap_ig"),
        **LANGUAGE_EVAL_JOB_INPUTS,
    output: PATHS.sufficiency(LX)
    params:
        job=job_env("language_evaluate"),
        **LANGUAGE_EVAL_JOB_PARAMS,
    log: log_path("language_evaluate", PER_SUFFICIENCY)
    benchmark: benchmark_path("language_evaluate", PER_SUFFICIENCY)
    conda: ENV
    resources: **LANGUAGE_MODEL_JOB,
    shell:
        stage_command("language-evaluate {params.model} --threads {threads} --task {wildcards.concept} "
                      "--votes {input.votes:q} --certificates {input.certificates:q} {params.eval_sets} "
                      "--experiment {params.experiment:q} --out {output:q}")


if LANGUAGE["faithfulness"]["grid"] == "mib":
    # every setting of each task and the held-out selection table: the job uses the selected setting
    # (pipeline/plans/language.py mib_circuits)
    MIB_SELECTED = language.language_selected_table(config, PATHS)
    MIB_TASK_CIRCUITS = language.mib_task_circuits(config, PATHS)

    rule language_faithfulness_mib:
        """Faithfulness at MIB's edge fractions (0.1%..100%): baseline top-n by signed and by |score|, and the
        certified circuit of the setting selected on held-out prompts, pruned as MIB does (docs/mib.md)."""
        input:
            attributions=partial(language.mib_job_attributions, MIB_TASK_CIRCUITS),
            circuits=partial(language.mib_job_circuit_files, MIB_TASK_CIRCUITS),
            selected=[MIB_SELECTED] if MIB_SELECTED else [],
            **LANGUAGE_EVAL_JOB_INPUTS,
        output: PATHS.faithfulness_mib(LX)
        params:
            job=job_env("language_faithfulness_mib"),
            circuits=partial(language.mib_job_circuit_options, MIB_TASK_CIRCUITS),
            selected=f"--selected {q(MIB_SELECTED)}" if MIB_SELECTED else "",
            **LANGUAGE_EVAL_JOB_PARAMS,
        log: log_path("language_faithfulness_mib", "{concept}")
        conda: ENV
        resources: **LANGUAGE_MODEL_JOB,
        shell:
            stage_command("language-faithfulness-mib {params.model} --threads {threads} --task {wildcards.concept} "
                          "--attributions {input.attributions:q} {params.circuits} {params.selected} "
                          "{params.eval_sets} --experiment {params.experiment:q} --out {output:q}")
