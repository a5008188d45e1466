"""``certified-circuits certify-scores`` and ``certified-circuits inspect``: any score file in, a certificate out.

``certify-scores`` certifies the top-K circuits of per-example scores ``[N, U]`` from any file (``.npy``,
``.npz``, ``.pt``/``.pth``, an attribution file or any HDF5) through the public API
(:func:`certified_circuits.certify_scores`, then :meth:`certified_circuits.Certificate.save`), with the
plan's verdict and warnings recorded in the file as the workflow's ``certify`` stage records them.
``inspect`` prints what a certificate, a votes or certificates file, or an attribution file holds.

Declared with the stage convention of :mod:`certified_circuits.cli.stages`; every input is checked before
any work, and bad input is an :class:`~certified_circuits.cli.stages.InputError` (exit 2) naming the fix.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

import numpy as np

from certified_circuits.commands import COMMAND
from certified_circuits.cli.stages import InputError, Stages, add_decision_setting, add_setting_tag, add_votes_setting
from certified_circuits.cli.stages import existing_file, k_fraction, output_file, setting_of_args
from certified_circuits.core.setting import number
from certified_circuits.storage.scores import ScoreFileError, Scores, checked_groups, checked_names, checked_scores
from certified_circuits.storage.scores import is_attribution_file, read_groups, read_names, read_scores

log = logging.getLogger(__name__)
STAGES = Stages()

#: the K grid of ``certify-scores`` when ``--k-grid`` is not given: small to medium circuits, a fraction of
#: each group (with one group, of all components)
DEFAULT_K_GRID = (0.05, 0.1, 0.2, 0.3, 0.5)


# ---------------------------------------------------------------------------------------------- certify-scores


def _certify_scores_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scores", type=existing_file, required=True,
                   help="per-example scores [N, U]: .npy, .npz (scores, groups, names), .pt/.pth (a tensor or a "
                        "dict with scores, groups, names), an attribution .h5, or any HDF5 (--dataset)")
    p.add_argument("--scorer", default=None,
                   help="the score matrix of an attribution file that holds several (e.g. relevance, eap_ig)")
    p.add_argument("--dataset", default="scores", help="the score dataset of a plain HDF5 file (default scores)")
    p.add_argument("--groups", type=existing_file, default=None,
                   help="group (layer) id of each component: .npy or a text file of integers; K is a fraction of "
                        "each group (default: the score file's groups, else one group: global top-K)")
    p.add_argument("--names", type=existing_file, default=None, help="component names, one per line")
    p.add_argument("--k-grid", type=k_fraction, nargs="+", default=list(DEFAULT_K_GRID), metavar="K",
                   help="top-K fractions in (0, 1], space-separated (default "
                        f"{' '.join(map(str, DEFAULT_K_GRID))})")
    p.add_argument("--absolute", action="store_true",
                   help="rank by |mean score| (EAP-IG's convention); an attribution file's recorded ranking is used")
    # the paper's vision setting: the defaults are Setting()'s, never retyped
    add_votes_setting(p, required=False, seed_help="seed of both mask streams")
    add_decision_setting(p, required=False)
    add_setting_tag(p, "setting")
    p.add_argument("--allow-vacuous", action="store_true",
                   help="certify even when the plan says no component can be certified (every one would abstain)")
    p.add_argument("--out", type=output_file, required=True, help="certificate HDF5 (output; Certificate.load reads it)")


def _read_inputs(args: argparse.Namespace) -> tuple[Scores, np.ndarray, np.ndarray, tuple[str, ...] | None]:
    """The score file's scores, the groups and names of ``--groups`` / ``--names`` or else of the file, checked
    (:mod:`certified_circuits.storage.scores`): ``(source, scores, groups, names)``."""
    source = read_scores(args.scores, args.scorer, args.dataset)
    scores = checked_scores(source.scores, args.scores)
    n_components = scores.shape[1]
    if args.groups is not None:
        groups = checked_groups(read_groups(args.groups), n_components, f"--groups {args.groups}")
    elif source.groups is not None:
        groups = checked_groups(source.groups, n_components, f"the groups of {args.scores}")
    else:
        groups = np.zeros(n_components, dtype=np.int64)  # one group: global top-K
    names = None
    if args.names is not None:
        names = checked_names(read_names(args.names), n_components, f"--names {args.names}")
    elif source.names is not None:
        names = checked_names(source.names, n_components, f"the names of {args.scores}")
    return source, scores, groups, names


@STAGES.stage("certify-scores", _certify_scores_arguments,
              help="certify the top-K circuits of any per-example score file [N, U] (the public API's certify_scores)")
def _cmd_certify_scores(args: argparse.Namespace) -> int:
    """Certify the top-K circuits of per-example scores [N, U] from any file, as certified_circuits.certify_scores
    does (the paper's base algorithm: top-K per group of the mean score over each sub-dataset), and write the
    certificate (Certificate.save; Certificate.load, inspect and the report stages read it).

    The setting flags default to Setting(), the paper's vision setting; the plan is checked first: a setting that
    can certify nothing stops with the planner's message (exit 2) unless --allow-vacuous, a marginal one warns.
    The masks are drawn from --seed itself (the workflow's votes stage draws them from the seed and the concept).

    Example: certified-circuits certify-scores --scores scores.npz --k-grid 0.1 0.25 --out circuit.h5
    """
    import warnings

    import certified_circuits as cc

    try:  # a score file that cannot serve names the fix: bad input, exit 2
        source, scores, groups, names = _read_inputs(args)
    except ScoreFileError as exc:
        raise InputError(str(exc)) from None
    n_examples, n_components = scores.shape
    absolute = bool(args.absolute)
    if source.absolute is not None:  # an attribution file records its scorer's ranking
        if args.absolute and not source.absolute:
            raise InputError(f"{args.scores} records ranking 'signed' for scorer '{source.attrs['scorer']}'; its base "
                             "algorithm ranks by the signed mean: drop --absolute")
        absolute = source.absolute
    try:
        setting = setting_of_args(args)
    except ValueError as exc:
        raise InputError(f"invalid setting: {exc}") from exc
    from certified_circuits.cli.main import check_votes_memory, masks_fix  # the votes stage's one estimate

    check_votes_memory(setting.n0 + setting.n, n_examples, n_components, masks_fix(args))
    attrs = {**source.attrs, "source": str(args.scores)}  # the API adds the plan's record
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", cc.PlanWarning)
        try:
            certificate = cc.certify_scores(scores, groups, args.k_grid, setting, absolute=absolute, attrs=attrs,
                                            allow_vacuous=args.allow_vacuous)
        except cc.VacuousSettingError as exc:
            raise InputError(str(exc).replace("(pass allow_vacuous=True to run it anyway)",
                                              "(pass --allow-vacuous to certify anyway)")) from exc
    for warning in caught:
        if issubclass(warning.category, cc.PlanWarning):
            log.warning("plan (%s): %s", certificate.attrs["plan_verdict"], warning.message)
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    if names is not None:
        from dataclasses import replace

        certificate = replace(certificate, names=names)
    certificate.save(args.out)
    counts = "; ".join(f"K {k:g}: {int((row == 1).sum())} in, {int((row == 0).sum())} out, "
                       f"{int((row == -1).sum())} abstain" for k, row in zip(args.k_grid, certificate.decision))
    print(f"certify-scores: {n_examples} examples x {n_components} components ({len(np.unique(groups))} group(s), "
          f"{'|mean|' if absolute else 'mean'} ranking) from {args.scores}; p_del {number(setting.p_del)}, n0 {setting.n0}, "
          f"n {setting.n}, seed {setting.seed}, tau {number(setting.tau)}, alpha {number(setting.alpha)}, {setting.correction}: "
          f"radius {certificate.radius}, plan {certificate.attrs['plan_verdict']}. {counts}. Written to {args.out}.", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------------------------- inspect


def _inspect_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", type=existing_file, metavar="FILE",
                   help="a certificate (Certificate.save, certify-scores), a workflow votes or certificates file "
                        "(give both of one circuit to see vote counts), or an attribution file")
    p.add_argument("--top", type=int, default=10,
                   help="components listed per K (certified in) or per scorer (highest mean); default 10, 0 for none")


def file_kind(path: Path) -> str:
    """``certificate``, ``certificates``, ``votes`` or ``attributions``, from the file's attributes and datasets.

    Raises:
        InputError: not HDF5, or HDF5 of none of these kinds (the message lists what it holds).
    """
    import h5py

    try:
        handle = h5py.File(path, "r")
    except OSError as exc:
        raise InputError(f"{path}: not an HDF5 file ({exc}); inspect reads certificates (Certificate.save, "
                         "certify-scores), votes, certificates and attribution files") from exc
    with handle:
        attrs = dict(handle.attrs)
        if str(attrs.get("kind", "")) == "certificate":
            return "certificate"
        if is_attribution_file(handle):
            return "attributions"
        if "decision" in handle and "tau" in attrs:
            return "certificates"
        if "selection_counts" in handle and "p_del" in attrs:
            return "votes"
        datasets: list[str] = []
        handle.visititems(lambda name, item: datasets.append(name) if isinstance(item, h5py.Dataset) else None)
        raise InputError(f"{path}: an HDF5 file of no kind inspect knows (datasets {datasets or 'none'}, attributes "
                         f"{sorted(attrs) or 'none'}); it reads certificates (decision + setting attributes), votes "
                         "(selection_counts + p_del), and attribution files (scores/<scorer> + components/group)")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _setting_value(value: Any) -> str:
    """A setting's value as every message prints it (exactly: tau 0.9999999, never 1)."""
    if isinstance(value, (float, np.floating)):
        return number(float(value))
    return _text(value.item() if isinstance(value, np.generic) else value)


def _setting_line(attrs: dict[str, Any]) -> str:
    parts = [f"{key} {_setting_value(attrs[key])}" for key in ("p_del", "n0", "n", "seed", "tau", "alpha") if key in attrs]
    if "correction" in attrs:
        parts.append(_text(attrs["correction"]))
    return ", ".join(parts)


def _plan_lines(attrs: dict[str, Any], n_components: int) -> list[str]:
    """The recorded plan verdict and warnings, else the plan recomputed from the file's setting and |D|."""
    verdict = _text(attrs.get("plan_verdict", "") or "")
    if verdict:
        problems = [w for w in _text(attrs.get("plan_warnings", "") or "").splitlines() if w.strip()]
        return [f"plan: {verdict} (recorded)", *(f"  - {problem}" for problem in problems)]
    needed = ("p_del", "n0", "n", "tau", "alpha", "correction", "n_examples")
    if any(key not in attrs for key in needed):
        return ["plan: not recorded, and the file lacks " + ", ".join(k for k in needed if k not in attrs)
                + " to recompute it"]
    import certified_circuits as cc

    setting = cc.Setting.from_config({"seed": 0, **attrs}, correction=_text(attrs["correction"]))
    checked = cc.plan(int(attrs["n_examples"]), n_components, setting)
    return [f"plan: {checked.verdict} (recomputed from the file's setting, |D| = {int(attrs['n_examples'])}, "
            f"U = {n_components})", *(f"  - {problem}" for problem in checked.problems())]


def _name(names: Any, index: int) -> str:
    return str(names[index]) if names is not None else f"#{index}"


def _decision_lines(decision: np.ndarray, k_grid: Any, counts: np.ndarray | None, n: int | None, pvalue: Any,
                    names: Any, groups: Any, top: int) -> list[str]:
    decision = np.atleast_2d(decision)
    labels = [f"K {float(k):g}" for k in k_grid] if k_grid is not None else ["circuit"]
    lines = ["decisions (in, out, abstain):"]
    for label, row in zip(labels, decision):
        lines.append(f"  {label}: {int((row == 1).sum())} in, {int((row == 0).sum())} out, "
                     f"{int((row == -1).sum())} abstain")
    if top <= 0:
        return lines
    counts = None if counts is None else np.atleast_2d(counts)
    pvalue = None if pvalue is None else np.atleast_2d(pvalue)
    empty = [label for label, row in zip(labels, decision) if not (row == 1).any()]
    if empty:  # one line for every K that certifies nothing in
        lines.append("certified in: none" + (f" at {', '.join(empty)}" if k_grid is not None else ""))
    for i, (label, row) in enumerate(zip(labels, decision)):
        chosen, at = np.flatnonzero(row == 1), f" at {label}" if k_grid is not None else ""
        if not chosen.size:
            continue
        if counts is not None:
            chosen = chosen[np.argsort(-counts[i, chosen], kind="stable")]
            how = f"by certification votes of n = {n}"
        else:
            how = "by p-value (pair the votes file for vote counts)"
            if pvalue is not None:
                chosen = chosen[np.argsort(pvalue[i, chosen], kind="stable")]
        lines.append(f"certified in{at} (top {min(top, chosen.size)} of {chosen.size}, {how}):")
        for u in chosen[:top]:
            where = f" (group {int(groups[u])})" if groups is not None else ""
            value = (f"{int(counts[i, u])} votes" if counts is not None
                     else f"p {float(pvalue[i, u]):.3g}" if pvalue is not None else "")
            lines.append(f"  {_name(names, int(u))}{where}: {value}")
    return lines


def _labels_line(attrs: dict[str, Any], skip: tuple[str, ...]) -> list[str]:
    shown = {k: _text(v) for k, v in attrs.items() if k not in skip and _text(v) != ""}
    return ["labels: " + ", ".join(f"{k}={v}" for k, v in sorted(shown.items()))] if shown else []


_SETTING_ATTRS = ("p_del", "n0", "n", "seed", "tau", "alpha", "correction", "radius", "n_examples", "plan_verdict",
                  "plan_warnings", "package_version", "kind", "seconds")


def _inspect_certificate(path: Path, top: int) -> list[str]:
    import certified_circuits as cc

    cert = cc.Certificate.load(path)
    s = cert.setting
    attrs = {**cert.attrs, **s.__dict__, "n_examples": cert.n_examples}
    groups = f" ({len(np.unique(cert.groups))} groups)" if cert.groups is not None else ""
    return [
        f"{path}: certificate (Certificate.save)",
        f"setting: {_setting_line(attrs)}; radius {cert.radius}",
        f"examples: {cert.n_examples}, components: {cert.decision.shape[-1]}{groups}",
        *_labels_line(cert.attrs, _SETTING_ATTRS),
        *_plan_lines(attrs, cert.decision.shape[-1]),
        *_decision_lines(cert.decision, cert.k_grid, cert.certification_counts, s.n, cert.pvalue, cert.names,
                         cert.groups, top),
    ]


def _inspect_certificates(path: Path, votes: Any, top: int) -> list[str]:
    from certified_circuits.storage.store import read_certificates

    certificates = read_certificates(path)
    attrs = dict(certificates.attrs)
    n_components = certificates.decision.shape[-1]
    head = [f"{path}: certificates (workflow certify stage)"
            + (f", with the votes of {votes[1]}" if votes is not None else ""),
            f"setting: {_setting_line(attrs)}; radius {int(attrs['radius'])}",
            f"examples: {attrs.get('n_examples', 'unknown')}, components: {n_components}",
            *_labels_line(attrs, _SETTING_ATTRS), *_plan_lines(attrs, n_components)]
    counts = votes[0].certification_counts if votes is not None else None
    groups = votes[0].groups if votes is not None else None
    names = votes[0].names if votes is not None else None
    n = int(votes[0].attrs["n"]) if votes is not None else None
    return head + _decision_lines(certificates.decision, certificates.k_grid, counts, n, certificates.pvalue, names,
                                  groups, top)


def _inspect_votes(path: Path, top: int) -> list[str]:
    from certified_circuits.storage.store import read_votes

    votes = read_votes(path)
    attrs = dict(votes.attrs)
    n_components, n = votes.selection_counts.shape[-1], int(attrs["n"])
    lines = [f"{path}: votes (workflow votes stage; certify it with {COMMAND} certify --votes {path} "
             "--tau TAU --out CERTS.h5)",
             f"setting: {_setting_line(attrs)}; radius: set by tau at certification",
             f"examples: {attrs['n_examples']}, components: {n_components} ({len(np.unique(votes.groups))} groups)",
             *_labels_line(attrs, _SETTING_ATTRS),
             f"plan: needs tau: {COMMAND} plan --examples {attrs['n_examples']} --components {n_components} "
             f"--p-del {_setting_value(attrs['p_del'])} --n0 {attrs['n0']} --n {n} --tau TAU",
             "baseline circuit size per K (the algorithm on the full dataset):"]
    for k, row in zip(votes.k_grid, votes.baseline):
        lines.append(f"  K {float(k):g}: {int(row.sum())} of {n_components}")
    if top > 0:
        for k, row in zip(votes.k_grid, votes.certification_counts):
            order = np.argsort(-row, kind="stable")[:top]
            lines.append(f"most certification votes at K {float(k):g} (of n = {n}):")
            lines += [f"  {_name(votes.names, int(u))} (group {int(votes.groups[u])}): {int(row[u])} votes"
                      for u in order]
    return lines


def _inspect_attributions(path: Path, top: int) -> list[str]:
    from certified_circuits.storage.store import read_attributions

    attributions = read_attributions(path)
    n_components = attributions.groups.shape[0]
    lines = [f"{path}: attributions",
             f"examples: {len(attributions.example_ids)}, components: {n_components} "
             f"({len(np.unique(attributions.groups))} groups)",
             *_labels_line(attributions.attrs, ("package_version",)),
             "scorers: " + ", ".join(f"{s} ({attributions.rankings[s]})" for s in sorted(attributions.scores))]
    if top > 0:
        for scorer in sorted(attributions.scores):
            mean = np.asarray(attributions.scores[scorer], dtype=np.float64).mean(axis=0)
            key = np.abs(mean) if attributions.absolute(scorer) else mean
            order = np.argsort(-key, kind="stable")[:top]
            rank = "|mean|" if attributions.absolute(scorer) else "mean"
            lines.append(f"highest {rank} score of {scorer} (top {order.size} of {n_components}):")
            lines += [f"  {attributions.names[u]} (group {int(attributions.groups[u])}): mean {mean[u]:.4g}"
                      for u in order]
    return lines


@STAGES.stage("inspect", _inspect_arguments,
              help="print what a certificate, votes, certificates or attribution file holds")
def _cmd_inspect(args: argparse.Namespace) -> int:
    """Print what each file holds (stdout): its kind; the setting and radius (certificates, votes); the in, out
    and abstain counts per K and the plan's verdict and warnings (as recorded, else recomputed with
    certified_circuits.plan from the file's setting and |D|); and the top components: the certified-in
    components of each K with their certification votes and names when known, or an attribution file's
    highest mean scores per scorer. A workflow certificates file given with its votes file shows vote counts.

    Example: certified-circuits inspect circuit.h5 --top 5
    """
    from certified_circuits.cli.stages import check_circuit_files
    from certified_circuits.storage.store import read_certificates, read_votes

    kinds = [(path, file_kind(path)) for path in args.files]
    votes_files = [path for path, kind in kinds if kind == "votes"]
    paired: dict[Path, tuple[Any, Path]] = {}
    certificates_files = [path for path, kind in kinds if kind == "certificates"]
    if len(votes_files) == 1 and len(certificates_files) == 1:
        votes = read_votes(votes_files[0])
        check_circuit_files([(votes, votes_files[0], read_certificates(certificates_files[0]), certificates_files[0])])
        paired[certificates_files[0]] = (votes, votes_files[0])
    blocks = []
    for path, kind in kinds:
        if kind == "certificate":
            blocks.append(_inspect_certificate(path, args.top))
        elif kind == "certificates":
            blocks.append(_inspect_certificates(path, paired.get(path), args.top))
        elif kind == "votes":
            blocks.append(_inspect_votes(path, args.top))
        else:
            blocks.append(_inspect_attributions(path, args.top))
    print("\n\n".join("\n".join(block) for block in blocks))
    return 0
