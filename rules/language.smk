# Language half: task prompts, the embedded tiny GPT-2 (or GPT-2 Small), EAP-IG attributions on the
# train split, interchange-patched sufficiency per (task, certification setting).

LANGUAGE = config["language"]
LX = LANGUAGE.get("experiment", "language")
LDIR = f"{RESULTS}/language"
EMBEDDED_LANGUAGE = LANGUAGE["enabled"] and LANGUAGE["source"] == "embedded"
LANGUAGE_SPLITS = ["train", "id_test", "ood_test"]


def language_model_args():
    if EMBEDDED_LANGUAGE:
        return f"--model embedded --model-path {LDIR}/model"
    return f"--model gpt2 --model-path {LANGUAGE['model_path']} --device {LANGUAGE.get('device', 'cpu')}"


def language_model_inputs():
    return [f"{LDIR}/model/config.json"] if EMBEDDED_LANGUAGE else []


def language_settings(task):
    """Certification blocks of a task: one per [tau, p_del] pair of the config."""
    base = LANGUAGE["certification"]
    return [{**base, "tau": tau, "p_del": p_del} for tau, p_del in LANGUAGE["settings"][task]]


rule language_tasks:
    """IOI / IOI-Hard / Greater-Than prompts: train, id_test and ood_test splits (seeded)."""
    output:
        expand(f"{LDIR}/tasks/{{{{task}}}}/{{split}}.jsonl", split=LANGUAGE_SPLITS),
    params:
        n=LANGUAGE.get("n_per_split", 100),
        seed=LANGUAGE.get("task_seed", 0),
        tokenizer="" if EMBEDDED_LANGUAGE else f"--gpt2-tokenizer {LANGUAGE.get('model_path', '')}",
    log:
        f"{RESULTS}/logs/language/tasks/{{task}}.log",
    wildcard_constraints:
        task=r"ioi|ioi_hard|greater_than",
    shell:
        tracked("certified-circuits language-tasks --task {wildcards.task} --n-per-split {params.n} "
                "--seed {params.seed} {params.tokenizer} --out-dir {LDIR}/tasks/{wildcards.task} 2> {log}")


if EMBEDDED_LANGUAGE:

    rule language_train:
        """Train the tiny GPT-2 on fresh prompts of the three tasks' training distributions.

        The model always learns all three tasks (whatever `tasks` certifies); every task's evaluation
        prompts are inputs so that training can exclude them."""
        input:
            expand(f"{LDIR}/tasks/{{task}}/{{split}}.jsonl", task=["ioi", "ioi_hard", "greater_than"], split=LANGUAGE_SPLITS),
        output:
            model=f"{LDIR}/model/config.json",
            metrics=f"{LDIR}/train_metrics.json",
        params:
            options=cli_options(LANGUAGE.get("train", {})),
        log:
            f"{RESULTS}/logs/language/train.log",
        benchmark:
            f"{RESULTS}/benchmarks/language/train.tsv"
        priority: 20  # critical path first
        threads: 1
        resources:
            mem_mb=4000,
            runtime=30,
        shell:
            tracked("certified-circuits language-train --tasks-dir {LDIR}/tasks {params.options} --threads {threads} "
                    "--out-dir {LDIR}/model --metrics {output.metrics} 2> {log}")


rule language_attribute:
    """Signed per-example EAP-IG scores of every edge for one task and split."""
    input:
        examples=f"{LDIR}/tasks/{{concept}}/{{split}}.jsonl",
        model=language_model_inputs(),
    output:
        f"{RESULTS}/attributions/{LX}/{{split}}/{{concept}}.h5",
    params:
        model=language_model_args(),
        ig_steps=LANGUAGE.get("ig_steps", 5),
    log:
        f"{RESULTS}/logs/language/attribute/{{split}}/{{concept}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/language/attribute/{{split}}/{{concept}}.tsv"
    priority: 10  # critical path first
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=0 if EMBEDDED_LANGUAGE else 1,
    shell:
        tracked("certified-circuits language-attribute {params.model} --threads {threads} --task {wildcards.concept} "
                "--split {wildcards.split} --examples {input.examples} --ig-steps {params.ig_steps} "
                "--experiment {LX} --out {output} 2> {log}")


rule language_evaluate:
    """Interchange-patched sufficiency of baseline, majority and certified edge circuits."""
    input:
        votes=f"{RESULTS}/votes/{LX}/{{split}}/{{concept}}/{{scorer}}/p{{p_del}}_n0{{n0}}_n{{n}}_s{{seed}}.h5",
        certificates=f"{RESULTS}/certificates/{LX}/{{split}}/{{concept}}/{{scorer}}/p{{p_del}}_n0{{n0}}_n{{n}}_s{{seed}}/t{{tau}}_a{{alpha}}_{{correction}}.h5",
        id_test=f"{LDIR}/tasks/{{concept}}/id_test.jsonl",
        ood_test=f"{LDIR}/tasks/{{concept}}/ood_test.jsonl",
        model=language_model_inputs(),
    output:
        f"{RESULTS}/sufficiency/{LX}/{{split}}/{{concept}}/{{scorer}}/p{{p_del}}_n0{{n0}}_n{{n}}_s{{seed}}/t{{tau}}_a{{alpha}}_{{correction}}.csv",
    params:
        model=language_model_args(),
    log:
        f"{RESULTS}/logs/language/evaluate/{{split}}/{{concept}}/{{scorer}}/p{{p_del}}_n0{{n0}}_n{{n}}_s{{seed}}/t{{tau}}_a{{alpha}}_{{correction}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/language/evaluate/{{split}}/{{concept}}/{{scorer}}/p{{p_del}}_n0{{n0}}_n{{n}}_s{{seed}}/t{{tau}}_a{{alpha}}_{{correction}}.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=0 if EMBEDDED_LANGUAGE else 1,
    shell:
        tracked("certified-circuits language-evaluate {params.model} --threads {threads} --task {wildcards.concept} "
                "--votes {input.votes} --certificates {input.certificates} --eval-set id_test={input.id_test} "
                "--eval-set ood_test={input.ood_test} --experiment {LX} --out {output} 2> {log}")
