"""The noisy compiled induction model (docs/embedded_default.md, "The noisy language model"): per-component truth
and the regime condition, per model seed.

For each seed: compile the model (language/compiled.py), find its circuit by the attention diagnostics and verify
it on the held-out prompts (language/ground_truth.py: whole circuit, then every edge's own effect and
analysis/component_truth.split_truth); score the |D| = 100 training prompts with EAP-IG (5 steps, reference points)
and EAP; and resample them (language/ground_truth.baseline_regime, i.e. analysis/stability.stability: 20 bootstrap
resamples, bootstrap seed 0) at K = the truth's size: the baseline circuit's mean Jaccard to the full-data one and
its mean precision against the truth.
The prompts are those of the default run (language-tasks --task induction --n-per-split 100 --seed 0).

Usage::

    PYTHONPATH=src python experiments/noisy_language_model.py --seeds 0 1 2 [--model induction_noisy] [--out x.json]
"""

from __future__ import annotations

import argparse
import json

import torch

from certified_circuits.analysis.component_truth import effect_summary
from certified_circuits.language import compiled, ground_truth as gt
from certified_circuits.language.compiled import compile_model
from certified_circuits.language.forward import GPT2Weights
from certified_circuits.language.tasks import INDUCTION_SYMBOLS, generate_splits
from certified_circuits.language.tokenizer import encode_examples


def measure(name: str, seed: int, *, n_resamples: int = 20, task_seed: int = 0, n_per_split: int = 100) -> dict:
    """Ground truth, per-component effects and the regime condition of one compiled model (module docstring)."""
    model, tok, _ = compile_model(name, seed)
    w = GPT2Weights.from_hf(model)
    splits = generate_splits("induction", task_seed, n_per_split)
    diag = gt.diagnose(model, [tok.answer_id(x) for x in INDUCTION_SYMBOLS], seed=0)
    gt.check_heads(diag)
    edges = gt.circuit_edges(diag.previous_token_heads, diag.induction_heads)
    held_out = encode_examples(splits["id_test"], tok, max_len=model.config.n_positions)
    verification = gt.verify_circuit(w, held_out, edges)
    kept, block = gt.per_component_verification(w, held_out, edges, verification)
    train = encode_examples(splits["train"], tok, max_len=model.config.n_positions)
    regime = {}
    for method in ("EAP-IG-inputs", "EAP"):
        jaccard, precision = gt.baseline_regime(w, train, kept, method, n_resamples=n_resamples)
        regime[method] = {"baseline_jaccard_mean": jaccard, "baseline_precision_mean": precision,
                          "holds": jaccard <= gt.REGIME_MAX and precision <= gt.REGIME_MAX}
    return {
        "model": name, "seed": seed, "heads": [diag.previous_token_heads, diag.induction_heads],
        "recovery": verification["recovery"], "remaining": verification["remaining"],
        "binary_accuracy_clean": verification["binary_accuracy_clean"], "whole_passed": verification["passed"],
        "n_truth": len(kept), "per_component_passed": block["passed"], "delta": block["delta"],
        "epsilon": block["epsilon"], "ratio": block["ratio"], "dropped": block["dropped"],
        "effects": effect_summary(block["effects"], kept),
        "strongest_outside": sorted(((e, v) for e, v in block["effects"].items() if e not in kept),
                                    key=lambda x: -x[1])[:5],
        "truth_effects": {e: block["effects"][e] for e in kept},
        "regime": regime,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="induction_noisy")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--out", default=None, help="JSON file for the results (default: print only)")
    p.add_argument("--set", nargs="*", default=[], metavar="NAME=VALUE",
                   help="override a constant of language/compiled.py (tuning), e.g. NOISY_SINK_SCORE=17.5")
    p.add_argument("--brief", action="store_true", help="print the headline numbers only")
    args = p.parse_args()
    for item in args.set:
        key, value = item.split("=", 1)
        setattr(compiled, key, tuple(float(x) for x in value.split(",")) if "," in value else float(value))
    torch.set_num_threads(1)
    results = [measure(args.model, s) for s in args.seeds]
    text = json.dumps(results, indent=1)
    if args.brief:
        for r in results:
            print(r["seed"], "truth", r["n_truth"], "passed", r["per_component_passed"], "ratio", r["ratio"],
                  "delta", r["delta"], "eps", r["epsilon"], "recovery", r["recovery"], "acc", r["binary_accuracy_clean"],
                  {m: (round(v["baseline_jaccard_mean"], 3), round(v["baseline_precision_mean"], 3))
                   for m, v in r["regime"].items()}, r["strongest_outside"][:3], r["truth_effects"])
    else:
        print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
