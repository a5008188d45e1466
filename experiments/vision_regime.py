"""The noisy vision regime's conditions (docs/embedded_default.md, "The noisy regime"), measured on the BASELINE only:
for each class, the top-K circuit at the truth's size from its concept dataset D_c, under bootstrap resamples of
D_c: its mean Jaccard to the full-data circuit, and its precision against the verified truth. No certificate is
computed here (the hypotheses are tested on certified numbers only after the regime is fixed).

Usage (a trained planted model, its world and its ground truth; attributions are written under --work):

    python experiments/vision_regime.py --checkpoint results/vision/model.pt --world results/vision/world \\
        --ground-truth results/ground_truth/world.json --work /tmp/regime --out regime.json

Prints one line per scorer (mean over the classes whose truth passed its checks; the others are named and left
out) and writes the per-class numbers to --out (JSON). Every refusal is one ``error: <file>: <key>: <what is
wrong>; <fix>`` on stderr with exit 2, before any attribution is computed: an option out of range, a world or
ground truth that cannot be read, a class with fewer concept images than ``--n-examples``, a ``--work`` folder built
from another checkpoint or world (``--work/built_from.json`` records their paths and sha256). A failed
``vision-attribute`` names its log (``--work/<class>_n<N>.log``) and prints its last lines.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from certified_circuits.analysis.recovery import GroundTruth, read_ground_truth, truth_mask
from certified_circuits.analysis.stability import MAX_RESAMPLES, stability
from certified_circuits.core.discovery import top_k_circuit
from certified_circuits.core.planning import PlanWarning
from certified_circuits.core.setting import Setting
from certified_circuits.storage.atomic import write_json
from certified_circuits.storage.store import read_attributions

sys.path.insert(0, str(Path(__file__).parent))
from noise_sweep import SEED_MAX, ConfigError, check_examples, failed_checks, run_stage, work_record  # noqa: E402

#: the regime's condition on the baseline (docs/embedded_default.md, "The noisy regime"): both at most this
CONDITION = 0.9
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
    with warnings.catch_warnings():  # the default setting's plan says nothing about the baseline
        warnings.simplefilter("ignore", PlanWarning)
        st = stability(scores, groups, [k], Setting(), resamples, seed, absolute=absolute, truth=truth,
                       allow_vacuous=True)
    return {"jaccard": float(st.columns["baseline_jaccard_mean"][0]),
            "precision": float((full & truth).sum() / max(full.sum(), 1)),
            "precision_resampled": float(st.columns["baseline_precision_mean"][0])}


def check_inputs(args: argparse.Namespace) -> GroundTruth:
    """Every option checked before any attribution: ranges, the checkpoint, the world's concept split (its classes
    and how many concept images each has), the ground truth and its classes.

    Returns:
        The ground truth.

    Raises:
        ConfigError: naming the file or option, what is wrong and the fix.
    """
    from certified_circuits.storage.arrays import read_npz

    if args.n_examples < 2:
        raise ConfigError(f"--n-examples: {args.n_examples}: must be at least 2 (bootstrap resamples of D_c); pass 50 "
                          "(the paper's |D_c|)")
    if not 2 <= args.resamples <= MAX_RESAMPLES:
        raise ConfigError(f"--resamples: {args.resamples}: must be in [2, {MAX_RESAMPLES}]; pass 20 (the protocol's)")
    if not 0 <= args.seed <= SEED_MAX:
        raise ConfigError(f"--seed: {args.seed}: must be in [0, 2**32 - 1]; pass a non-negative 32-bit seed")
    grid = np.asarray(args.k_grid, dtype=np.float64)
    if not ((grid > 0) & (grid <= 1)).all() or np.unique(grid).size != grid.size:
        raise ConfigError(f"--k-grid: {args.k_grid}: each K must be in (0, 1] and given once; pass shares of the "
                          "components, e.g. 0.05 0.1 0.2")
    if args.out.is_dir():
        raise ConfigError(f"{args.out}: --out: a folder, not a file; pass the JSON file to write")
    if not args.checkpoint.is_file():
        raise ConfigError(f"{args.checkpoint}: --checkpoint: not found; pass the model vision-train wrote")
    concept_split = args.world / "concept.npz"
    for path in (concept_split, args.world / "counterfactual.npz"):
        if not path.is_file():
            raise ConfigError(f"{path}: --world: not found; pass the folder vision-world wrote (with the concept and "
                              "counterfactual splits)")
    try:
        data = read_npz(concept_split, "rebuild the world with vision-world", names=("labels", "class_names"))
        truth = read_ground_truth(args.ground_truth)
    except (ValueError, FileNotFoundError) as exc:
        raise ConfigError(str(exc)) from None
    names = [str(n) for n in data.get("class_names", [])]
    labels = np.asarray(data.get("labels", []), dtype=np.int64)
    images = dict(zip(names, np.bincount(labels, minlength=len(names)).tolist()))
    unknown = [c for c in truth.concepts if c not in images]
    if unknown:
        raise ConfigError(f"{args.ground_truth}: concepts: {unknown} are not classes of the world {args.world} "
                          f"({', '.join(names)}); pass the ground truth of a model trained on this world")
    short = {c: images[c] for c in truth.concepts if images[c] < args.n_examples}
    if short:
        concept, held = next(iter(short.items()))
        raise ConfigError(f"{concept_split}: --n-examples: {args.n_examples} exceeds the {held} concept images of class "
                          f"{concept!r} ({len(short)} classes have fewer): |D_c| would silently be {held}; pass "
                          f"--n-examples {min(short.values())} or rebuild the world with --n-concept-per-class "
                          f"{args.n_examples}")
    return truth


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--world", type=Path, required=True)
    p.add_argument("--ground-truth", type=Path, required=True)
    p.add_argument("--work", type=Path, required=True,
                   help="attribution files go here (reused when present, if built from this checkpoint and world)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--n-examples", type=int, default=50, help="|D_c| (paper: 50)")
    p.add_argument("--resamples", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--k-grid", type=float, nargs="+", default=[0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1.0])
    args = p.parse_args(argv)
    try:
        summary = run(args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for label, numbers in summary.items():
        met = numbers["jaccard"] <= CONDITION and numbers["precision"] <= CONDITION
        print(f"{label}: baseline Jaccard to the full-data circuit {numbers['jaccard']:.3f}, precision "
              f"{numbers['precision']:.3f} (resampled {numbers['precision_resampled']:.3f}) over "
              f"{numbers['classes']} verified classes; condition {'met' if met else 'NOT met'}", file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Check the inputs, attribute each verified class (reusing ``--work``'s files when built from this checkpoint
    and world), measure the baseline regime per class and scorer and write ``--out``.

    Returns:
        Per scorer label, the mean over verified classes of ``jaccard``, ``precision``, ``precision_resampled``, and
        ``classes`` (their number).

    Raises:
        ConfigError: an input refused (:func:`check_inputs`), a ``--work`` folder of another checkpoint or world, a
            failed ``vision-attribute`` (its log named, its last lines shown), no class whose truth passed.
    """
    from certified_circuits.pipeline.tracking.records import sha256_of

    truth = check_inputs(args)
    work_record(args.work, {"checkpoint": str(args.checkpoint.resolve()), "checkpoint_sha256": sha256_of(args.checkpoint),
                            "world": str(args.world.resolve()),
                            "concept_sha256": sha256_of(args.world / "concept.npz")}, "--work")
    left_out = {c: failed_checks(truth, c) or ["passed: false"] for c in truth.concepts if not truth.verified(c)}
    for concept, failed in left_out.items():
        print(f"vision regime: {concept}: the truth fails {failed}; left out", file=sys.stderr)
    per_class: dict[str, dict] = {}
    for concept in (c for c in truth.concepts if c not in left_out):
        out = args.work / f"{concept}_n{args.n_examples}.h5"
        if not out.is_file():
            run_stage(["vision-attribute", "--model", "world", "--checkpoint", str(args.checkpoint), "--threads", "1",
                       "--data", str(args.world / "concept.npz"), "--n-examples", str(args.n_examples),
                       "--counterfactual", str(args.world / "counterfactual.npz"), "--concept", concept, "--split",
                       "concept", "--experiment", "world", "--out", str(out)], out.with_suffix(".log"))
        attr = read_attributions(out)
        check_examples(attr, args.n_examples, out)
        mask = truth_mask(truth, concept, attr.names, str(out))
        grid = np.asarray(args.k_grid)
        k = float(grid[np.argmin(np.abs(grid - mask.mean()))])
        per_class[concept] = {"k": k, "n_true": int(mask.sum()), **{
            label: baseline_regime(attr.scores[scorer], attr.groups, mask, k, ranking, args.resamples, args.seed)
            for label, scorer, ranking in SCORERS}}
    if not per_class:
        raise ConfigError(f"{args.ground_truth}: verification: no class's truth passed its checks ({left_out}): "
                          "nothing to measure; retrain the model or rerun vision-ground-truth")
    summary = {label: {**{q: float(np.mean([c[label][q] for c in per_class.values()]))
                          for q in ("jaccard", "precision", "precision_resampled")}, "classes": len(per_class)}
               for label, _, _ in SCORERS}
    write_json(args.out, {"per_class": per_class, "left_out": left_out, "mean": summary})
    return summary


if __name__ == "__main__":
    raise SystemExit(main())
