"""``certified-circuits language-*`` stages (declared with :mod:`certified_circuits.cli.stages`).

* ``language-tasks``     one task's train / id_test / ood_test prompts -> JSONL files
* ``language-task-file`` your own task (CSV or JSONL) checked and split -> the same JSONL files
* ``language-train``     train the embedded tiny GPT-2 -> HF model dir + per-task/split accuracy JSON
* ``language-attribute`` per-example EAP / EAP-IG scores (edges or nodes) for one task and split -> attributions .h5
* ``language-evaluate``  circuit-restricted accuracy of baseline / majority / certified circuits -> tidy CSV
* ``language-ground-truth`` the induction circuit of an attention-only model, found and verified -> ground-truth JSON
"""

from __future__ import annotations

import argparse
import logging
import re
from pathlib import Path

from certified_circuits.language.graph import COMPILED_SHAPES, EMBEDDED_N_HEAD, EMBEDDED_N_LAYER
from certified_circuits.language.methods import INTEGRATIONS, LEVELS, METHODS
from certified_circuits.language.tasks import GENERATED_TASKS, INDUCTION, SPLITS, TASKS
from certified_circuits.language.tasks import TRAINING_LOSSES as LOSSES
from certified_circuits.core.devices import configure_torch
from certified_circuits.cli.stages import (InputError, Stages, add_device, check_circuit_files, existing_file, existing_path,
                                          named_path, output_file, positive_int, seed)

log = logging.getLogger(__name__)
STAGES = Stages()
MODEL_CHOICES = ("embedded", "gpt2", "hf")
#: the registered attribution methods (language/methods.py; the schema's language.method enum equals them)
METHOD_CHOICES = tuple(METHODS)


def task_name(text: str) -> str:
    """argparse type: a task name (built-in or a task file's), letters, digits, ``_`` and ``-``."""
    if not re.fullmatch(r"[A-Za-z0-9_-]+", text):
        raise argparse.ArgumentTypeError(f"task name {text!r} may hold only letters, digits, _ and - "
                                         f"(it names result files)")
    return text


def model_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", choices=MODEL_CHOICES, default="embedded",
                   help="'embedded' (tiny GPT-2 from language-train), 'gpt2' (GPT-2 Small, paper scale) or 'hf' "
                        "(any causal LM folder TransformerBridge boots: Pythia, Llama, Qwen2, Gemma, ...)")
    p.add_argument("--model-path", type=existing_path, required=True,
                   help="embedded: the model dir written by language-train; gpt2/hf: a local Hugging Face directory "
                        "(save_pretrained model + tokenizer)")
    add_device(p)


# ---------------------------------------------------------------------------------------------- tasks


def _tasks_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", required=True, choices=GENERATED_TASKS)
    p.add_argument("--out-dir", required=True, help="folder for train.jsonl, id_test.jsonl, ood_test.jsonl")
    p.add_argument("--n-per-split", type=positive_int, default=100)
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument("--gpt2-tokenizer", default=None,
                   help="local GPT-2 tokenizer dir/cache name: check single-token names and equal clean/corrupted "
                        "lengths (paper scale)")


@STAGES.stage(
    "language-tasks", _tasks_arguments,
    help="generate one language task's train/id_test/ood_test prompts (JSONL)",
)
def _cmd_tasks(args: argparse.Namespace) -> int:
    """Generate IOI / IOI-Hard / Greater-Than prompt pairs (clean, corrupted, answer, distractor) for the splits train,
    id_test and ood_test (paper, Appendix A.2) as OUT_DIR/{split}.jsonl.
    """

    from certified_circuits.language.tasks import NAMES, OBJECTS, PLACES, generate_splits, write_jsonl

    kw = {}
    if args.gpt2_tokenizer:
        from transformers import AutoTokenizer

        from certified_circuits.language.tokenizer import GPT2PromptTokenizer
        try:
            tok = GPT2PromptTokenizer(AutoTokenizer.from_pretrained(args.gpt2_tokenizer, local_files_only=True))
        except (OSError, ValueError) as err:
            raise InputError(f"GPT-2 tokenizer not found at {args.gpt2_tokenizer!r} (offline): {err}; "
                             f"download it once with `huggingface-cli download gpt2 --local-dir DIR`") from err
        tok.check_single_tokens(list(NAMES) + list(OBJECTS) + list(PLACES))
        kw["length_check"] = tok.equal_length
    splits = generate_splits(args.task, args.seed, args.n_per_split, **kw)
    out = Path(args.out_dir)
    for split, ex in splits.items():
        write_jsonl(out / f"{split}.jsonl", ex)
        log.info("language-tasks: wrote %d %s/%s examples to %s", len(ex), args.task, split, out / f"{split}.jsonl")
    return 0


