"""One-off check of CEAP against LIONS-EPFL/Circuit-Variance's own code (numbers in docs/reference_parity.md, "CEAP").

Three steps, two Python environments:

1. ``prepare`` (this project's venv, ``PYTHONPATH=src``): a fixture GPT-2 (random weights, 2 layers, 4 heads,
   d = 32, saved as a Hugging Face folder with a BPE tokenizer built by ``tokenizers``), six IOI-style prompt
   pairs, and the project's per-example CEAP scores for each m of ``STEPS`` on both paths (the TransformerBridge
   hooks, :mod:`certified_circuits.language.hooked`, and the decomposed GPT-2 forward,
   :mod:`certified_circuits.language.eap_ig`), under ``integration="hannamw"`` (LIONS-EPFL's sign) and the
   default; written to ``project.json`` as the mean of the rows (the dataset score), with the token ids and the
   weights' fingerprint (:func:`weights_fingerprint`). The fixture is built by :func:`fixture`.
2. ``reference`` (a separate venv with torch, transformer-lens 2.15, transformers 4.49, einops, tqdm, scipy; see
   docs/reference_parity.md): the same HF weights as a HookedTransformer (``use_split_qkv_input``,
   ``use_attn_result``, ``use_hook_mlp_in``), LIONS-EPFL's ``Graph.from_model`` and ``attribute(model, graph,
   dataloader, metric, ig_style="ceap", integration_steps=m)`` with a summed logit-difference metric, on the same
   prompts in batches of 4 and 2 (their ``scores /= total_items`` is the dataset mean). Their code is imported from
   a copy of ``CEAP/`` (``git archive HEAD CEAP``) made here under ``--out``, in which every ``device='cuda'`` is
   replaced by ``device='cpu'`` (the substituted lines are written to ``reference.json``). Two import-time shims,
   neither touching the arithmetic: ``pygraphviz`` and ``cmapy`` (drawing only, imported by their ``graph.py`` and
   ``utils.py``; pygraphviz needs the system's Graphviz) are stub modules (pygraphviz with an empty ``AGraph`` class,
   named in an annotation), and the aliases ``np.NaN`` and
   ``np.float_`` that NumPy 2 removed (their ``graph.py``: an edge's initial score and a type annotation; their
   pin is NumPy 1.24, which transformer-lens 2.15's pandas and pyarrow no longer accept) are set to ``np.nan`` and
   ``np.float64``.
3. ``compare``: the token ids both sides fed the model, and for each m and path the maximum absolute and relative
   (to the largest |score|) difference of the dataset-mean edge scores; as a control that the check can fail, the
   same difference for EAP-IG-inputs (``endpoint``, the same m gradient points), which is not CEAP beyond m = 1.

Usage (the venv of step 2 built as docs/reference_parity.md says)::

    PYTHONPATH=src .venv/bin/python benchmarks/ceap_reference_check.py prepare --out /tmp/ceapcmp
    /tmp/ceapref/bin/python benchmarks/ceap_reference_check.py reference --out /tmp/ceapcmp --ceap /tmp/ceapsrc/CEAP
    python3 benchmarks/ceap_reference_check.py compare --out /tmp/ceapcmp --store tests/unit/data/ceap_reference

``--store`` refreshes the test data of tests/unit/language/test_ceap_reference.py (which runs in CI without the
second venv): LIONS-EPFL's dataset-mean scores per m, the token and label ids their side fed the model, the
device-substitution record, the prompts and the fixture's weight fingerprint. The weights themselves are not
stored: :func:`fixture` rebuilds them bit for bit from the seed, and the test rebuilds them the same way.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import types
from pathlib import Path

#: what ``compare --store`` writes beside the numbers (tests/unit/language/test_ceap_reference.py reads them)
STORED_ABOUT = ("LIONS-EPFL/Circuit-Variance's CEAP (ig_style='ceap', CPU copy) on the fixture GPT-2 of "
                "benchmarks/ceap_reference_check.py: scores[m][edge] = their dataset-mean edge score; clean_tokens "
                "and labels = the ids their side fed the model; weights = the fixture's fingerprint (rebuilt by "
                "fixture()); written by `ceap_reference_check.py compare --out DIR --store DIR`")
#: the step counts checked: m = 1 (their code switches to its EAP), a small m, and their default 30
STEPS = (1, 5, 30)
#: the prompts' batches on the reference side (two batches: its reduction over items is exercised)
REFERENCE_BATCH = 4
PAIRS = [("Mary", "John", "John", "Anna", "Tom", "Lucy"), ("Kate", "Paul", "Kate", "Mark", "Lucy", "Tom"),
         ("Tom", "Lucy", "Lucy", "John", "Kate", "Mark"), ("Anna", "Mark", "Anna", "Paul", "Mary", "Kate"),
         ("Lucy", "Tom", "Tom", "Kate", "John", "Anna"), ("Paul", "Anna", "Paul", "Tom", "Mark", "Mary")]


def rows() -> list[dict]:
    """The prompt pairs: clean IOI prompt (answer = the name that did not give), corrupted with three other names."""
    from tests.helpers.family_fixtures import ioi_prompt

    out = []
    for i, (a, b, s, x, y, z) in enumerate(PAIRS):
        place, obj = ("garden", "drink") if i % 2 == 0 else ("store", "book")
        answer, distractor = (b, a) if s == a else (a, b)
        out.append({"clean": ioi_prompt(a, b, s, place, obj), "corrupted": ioi_prompt(x, y, z, place, obj),
                    "answer": " " + answer, "distractor": " " + distractor})
    return out


def fixture(folder: Path):
    """The check's inputs, rebuilt from code (the tests rebuild them the same way): the fixture GPT-2 saved into
    ``folder`` (``save_family("gpt2", seed=0)``: ``torch.manual_seed``, Hugging Face's init, the 2-D weights
    times 4, a BPE trained by ``tokenizers``), loaded on the hooks and on the decomposed forward, and the
    prompts of :func:`rows` encoded. Returns ``(hooks, decomposed, batch, rows)``."""
    from certified_circuits.language.attribution import uses_fast_path
    from certified_circuits.language.forward import GPT2Weights
    from certified_circuits.language.models import LanguageModel, load_hf_model
    from certified_circuits.language.tasks import Example
    from certified_circuits.language.tokenizer import encode_examples
    from tests.helpers.family_fixtures import save_family

    model_dir = save_family("gpt2", folder, seed=0)
    data = rows()
    hooks = load_hf_model(model_dir)
    fast = LanguageModel("gpt2", hooks.hf, hooks.bridge, GPT2Weights.from_hf(hooks.hf), hooks.tokenizer)
    assert uses_fast_path(fast, "CEAP", "edge") and not uses_fast_path(hooks, "CEAP", "edge")
    examples = [Example(f"e{i}", "ioi", "train", r["clean"], r["corrupted"], r["answer"], r["distractor"])
                for i, r in enumerate(data)]
    return hooks, fast, encode_examples(examples, hooks.tokenizer, max_len=hooks.n_positions), data


def weights_fingerprint(model_dir: Path) -> dict:
    """Per tensor of the folder's ``model.safetensors`` (the file both sides load): its shape, its L2 norm and its
    first four values (float64 repr), so that a rebuilt fixture can be checked against the one the reference ran
    on to a tolerance (a changed init moves every value; a last-ulp difference of the RNG on another CPU does
    not)."""
    import torch
    from safetensors.torch import load_file

    out = {}
    for name, p in sorted(load_file(Path(model_dir) / "model.safetensors").items()):
        x = p.to(torch.float64).flatten()
        out[name] = {"shape": list(p.shape), "l2": float(x.norm()), "first": x[:4].tolist()}
    return out


def tokens(batch) -> dict:
    """The token ids the model is fed (clean prompts, unpadded) and the answer/distractor ids."""
    return {"clean_tokens": [batch.clean[i, :n].tolist() for i, n in enumerate(batch.lengths)],
            "answer": batch.answer.tolist(), "distractor": batch.distractor.tolist()}


def prepare(out: Path) -> None:
    import numpy as np

    from certified_circuits.core.devices import configure_torch
    from certified_circuits.language.attribution import score_examples

    configure_torch(1)
    hooks, fast, batch, data = fixture(out / "model")
    (out / "prompts.json").write_text(json.dumps(data, indent=1))
    result: dict = {"edges": hooks.graph.edge_names(), **tokens(batch), "weights": weights_fingerprint(out / "model"),
                    "scores": {}}
    for m in STEPS:
        for path, lm in (("hooks", hooks), ("decomposed", fast)):
            for integration in ("hannamw", "reference"):
                s = score_examples(lm, batch, method="CEAP", ig_steps=m, integration=integration, batch_size=3,
                                   progress=False)
                result["scores"][f"{m}/{path}/{integration}"] = s.astype(np.float64).mean(0).tolist()
        # a control that must not match: EAP-IG-inputs with the same m gradients (k = 1..m), averaged
        s = score_examples(fast, batch, method="EAP-IG-inputs", ig_steps=m, integration="endpoint", progress=False)
        result["scores"][f"{m}/eap-ig-endpoint"] = s.astype(np.float64).mean(0).tolist()
    (out / "project.json").write_text(json.dumps(result))
    print(f"prepared {len(data)} prompts, {len(result['edges'])} edges, m = {STEPS}", file=sys.stderr)


def _cpu_copy(ceap: Path, out: Path) -> tuple[Path, list[dict]]:
    """A copy of LIONS-EPFL's ``CEAP/`` with every ``device='cuda'`` replaced by ``device='cpu'``; the lines changed."""
    dest = out / "ceap-cpu"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(ceap, dest)
    changed = []
    for f in sorted((dest / "ceap").glob("*.py")):
        lines = f.read_text().splitlines(keepends=True)
        for i, line in enumerate(lines):
            if "device='cuda'" in line:
                lines[i] = line.replace("device='cuda'", "device='cpu'")
                changed.append({"file": f"CEAP/ceap/{f.name}", "line": i + 1, "before": line.strip(),
                                "after": lines[i].strip()})
        f.write_text("".join(lines))
    return dest, changed


