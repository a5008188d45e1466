"""One-off check of the MIB export against MIB's own code (issue 36; numbers in docs/mib.md).

Three steps, two Python environments:

1. ``prepare`` (this project's venv, ``PYTHONPATH=src``): a fixture GPT-2 (random weights, 2 layers, 4 heads,
   d = 32, saved as a Hugging Face folder with a BPE tokenizer built by ``tokenizers``), an IOI dataset in MIB's
   schema and hub layout (``data/<split>-00000-of-00001.parquet``), read by :mod:`certified_circuits.language.
   mib_data`; the project's EAP-IG attributions on its train split, a planner-sized certificate on MIB's 9
   fractions, ``reports.mib_submission.write_submission``; then the project's own faithfulness, CPR and CMD on the
   validation split (``language.evaluate.mib_circuit_masks`` + ``mib_table``, ``analysis.faithfulness``) of the
   importance file's ranking and of the 9 binary circuits.
2. ``reference`` (a separate venv with hannamw/EAP-IG at 7af394a, hannamw/MIB-circuit-track at b759df3 and
   transformer-lens 2.15): the same HF model as a HookedTransformer, MIB's ``HFEAPDataset`` on the same folder
   (validation split), MIB's ``logit_diff`` metric, EAP-IG's ``Graph.from_json`` on the exported files, MIB's
   ``evaluate_area_under_curve`` on ``importances.json`` (absolute False: CPR; True: CMD), and for each binary file
   ``apply_topn(int(p E))`` + ``evaluate_graph``.
3. ``compare``: both sets of numbers and their differences.

Usage (the venv of step 2 built as docs/mib.md says)::

    PYTHONPATH=src .venv/bin/python benchmarks/mib_reference_check.py prepare --out /tmp/mibcmp
    /tmp/mibref/bin/python benchmarks/mib_reference_check.py reference --out /tmp/mibcmp \\
        --mib /tmp/mibref-src/MIB-circuit-track --eap /tmp/mibref-src/EAP-IG
    python3 benchmarks/mib_reference_check.py compare --out /tmp/mibcmp
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PERCENTAGES = (.001, .002, .005, .01, .02, .05, .1, .2, .5, 1)
METHOD = "certified-EAP-IG-inputs"
PAIR = "ioi_gpt2"


def ioi_rows(n: int, seed: int) -> list[dict]:
    """IOI rows in MIB's schema (``prompt``, ``metadata``, ``s2_io_flip_counterfactual``), from seeded names."""
    import numpy as np

    from tests.helpers.family_fixtures import NAMES, OBJECTS, PLACES, ioi_prompt

    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        a, b, c = rng.choice(NAMES, 3, replace=False)
        place, obj = rng.choice(PLACES), rng.choice(OBJECTS)
        rows.append({"prompt": ioi_prompt(a, b, b, place, obj),
                     "metadata": {"indirect_object": str(a), "subject": str(b), "random_c": str(c)},
                     "s2_io_flip_counterfactual": {"prompt": ioi_prompt(a, b, a, place, obj)}})
    return rows