# ---------------------------------------------------------------------------------------------- train


def _train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tasks-dir", required=True, help="folder with {task}/{split}.jsonl from language-tasks")
    p.add_argument("--out-dir", required=True, help="model directory to write (HF format + vocab.json)")
    p.add_argument("--metrics", required=True, help="JSON file for accuracy per task and split")
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument("--steps", type=positive_int, default=900)
    p.add_argument("--batch-per-task", type=positive_int, default=24)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--n-layer", type=positive_int, default=EMBEDDED_N_LAYER)
    p.add_argument("--n-head", type=positive_int, default=EMBEDDED_N_HEAD)
    p.add_argument("--n-embd", type=positive_int, default=64)
    p.add_argument("--n-positions", type=positive_int, default=80)
    p.add_argument("--time-limit", type=float, default=None,
                   help="optional wall-clock cap in seconds; off by default because it makes the model depend on "
                        "machine speed (every result must follow from the seeds)")
    p.add_argument("--threads", type=positive_int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--tasks", nargs="+", choices=GENERATED_TASKS, default=list(TASKS),
                   help=f"train on these tasks only (default: {' '.join(TASKS)}); their prompts must be in --tasks-dir")
    p.add_argument("--attn-only", action="store_true",
                   help="attention-only model: every MLP's output projection is set to 0 and frozen, so MLP nodes "
                        "output exactly 0 (the architecture stays GPT-2)")
    p.add_argument("--loss", choices=LOSSES, default="last",
                   help="last: cross-entropy of the answer at the last position (default); all: next-token "
                        "cross-entropy at every position of prompt + answer (learns induction from every repeated word)")
    p.add_argument("--shift-prob", type=float, default=0.3,
                   help="share of training prompts whose position ids are offset at random (default 0.3)")
    p.add_argument("--compiled", choices=tuple(COMPILED_SHAPES), default=None,
                   help="write a model whose circuit is planted by construction instead of training one "
                        "(language/compiled.py, seeded by --seed): 'induction' = attention-only 2x4 GPT-2 with a "
                        "previous-token and an induction head (the clean control); 'induction_noisy' = 2x8 with two "
                        "previous-token and two induction heads of graded strengths among 12 distractor heads with "
                        "small data-dependent effects; fixes the architecture and ignores --tasks and every "
                        "training option; held-out accuracy is measured on TASKS-DIR/induction")


#: language-train options a compiled model does not read (it is set by construction, not trained)
TRAINING_OPTIONS = ("steps", "batch_per_task", "lr", "n_layer", "n_head", "n_embd", "n_positions", "time_limit",
                    "tasks", "attn_only", "loss", "shift_prob")


def check_compiled_options(args: argparse.Namespace) -> None:
    """Refuse a training option given with --compiled (it would be ignored without a word).

    Args:
        args: language-train's options.

    Raises:
        InputError: naming the options and the fix.
    """
    defaults = argparse.ArgumentParser()
    _train_arguments(defaults)
    given = [name for name in TRAINING_OPTIONS if getattr(args, name) != defaults.get_default(name)]
    if given:
        shown = ", ".join("--" + name.replace("_", "-") for name in given)
        raise InputError(f"--compiled {args.compiled} sets the weights by construction, so {shown} would be ignored: "
                         f"leave {shown} out, or drop --compiled to train a model")


