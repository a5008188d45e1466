"""The result layout: the one place that knows where every result lives and how settings become names.

Every hyperparameter that changes a result is part of its path, so Snakemake reruns exactly what a
config change affects (change tau: certification onward; change p_del or n: votes onward) and old
results stay beside new ones. The workflow's rules build their output patterns and wildcard
constraints from this module, and nothing downstream ever parses a path: each stage writes its
settings into its outputs (HDF5 attributes, CSV columns).

Layout (under ``results_dir``)::

    attributions/{experiment}/{split}/{concept}.h5
    votes/{experiment}/{split}/{concept}/{scorer}/{setting}.h5
    certificates/{experiment}/{split}/{concept}/{scorer}/{setting}/{decision}.h5
    sufficiency/{experiment}/{split}/{concept}/{setting}/{decision}.csv     (all scorers of the job)
    faithfulness_mib/{experiment}/{concept}.csv                              (language.faithfulness.grid: mib)
    stability/{experiment}/{split}/{concept}/{scorer}/{setting}/{decision}.csv  (bootstrap resamples: testbed)
    truth_size/{experiment}/{split}/{concept}/{scorer}/{setting}/{decision}.csv (at the truth's size: testbed)
    truth_size_equal/{experiment}/{split}/{concept}/{scorer}/{setting}/{decision}.csv  (its equal footing: testbed)
    ground_truth/{experiment}.json          (the planted or verified circuits of a testbed model)
    tables/{experiment}/...   figures/{experiment}/...   mib/{experiment}/...   logs/  benchmarks/  mlflow.db

with ``setting = p{p_del}_n0{n0}_n{n}_s{seed}`` (the votes: Algorithm 2) and
``decision = t{tau}_a{alpha}_{correction}`` (the test: Algorithm 1).

Numbers appear *exactly*: a float is written as Python's shortest round-trip ``repr`` (``0.95``,
``0.001``, ``1e-05``, ``0.6000001``), so ``float(tag) == value`` always; a 6-digit ``%g`` would turn
``tau: 0.9999999`` into ``1`` and ``p_del: 0.6000001`` into ``0.6``.
"""

from __future__ import annotations

from typing import Mapping

from certified_circuits.core.setting import Setting, decision_tag, number, votes_tag

__all__ = ["Layout", "Setting", "number", "votes_tag", "decision_tag", "WILDCARD_CONSTRAINTS", "VOTES_PATTERN", "SETTING_PATTERN"]

#: regexes of every wildcard of the layout (Snakemake ``wildcard_constraints``)
NAME = r"[A-Za-z0-9][A-Za-z0-9_\-]*"
FLOAT = r"[0-9][0-9.]*(?:e-?[0-9]+)?"
INT = r"[0-9]+"
WILDCARD_CONSTRAINTS: dict[str, str] = {
    "experiment": NAME,
    "split": NAME,
    "concept": NAME,
    "scorer": r"[a-z_][a-z0-9_]*",
    "p_del": FLOAT,
    "n0": INT,
    "n": INT,
    "seed": INT,
    "tau": FLOAT,
    "alpha": FLOAT,
    "correction": r"bonferroni|holm",
    "size": INT,
}


# Patterns: with the default arguments they are Snakemake patterns ("{concept}" wildcards); with
# values they are concrete paths. Snakemake's own braces are doubled by the caller where needed.
_VOTES_WILDCARDS = ("{p_del}", "{n0}", "{n}", "{seed}")
_DECISION_WILDCARDS = ("{tau}", "{alpha}", "{correction}")
#: wildcard patterns of a votes setting and of a full setting (for log and benchmark names)
VOTES_PATTERN = votes_tag(*_VOTES_WILDCARDS)
SETTING_PATTERN = f"{VOTES_PATTERN}/{decision_tag(*_DECISION_WILDCARDS)}"


