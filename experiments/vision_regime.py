"""The noisy vision regime's conditions (docs/embedded_default.md, "The noisy regime"), measured on the BASELINE only:
for each class, the top-K circuit at the truth's size from its concept dataset D_c, under bootstrap resamples of
D_c: its mean Jaccard to the full-data circuit, and its precision against the verified truth. No certificate is
computed here (the hypotheses are tested on certified numbers only after the regime is fixed).

Usage (a trained planted model, its world and its ground truth; attributions are written under --work):

    python experiments/vision_regime.py --checkpoint results/vision/model.pt --world results/vision/world \\
        --ground-truth results/ground_truth/world.json --work /tmp/regime --out regime.json

Prints one line per scorer (mean over classes) and writes the per-class numbers to --out (JSON).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from certified_circuits.analysis.recovery import read_ground_truth, truth_mask
from certified_circuits.analysis.stability import stability
from certified_circuits.core.discovery import top_k_circuit
from certified_circuits.core.setting import Setting
from certified_circuits.storage.store import read_attributions

ROOT = Path(__file__).resolve().parents[1]
#: (label, scorer, ranking): signed and absolute relevance, activation
SCORERS = (("relevance (signed)", "relevance", "signed"), ("relevance (absolute)", "relevance", "absolute"),
           ("activation", "activation", "signed"))


def baseline_regime(scores: np.ndarray, groups: np.ndarray, truth: np.ndarray, k: float, ranking: str,
                    resamples: int, seed: int) -> dict[str, float]:
    """The baseline at K ``k`` on the full data and on ``resamples`` bootstrap resamples of its examples, through
    :func:`certified_circuits.analysis.stability.stability` (its bootstrap, top-K and Jaccard; the certification
    setting is irrelevant to the baseline, so the default one serves).

    Returns:
        ``jaccard`` (mean over resamples of |C_b & C| / |C_b | C|), ``precision`` (of the full-data circuit against
        ``truth``), ``precision_resampled`` (mean over resamples).
    """
    absolute = ranking == "absolute"
    mean = scores.mean(axis=0)
    full = top_k_circuit(np.abs(mean) if absolute else mean, groups, k)
    st = stability(scores, groups, [k], Setting(), resamples, seed, absolute=absolute, truth=truth,
                   allow_vacuous=True)
    return {"jaccard": float(st.columns["baseline_jaccard_mean"][0]),
            "precision": float((full & truth).sum() / max(full.sum(), 1)),
            "precision_resampled": float(st.columns["baseline_precision_mean"][0])}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--world", type=Path, required=True)
    p.add_argument("--ground-truth", type=Path, required=True)
    p.add_argument("--work", type=Path, required=True, help="attribution files go here (reused when present)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--n-examples", type=int, default=50, help="|D_c| (paper: 50)")
    p.add_argument("--resamples", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--k-grid", type=float, nargs="+", default=[0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1.0])
    args = p.parse_args(argv)
    truth = read_ground_truth(args.ground_truth)
    args.work.mkdir(parents=True, exist_ok=True)
    per_class: dict[str, dict] = {}
    for concept in truth.concepts:
        out = args.work / f"{concept}_n{args.n_examples}.h5"
        if not out.is_file():
            subprocess.run([str(ROOT / "bin" / "certified-circuits"), "vision-attribute", "--model", "world",
                            "--checkpoint", str(args.checkpoint), "--threads", "1", "--data",
                            str(args.world / "concept.npz"), "--n-examples", str(args.n_examples), "--counterfactual",
                            str(args.world / "counterfactual.npz"), "--concept", concept, "--split", "concept",
                            "--experiment", "world", "--out", str(out)], check=True, stderr=subprocess.DEVNULL)
        attr = read_attributions(out)
        mask = truth_mask(truth, concept, attr.names, str(out))
        grid = np.asarray(args.k_grid)
        k = float(grid[np.argmin(np.abs(grid - mask.mean()))])
        per_class[concept] = {"k": k, "n_true": int(mask.sum()), **{
            label: baseline_regime(attr.scores[scorer], attr.groups, mask, k, ranking, args.resamples, args.seed)
            for label, scorer, ranking in SCORERS}}
    summary = {label: {q: float(np.mean([c[label][q] for c in per_class.values()]))
                       for q in ("jaccard", "precision", "precision_resampled")} for label, _, _ in SCORERS}
    args.out.write_text(json.dumps({"per_class": per_class, "mean": summary}, indent=1))
    for label, numbers in summary.items():
        print(f"{label}: baseline Jaccard to the full-data circuit {numbers['jaccard']:.3f}, precision "
              f"{numbers['precision']:.3f} (resampled {numbers['precision_resampled']:.3f}); condition "
              f"{'met' if numbers['jaccard'] <= 0.9 and numbers['precision'] <= 0.9 else 'NOT met'}",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