@STAGES.stage(
    "language-train", _train_arguments,
    help="train the embedded tiny GPT-2 on the three tasks' ID training distributions",
)
def _cmd_train(args: argparse.Namespace) -> int:
    """Train an HF GPT2LMHeadModel with a tiny config on fresh ID prompts of IOI, IOI-Hard and Greater-Than (or the
    tasks named by --tasks; never the held-out prompts in --tasks-dir), attention-only with --attn-only, then write
    the model dir and the full model's accuracy per task and split as JSON. With --compiled induction the weights
    are set by construction instead (language/compiled.py; the metrics' config says compiled, not trained).
    """

    from certified_circuits.language.models import save_embedded
    from certified_circuits.language.tasks import read_jsonl
    from certified_circuits.language.train import TrainConfig, held_out_accuracy, train_embedded
    from certified_circuits.storage.atomic import atomic_dir, write_json

    if args.compiled:
        check_compiled_options(args)
    tasks_dir = Path(args.tasks_dir)
    tasks = (INDUCTION,) if args.compiled else tuple(dict.fromkeys(args.tasks))  # every compiled model: induction
    if not 0.0 <= args.shift_prob <= 1.0:
        raise InputError(f"--shift-prob is {args.shift_prob}; it is a probability in [0, 1]")
    files = {t: {s: tasks_dir / t / f"{s}.jsonl" for s in SPLITS} for t in tasks}
    missing = [str(f) for d in files.values() for f in d.values() if not f.is_file()]
    if missing:
        raise InputError(f"task prompts not found: {', '.join(missing)}; run language-tasks for every task first")
    held_out = {t: {s: read_jsonl(f) for s, f in d.items()} for t, d in files.items()}
    exclude = [e.clean for d in held_out.values() for ex in d.values() for e in ex]
    configure_torch(args.threads)
    if args.compiled:
        import time

        from certified_circuits.language.compiled import compile_model, compiled_config, noisy_compiled_config

        t0 = time.time()
        model, tok, lay = compile_model(args.compiled, args.seed)
        config = (noisy_compiled_config if args.compiled == "induction_noisy" else compiled_config)(args.seed, lay)
        train_log = {"compiled": True, "trained": False, "steps_run": 0, "train_seconds": time.time() - t0}
        heads = lay.head_names if args.compiled == "induction_noisy" else ([lay.heads[0]], [lay.heads[1]])
        log.info("language-train: compiled %s model (weights set by construction, not trained): previous-token "
                 "head(s) %s, induction head(s) %s", args.compiled, ",".join(heads[0]), ",".join(heads[1]))
    else:
        cfg = TrainConfig(n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd, n_positions=args.n_positions,
                          steps=args.steps, batch_per_task=args.batch_per_task, lr=args.lr, seed=args.seed,
                          time_limit_s=args.time_limit, tasks=tasks, attn_only=args.attn_only, loss=args.loss,
                          shift_prob=args.shift_prob)
        model, tok, train_log = train_embedded(cfg, exclude)
        config = cfg.__dict__
    accuracy = held_out_accuracy(model, tok, held_out, int(model.config.n_positions))
    for task, splits in accuracy.items():
        for split, r in splits.items():
            log.info("language-train: %s/%s: accuracy %.3f, binary %.3f", task, split, r["accuracy"], r["binary_accuracy"])
    with atomic_dir(args.out_dir) as tmp:
        save_embedded(model, tok, tmp)
    write_json(args.metrics, {"config": config, "training": train_log, "accuracy": accuracy})
    log.info("language-train: model -> %s, metrics -> %s", args.out_dir, args.metrics)
    return 0


# ---------------------------------------------------------------------------------------------- attribute


def _task_file_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", required=True, type=task_name)
    p.add_argument("--file", type=existing_path, required=True, help="CSV or JSONL (or a folder of MIB data): clean, corrupted, answer, "
                                                                    "distractor, optional split")
    p.add_argument("--model-path", type=existing_path, required=True, help="the model folder (its tokenizer checks "
                                                                           "single-token answers and equal lengths)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the 60/20/20 split when the file has no split column")
    p.add_argument("--out-dir", required=True, help="folder for train, validation, id_test, ood_test .jsonl")


