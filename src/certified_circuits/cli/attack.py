"""``certified-circuits report-attack``: the guarantee of Theorem 1 shown directly by editing datasets.

For each class/task (``--class ATTR POOL [POOL ...]``, repeatable): the concept dataset's cached
per-example scores (``ATTR``) are edited by 1, 2, 4 (``--multiples``) times the certified radius
``r = floor(log(1.5 - tau) / log p_del)`` of insertions, deletions and substitutions, drawing new examples
from the pool files (other attribution files of the same concept: same components, scores for the same
class, e.g. its OOD re-discovery splits), at random and greedily against the baseline circuit; the edited
dataset is certified again with the same settings and mask seed, and the flips of baseline memberships
and of certified labels are counted (:mod:`certified_circuits.core.edits`). Classes are pooled in the
summary table and figure.

The mask seed of each class is derived from ``--seed`` and the concept name exactly as the ``votes``
stage derives it, so the certificates of ``D`` are those of the workflow; the random edits use
``--attack-seed`` (also per concept).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from certified_circuits.cli.stages import InputError, Stages, add_decision_setting, add_k_grid, add_setting_tag
from certified_circuits.cli.stages import add_votes_setting, existing_file, positive_int
from certified_circuits.cli.stages import seed as seed_option
from certified_circuits.cli.stages import setting_of_args

log = logging.getLogger(__name__)

STAGES = Stages()


def _attack_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--class", dest="classes", nargs="+", action="append", default=[], type=existing_file,
                   metavar="FILE",
                   help="ATTR POOL [POOL ...]: the attribution file of one concept dataset, then one or more "
                   "attribution files of candidate examples of the same concept (repeatable, one per class)")
    p.add_argument("--scorer", required=True, help="score matrix to use, e.g. relevance or eap_ig")
    add_k_grid(p)
    add_votes_setting(p, seed_help="config seed of the deletion masks (as for votes)")
    add_decision_setting(p)
    add_setting_tag(p, "setting")
    p.add_argument("--multiples", type=positive_int, nargs="+", default=[1, 2, 4],
                   help="edits in multiples of the certified radius (of one edit when r = 0); default 1 2 4")
    p.add_argument("--kinds", nargs="+", choices=("insert", "delete", "substitute"),
                   default=["insert", "delete", "substitute"], help="edit kinds (default all three)")
    p.add_argument("--modes", nargs="+", choices=("random", "adversarial"), default=["random", "adversarial"],
                   help="random and/or greedy adversarial edits (default both)")
    p.add_argument("--trials", type=positive_int, default=5, help="random draws per edit kind and multiple (default 5)")
    p.add_argument("--attack-seed", type=seed_option, default=0, help="seed of the random edits (per concept)")
    p.add_argument("--out-dir", required=True, type=Path)


def _load_class(paths: list[Path], scorer: str):
    """(concept, scores, pool, groups, absolute) of one ``--class`` after checking the files belong together;
    ``absolute``: the scorer's ranking convention, as its attribution file records it."""
    import numpy as np

    from certified_circuits.storage.store import read_attributions

    if len(paths) < 2:
        raise InputError(f"--class {paths[0]}: give the concept's attribution file followed by at least one pool "
                         "file (attribution files of candidate examples of the same concept)")
    concept_file, *pool_files = paths
    attributions = read_attributions(concept_file)
    if scorer not in attributions.scores:
        raise InputError(f"{concept_file} has no scorer '{scorer}'; it has {sorted(attributions.scores)}")
    concept = str(attributions.attrs.get("concept", ""))
    pools = []
    for path in pool_files:
        candidates = read_attributions(path)
        if scorer not in candidates.scores:
            raise InputError(f"{path} has no scorer '{scorer}'; it has {sorted(candidates.scores)}")
        same_groups = np.array_equal(candidates.groups, attributions.groups)
        if list(candidates.names) != list(attributions.names) or not same_groups:
            raise InputError(f"{path} scores other components than {concept_file} ({candidates.n_components} vs "
                             f"{attributions.n_components}, or other names/groups): the pool must come from the "
                             "same model and component set")
        pool_concept = str(candidates.attrs.get("concept", ""))
        if concept and pool_concept and pool_concept != concept:
            raise InputError(f"{path} is concept '{pool_concept}' but {concept_file} is '{concept}': the pool must "
                             "hold examples of the same class/task, scored for it")
        pools.append(np.asarray(candidates.scores[scorer]))
    return (concept, np.asarray(attributions.scores[scorer]), np.concatenate(pools, axis=0), attributions.groups,
            attributions.absolute(scorer))


@STAGES.stage(
    "report-attack", _attack_arguments,
    help="Theorem 1 shown directly: edit the concept dataset by r, 2r, 4r examples and re-certify",
)
def _cmd_attack(args: argparse.Namespace) -> int:
    """Edit each concept dataset by multiples of the certified radius (random and greedy adversarial insertions,
    deletions and substitutions drawn from pool attribution files), re-run votes and certification with the same
    settings and seed, and report the share of baseline components and of certified labels that flip
    (attack_raw.csv, attack.csv/.md/.tex, attack.png/.pdf).
    """

    import pandas as pd

    from certified_circuits.reports.attack import attack_metrics, attack_table, write_attack_report
    from certified_circuits.core.smoothing import mask_seed
    from certified_circuits.pipeline.tracking import add_metrics


    try:  # the Setting owns the checks of every field, before any work
        setting_of_args(args)
    except ValueError as exc:
        raise InputError(f"invalid setting: {exc}") from None
    if not args.classes:  # the workflow knows the classes with a pool only after filtration
        from certified_circuits.storage.atomic import write_csv, write_text
        from certified_circuits.reports.figures import plot_message

        log.warning("report-attack: no class has a pool of insertion candidates; writing empty outputs")
        write_csv(args.out_dir / "attack_raw.csv", pd.DataFrame(columns=["edit", "mode", "r_multiple", "k_target"]))
        write_text(args.out_dir / "attack.md", "No class had enough pool examples to attack.\n")
        plot_message(args.out_dir / "attack", "Dataset-edit attack", "No class had enough pool examples to attack.")
        return 0
    from certified_circuits.cli.main import check_votes_memory, masks_fix  # the votes stage's one estimate

    tables = []
    for index, paths in enumerate(args.classes):
        concept, scores, pool, groups, absolute = _load_class(paths, args.scorer)
        name = concept or f"class{index}"
        log.info("attack: %s: |D| = %d, pool = %d, U = %d", name, scores.shape[0], pool.shape[0], scores.shape[1])
        # the edited datasets' masks draw over |D| plus the inserted pool examples at most
        check_votes_memory(args.n0 + args.n, scores.shape[0] + pool.shape[0], scores.shape[1], masks_fix(args))
        table = attack_table(
            scores, pool, groups, args.k_grid,
            p_del=args.p_del, n0=args.n0, n=args.n, seed=mask_seed(args.seed, concept), tau=args.tau,
            alpha=args.alpha, correction=args.correction, absolute=absolute, multiples=args.multiples,
            kinds=args.kinds, modes=args.modes, n_trials=args.trials, attack_seed=mask_seed(args.attack_seed, concept),
        )
        tables.append(table.assign(concept=name, scorer=args.scorer, source=str(paths[0])))
    raw = pd.concat(tables, ignore_index=True)
    if raw.empty:
        raise InputError("no edit could be made: every concept dataset is too small for the radius and multiples "
                         "(deleting needs |D| > edits); lower --multiples or raise |D|")
    write_attack_report(raw, args.out_dir, args.alpha)
    add_metrics({**attack_metrics(raw), "n_classes": len(args.classes)})
    return 0
