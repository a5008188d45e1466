"""Vision reports: the spurious-cue index by certification category, and the feature grids (Fig. 4).

Both take their K from the operating points of report-sufficiency (``certified_peak`` on the ID sets)
and read concept and scorer from the files' attributes.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from certified_circuits.analysis import evaluation
from certified_circuits.reports import figures, tables
from certified_circuits.storage.atomic import write_csv
from certified_circuits.core.discovery import k_index
from certified_circuits.reports.paper import read_circuits
from certified_circuits.storage.store import read_attributions

log = logging.getLogger(__name__)


def spurious_report(operating_points: Path, scorer: str, attributions: Sequence[Path],
                    pairs: Sequence[tuple[Path, Path]], out_dir: Path, eval_set: str = "id") -> dict[str, float]:
    """Spurious index (reliance on the planted background cue, embedded world only) of certified-in,
    abstained (within the baseline) and certified-out channels at the certified peak K."""
    k_target = evaluation.operating_k(evaluation.read_operating_points(operating_points), scorer=scorer, eval_set=eval_set,
                                      criterion="certified_peak")
    by_concept = {}
    for path in attributions:
        scores = read_attributions(path)
        if "spurious_index" not in scores.extras:
            raise ValueError(f"{path} has no extras/spurious_index (only the embedded world writes it)")
        by_concept[str(scores.attrs["concept"])] = scores
    frames = []
    for votes, certificates in read_circuits(pairs, scorer):
        concept = str(votes.attrs["concept"])
        if concept not in by_concept:
            raise ValueError(f"no attributions of {concept!r} among --attributions")
        i = k_index(votes.k_grid, k_target, concept)
        categories = evaluation.channel_categories(certificates.decision[i], votes.baseline[i])
        frames.append(pd.DataFrame({"concept": concept, "component": by_concept[concept].names, "category": categories,
                                    "spurious_index": by_concept[concept].extras["spurious_index"],
                                    "k_target": k_target}))
    channels = pd.concat(frames, ignore_index=True)
    channels = channels[channels.category != "other"]
    write_csv(out_dir / "spurious_channels.csv", channels)
    summary = channels.groupby("category")["spurious_index"].agg(["mean", "median", "count"]).reset_index()
    tables.write_table(summary, out_dir / "spurious_summary", caption="Spurious index by certification category")
    figures.plot_spurious(channels, out_dir / "spurious")
    return {f"spurious_mean_{r.category}": float(r["mean"]) for _, r in summary.iterrows()}


def example_images(data: str | Path, ids: list[str], size: int = 64) -> np.ndarray:
    """uint8 [len(ids), H, W, 3] for example ids of a world .npz split or an ImageNet-style folder."""
    path = Path(data)
    if path.suffix == ".npz":
        from certified_circuits.vision.data.world import load_split

        split = load_split(path)
        position = {str(i): n for n, i in enumerate(split["ids"].astype(str))}
        missing = [i for i in ids if i not in position]
        if missing:
            raise ValueError(f"{path} lacks example ids {missing[:3]}: were the attributions made from it?")
        return split["images"][[position[i] for i in ids]]
    from certified_circuits.vision.data.images import read_rgb

    return np.stack([np.asarray(read_rgb(path / i).resize((size, size))) for i in ids])


def features_report(operating_points: Path, scorer: str, attributions_path: Path, votes_path: Path,
                    certificates_path: Path, data: str | Path, out_stem: Path, eval_set: str = "id",
                    channels: int = 3, examples: int = 6) -> None:
    """Fig. 4: top-activating examples of certified-in, abstained (within the baseline) and
    certified-out channels of one class, at the certified ID peak K. Channels come from the deepest
    block (the most class-specific features); within each category the ones with the highest mean
    activation on the concept dataset are shown."""
    k_target = evaluation.operating_k(evaluation.read_operating_points(operating_points), scorer=scorer, eval_set=eval_set,
                                      criterion="certified_peak")
    attributions = read_attributions(attributions_path)
    for key in ("top_examples", "mean_activation"):
        if key not in attributions.extras:
            raise ValueError(f"{attributions_path} has no extras/{key}; rerun vision-attribute")
    ((votes, certificates),) = read_circuits([(votes_path, certificates_path)], scorer)
    i = k_index(votes.k_grid, k_target, str(votes_path))
    categories = evaluation.channel_categories(certificates.decision[i], votes.baseline[i])
    deepest = attributions.groups == attributions.groups.max()
    activation = attributions.extras["mean_activation"]
    top = attributions.extras["top_examples"][:, :examples]
    rows, labels = [], []
    for category in ("certified_in", "abstained", "certified_out"):
        candidates = np.flatnonzero((categories == category) & deepest)
        for channel in candidates[np.argsort(-activation[candidates], kind="stable")][:channels]:
            ids = [attributions.example_ids[j] for j in top[channel]]
            rows.append(example_images(data, ids))
            labels.append(f"{category.replace('_', ' ')}: {attributions.names[channel]}")
    if not rows:
        raise ValueError("no channel in any category at this K; nothing to show")
    figures.plot_feature_grid(np.stack(rows), labels, out_stem,
                              title=f"{attributions.attrs.get('concept', '')} (K = {k_target:g})")