def reference(out: Path, ceap: Path) -> None:
    import numpy as np
    import torch

    for name in ("pygraphviz", "cmapy"):   # drawing only (module docstring)
        sys.modules.setdefault(name, types.ModuleType(name))
    stub = sys.modules["pygraphviz"]
    stub.AGraph = type("AGraph", (), {})  # type: ignore[attr-defined]  # named in to_graphviz's annotation
    for alias, value in (("NaN", np.nan), ("float_", np.float64)):   # NumPy 2 removed these aliases (graph.py)
        if alias not in np.__dict__:
            setattr(np, alias, value)
    copy, changed = _cpu_copy(ceap, out)
    sys.path.insert(0, str(copy))
    from ceap.attribute import attribute
    from ceap.graph import Graph
    from transformer_lens import HookedTransformer, HookedTransformerConfig
    from transformer_lens.pretrained.weight_conversions.gpt2 import convert_gpt2_weights
    from transformers import AutoTokenizer, GPT2LMHeadModel, PreTrainedTokenizerFast

    torch.set_num_threads(1)
    hf = GPT2LMHeadModel.from_pretrained(out / "model").eval()
    # the tokenizer.json the project saved (its tokenizer_config names a transformers-5 class this version lacks)
    PreTrainedTokenizerFast(tokenizer_file=str(out / "model" / "tokenizer.json"), bos_token="<|endoftext|>",
                            eos_token="<|endoftext|>", pad_token="<|endoftext|>").save_pretrained(out / "ref_tokenizer")
    tok = AutoTokenizer.from_pretrained(out / "ref_tokenizer")
    c = hf.config
    cfg = HookedTransformerConfig(n_layers=c.n_layer, d_model=c.n_embd, n_ctx=c.n_positions, d_head=c.n_embd // c.n_head,
                                  n_heads=c.n_head, d_mlp=4 * c.n_embd, d_vocab=c.vocab_size, act_fn="gelu_new",
                                  normalization_type="LN", positional_embedding_type="standard",
                                  eps=c.layer_norm_epsilon, default_prepend_bos=True)
    model = HookedTransformer(cfg, tokenizer=tok)
    model.load_and_process_state_dict(convert_gpt2_weights(hf, cfg), fold_ln=False, center_writing_weights=False,
                                      center_unembed=False, fold_value_biases=False)
    model.cfg.use_split_qkv_input = True
    model.cfg.use_attn_result = True
    model.cfg.use_hook_mlp_in = True
    data = json.loads((out / "prompts.json").read_text())

    def label(r):
        return [tok.encode(r[k], add_special_tokens=False)[0] for k in ("answer", "distractor")]

    loader = [([r["clean"] for r in data[s: s + REFERENCE_BATCH]], [r["corrupted"] for r in data[s: s + REFERENCE_BATCH]],
               torch.tensor([label(r) for r in data[s: s + REFERENCE_BATCH]]))
              for s in range(0, len(data), REFERENCE_BATCH)]

    def metric(logits, corrupted_logits, input_lengths, labels):   # logit difference, summed over the batch
        ar = torch.arange(len(logits))
        last = logits[ar, input_lengths - 1]
        return (last[ar, labels[:, 0]] - last[ar, labels[:, 1]]).sum()

    tokens = model.to_tokens([r["clean"] for r in data])
    lengths = [len(tok.encode(r["clean"], add_special_tokens=False)) + 1 for r in data]
    result: dict = {"device_substitution": changed, "clean_tokens": [tokens[i, :n].tolist() for i, n in enumerate(lengths)],
                    "labels": [label(r) for r in data], "scores": {}}
    for m in STEPS:
        graph = Graph.from_model(model)
        attribute(model, graph, loader, metric, ig_style="ceap", integration_steps=m, quiet=True)
        result["scores"][str(m)] = {name: float(e.score) for name, e in graph.edges.items()}
    (out / "reference.json").write_text(json.dumps(result))
    print(f"reference: {len(changed)} lines device='cuda' -> 'cpu'; m = {STEPS}", file=sys.stderr)


