"""Benchmark: CEAP's cost beside EAP-IG-inputs' at the same m (language/methods.py; docs/reference_parity.md, "CEAP").

Both run m forward and backward passes from the corrupted to the clean input; CEAP adds one contraction of the step's
node-output changes [B, n_up, P, d] with the pass's input gradients [B, n_down, P, d] per step (EAP-IG contracts once,
with the averaged gradient) and needs no clean run. Timed on the same model and prompts, per-example scores of every
edge, on the GPT-2 decomposed path (``eap_ig_scores``, what the attribution stage and experiments/fair_testbed.py
use) and on the TransformerBridge hook path (``hooked.attribution_scores``, every other family), for each m:

* ``--shape embedded`` (default): a seeded random-weight model of the embedded model's shape (3 layers, 4 heads,
  d_model 64; timings do not depend on the weights), ``--n`` IOI-hard prompts;
* ``--shape gpt2-small``: GPT-2 Small's shape (12 layers, 12 heads, d_model 768, 32,491 edges), random weights,
  the word vocabulary (fewer prompts: it is ~1000x the work).

Median of ``--repeats`` runs each, one thread by default. Figures go to stderr and stdout; the last line is a one-line
summary with the ratios CEAP / EAP-IG. A benchmark: nothing is asserted about time.

    python benchmarks/bench_ceap.py [--shape embedded] [--n 100] [--steps 5 30] [--hooked-n 20] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch


def _time(fn, repeats: int) -> float:
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", choices=["embedded", "gpt2-small"], default="embedded")
    ap.add_argument("--task", default="ioi_hard")
    ap.add_argument("--n", type=int, default=None, help="prompts on the decomposed path (100; gpt2-small 8)")
    ap.add_argument("--hooked-n", type=int, default=None, help="prompts on the hook path (20; gpt2-small 2; 0: skip)")
    ap.add_argument("--steps", type=int, nargs="+", default=[5, 30])
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from certified_circuits.language.eap_ig import eap_ig_scores
    from certified_circuits.language.hooked import attribution_scores
    from certified_circuits.language.methods import METHODS
    from certified_circuits.language.models import _bundle, build_model, tiny_config
    from certified_circuits.language.tasks import generate_examples
    from certified_circuits.language.tokenizer import WordTokenizer, encode_examples

    small = args.shape == "gpt2-small"
    n = args.n or (8 if small else 100)
    n_hooked = (2 if small else 20) if args.hooked_n is None else args.hooked_n
    tok = WordTokenizer.default()
    cfg = (tiny_config(tok.vocab_size, n_layer=12, n_head=12, n_embd=768, n_positions=128) if small
           else tiny_config(tok.vocab_size))
    lm = _bundle("random", build_model(cfg, seed=0), tok, with_bridge=n_hooked > 0)
    w, g = lm.weights, lm.weights.graph
    batch = encode_examples(generate_examples(args.task, "train", n, seed=0), tok)
    print(f"{args.shape}: {w.n_layers} layers x {w.n_heads} heads, d_model {w.d_model}, {g.n_edges} edges; {n} prompts "
          f"of {int(batch.lengths.min())}-{int(batch.lengths.max())} tokens (hook path: {n_hooked}); "
          f"{args.threads} thread(s), median of {args.repeats}", file=sys.stderr)
    rows = []
    for m in args.steps:
        times = {}
        for name in ("EAP-IG-inputs", "CEAP"):
            spec = METHODS[name]
            points = list(spec.convention("edge", m, "reference").points)
            times[f"{name} decomposed"] = _time(lambda: eap_ig_scores(w, batch, ig_steps=m, points=points,
                                                                      factor=spec.factor, batch_size=args.batch_size,
                                                                      progress=False), args.repeats)
            if n_hooked:
                sub = encode_examples(generate_examples(args.task, "train", n_hooked, seed=0), tok)
                times[f"{name} hooks"] = _time(lambda: attribution_scores(lm.bridge, lm.graph, sub, method=name,
                                                                          ig_steps=m, batch_size=args.batch_size,
                                                                          progress=False), args.repeats)
        for key, t in times.items():
            print(f"m = {m:2d}  {key:24s} {t:8.3f} s", file=sys.stderr)
        ratios = {path: times[f"CEAP {path}"] / times[f"EAP-IG-inputs {path}"]
                  for path in ("decomposed", "hooks") if f"CEAP {path}" in times}
        for path, r in ratios.items():
            print(f"m = {m:2d}  CEAP / EAP-IG-inputs, {path}: {r:.2f}x")
        rows.append((m, times, ratios))
    parts = [f"m={m}: " + ", ".join(f"{p} {times['CEAP ' + p]:.2f} s / {times['EAP-IG-inputs ' + p]:.2f} s = {r:.2f}x"
                                    for p, r in ratios.items()) for m, times, ratios in rows]
    print(f"summary: CEAP vs EAP-IG-inputs at the same m, {args.shape} shape, {n} prompts ({n_hooked} on the hook "
          f"path), {args.threads} thread(s): " + "; ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