class Layout:
    """Paths of one results folder. ``Layout(root).votes(...)`` with wildcard defaults gives patterns."""

    def __init__(self, root: str) -> None:
        root = str(root).rstrip("/") or "/"
        self.root = root
        #: every setting a path was built from, by its tag: the parse-time table the rules look settings
        #: up in (:meth:`setting_of`), so no job reads a value back out of its path
        self.settings: dict[str, Setting] = {}

    def _named(self, setting: Setting | None) -> Setting | None:
        """Record ``setting`` in :attr:`settings` (every path built from a setting names a known one)."""
        if setting is not None:
            self.settings.setdefault(setting.tag, setting)
        return setting

    def _setting_path(self, setting: Setting | None) -> str:
        """``{votes tag}/{decision tag}`` of ``setting`` (recorded, :meth:`_named`), or the wildcard pattern of both."""
        return self._named(setting).tag if setting else SETTING_PATTERN

    def setting_of(self, wildcards: Mapping[str, str], votes_only: bool = False) -> Setting:
        """The configured :class:`Setting` a job's wildcards name, from :attr:`settings`.

        Args:
            wildcards: the job's ``p_del, n0, n, seed`` (and ``tau, alpha, correction`` unless ``votes_only``),
                as the path holds them.
            votes_only: a votes job: any configured setting with these votes parameters (they are all equal
                in p_del, n0, n and seed, which is all a votes job uses).

        Raises:
            KeyError: no path of this workflow was built from such a setting (the message lists the known ones).
        """
        votes = votes_tag(*(wildcards[k] for k in ("p_del", "n0", "n", "seed")))
        if votes_only:
            for setting in self.settings.values():
                if setting.votes_tag == votes:
                    return setting
            tag = votes
        else:
            tag = f"{votes}/{decision_tag(*(wildcards[k] for k in ('tau', 'alpha', 'correction')))}"
            if tag in self.settings:
                return self.settings[tag]
        raise KeyError(f"no configured setting is named {tag}; known: {sorted(self.settings)}")

    # ---- per-job results
    def attributions(self, experiment: str = "{experiment}", split: str = "{split}",
                     concept: str = "{concept}") -> str:
        return f"{self.root}/attributions/{experiment}/{split}/{concept}.h5"

    def votes(self, experiment: str = "{experiment}", split: str = "{split}", concept: str = "{concept}",
              scorer: str = "{scorer}", setting: Setting | None = None) -> str:
        tag = self._named(setting).votes_tag if setting else votes_tag(*_VOTES_WILDCARDS)
        return f"{self.root}/votes/{experiment}/{split}/{concept}/{scorer}/{tag}.h5"

    def certificates(self, experiment: str = "{experiment}", split: str = "{split}", concept: str = "{concept}",
                     scorer: str = "{scorer}", setting: Setting | None = None) -> str:
        return f"{self.root}/certificates/{experiment}/{split}/{concept}/{scorer}/{self._setting_path(setting)}.h5"

    def sufficiency(self, experiment: str = "{experiment}", split: str = "{split}", concept: str = "{concept}",
                    setting: Setting | None = None) -> str:
        return f"{self.root}/sufficiency/{experiment}/{split}/{concept}/{self._setting_path(setting)}.csv"

    def faithfulness_mib(self, experiment: str = "{experiment}", concept: str = "{concept}") -> str:
        """A task's faithfulness on MIB's grid (``language-faithfulness-mib``; docs/mib.md)."""
        return f"{self.root}/faithfulness_mib/{experiment}/{concept}.csv"

    def stability(self, experiment: str = "{experiment}", split: str = "{split}", concept: str = "{concept}",
                  scorer: str = "{scorer}", setting: Setting | None = None) -> str:
        """One concept's circuits over bootstrap resamples of its dataset (``stability``; docs/embedded_default.md)."""
        return f"{self.root}/stability/{experiment}/{split}/{concept}/{scorer}/{self._setting_path(setting)}.csv"

    def truth_size(self, experiment: str = "{experiment}", split: str = "{split}", concept: str = "{concept}",
                   scorer: str = "{scorer}", setting: Setting | None = None) -> str:
        """One concept's circuits at the truth's size, each against the baseline of its own size, and their
        stability (the ``stability`` stage's second table; analysis/size_matched.py)."""
        return f"{self.root}/truth_size/{experiment}/{split}/{concept}/{scorer}/{self._setting_path(setting)}.csv"

    def truth_size_equal(self, experiment: str = "{experiment}", split: str = "{split}", concept: str = "{concept}",
                         scorer: str = "{scorer}", setting: Setting | None = None) -> str:
        """One concept's certificate at the truth's size beside the comparators that abstain as much (matched cut,
        bootstrap interval, consensus) on the same resamples (the ``stability`` stage's third table;
        analysis/equal_footing.py)."""
        return (f"{self.root}/truth_size_equal/{experiment}/{split}/{concept}/{scorer}/"
                f"{self._setting_path(setting)}.csv")

    def ground_truth(self, experiment: str = "{experiment}") -> str:
        """The true circuits of an experiment's model, causally verified (``vision-ground-truth``,
        ``language-ground-truth``): the testbed's answer key."""
        return f"{self.root}/ground_truth/{experiment}.json"

    # ---- per-stage folders
    def mib(self, experiment: str) -> str:
        """The MIB submission root of an experiment (``report-mib``: ``<method>_patching_<level>/<task>_<model>/``)."""
        return f"{self.root}/mib/{experiment}"

    def tables(self, experiment: str) -> str:
        return f"{self.root}/tables/{experiment}"

    def figures(self, experiment: str) -> str:
        return f"{self.root}/figures/{experiment}"

    def data(self, half: str) -> str:
        """Data and models the workflow builds itself (``vision``, ``language``)."""
        return f"{self.root}/{half}"

    def log(self, stage: str, name: str) -> str:
        return f"{self.root}/logs/{stage}/{name}.log"

    def benchmark(self, stage: str, name: str) -> str:
        return f"{self.root}/benchmarks/{stage}/{name}.tsv"