@STAGES.stage(
    "language-task-file", _task_file_arguments,
    help="check and split your own task file into the split JSONL files",
)
def _cmd_task_file(args: argparse.Namespace) -> int:
    """Read a task file, assign its rows to train / validation / id_test / ood_test (its split column, else a seeded
    60/20/20 split without ood_test), check every answer and distractor is one token and clean and corrupted prompts
    have equal lengths under the model's tokenizer, and write OUT_DIR/{split}.jsonl (ood_test may be empty).
    """
    from certified_circuits.language.tasks import write_jsonl
    from certified_circuits.language.task_files import load_task_file
    from certified_circuits.pipeline.config_language import hf_prompt_tokenizer
    from certified_circuits.pipeline.config_errors import ConfigError

    try:
        tokenizer, max_len = hf_prompt_tokenizer(args.model_path)
    except ConfigError as exc:
        raise InputError(str(exc)) from None
    splits = load_task_file(args.file, args.task, seed=args.seed, tokenizer=tokenizer, max_len=max_len)
    out = Path(args.out_dir)
    for split in SPLITS:
        write_jsonl(out / f"{split}.jsonl", splits.get(split, []))
        log.info("language-task-file: wrote %d %s/%s examples to %s", len(splits.get(split, [])), args.task, split,
                 out / f"{split}.jsonl")
    return 0


def _attribute_arguments(p: argparse.ArgumentParser) -> None:
    model_arguments(p)
    p.add_argument("--task", required=True, type=task_name)
    p.add_argument("--split", required=True, choices=SPLITS)
    p.add_argument("--examples", type=existing_file, required=True, help="JSONL from language-tasks for this task and split")
    p.add_argument("--out", type=output_file, required=True, help="attributions .h5 to write")
    p.add_argument("--ig-steps", type=positive_int, default=5)
    p.add_argument("--integration", choices=INTEGRATIONS, default="reference",
                   help="EAP-IG convention (docs/reference_parity.md): reference = k/m for k = 0..m-1 at every level, "
                        "as hannamw/EAP-IG's edge code (default); endpoint = k = 1..m at every level; hannamw = the "
                        "reference's code per method and level (for CEAP: LIONS-EPFL/Circuit-Variance's code), to "
                        "reproduce a published number")
    p.add_argument("--batch-size", type=positive_int, default=16)
    p.add_argument("--method", choices=METHOD_CHOICES, default="EAP-IG-inputs",
                   help="attribution method (default EAP-IG-inputs): "
                        + "; ".join(f"{name}: {spec.description}" for name, spec in METHODS.items()))
    p.add_argument("--level", choices=LEVELS, default="edge",
                   help="edge: every EAP edge is a component; node: every head and MLP")
    p.add_argument("--experiment", default="language")


@STAGES.stage(
    "language-attribute", _attribute_arguments,
    help="per-example EAP / EAP-IG scores of every edge (or head and MLP) for one task and split (.h5)",
)
def _cmd_attribute(args: argparse.Namespace) -> int:
    """Compute signed per-example scores of every EAP-graph edge, or every head and MLP with --level node (metric:
    logit(answer) - logit(distractor) at the last position; --method EAP-IG-inputs averages gradients at k/m for
    k = 0..m-1 (m = --ig-steps) between corrupted and clean inputs) and write the attribution contract (scorer
    'eap_ig', with the method and level recorded).
    """

    from certified_circuits.core.devices import resolve_device
    from certified_circuits.language.attribution import attribute_task
    from certified_circuits.language.tasks import read_jsonl

    examples = read_jsonl(args.examples)
    bad = [e.id for e in examples if e.task != args.task]
    if bad:
        raise InputError(f"{args.examples} holds examples of another task than {args.task!r} ({bad[:3]})")
    device = resolve_device(args.device)
    configure_torch(args.threads)
    n_examples, n_edges = attribute_task(
        examples, task=args.task, split=args.split, model=args.model, model_path=args.model_path, out=args.out,
        experiment=args.experiment, device=device, ig_steps=args.ig_steps, integration=args.integration,
        batch_size=args.batch_size, method=args.method, level=args.level)
    log.info("language-attribute: %d x %d %s scores (%s level) -> %s", n_examples, n_edges, args.method, args.level,
             args.out)
    return 0


