"""Degenerate results, flagged where people look (issue 26): one implementation of every check.

A reader takes "0 certified" or a flat curve as a finding. A run's flags are ONE list (issue 35):
:func:`run_flags` checks every curves table and certificate of the run and adds the parse-time plan warnings
(``plan/warnings.json``, :func:`certified_circuits.pipeline.plans.setting_plans.plan_records`); the ``report-warnings`` stage
writes it to ``warnings.json`` (:func:`write_flags`) and tags its job with :func:`flag_tags` (MLflow
``cc.flag.<code>``). Everything else reads that file: the ``## Warnings`` section of ``summary.md``
(:func:`grouped_markdown`: one line per kind, :func:`kind_line`), the explorer (a one-line banner per kind on every
page, every flag a click away) and the end of the run (:func:`counts_line`), so the counts are the same everywhere.
A :class:`Flag` says what it concerns (and its experiment and concept, for the explorer's pages), in one line what
it means, and what to change.

Codes and their rules (thresholds are the module constants below):

``model-at-chance``
    The full model's metric on an evaluation set is at most chance + :data:`CHANCE_TOLERANCE`. Chance:
    ``0.5`` for the binary concept-vs-rest metrics -- vision's ``balanced_accuracy`` (``(cACC + 1 - FPR) / 2``;
    a classifier that ignores its input labels a positive and a negative ``c`` with the same probability,
    which gives exactly 0.5) and language's ``binary_accuracy`` (correct answer's logit above the
    counterfactual's); ``1 / n_classes`` for the argmax accuracy (vision's cACC, "share of class-c images
    labelled c") when the number of classes is known (argument ``n_classes`` or an ``n_classes`` column).
    Exact-match accuracy of a language task has no known chance level and is not checked.
``empty-circuit``
    A method's evaluated circuit is empty (``k_effective == 0``) at every K of the grid: its curve is the
    empty model's, whatever the method.
``certified-nothing``
    A certificate has no component certified IN at any K (its certified circuit is empty at every K); the
    message says whether every component abstained.
``saturated``
    On an eval set, the full model's headline (cACC, else accuracy) is constant and every method's curve equals it at
    every K of the grid (at least :data:`MIN_SHARED_K` K, at least two methods; within :data:`IDENTICAL_TOLERANCE`):
    each circuit already reproduces the model at the smallest K, so the curves cannot rank circuits (the compiled
    marked world: every class circuit keeps its badge chain, cACC 1 at every K). One flag per curve group without
    its eval set (the eval sets are named in the message); the curves' ``identical-curves`` and the headline's
    ``constant-quantity`` are its symptoms and are not repeated.
``identical-curves``
    Two methods' headline curves (cACC, else accuracy) of one group agree within :data:`IDENTICAL_TOLERANCE`
    (max absolute difference) at every K of their shared grid, which holds at least :data:`MIN_SHARED_K` K.
``high-fpr``
    A curve's false-positive rate is at least :data:`HIGH_FPR` at some K: the circuit labels almost every other
    class's image ``c``, so its cACC rewards class bias.
``constant-quantity``
    A plotted quantity of a method's curve (not the full model's reference line, which is constant by
    construction) spans less than :data:`CONSTANT_RANGE` over at least two K (curves already flagged
    ``empty-circuit`` are not repeated).
``full-model-k``
    A method's K chosen on held-out data (a ``selected_*`` table of ``report-sufficiency --select-on``) is 100% of
    the components (:func:`is_full_model`): its circuit is the whole model, so every number read there compares the
    full model with itself (precision is the truth's share, recall 1, a paired test p = 1 by construction) and
    cannot tell methods apart. The findings say so in the same line.
``plan``
    A planner warning the certify stage recorded in the certificate's attributes (``plan_verdict``,
    ``plan_warnings``; :meth:`certified_circuits.core.planning.Plan.problems`).

Every check is vectorized over the rows of its table (pandas groupby) or the array; the only Python loops run
over the flags found.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from itertools import combinations
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from certified_circuits.commands import COMMAND, plan_command
from certified_circuits.core.setting import number
from certified_circuits.analysis.evaluation import METHODS as SELECTED_METHODS
from certified_circuits.storage.tables import check_distinct_files, parse_k_column, read_csv_table

#: Absolute tolerance above chance under which the full model counts as at chance (a 5-point margin: an
#: eval set of a few dozen images has a standard error of that size at 0.5).
CHANCE_TOLERANCE = 0.05
#: Chance level of a binary concept-vs-rest metric (balanced accuracy, binary accuracy).
BINARY_CHANCE = 0.5
#: Two curves are identical when their largest absolute difference over the shared K grid is at most this.
IDENTICAL_TOLERANCE = 1e-9
#: Fewest shared K values for the identical-curves check (two methods agreeing at one K is common).
MIN_SHARED_K = 2
#: A false-positive rate at or above this makes cACC a measure of class bias.
HIGH_FPR = 0.95
#: A plotted quantity whose range over K is below this is constant (figures annotate it, reports flag it).
CONSTANT_RANGE = 1e-9
#: Longest value of one MLflow tag written by :func:`flag_tags` (MLflow allows 5000 characters).
TAG_LIMIT = 5000

#: Columns that identify one curve (besides ``method``), in the order they are named in ``where``.
GROUP_KEYS = ("experiment", "scorer", "concept", "setting", "eval_set")
#: Binary metrics whose chance level is :data:`BINARY_CHANCE`.
BINARY_METRICS = ("balanced_accuracy", "binary_accuracy")
#: Quantities the reports plot against K (checked by ``constant-quantity``).
PLOTTED = ("cacc", "accuracy", "balanced_accuracy", "false_positive_rate", "binary_accuracy", "logit_diff")
#: Codes from most to least severe (the order of every list: :func:`sorted_flags`).
CODES = ("model-at-chance", "plan", "certified-nothing", "empty-circuit", "full-model-k", "saturated", "high-fpr",
         "identical-curves", "constant-quantity")


@dataclass(frozen=True)
class Flag:
    """One degenerate result.

    Attributes:
        code: one of :data:`CODES`.
        where: what it concerns (``"world / scorer grad_x_act / eval_set id / method certified"``).
        message: one line: what it means.
        fix: one line: the likely fix.
        experiment: the experiment it concerns ("" when the table names none): the explorer shows a flag on the
            pages of its experiment.
        concept: the class or task it concerns ("" when it concerns all of them): the explorer shows it on that
            concept's page.
    """

    code: str
    where: str
    message: str
    fix: str
    experiment: str = ""
    concept: str = ""

    def line(self) -> str:
        """``"where: message Fix: fix"`` on one line (whitespace and newlines collapsed), safe as a Markdown list
        item; pipes are kept (``|D|``), so escape them before putting a line in a Markdown table cell."""
        text = f"{self.where}: {self.message} Fix: {self.fix}" if self.where else f"{self.message} Fix: {self.fix}"
        return re.sub(r"\s+", " ", text).strip()


# ------------------------------------------------------------------------------------------------ curves


def _where(frame: pd.DataFrame, keys: Sequence[str], prefix: str) -> pd.Series:
    """``where`` strings of the rows of a grouped frame: the prefix, the experiment, then ``key value``."""
    if frame.empty:
        return pd.Series("", index=frame.index, dtype=object)
    parts = [pd.Series(prefix, index=frame.index)] if prefix else []
    for key in keys:
        values = frame[key].astype(str)
        parts.append(values if key == "experiment" else f"{key} " + values)
    if not parts:
        return pd.Series("", index=frame.index)
    return pd.concat(parts, axis=1).agg(" / ".join, axis=1)


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def _places(frame: pd.DataFrame) -> list[dict[str, str]]:
    """Per row of a grouped frame, the ``experiment`` and ``concept`` its flag concerns (:class:`Flag`)."""
    columns = {key: frame[key].astype(str).tolist() if key in frame.columns else [""] * len(frame)
               for key in ("experiment", "concept")}
    return [{"experiment": e, "concept": c} for e, c in zip(columns["experiment"], columns["concept"])]


#: eval sets that are hard by construction (stress sets, not headlines): the embedded world's adversarial set keeps
#: only images the model misclassifies (as ImageNet-A was filtered against a ResNet), so its model is at chance there
#: by design; the anomaly set keeps novel shapes the model confidently assigns to a class (as ImageNet-O)
STRESS_SETS: tuple[str, ...] = ("adversarial", "anomaly")


def _chance_flags(full: pd.DataFrame, keys: list[str], headline: str, n_classes: int | None, prefix: str) -> list[Flag]:
    """``model-at-chance``: one flag per group whose full model is at chance on some metric. On a stress set
    (:data:`STRESS_SETS`) the flag says that this is expected, so no one reads it as a broken model."""
    if full.empty:
        return []
    checks = [(m, BINARY_CHANCE) for m in BINARY_METRICS if m in full.columns]
    if n_classes is None and "n_classes" in full.columns and full["n_classes"].notna().all():
        n_classes = int(full["n_classes"].iloc[0])
    if n_classes:
        checks.insert(0, (headline, 1.0 / n_classes))
    if not checks:
        return []
    metrics = list(dict.fromkeys(m for m, _ in checks))
    means = full.groupby(keys, sort=True)[metrics].mean().reset_index() if keys else full[metrics].mean().to_frame().T
    means["where"] = _where(means, keys, prefix)
    flags: list[Flag] = []
    seen: set[str] = set()
    for metric, chance in checks:
        hit = means[means[metric] <= chance + CHANCE_TOLERANCE]
        stress = hit["eval_set"].astype(str).isin(STRESS_SETS) if "eval_set" in hit else pd.Series(False, index=hit.index)
        for where, value, is_stress, place in zip(hit["where"], hit[metric], stress, _places(hit)):
            if where in seen:
                continue
            seen.add(where)
            if is_stress:
                flags.append(Flag(
                    "model-at-chance", f"{where} (stress set)",
                    f"the full model's {metric} is {_fmt(value)}, at most chance {_fmt(chance)} + {CHANCE_TOLERANCE:g}, as "
                    "expected: this stress set is filtered to the model's failures (as ImageNet-A was), so it is not a "
                    "headline and its curves and peaks mean nothing.",
                    "none needed; read the stress set's rows as a check that the filter worked, or drop it from eval_sets.",
                    **place,
                ))
                continue
            flags.append(Flag(
                "model-at-chance", where,
                f"the full model's {metric} is {_fmt(value)}, at most chance {_fmt(chance)} + {CHANCE_TOLERANCE:g}: "
                "no circuit of a model at chance can show anything, so these curves and peaks mean nothing.",
                "train the model until it beats chance on this eval set (vision.train / language.train: more epochs, "
                "data, a larger model), or check the eval set's labels and the model's weights.",
                **place,
            ))
    return flags


def _empty_flags(pruned: pd.DataFrame, keys: list[str], prefix: str) -> tuple[list[Flag], pd.DataFrame]:
    """``empty-circuit``: (keys, method) curves whose effective K is 0 at every K; also returns those keys."""
    if "k_effective" not in pruned.columns or pruned.empty:
        return [], pruned.iloc[:0][[*keys, "method"]]
    largest = pruned.groupby([*keys, "method"], sort=True)["k_effective"].max().reset_index()
    empty = largest[largest["k_effective"] <= 0].copy()
    empty["where"] = _where(empty, [*keys, "method"], prefix)
    flags = []
    for where, method, place in zip(empty["where"], empty["method"], _places(empty)):
        if method == "certified":
            fix = ("the setting certifies no component IN: see the plan warnings, and check it with "
                   f"`{COMMAND} plan --examples N_EXAMPLES --components N_COMPONENTS --p-del P_DEL --tau TAU --n N` "
                   "(lower p_del or tau, raise |D| or n).")
        else:
            fix = "raise the K grid (k_grid): every K keeps no component of this method's circuit."
        flags.append(Flag("empty-circuit", where,
                          f"the {method} circuit is empty at every K: its curve is the empty model's, not the method's.",
                          fix, **place))
    return flags, empty[[*keys, "method"]]


def _saturated_groups(full: pd.DataFrame, pruned: pd.DataFrame, keys: list[str], headline: str) -> pd.DataFrame:
    """The curve groups (``keys``, eval set included) whose every method's headline equals the full model's constant
    value at every K (``saturated``, module docstring): one row per group with ``value`` (the full model's) and
    ``n_k`` (the K of the grid)."""
    columns = [*keys, "value", "n_k"]
    if full.empty or pruned.empty or headline not in full.columns or not keys:
        return pd.DataFrame(columns=columns)
    reference = full.groupby(keys, sort=True)[headline].agg(["min", "max"]).reset_index()
    reference = reference[(reference["max"] - reference["min"]) < CONSTANT_RANGE].rename(columns={"max": "value"})
    merged = pruned[[*keys, "method", "k_target", headline]].dropna(subset=[headline]).merge(
        reference[[*keys, "value"]], on=keys)
    if merged.empty:
        return pd.DataFrame(columns=columns)
    merged["gap"] = (merged[headline] - merged["value"]).abs()
    stats = merged.groupby(keys, sort=True).agg(gap=("gap", "max"), methods=("method", "nunique"),
                                                n_k=("k_target", "nunique"), value=("value", "first")).reset_index()
    hit = stats[(stats["gap"] <= IDENTICAL_TOLERANCE) & (stats["methods"] >= 2) & (stats["n_k"] >= MIN_SHARED_K)]
    return hit[columns].reset_index(drop=True)


def _saturated_flags(saturated: pd.DataFrame, keys: list[str], headline: str, prefix: str) -> list[Flag]:
    """``saturated``: one flag per saturated curve group without its eval set, naming the eval sets."""
    if saturated.empty:
        return []
    outer = [k for k in keys if k != "eval_set"]
    frame = saturated.assign(_all=0)
    by = outer or ["_all"]
    sets = "eval_set" in frame.columns
    grouped = frame.groupby(by, sort=True).agg(
        sets=("eval_set", lambda v: ", ".join(map(str, v))) if sets else ("value", lambda v: ""),
        value=("value", lambda v: ", ".join(dict.fromkeys(_fmt(x) for x in v))),
        n_k=("n_k", "min")).reset_index()
    grouped["where"] = _where(grouped, outer, prefix)
    flags = []
    for where, on, value, n_k, place in zip(grouped["where"], grouped["sets"], grouped["value"], grouped["n_k"],
                                            _places(grouped)):
        flags.append(Flag(
            "saturated", where,
            f"every method's {headline} equals the full model's ({value}) at all {n_k} K"
            + (f" on {on}" if on else "") + ": each circuit already reproduces the model at the smallest K, so these "
            "curves cannot rank the methods (their identical-curves and constant-quantity symptoms are not repeated).",
            "compare the methods where they differ: recovery of the known circuit (testbed/recovery*, "
            "testbed/truth_size.csv) on a testbed model; to compare sufficiency, evaluate a model below its ceiling "
            "(the trained control of configs/clean_testbed.yaml) or an eval set on which the full model errs.",
            **place,
        ))
    return flags


def _without(frame: pd.DataFrame, groups: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The rows of ``frame`` outside the ``groups`` (rows of ``keys``)."""
    if groups.empty or not keys:
        return frame
    marked = frame.merge(groups[keys].drop_duplicates(), on=keys, how="left", indicator="_in")
    return frame[(marked["_in"] == "left_only").to_numpy()]


def _identical_flags(pruned: pd.DataFrame, keys: list[str], headline: str, prefix: str) -> list[Flag]:
    """``identical-curves``: pairs of methods whose headline curves agree at every shared K."""
    methods = sorted(pruned["method"].unique())
    if len(methods) < 2:
        return []
    wide = pruned.pivot_table(index=[*keys, "k_target"], columns="method", values=headline, aggfunc="mean")
    flags = []
    for a, b in combinations(methods, 2):
        difference = (wide[a] - wide[b]).abs().dropna()
        if difference.empty:
            continue
        by_group = difference.groupby(level=list(range(len(keys)))) if keys else difference.groupby(lambda _: 0)
        summary = pd.DataFrame({"max": by_group.max(), "count": by_group.size()})
        hit = summary[(summary["max"] <= IDENTICAL_TOLERANCE) & (summary["count"] >= MIN_SHARED_K)].reset_index()
        if hit.empty:
            continue
        hit["where"] = _where(hit, keys, prefix)
        for where, largest, count, place in zip(hit["where"], hit["max"], hit["count"], _places(hit)):
            flags.append(Flag(
                "identical-curves", where,
                f"the {a} and {b} curves of {headline} are identical at all {count} shared K (max |difference| "
                f"{largest:.2g} <= {IDENTICAL_TOLERANCE:g}): this comparison cannot tell the methods apart.",
                "check that the circuits differ (often both are empty or both keep everything: see the other "
                "warnings); widen the K grid or change the certification setting.",
                **place,
            ))
    return flags


def _fpr_flags(table: pd.DataFrame, keys: list[str], headline: str, prefix: str) -> list[Flag]:
    """``high-fpr``: curves with a false-positive rate >= HIGH_FPR at some K."""
    if "false_positive_rate" not in table.columns:
        return []
    frame = table.assign(_high=table["false_positive_rate"] >= HIGH_FPR)
    grouped = frame.groupby([*keys, "method"], sort=True)
    summary = grouped.agg(n_high=("_high", "sum"), n_k=("_high", "size"), fpr=("false_positive_rate", "max"),
                          metric=(headline, "max")).reset_index()
    hit = summary[summary["n_high"] > 0].copy()
    hit["where"] = _where(hit, [*keys, "method"], prefix)
    return [
        Flag("high-fpr", where,
             f"the false-positive rate reaches {_fmt(fpr)} (>= {HIGH_FPR:g}) at {n_high} of {n_k} K: the circuit labels "
             f"nearly every other class's image as this class, so its {headline} (up to {_fmt(metric)}) rewards class "
             "bias, not the concept.",
             "read balanced accuracy (peaks_balanced, curves_balanced_accuracy) instead of cACC for these K, or use "
             "larger K.", **place)
        for where, fpr, n_high, n_k, metric, place in zip(hit["where"], hit["fpr"], hit["n_high"], hit["n_k"], hit["metric"],
                                                          _places(hit))
    ]


def _constant_flags(pruned: pd.DataFrame, keys: list[str], metrics: list[str], skip: pd.DataFrame,
                    prefix: str, saturated: pd.DataFrame | None = None, headline: str = "") -> list[Flag]:
    """``constant-quantity``: one flag per (keys, method) curve listing its constant plotted quantities (not the
    curves of ``skip``, already flagged empty-circuit, nor the headline of a ``saturated`` group)."""
    if not metrics or pruned.empty:
        return []
    curve = [*keys, "method"]
    long = pruned.melt(id_vars=curve, value_vars=metrics, var_name="quantity").dropna(subset=["value"])
    stats = long.groupby([*curve, "quantity"], sort=True)["value"].agg(["min", "max", "count"]).reset_index()
    stats = stats[((stats["max"] - stats["min"]) < CONSTANT_RANGE) & (stats["count"] >= 2)]
    if not skip.empty:  # curves already flagged empty-circuit
        marked = stats.merge(skip.drop_duplicates(), on=curve, how="left", indicator=True)
        stats = marked[marked["_merge"] == "left_only"].drop(columns="_merge")
    if saturated is not None and not saturated.empty:  # the headline of a saturated group: its flag says it
        head = stats["quantity"] == headline
        stats = pd.concat([stats[~head], _without(stats[head], saturated, keys)])
    if stats.empty:
        return []
    stats = stats.assign(what=stats["quantity"] + " = " + stats["min"].map(_fmt))
    frame = stats.groupby(curve, sort=True)["what"].agg(", ".join).reset_index()
    frame["where"] = _where(frame, curve, prefix)
    return [
        Flag("constant-quantity", where,
             f"{what} at every K: a constant curve shows no effect of K (its figure is annotated).",
             "check the flags above (model at chance, empty or full circuits); widen the K grid, or use a metric that "
             "varies (balanced accuracy, faithfulness).", **place)
        for where, what, place in zip(frame["where"], frame["what"], _places(frame))
    ]


def curve_flags(curves: pd.DataFrame, where: str = "", *, n_classes: int | None = None) -> list[Flag]:
    """Flags of a curves table (``curves.csv`` of report-sufficiency, :func:`certified_circuits.analysis.evaluation.
    cacc_curves`) or a tidy sufficiency table (``accuracy`` per concept): ``model-at-chance``, ``empty-circuit``,
    ``saturated``, ``identical-curves``, ``high-fpr`` and ``constant-quantity`` (module docstring).

    Args:
        curves: needs ``method`` and ``k_target``; a curve is one (:data:`GROUP_KEYS` present, method); the
            full model is ``method == "full"``.
        where: prefix of every flag's ``where`` (e.g. the table's path or experiment).
        n_classes: classes of the argmax accuracy (enables its chance check; else an ``n_classes`` column).

    Returns:
        The flags, in check order ([] for a healthy table).
    """
    missing = [c for c in ("method", "k_target") if c not in curves.columns]
    if missing:
        raise ValueError(f"curve table is missing column(s) {missing}; pass curves.csv or a sufficiency table")
    if curves.empty:
        return []
    keys = [k for k in GROUP_KEYS if k in curves.columns]
    table = curves.copy()
    for key in keys:
        table[key] = table[key].astype(str)
    headline = "cacc" if "cacc" in table.columns else "accuracy"
    metrics = [m for m in PLOTTED if m in table.columns]
    full = table[table["method"] == "full"]
    pruned = table[table["method"] != "full"]
    flags = _chance_flags(full, keys, headline, n_classes, where)
    empty_flags, empty = _empty_flags(pruned, keys, where)
    flags += empty_flags
    saturated = _saturated_groups(full, pruned, keys, headline) if headline in table.columns else None
    if saturated is not None:
        flags += _saturated_flags(saturated, keys, headline, where)
        flags += _identical_flags(_without(pruned, saturated, keys), keys, headline, where)
    flags += _fpr_flags(table, keys, headline if headline in table.columns else "false_positive_rate", where)
    flags += _constant_flags(pruned, keys, metrics, empty, where, saturated, headline)
    return flags


# ------------------------------------------------------------------------------------------ certificates


def _plan_command(attrs: Mapping[str, Any], n_components: int) -> str:
    """The runnable plan command (:func:`certified_circuits.commands.plan_command`) for the certificate's own
    |D|, U and setting (what is known of it), in backquotes."""
    setting = {key: attrs.get(key) for key in ("p_del", "tau", "n", "alpha")}
    return f"`{plan_command(attrs.get('n_examples'), n_components, **setting)}`"


def certificate_where(attrs: Mapping[str, Any]) -> str:
    """``where`` of a certificate from its attributes: experiment, concept, split, scorer and the setting
    (``"world / concept circle / split concept / scorer grad_x_act / tau 0.95, p_del 0.6"``)."""
    parts = [str(attrs["experiment"])] if attrs.get("experiment") else []
    parts += [f"{key} {attrs[key]}" for key in ("concept", "split", "scorer") if attrs.get(key) not in (None, "")]
    setting = ", ".join(f"{key} {number(attrs[key])}" if isinstance(attrs[key], float) else f"{key} {attrs[key]}"
                        for key in ("tau", "p_del") if key in attrs)
    return " / ".join(parts + ([setting] if setting else []))


def certificate_flags(decision: np.ndarray, attrs: Mapping[str, Any], where: str) -> list[Flag]:
    """Flags of one certificates file: ``plan`` (each warning recorded by the certify stage) and
    ``certified-nothing`` (no component IN at any K).

    Args:
        decision: int8 ``[nK, U]`` or ``[U]`` in {1 in, 0 out, -1 abstain}.
        attrs: the file's attributes (``plan_verdict``, ``plan_warnings``, and the setting: ``n_examples``,
            ``p_del``, ``tau``, ``n``, ``alpha`` name the plan command of the fix).
        where: what the certificate is (experiment, concept, split, scorer, setting).
    """
    decision = np.atleast_2d(np.asarray(decision))
    place = {key: str(attrs.get(key) or "") for key in ("experiment", "concept")}
    flags = []
    verdict = str(attrs.get("plan_verdict", "") or "")
    warnings = str(attrs.get("plan_warnings", "") or "")
    for warning in filter(None, (w.strip() for w in warnings.splitlines())):
        message, _, fix = warning.partition(" Fix: ")
        flags.append(Flag("plan", where, f"plan {verdict or 'warning'}: {message}",
                          fix or f"check the setting with {_plan_command(attrs, decision.shape[-1])}.", **place))
    if decision.size and not (decision == 1).any():
        n_k, n_components = decision.shape[0] if decision.ndim > 1 else 1, decision.shape[-1]
        out = int((decision == 0).any(axis=0).sum())
        what = ("every component abstained at every K" if out == 0
                else f"{out} of {n_components:,} components are certified OUT at some K, the rest abstain")
        flags.append(Flag(
            "certified-nothing", where,
            f"no component is certified IN at any of {n_k} K ({what}): the certified circuit is empty, which says "
            "nothing about the model.",
            f"lower p_del or tau, or raise |D| or n: {_plan_command(attrs, n_components)}.",
            **place,
        ))
    return flags


# ---------------------------------------------------------------------------------------------- outputs


def flag_tags(flags: Sequence[Flag]) -> dict[str, str]:
    """MLflow tags of the flags: ``cc.flag.<code>`` -> ``"<count>: <where>; <where>; ..."`` (at most
    :data:`TAG_LIMIT` characters; the wheres that do not fit are counted)."""
    by_code: dict[str, list[str]] = {}
    for flag in flags:
        by_code.setdefault(flag.code, []).append(flag.where or "(run)")
    tags = {}
    for code, wheres in by_code.items():
        value = f"{len(wheres)}: " + "; ".join(wheres)
        if len(value) > TAG_LIMIT:
            shown: list[str] = []
            head = f"{len(wheres)}: "
            for i, w in enumerate(wheres):
                tail = f"; ... ({len(wheres) - i - 1} more)"
                if len(head + "; ".join([*shown, w]) + tail) > TAG_LIMIT:
                    break
                shown.append(w)
            value = head + "; ".join(shown) + f"; ... ({len(wheres) - len(shown)} more)"
            value = value[:TAG_LIMIT]
        tags[f"cc.flag.{code}"] = value
    return tags


def sorted_flags(flags: Sequence[Flag]) -> list[Flag]:
    """The flags from most to least severe (:data:`CODES`), in their own order within a code."""
    rank = {code: i for i, code in enumerate(CODES)}
    return sorted(flags, key=lambda f: rank.get(f.code, len(CODES)))


# ------------------------------------------------------------------------------------- the run's one list

#: format of ``<results>/warnings.json`` (:func:`write_flags`) and of ``<results>/plan/warnings.json``
FLAGS_FORMAT = "certified-circuits/warnings/1"
PLAN_FORMAT = "certified-circuits/plan-warnings/1"
#: places named on a kind's one line (:func:`kind_lines`); the rest are counted
SHOWN_PLACES = 3


#: fields of every plan record (:func:`certified_circuits.pipeline.plans.setting_plans.plan_records`) that :func:`plan_flags` reads
PLAN_RECORD_FIELDS = ("where", "key", "radius", "message", "fix")
#: what to do when a plan-warnings file is refused
PLAN_FIX = (f"pass the plan/warnings.json that {COMMAND} report-plan-warnings wrote (the workflow's rule "
            "`plan_warnings` does), not the run's warnings.json or another file")


def read_plan_records(path: str | Path) -> list[dict[str, Any]]:
    """The records of ``plan/warnings.json`` (:func:`certified_circuits.pipeline.plans.setting_plans.plan_records`, written by
    ``report-plan-warnings``), read strictly: its ``format`` must be :data:`PLAN_FORMAT` (a warnings list or any
    other JSON file would otherwise read as "no plan warnings").

    Args:
        path: the file.

    Returns:
        The records, each with :data:`PLAN_RECORD_FIELDS`.

    Raises:
        ValueError: naming the file (and the record and field), what is wrong and the fix.
    """
    from certified_circuits.storage.documents import read_json_document

    doc = read_json_document(path, PLAN_FIX, fmt=PLAN_FORMAT, what="plan-warnings file")
    return check_plan_records(doc.get("warnings"), f"{path}: warnings", PLAN_FIX)


def check_plan_records(records: Any, where: str, fix: str) -> list[dict[str, Any]]:
    """Plan records as :func:`certified_circuits.pipeline.plans.setting_plans.plan_records` writes them: a list of objects, each
    with :data:`PLAN_RECORD_FIELDS` (the one check of ``report-plan-warnings``' input and of its file).

    Args:
        records: the parsed JSON.
        where: the file or option, for messages.
        fix: what to do when refused.

    Returns:
        The records.

    Raises:
        ValueError: naming ``where``, the record and its missing fields, and the fix.
    """
    if not isinstance(records, list):
        raise ValueError(f"{where} is a {type(records).__name__}, expected a list of records; {fix}")
    for index, record in enumerate(records):
        missing = [f for f in PLAN_RECORD_FIELDS if not isinstance(record, dict) or f not in record]
        if missing:
            raise ValueError(f"{where}[{index}] lacks {missing}: a plan record holds 'where' and 'message', and "
                             f"'key', 'radius' and 'fix'; {fix}")
    return records


def plan_flags(path: str | Path) -> list[Flag]:
    """``plan`` flags of the parse-time plan warnings written into the results (``plan/warnings.json``, records of
    :func:`certified_circuits.pipeline.plans.setting_plans.plan_records`): the settings a config will certify whose plan is
    marginal, the radius sweep's included."""
    return [Flag("plan", f"{r['where']} ({r['key']}, radius {r['radius']})", f"plan warning: {r['message']}",
                 r["fix"] or f"see `{COMMAND} plan --help`.", experiment=str(r.get("experiment", "")))
            for r in read_plan_records(path)]


#: columns every curves table (curves.csv of report-sufficiency) holds; the headline is ``cacc`` or ``accuracy``
CURVES_COLUMNS = ("method", "k_target", "k_effective")
CURVES_FIX = "pass the curves.csv that report-sufficiency wrote (or a sufficiency table)"


def read_curves(path: str | Path) -> pd.DataFrame:
    """A curves table for :func:`curve_flags`, checked to be one: readable UTF-8 CSV with at least one row,
    :data:`CURVES_COLUMNS` and a ``cacc`` or ``accuracy`` column (another file would otherwise yield no flags).

    Args:
        path: the CSV.

    Returns:
        The table (``concept`` read as text).

    Raises:
        ValueError: naming the file, what is wrong and the fix.
    """
    table = read_csv_table(path, f"{path} (--curves)", (), CURVES_FIX, {"concept": str}, kind="curves CSV",
                           allow_empty=True)
    missing = [c for c in CURVES_COLUMNS if c not in table.columns]
    if not {"cacc", "accuracy"} & set(table.columns):
        missing.append("cacc (or accuracy)")
    if missing:
        raise ValueError(f"{path} (--curves) is not a curves table: it lacks column(s) {missing} (it has "
                         f"{list(table.columns)[:8]}); {CURVES_FIX}")
    if table.empty:
        raise ValueError(f"{path} (--curves) holds no rows (header only): its warnings cannot be checked; rerun "
                         "report-sufficiency, or leave this file out")
    return parse_k_column(table, "k_target", f"{path} (--curves)", CURVES_FIX)


#: a selected K at least this is the whole model (K grids hold 1.0 exactly; the slack absorbs float text)
FULL_MODEL_K = 1.0 - 1e-9
#: the K columns of a selected table, by method (report-sufficiency --select-on)
SELECTED_K_COLUMNS = {method: f"{method}_k_target" for method in SELECTED_METHODS}
SELECTED_FIX = "pass the selected_*_raw.csv that report-sufficiency --select-on wrote"


def is_full_model(k: Any) -> bool:
    """Whether a K (a fraction of the components) is the whole model: the one test behind ``full-model-k`` and the
    findings' caveat.

    Args:
        k: a K fraction (NaN: no K, False).

    Returns:
        ``k >= 1 - 1e-9``.
    """
    try:
        return bool(float(k) >= FULL_MODEL_K)
    except (TypeError, ValueError):
        return False


def selection_flags(selected: pd.DataFrame, where: str = "") -> list[Flag]:
    """``full-model-k`` flags of a ``selected_*`` table: one per (experiment, scorer, concept, setting) and method
    whose K chosen on held-out data is the whole model (the K is the same on every test eval set, so the eval sets
    are not repeated).

    Args:
        selected: a ``selected_*_raw.csv`` table (columns ``<method>_k_target``; ``metric``, ``selected_on``).
        where: a prefix for the place (``"mean ablation"``).

    Returns:
        The flags.
    """
    from certified_circuits.reports.tables import selection_name

    keys = [k for k in GROUP_KEYS if k in selected.columns and k != "eval_set"]
    found: list[Flag] = []
    for method, column in SELECTED_K_COLUMNS.items():
        if column not in selected.columns:
            continue
        hit = selected[selected[column].map(is_full_model)].drop_duplicates(keys)
        for (_, row), place in zip(hit.iterrows(), _where(hit, keys, where)):
            found.append(Flag(
                "full-model-k", f"{place} / method {method}" if place else f"method {method}",
                f"the K {selection_name(row)} is 100%: the circuit is the whole model, so its numbers there compare the "
                f"full model with itself (precision = the truth's share, recall 1, p = 1) and cannot tell methods apart.",
                "read the selection-free numbers (AUROC; precision and recall at the truth's size), or select on a "
                "metric that a smaller circuit can win.",
                experiment=str(row.get("experiment", "")), concept=str(row.get("concept", "")),
            ))
    return found


def read_selected(path: str | Path) -> pd.DataFrame:
    """A ``selected_*`` table for :func:`selection_flags`, checked to be one: readable UTF-8 CSV with rows, no ragged
    row, and every method's K column a share in (0, 1] (:func:`~certified_circuits.storage.tables.parse_k_column`:
    ``100%`` is the whole model, ``1.5``, ``inf`` or a word is refused; an empty cell is no K).

    Raises:
        ValueError: naming the file (and the row and column), what is wrong and the fix.
    """
    where = f"{path} (--selected)"
    table = read_csv_table(path, where, list(SELECTED_K_COLUMNS.values()), SELECTED_FIX, {"concept": str},
                           kind="selected table")
    for column in SELECTED_K_COLUMNS.values():
        table = parse_k_column(table, column, where, SELECTED_FIX, allow_missing=True)
    return table



def run_flags(curves: Sequence[str | Path] = (), certificates: Sequence[str | Path] = (),
              plan_warnings: str | Path | None = None, selected: Sequence[str | Path] = ()) -> list[Flag]:
    """THE warning list of a run: what ``summary.md``, the explorer, the MLflow tags and the end of the run show.

    Args:
        curves: curves tables (``curves.csv`` of report-sufficiency), checked by :func:`curve_flags`.
        certificates: certificates files, checked by :func:`certificate_flags` (their recorded plan warnings
            included).
        plan_warnings: ``plan/warnings.json`` (the parse-time plans); a warning whose text a certificate already
            recorded is not repeated.
        selected: ``selected_*`` tables, checked by :func:`selection_flags`.

    Returns:
        Every flag, most severe first (:func:`sorted_flags`).

    Raises:
        ValueError: a file given twice to one argument
            (:func:`~certified_circuits.storage.tables.check_distinct_files`), or a file that is not of its
            kind (its reader's message: the file, the row and column, the fix).
    """
    from certified_circuits.storage.store import read_certificates

    for paths, option in ((curves, "--curves"), (certificates, "--certificates"), (selected, "--selected")):
        check_distinct_files(paths, option)
    found: list[Flag] = []
    for path in map(Path, curves):  # the mean-ablation tables say so (their places are otherwise the same)
        found += curve_flags(read_curves(path), "mean ablation" if path.parent.name == "mean_ablation" else "")
    for path in map(Path, certificates):
        certificate = read_certificates(path)
        found += certificate_flags(certificate.decision, certificate.attrs, certificate_where(certificate.attrs))
    for path in map(Path, selected):
        found += selection_flags(read_selected(path), "mean ablation" if path.parent.name == "mean_ablation" else "")
    if plan_warnings is not None:
        recorded = {f.message.split(": ", 1)[-1] for f in found if f.code == "plan"}
        found += [f for f in plan_flags(plan_warnings) if f.message.split(": ", 1)[-1] not in recorded]
    return sorted_flags(found)


def write_flags(path: str | Path, flags: Sequence[Flag]) -> Path:
    """Write the run's list (``<results>/warnings.json``, atomically): its counts by kind and every flag."""
    from dataclasses import asdict

    from certified_circuits.storage.atomic import write_json

    ordered = sorted_flags(flags)
    return write_json(path, {"format": FLAGS_FORMAT, "counts": counts(ordered), "flags": [asdict(f) for f in ordered]})


#: what to do when a warnings list is refused
FLAGS_FIX = (f"pass the run's warnings.json that {COMMAND} report-warnings wrote (the workflow's rule `warnings` "
             "does), not plan/warnings.json or another file")


def read_flags(path: str | Path) -> list[Flag]:
    """The flags of ``<results>/warnings.json`` (:func:`write_flags`), in their order, read strictly (its
    ``format`` is :data:`FLAGS_FORMAT`; every flag has a known code and string fields).

    Args:
        path: the file.

    Returns:
        The flags.

    Raises:
        ValueError: naming the file (and the flag), what is wrong and the fix.
    """
    from certified_circuits.storage.documents import read_json_document

    doc = read_json_document(path, FLAGS_FIX, fmt=FLAGS_FORMAT, what="warnings list")
    flags = doc.get("flags")
    if not isinstance(flags, list):
        raise ValueError(f"{path}: 'flags' is {type(flags).__name__}, expected a list of flags; {FLAGS_FIX}")
    for index, flag in enumerate(flags):
        problem = _flag_problem(flag)
        if problem:
            raise ValueError(f"{path}: flags[{index}]: {problem}; {FLAGS_FIX}")
    return [Flag(**f) for f in flags]


def _flag_problem(flag: Any) -> str:
    """What is wrong with one entry of a warnings list ("" when nothing): an object of :class:`Flag`'s string
    fields, the first four required, its code one of :data:`CODES`."""
    fields = ("code", "where", "message", "fix", "experiment", "concept")
    if not isinstance(flag, dict):
        return f"a {type(flag).__name__}, not an object"
    wrong = ([f for f in fields[:4] if f not in flag] + [f for f in flag if f not in fields]
             + [f for f in fields if f in flag and not isinstance(flag[f], str)])
    if wrong:
        return f"field(s) {wrong} are missing, unknown or not strings"
    if flag["code"] not in CODES:
        return f"code {flag['code']!r} is unknown (codes: {', '.join(CODES)})"
    return ""


def counts(flags: Sequence[Flag]) -> dict[str, int]:
    """Flags per kind, most severe kind first (the sizes of :func:`by_kind`'s groups)."""
    return {code: len(group) for code, group in by_kind(flags).items()}


def counts_line(flags: Sequence[Flag]) -> str:
    """One line: ``"Warnings: 4 model-at-chance, 1 plan"`` (``"Warnings: none"``)."""
    found = counts(flags)
    return "Warnings: " + (", ".join(f"{n} {code}" for code, n in found.items()) if found else "none")


def by_kind(flags: Sequence[Flag]) -> dict[str, list[Flag]]:
    """The flags grouped by kind (most severe first), each kind in its flags' order."""
    groups: dict[str, list[Flag]] = {}
    for flag in sorted_flags(flags):
        groups.setdefault(flag.code, []).append(flag)
    return groups


def kind_line(code: str, group: Sequence[Flag], shown: int = SHOWN_PLACES) -> str:
    """One line for a kind: its count (and its places' when several flags share a place), its first ``shown``
    places, the first one's message and fix (``"**plan** (2): a; b. <message> Fix: <fix>"``, ``"**identical-curves**
    (25 in 9 places): ..."``; whitespace collapsed)."""
    places = list(dict.fromkeys(f.where or "(run)" for f in group))
    where = "; ".join(places[:shown]) + (f"; and {len(places) - shown} more" if len(places) > shown else "")
    first = group[0]
    count = f"{len(group)}" + (f" in {len(places)} place{'s' if len(places) > 1 else ''}" if len(places) < len(group) else "")
    text = f"**{code}** ({count}): {where}. {first.message} Fix: {first.fix}"
    return re.sub(r"\s+", " ", text).strip()


def grouped_markdown(flags: Sequence[Flag], details: str = "") -> list[str]:
    """The ``## Warnings`` section of ``summary.md``: one bullet per kind (:func:`kind_line`), then where every
    place is listed (``details``); one line saying so when there is no flag."""
    lines = ["## Warnings", ""]
    if not flags:
        return lines + [NO_WARNINGS, ""]
    lines += [f"- {kind_line(code, group)}" for code, group in by_kind(flags).items()]
    return lines + ([""] + [details] if details else []) + [""]


#: The Warnings section of a run without flags (one line, naming what was checked).
NO_WARNINGS = ("None: no degenerate result found (checked: model at chance, empty circuits, certified IN nothing, "
               "a K chosen on held-out data that is the whole model, saturated, identical or constant curves, "
               f"false-positive rate >= {HIGH_FPR:g}, plan warnings).")
