"""Timing of the language hot paths on this CPU (docs/testing.md, "Benchmarks"; issue 4 budget).

EAP-IG per-example scores (ig_steps 5) for 100 prompts, and circuit-restricted evaluation of 60 edge masks
(20 K values x 3 methods) on 100 prompts, for the embedded model shape (3 layers, 4 heads, d_model 64).
Uses a trained model directory when given (``--model-path``), otherwise a seeded random-weight model
(timings do not depend on the weights). Budget: evaluation < 60 s per task on 2 cores.

    python benchmarks/bench_language_eap.py [--model-path results/language/model] [--task ioi_hard]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import torch


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-path", default=None)
    ap.add_argument("--task", default="ioi_hard")
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from certified_circuits.language.eap_ig import eap_ig_scores
    from certified_circuits.language.models import _bundle, build_model, load_embedded, tiny_config
    from certified_circuits.language.patching import evaluate_edge_masks
    from certified_circuits.language.tasks import generate_examples
    from certified_circuits.language.tokenizer import WordTokenizer, encode_examples

    if args.model_path:
        lm = load_embedded(args.model_path, with_bridge=False)
    else:
        tok = WordTokenizer.default()
        lm = _bundle("random", build_model(tiny_config(tok.vocab_size), seed=0), tok, with_bridge=False)
    w, g = lm.weights, lm.weights.graph
    out = {"task": args.task, "n_edges": g.n_edges, "n_prompts": args.n}
    for split in ("train", "ood_test"):
        batch = encode_examples(generate_examples(args.task, split, args.n, seed=0), lm.tokenizer)
        t = time.perf_counter()
        eap_ig_scores(w, batch, ig_steps=5, progress=False)
        out[f"eap_ig_{split}_s"] = time.perf_counter() - t
        masks = np.random.default_rng(0).random((60, g.n_edges)) < np.linspace(0.02, 1.0, 60)[:, None]
        t = time.perf_counter()
        evaluate_edge_masks(w, batch, masks, progress=False)
        out[f"evaluate_60_masks_{split}_s"] = time.perf_counter() - t
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