# ---------------------------------------------------------------------------------------------- evaluate


def _evaluate_arguments(p: argparse.ArgumentParser) -> None:
    model_arguments(p)
    p.add_argument("--task", required=True, type=task_name)
    p.add_argument("--votes", type=existing_file, required=True, help="votes .h5 of this task (engine's votes stage)")
    p.add_argument("--certificates", type=existing_file, required=True, help="certificates .h5 of this task")
    p.add_argument("--eval-set", action="append", required=True, type=named_path, metavar="NAME=PATH",
                   help="evaluation prompts, repeatable: id_test=DIR/id_test.jsonl ood_test=DIR/ood_test.jsonl")
    p.add_argument("--out", type=output_file, required=True, help="CSV to write")
    p.add_argument("--experiment", default="language")
    p.add_argument("--max-floats", type=float, default=None,
                   help="activation buffer size per patched batch in floats (default: sized from free device memory)")


@STAGES.stage(
    "language-evaluate", _evaluate_arguments,
    help="circuit-restricted accuracy of baseline/majority/certified circuits (CSV)",
)
def _cmd_evaluate(args: argparse.Namespace) -> int:
    """Interchange-patch every non-circuit edge with the corrupted run's activation and report exact next-token
    accuracy (cACC), binary answer-vs-distractor accuracy and logit difference per method and K, plus the
    unpatched 'full' model, as a tidy CSV.
    """

    from certified_circuits.storage.atomic import write_csv
    from certified_circuits.core.contracts import setting_columns
    from certified_circuits.core.devices import resolve_device
    from certified_circuits.language.evaluate import evaluate_task
    from certified_circuits.storage.store import read_certificates, read_votes
    from certified_circuits.pipeline.tracking import add_metrics

    eval_sets = dict(args.eval_set)
    votes, certificates = read_votes(args.votes), read_certificates(args.certificates)
    check_circuit_files([(votes, args.votes, certificates, args.certificates)], concept=args.task, what="--task")
    device = resolve_device(args.device)
    configure_torch(args.threads)
    table = evaluate_task(args.model, args.model_path, args.task, votes, certificates, eval_sets,
                          experiment=args.experiment, device=str(device), budget_floats=args.max_floats)
    table = table.assign(**setting_columns(votes, certificates))
    write_csv(args.out, table)
    full = table[table.method == "full"].drop_duplicates("eval_set")
    add_metrics({f"full_accuracy_{r.eval_set}": r.accuracy for r in full.itertuples()})
    log.info("language-evaluate: %d rows -> %s", len(table), args.out)
    return 0


# ---------------------------------------------------------------------------------------------- ground truth


def _ground_truth_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model-path", type=existing_path, required=True,
                   help="the attention-only embedded model dir written by language-train --compiled induction "
                        "(circuit planted by construction) or --tasks induction --attn-only")
    p.add_argument("--task", type=task_name, default=INDUCTION, help="the concept key (default induction)")
    p.add_argument("--examples", type=existing_file, required=True,
                   help="held-out prompts of the induction task to verify on (language-tasks' id_test.jsonl)")
    p.add_argument("--experiment", default="language")
    p.add_argument("--out", type=output_file, required=True, help="ground-truth JSON to write")
    p.add_argument("--seed", type=seed, default=0, help="seed of the diagnostic repeated random sequences")
    add_device(p)