def compare(out: Path, store: Path | None = None) -> None:
    ours = json.loads((out / "project.json").read_text())
    theirs = json.loads((out / "reference.json").read_text())
    same_tokens = ours["clean_tokens"] == theirs["clean_tokens"]
    same_labels = [list(x) for x in zip(ours["answer"], ours["distractor"])] == theirs["labels"]
    print(f"device substitution: {len(theirs['device_substitution'])} lines "
          + "; ".join(f"{d['file']}:{d['line']}" for d in theirs["device_substitution"]))
    print(f"same token ids: {same_tokens}; same answer/distractor ids: {same_labels}; edges {len(ours['edges'])}")
    worst = worst_abs = 0.0
    for m in STEPS:
        ref = theirs["scores"][str(m)]
        assert sorted(ref) == sorted(ours["edges"]), "edge sets differ"
        want = [ref[n] for n in ours["edges"]]
        top = max(abs(x) for x in want)
        for path in ("hooks", "decomposed"):
            for integration, sign in (("hannamw", 1.0), ("reference", -1.0)):   # the default: LIONS-EPFL's negation
                got = [sign * x for x in ours["scores"][f"{m}/{path}/{integration}"]]
                d = max(abs(a - b) for a, b in zip(got, want))
                worst_abs, worst = max(worst_abs, d), max(worst, d / top)
                print(f"m = {m:2d}  {path:10s} {'' if sign > 0 else '-'}{integration:10s} max |diff| {d:.2e}  "
                      f"relative {d / top:.2e}  (max |score| {top:.3e})")
        control = max(abs(-a - b) for a, b in zip(ours["scores"][f"{m}/eap-ig-endpoint"], want))
        print(f"m = {m:2d}  control: -EAP-IG-inputs (endpoint, same m) vs their ceap: max |diff| {control:.2e}")
    print(f"summary: integration=hannamw (and minus the default) equals LIONS-EPFL's ceap to {worst_abs:.2e} absolute, "
          f"{worst:.2e} relative to the largest score (max over m = {STEPS} and both paths); same tokens "
          f"{same_tokens and same_labels}")
    if store is not None:
        if not (same_tokens and same_labels):
            raise SystemExit("not stored: the two sides fed the model different token ids")
        store.mkdir(parents=True, exist_ok=True)
        stored = {"about": STORED_ABOUT, "steps": list(STEPS), "prompts": json.loads((out / "prompts.json").read_text()),
                  "weights": ours["weights"], "device_substitution": theirs["device_substitution"],
                  "clean_tokens": theirs["clean_tokens"], "labels": theirs["labels"], "scores": theirs["scores"]}
        # one top-level key a line (full float repr, nothing rounded): a refresh's diff shows which part moved
        (store / "reference.json").write_text("{\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v)}"
                                                                  for k, v in stored.items()) + "\n}\n")
        print(f"stored LIONS-EPFL's scores and the inputs' record in {store / 'reference.json'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=["prepare", "reference", "compare"])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--ceap", type=Path, help="LIONS-EPFL/Circuit-Variance's CEAP/ folder (reference step)")
    parser.add_argument("--store", type=Path, help="compare: also write the reference side's scores and the inputs' "
                        "record here as the test data (tests/unit/data/ceap_reference)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.step == "prepare":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        prepare(args.out)
    elif args.step == "reference":
        reference(args.out, args.ceap)
    else:
        compare(args.out, args.store)


if __name__ == "__main__":
    main()
