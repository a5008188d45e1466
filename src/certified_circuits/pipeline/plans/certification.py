"""A certification setting as the option of a stage: the one place that writes a :class:`Setting` into a command
(``rules/certification.smk``'s votes and certify jobs, and the attack, stability and runtime stages that re-run
Algorithms 1 and 2).

The workflow passes a setting by one name, ``--setting TAG``: the part of its tag the stage takes
(:attr:`~Setting.votes_tag`, :attr:`~Setting.decision_tag` or the whole :attr:`~Setting.tag`), which the stage reads
back exactly (:func:`certified_circuits.cli.stages.resolve_setting`). The stages keep their ``--p-del ...
--correction`` words for people who call them by hand (docs/calibration.md); the workflow never reads a setting
out of a path: a job's setting is looked up by its tag in the parse-time table of every configured setting
(:meth:`~certified_circuits.pipeline.layout.Layout.setting_of`).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Mapping

from certified_circuits.core.setting import Setting
from certified_circuits.pipeline.layout import Layout
from certified_circuits.pipeline.plans.common import Config, q, words

__all__ = ["setting_option", "votes_options", "decision_options", "setting_options", "runtime_options", "attack_options",
           "votes_job_options", "decision_job_options", "votes_job_k_grid"]


#: the tag of each part of a setting that a stage takes (:class:`Setting`'s properties)
_TAGS = {"votes": "votes_tag", "decision": "decision_tag", "whole": "tag"}


def setting_option(setting: Setting, part: str = "whole") -> str:
    """A setting as the one option a stage takes, ``--setting TAG``, which the stage reads back exactly
    (:mod:`certified_circuits.core.setting`).

    Args:
        setting: the setting.
        part: ``votes`` (Algorithm 2's part: votes and vision-discover jobs), ``decision`` (Algorithm 1's: certify
            jobs) or ``whole`` (stages that run both: stability, report-attack; vision-runtime, which reads the
            tag's p_del, seed, tau, alpha and correction and takes n0 and n from its own ``--n`` list).

    Returns:
        ``--setting p0.6_n0100_n1000_s0``, ``--setting t0.95_a0.001_bonferroni`` or ``--setting
        p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni`` (numbers exact, one shell word).
    """
    return f"--setting {q(getattr(setting, _TAGS[part]))}"


#: the votes job's option (``--setting {votes_tag}``)
votes_options = partial(setting_option, part="votes")
#: the certify job's option (``--setting {decision_tag}``)
decision_options = partial(setting_option, part="decision")
#: the whole setting, for report-attack and stability (``--setting {tag}``)
setting_options = partial(setting_option, part="whole")
#: vision-runtime's option: the whole tag (its n0 and n come from the stage's ``--n`` list)
runtime_options = setting_options


def attack_options(attack: Mapping[str, Any], setting: Setting, scorer: str) -> str:
    """report-attack's options (Theorem 1 shown directly: the attack re-certifies edited datasets).

    Args:
        attack: a ``vision.attack`` or ``language.attack`` config block (``k_grid``, ``multiples``, ``trials``, ``seed``).
        setting: the certification setting the attack re-runs.
        scorer: the scorer whose certificates it attacks.

    Returns:
        ``--scorer S --k-grid ...`` then :func:`setting_options`, then ``--multiples ... --trials T --attack-seed A``.
    """
    return (f"--scorer {q(scorer)} --k-grid {words(attack['k_grid'])} {setting_options(setting)} "
            f"--multiples {words(attack['multiples'])} --trials {attack['trials']} --attack-seed {attack['seed']}")


def votes_job_options(paths: Layout, wildcards: Any) -> str:
    """:func:`votes_options` of the configured setting that a votes job's wildcards name.

    Args:
        paths: the run's layout (its table of configured settings).
        wildcards: the job's ``p_del, n0, n, seed``.

    Returns:
        The options; a KeyError names the known settings if no configured setting has these votes parameters.
    """
    return votes_options(paths.setting_of(wildcards, votes_only=True))


def decision_job_options(paths: Layout, wildcards: Any) -> str:
    """:func:`decision_options` of the configured setting that a certify job's wildcards name (every field of it).

    Args:
        paths: the run's layout (its table of configured settings).
        wildcards: the job's ``p_del, n0, n, seed, tau, alpha, correction``.

    Returns:
        The options.
    """
    return decision_options(paths.setting_of(wildcards))


def votes_job_k_grid(config: Config, wildcards: Any) -> str:
    """The K grid of a votes job: its experiment's half's ``k_grid``, as words.

    Args:
        config: the run's config.
        wildcards: the job's ``experiment`` (the vision or the language experiment).

    Returns:
        ``"0.01 0.05 ..."``; a KeyError names the experiments for any other name.
    """
    grids = {config[half]["experiment"]: words(config[half]["k_grid"]) for half in ("vision", "language")
             if config[half]["enabled"]}
    if wildcards.experiment not in grids:
        raise KeyError(f"no enabled experiment is named {wildcards.experiment!r}; known: {sorted(grids)}")
    return grids[wildcards.experiment]
