"""A run's settings in words, for people: the explorer, the summary and the figures' legends.

One place turns a certificate's attributes, a table row's setting columns or a setting tag into
"tau 0.95, p_del 0.6 (radius r = 1)" and says what Theorem 1 guarantees for it. The values come from the
attributes or columns wherever the data has them; a tag (a table's ``setting`` column, when it is the only record)
is read back by :meth:`certified_circuits.core.setting.Setting.from_tag`, the inverse of the one function that
writes it.
"""

from __future__ import annotations

from typing import Any, Mapping

from certified_circuits.core.certification import certified_radius
from certified_circuits.core.setting import Setting, number


def setting_words(attrs: dict) -> str:
    """A certificate's setting in words: ``tau 0.95, p_del 0.6 (radius r = 1), alpha 0.001, n0 = 100, n = 1000,
    Bonferroni``."""
    tau, p_del = float(attrs["tau"]), float(attrs["p_del"])
    return (
        f"tau {number(tau)}, p_del {number(p_del)} (radius r = {certified_radius(tau, p_del)}), alpha {number(float(attrs['alpha']))}, "
        f"n0 = {int(attrs['n0'])} selection and n = {int(attrs['n'])} certification sub-datasets, "
        f"{str(attrs['correction']).capitalize()} correction"
    )


def guarantee_words(attrs: dict) -> str:
    """What Theorem 1 says for a certificate's setting, in one paragraph."""
    tau, p_del, alpha = float(attrs["tau"]), float(attrs["p_del"]), float(attrs["alpha"])
    r = certified_radius(tau, p_del)
    joint = (
        f"With probability at least {100 * (1 - alpha):g}% over the sampled deletion masks, the labels hold jointly "
        f"for all components of a concept's circuit at each K ({str(attrs['correction']).capitalize()} correction over "
        f"the components). A component abstains when its votes over the {int(attrs['n'])} certification "
        f"sub-datasets do not show agreement of at least tau = {number(tau)}."
    )
    if r == 0:
        return (
            f"At tau {number(tau)} and p_del {number(p_del)} the certified radius is r = 0: no edit of the concept dataset is "
            f"covered (a larger p_del or a smaller tau gives r >= 1), so each certified in or out label is certified "
            f"for the dataset as given. " + joint
        )
    edits = (
        f"any {r} insertion{'s' if r > 1 else ''}, deletion{'s' if r > 1 else ''} or substitution{'s' if r > 1 else ''}"
    )
    return (
        f"Each component labelled certified in or certified out keeps its label under {edits} of examples of the "
        f"concept dataset (Theorem 1): an edit can move it to abstain, never from in to out or back. " + joint
    )


def short_words(tau: float, p_del: float) -> str:
    """``tau 0.9, p_del 0.95, r = 9``: a setting's short name in words (legends, headings)."""
    tau, p_del = float(tau), float(p_del)
    return f"tau {number(tau)}, p_del {number(p_del)}, r = {certified_radius(tau, p_del)}"


def row_words(row: Mapping[str, Any]) -> str:
    """A table row's or a certificate's setting in short words, read from its ``tau`` and ``p_del`` columns
    (attributes); a row without them but with a ``setting`` tag falls back to :func:`tag_words`."""
    if "tau" in row and "p_del" in row:
        return short_words(row["tau"], row["p_del"])
    return tag_words(str(row["setting"]))


def tag_words(tag: str) -> str:
    """A setting tag (``p0.95_n0100_n1000_s0/t0.9_a0.001_bonferroni``, :attr:`Setting.tag`) in words:
    ``tau 0.9, p_del 0.95, r = 9``; the tag itself when it is not one. For data whose only record of its setting
    is the tag; rows with ``tau`` and ``p_del`` columns go through :func:`row_words`."""
    try:
        setting = Setting.from_tag(tag)
    except ValueError:
        return str(tag)
    return short_words(setting.tau, setting.p_del)


#: the equal footing's methods (analysis/equal_footing.py: THREE_VALUED, then TWO_VALUED) in words, for the headline
#: (reports/findings.py) and ``truth_size_equal_summary`` (reports/testbed.py)
FOOTING_WORDS = {"certified": "certified", "matched_cut": "matched cut", "interval": "interval",
                 "consensus": "consensus", "certified_in": "certified IN",
                 "certified_in_abstain": "certified IN + abstain", "majority": "majority vote"}  # fmt: skip


def footing_header(what: str, methods: tuple[str, ...]) -> str:
    """``"labels changed (live): certified / matched cut / interval / consensus"``: a header whose cell holds one
    number per method, in that order, ``" / "`` apart (:data:`FOOTING_WORDS`)."""
    return f"{what}: " + " / ".join(FOOTING_WORDS.get(m, m) for m in methods)