def prepare(out: Path) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import torch

    import certified_circuits as cc
    from certified_circuits.analysis import faithfulness as fa
    from certified_circuits.analysis.mib_constants import SUBMISSION_FRACTIONS
    from certified_circuits.core import planning
    from certified_circuits.core.setting import Setting
    from certified_circuits.language.attribution import attribute_task
    from certified_circuits.language.evaluate import load_evaluation_model, mib_circuit_masks, mib_table
    from certified_circuits.language.mib_data import load_mib_task
    from certified_circuits.language.tasks import write_jsonl
    from certified_circuits.pipeline.config_language import hf_prompt_tokenizer
    from certified_circuits.reports import mib_submission as mib
    from certified_circuits.storage.store import read_attributions, read_certificates
    from tests.helpers.family_fixtures import save_family

    torch.manual_seed(0)
    model_dir = save_family("gpt2", out / "model", seed=0)
    data = out / "ioi"
    (data / "data").mkdir(parents=True, exist_ok=True)
    for split, n, seed in (("train", 48, 1), ("validation", 24, 2)):
        pq.write_table(pa.Table.from_pylist(ioi_rows(n, seed)), data / "data" / f"{split}-00000-of-00001.parquet")
    tokenizer, max_len = hf_prompt_tokenizer(model_dir)
    splits = load_mib_task(data, "ioi", splits={"id_test": "validation"}, tokenizer=tokenizer, max_len=max_len)
    for split in ("train", "validation"):
        write_jsonl(out / f"{split}.jsonl", splits[split])
    attr_path = out / "attr.h5"
    attribute_task(splits["train"], task="ioi", split="train", model="hf", model_path=model_dir, out=attr_path,
                   experiment="mib", device=torch.device("cpu"), ig_steps=5, integration="reference", batch_size=16)
    attr = read_attributions(attr_path)
    scores = attr.scores["eap_ig"]
    setting = Setting(p_del=0.9, n0=50, n=400, tau=0.8, alpha=0.05, seed=0)
    print(planning.plan(scores.shape[0], scores.shape[1], setting), file=sys.stderr)
    cert = cc.certify_scores(scores, np.zeros(scores.shape[1], int), list(SUBMISSION_FRACTIONS), setting,
                             absolute=True, attrs={"scorer": "eap_ig"}).save(out / "cert.h5")
    mib.write_submission(out / "submission", "ioi", "gpt2", METHOD, attr_path, cert, cert)
    decision = read_certificates(cert).decision
    importance_file = out / "submission" / "importances" / f"{METHOD}_patching_edge" / PAIR / "importances.json"
    edges = json.loads(importance_file.read_text())["edges"]
    lm = load_evaluation_model("hf", model_dir, "ioi", {"validation": out / "validation.jsonl"}, "cpu")
    names = lm.graph.edge_names()
    importance = np.array([edges[n]["score"] for n in names])
    mean = scores.mean(0).astype(np.float64)
    circuits = mib_circuit_masks(lm.graph, importance, decision, list(SUBMISSION_FRACTIONS),
                                 rank_scores=np.abs(mean))
    table = mib_table(lm, "ioi", circuits, {"validation": out / "validation.jsonl"}, device="cpu", progress=False)
    areas = fa.mib_faithfulness_table(table.assign(experiment="mib"), ["eval_set"])
    f = (table.m - table.m_empty) / (table.m_full - table.m_empty)
    baseline = table[(table.method == "baseline") & (table.ranking == "signed")]
    certified = table[table.method == "certified"]
    result = {
        "importance_cpr": float(areas[areas.method == "baseline"].cpr.iloc[0]),
        "importance_cmd": float(areas[areas.method == "baseline"].cmd.iloc[0]),
        "importance_f": [float(f[i]) for i in baseline.index],
        "binary_f": [float(f[i]) for i in certified.index if table.k_target[i] < 1],
        "n_certified_in": [int((decision[i] == 1).sum()) for i in range(decision.shape[0])],
        "n_edges": len(names),
    }
    (out / "project.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


def reference(out: Path, mib_repo: Path, eap_repo: Path) -> None:
    sys.path[:0] = [str(eap_repo / "src"), str(mib_repo)]
    from functools import partial

    import torch
    from eap.evaluate import evaluate_baseline, evaluate_graph
    from eap.graph import Graph
    from MIB_circuit_track.dataset import HFEAPDataset
    from MIB_circuit_track.evaluation import evaluate_area_under_curve
    from MIB_circuit_track.metrics import get_metric
    from transformer_lens import HookedTransformer, HookedTransformerConfig
    from transformer_lens.pretrained.weight_conversions.gpt2 import convert_gpt2_weights
    from transformers import AutoTokenizer, GPT2LMHeadModel, PreTrainedTokenizerFast

    hf = GPT2LMHeadModel.from_pretrained(out / "model").eval()
    # the tokenizer.json the project saved (its tokenizer_config names a transformers-5 class this version lacks)
    PreTrainedTokenizerFast(tokenizer_file=str(out / "model" / "tokenizer.json"), bos_token="<|endoftext|>",
                            eos_token="<|endoftext|>", pad_token="<|endoftext|>").save_pretrained(out / "ref_tokenizer")
    tok = AutoTokenizer.from_pretrained(out / "ref_tokenizer")  # TransformerLens reloads it by name_or_path
    c = hf.config
    cfg = HookedTransformerConfig(n_layers=c.n_layer, d_model=c.n_embd, n_ctx=c.n_positions, d_head=c.n_embd // c.n_head,
                                  n_heads=c.n_head, d_mlp=4 * c.n_embd, d_vocab=c.vocab_size, act_fn="gelu_new",
                                  normalization_type="LN", positional_embedding_type="standard",
                                  eps=c.layer_norm_epsilon, default_prepend_bos=True)
    model = HookedTransformer(cfg, tokenizer=tok)
    model.load_and_process_state_dict(convert_gpt2_weights(hf, cfg), fold_ln=False, center_writing_weights=False,
                                      center_unembed=False, fold_value_biases=False)
    model.cfg.use_split_qkv_input = True  # as run_evaluation.py sets them
    model.cfg.use_attn_result = True
    model.cfg.use_hook_mlp_in = True
    model.cfg.ungroup_grouped_query_attention = True
    dataset = HFEAPDataset(str(out / "ioi"), model.tokenizer, split="validation", task="ioi", model_name="gpt2")
    dataloader = dataset.to_dataloader(batch_size=8)
    metric = partial(get_metric("logit_diff", "ioi", model.tokenizer, model), mean=False, loss=False)
    root = out / "submission"
    importance = root / "importances" / f"{METHOD}_patching_edge" / PAIR / "importances.json"
    result: dict = {"n_examples": len(dataset)}
    with torch.no_grad():
        for absolute, key in ((False, "cpr"), (True, "cmd")):
            counts, area_under, area_from_1, _, faith = evaluate_area_under_curve(
                model, Graph.from_json(str(importance)), dataloader, metric, absolute=absolute, quiet=True)
            result[f"importance_{key}"] = area_under if key == "cpr" else area_from_1
            result[f"importance_f_abs_{absolute}"] = faith
        baseline = evaluate_baseline(model, dataloader, metric).mean().item()
        empty = Graph.from_json(str(importance))
        empty.apply_topn(0, True)
        corrupted = evaluate_graph(model, empty, dataloader, metric, quiet=True).mean().item()
        binary, as_marked = [], []
        for p in PERCENTAGES[:-1]:
            path = str(root / "multiple_circuits" / f"{METHOD}_patching_edge" / PAIR / f"circuit_{p * 100:g}pct.json")
            g = Graph.from_json(path)
            g.apply_topn(int(p * len(g.edges)), False, prune=True)  # MIB's re-ranking, as for an importance file
            score = evaluate_graph(model, g, dataloader, metric, quiet=True).mean().item()
            binary.append((score - corrupted) / (baseline - corrupted))
            g = Graph.from_json(path)  # the file's in_graph as it is (evaluate_graph prunes it)
            score = evaluate_graph(model, g, dataloader, metric, quiet=True).mean().item()
            as_marked.append((score - corrupted) / (baseline - corrupted))
        result["binary_f"] = binary
        result["binary_f_in_graph"] = as_marked
    (out / "reference.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


def compare(out: Path) -> None:
    ours = json.loads((out / "project.json").read_text())
    theirs = json.loads((out / "reference.json").read_text())
    print(f"edges {ours['n_edges']}, certified in per fraction {ours['n_certified_in']}, "
          f"MIB's validation examples {theirs['n_examples']}")
    for key in ("importance_cpr", "importance_cmd"):
        print(f"{key}: MIB {theirs[key]:.6f}  project {ours[key]:.6f}  diff {ours[key] - theirs[key]:.2e}")
    notes = json.loads((out / "submission" / "notes" / f"{PAIR}.json").read_text())["fractions"]
    kept = [n["keeps_membership"] for n in notes]
    d_imp = max(abs(a - b) for a, b in zip(ours["importance_f"], theirs["importance_f_abs_False"]))
    d_kept = max(abs(a - b) for a, b, k in zip(ours["binary_f"], theirs["binary_f"], kept) if k)
    d_marked = max(abs(a - b) for a, b in zip(ours["binary_f"], theirs["binary_f_in_graph"]))
    print(f"max |f diff|: importance curve {d_imp:.2e}; binary files re-ranked by MIB where the notes say the "
          f"membership is kept ({sum(kept)} of 9) {d_kept:.2e}; binary files by in_graph {d_marked:.2e}")
    print("keeps_membership:            ", " ".join(f"{str(k):>7}" for k in kept))
    print("binary f, MIB re-ranked:     ", " ".join(f"{x:7.4f}" for x in theirs["binary_f"]))
    print("binary f, MIB by in_graph:   ", " ".join(f"{x:7.4f}" for x in theirs["binary_f_in_graph"]))
    print("binary f, project:           ", " ".join(f"{x:7.4f}" for x in ours["binary_f"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=["prepare", "reference", "compare"])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--mib", type=Path, help="hannamw/MIB-circuit-track checkout (reference step)")
    parser.add_argument("--eap", type=Path, help="hannamw/EAP-IG checkout at 7af394a (reference step)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.step == "prepare":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        prepare(args.out)
    elif args.step == "reference":
        reference(args.out, args.mib, args.eap)
    else:
        compare(args.out)


if __name__ == "__main__":
    main()
