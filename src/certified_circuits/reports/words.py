"""A run's settings in words, for people: the explorer, the summary and the figures' legends.

One place turns a certificate's attributes or a setting path tag into "tau 0.95, p_del 0.6 (radius r = 1)"
and says what Theorem 1 guarantees for it.
"""

from __future__ import annotations

import re

from certified_circuits.core.certification import certified_radius


def setting_words(attrs: dict) -> str:
    """A certificate's setting in words: ``tau 0.95, p_del 0.6 (radius r = 1), alpha 0.001, n0 = 100, n = 1000,
    Bonferroni``."""
    tau, p_del = float(attrs["tau"]), float(attrs["p_del"])
    return (
        f"tau {tau:g}, p_del {p_del:g} (radius r = {certified_radius(tau, p_del)}), alpha {float(attrs['alpha']):g}, "
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
        f"sub-datasets do not show agreement of at least tau = {tau:g}."
    )
    if r == 0:
        return (
            f"At tau {tau:g} and p_del {p_del:g} the certified radius is r = 0: no edit of the concept dataset is "
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


def tag_words(tag: str) -> str:
    """A setting path tag (``p0.95_n0100_n1000_s0/t0.9_a0.001_bonferroni``) in words:
    ``tau 0.9, p_del 0.95, r = 9``; the tag itself when it is not one."""
    match = re.fullmatch(r"p([0-9.e-]+)_n0(\d+)_n(\d+)_s(\d+)/t([0-9.e-]+)_a([0-9.e-]+)_(\w+)", str(tag))
    if not match:
        return str(tag)
    p_del, tau = float(match[1]), float(match[5])
    return f"tau {tau:g}, p_del {p_del:g}, r = {certified_radius(tau, p_del)}"