@STAGES.stage(
    "language-ground-truth", _ground_truth_arguments,
    help="find the induction circuit's heads by their attention and verify its edges by patching (ground-truth JSON)",
)
def _cmd_ground_truth(args: argparse.Namespace) -> int:
    """Score every head of the model on repeated random sequences (previous-token and induction scores), pick the
    heads above the thresholds of language/ground_truth.py, build the circuit's EAP edges (input -> P<v>,
    P -> I<k>, I -> logits) and check them by interchange patching on --examples: the circuit alone must recover
    the clean-minus-corrupted logit difference and the model without it must fall to the corrupted level.
    Then each edge's own effect (that edge alone patched, in units of the circuit's effect) decides which planted
    edges form the truth (analysis/component_truth.py: the weakest kept at least 5 times the strongest other), written
    as verification.per_component; the concept's components are the kept edges.
    Writes the ground-truth JSON (with 'passed' false when the check fails) and exits 2 when no head passes a
    diagnostic threshold.
    """
    from certified_circuits.core.devices import resolve_device
    from certified_circuits.language import ground_truth as gt
    from certified_circuits.language.models import load_embedded
    from certified_circuits.language.tasks import INDUCTION_SYMBOLS, read_jsonl
    from certified_circuits.language.tokenizer import encode_examples

    if args.task != INDUCTION:
        raise InputError(f"--task {args.task}: this stage finds and verifies the {INDUCTION} circuit only (the model "
                         f"has no truth for another task, and the file would name the {INDUCTION} circuit "
                         f"{args.task!r}): pass --task {INDUCTION}, or leave --task out")
    examples = read_jsonl(args.examples)
    bad = [e.id for e in examples if e.task != INDUCTION]
    if bad or not examples:
        raise InputError(f"{args.examples} must hold induction prompts (language-tasks --task induction); "
                         f"found {len(examples)} examples, other tasks: {bad[:3]}")
    configure_torch(args.threads)
    device = resolve_device(args.device)
    try:
        lm = load_embedded(args.model_path, with_bridge=False)
    except (FileNotFoundError, ValueError) as exc:
        raise InputError(str(exc)) from None
    tok = lm.tokenizer
    try:
        diag = gt.diagnose(lm.hf, [tok.answer_id(w) for w in INDUCTION_SYMBOLS], seed=args.seed)
        gt.check_heads(diag)
    except gt.NoHeadsError as exc:
        raise InputError(f"{args.model_path}: {exc}") from None
    edges = gt.circuit_edges(diag.previous_token_heads, diag.induction_heads)
    batch = encode_examples(examples, tok, max_len=lm.n_positions)
    planted = edges
    edges, verification = gt.verified_truth(lm.weights, batch, planted, device=device)  # checks on the scored truth
    cfg = lm.hf.config
    mlp_zero = all(float(b.mlp.c_proj.weight.abs().max()) == 0 and float(b.mlp.c_proj.bias.abs().max()) == 0
                   for b in lm.hf.transformer.h)
    compiled = (getattr(cfg, "certified_circuits", None) or {}).get("compiled")
    model = (f"{f'compiled_{compiled}_' if compiled else ''}{'attn_only_' if mlp_zero else ''}"
             f"gpt2_{cfg.n_layer}x{cfg.n_head}_d{cfg.n_embd}")
    gt.write_induction_truth(args.out, experiment=args.experiment, task=args.task, model=model,  # checked, written
                             edge_names=lm.graph.edge_names(), edges=edges, verification=verification, diag=diag)
    v = verification
    log.info("language-ground-truth: %s: heads prev %s induction %s, %d edges; circuit alone recovers %.1f%% of the "
             "logit difference, without it %.1f%% remains (binary acc %.2f): %s -> %s", args.task,
             ",".join(diag.previous_token_heads), ",".join(diag.induction_heads), len(edges), 100 * v["recovery"],
             100 * v["remaining"], v["binary_accuracy_removed"], "passed" if v["passed"] else "FAILED", args.out)
    pc = v["per_component"]
    log.info("language-ground-truth: %s: per component, %d of %d planted edges kept (dropped %s): weakest true "
             "effect delta %.4f, strongest other epsilon %.4f (delta/epsilon %s, required %g): %s", args.task,
             len(edges), len(planted), pc["dropped"] or "none", pc["delta"], pc["epsilon"],
             "inf" if pc["ratio"] is None else f"{pc['ratio']:.2f}", pc["required_ratio"],
             "passed" if pc["passed"] else "FAILED")
    return 0
