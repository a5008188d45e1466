"""Seconds per 100 prompts of EAP-IG per-example edge scores (ig_steps 5, EAP-IG-inputs) for every family the
hook path supports, on random-weight models of one shape (4 layers, 8 heads, d_model 128, vocab ~320, BPE
prompts of 16 tokens), and the GPT-2 hook path against the decomposed fast path on the same model (ratio).

    python benchmarks/bench_language_families.py [--n 100] [--threads 1]

Last line: a summary. Timings are of this CPU; compare ratios, not seconds, across machines.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.helpers


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    import tests.helpers.family_fixtures as ff

    from certified_circuits.language.attribution import score_examples
    from certified_circuits.language.forward import GPT2Weights
    from certified_circuits.language.models import LanguageModel, load_hf_model
    from certified_circuits.language.tasks import Example
    from certified_circuits.language.tokenizer import encode_examples

    def bigger(family):   # the fixture's shape scaled up: 4 layers, 8 heads, d_model 128
        cfg, cls = ff.family_config(family)
        for key, value in (("num_hidden_layers", 4), ("n_layer", 4), ("num_attention_heads", 8), ("n_head", 8),
                           ("hidden_size", 128), ("n_embd", 128), ("intermediate_size", 512)):
            if hasattr(cfg, key):
                setattr(cfg, key, value)
        if getattr(cfg, "layer_types", None):
            cfg.layer_types = [cfg.layer_types[0]] * 4
        if hasattr(cfg, "head_dim") and family == "gemma":
            cfg.head_dim = 16
        if hasattr(cfg, "num_key_value_heads") and family != "pythia":
            cfg.num_key_value_heads = 2
        return cfg, cls

    rng = torch.Generator().manual_seed(0)
    names = ff.NAMES
    examples = []
    for i in range(args.n):
        a, b, c, d, e = (names[j] for j in torch.randperm(len(names), generator=rng)[:5].tolist())
        examples.append(Example(f"e{i}", "t", "train", ff.ioi_prompt(a, b, b), ff.ioi_prompt(c, d, e), f" {a}", f" {b}"))
    summary = {}
    with tempfile.TemporaryDirectory() as tmp:
        for family in ff.FAMILIES:
            cfg, cls = bigger(family)
            torch.manual_seed(0)
            folder = Path(tmp) / family
            cls(cfg).save_pretrained(folder)
            ff.bpe_tokenizer().save_pretrained(folder)
            lm = load_hf_model(folder)
            batch = encode_examples(examples, lm.tokenizer, max_len=lm.n_positions)
            start = time.perf_counter()
            score_examples(lm, batch, method="EAP-IG-inputs", ig_steps=5, batch_size=16, progress=False)
            seconds = (time.perf_counter() - start) * 100 / args.n
            summary[family] = seconds
            print(f"{family:8s} edges {lm.graph.n_edges:5d}  hook path {seconds:6.2f} s / 100 prompts", flush=True)
            if family == "gpt2":
                fast = LanguageModel("gpt2", lm.hf, lm.bridge, GPT2Weights.from_hf(lm.hf), lm.tokenizer)
                start = time.perf_counter()
                score_examples(fast, batch, method="EAP-IG-inputs", ig_steps=5, batch_size=16, progress=False)
                summary["gpt2_fast"] = (time.perf_counter() - start) * 100 / args.n
                print(f"gpt2     decomposed fast path {summary['gpt2_fast']:6.2f} s / 100 prompts", flush=True)
    print("summary: s/100 prompts " + ", ".join(f"{k} {v:.2f}" for k, v in summary.items())
          + f"; GPT-2 hook/fast ratio {summary['gpt2'] / summary['gpt2_fast']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
