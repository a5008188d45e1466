"""Test helpers, one way to load them: ``from tests.helpers.<module> import ...`` (pytest puts the checkout on
``sys.path``: ``pythonpath = ["."]`` in pyproject.toml).

- :mod:`tests.helpers.paths`: the checkout's folders and the environment's executables;
- :mod:`tests.helpers.config`: a workflow config merged and checked in-process, as the Snakefile checks it;
- :mod:`tests.helpers.workflow`: ``snakemake`` and ``bin/workflow`` runs, dry-run parsing, private checkouts;
- :mod:`tests.helpers.shared`: a run that every pytest-xdist worker of a session shares, started once;
- :mod:`tests.helpers.artifacts`: result trees and golden tables compared (integers exactly, floats with a tolerance);
- :mod:`tests.helpers.mib_reference`: MIB's loader, ``apply_topn`` and prune, reimplemented;
- fixture builders: :mod:`~tests.helpers.custom_fixtures` (a user's vision setup), :mod:`~tests.helpers.paper_fixtures`
  (the paper's setup), :mod:`~tests.helpers.family_fixtures` (language families), :mod:`~tests.helpers.slurm_cluster`
  (a private SLURM cluster), :mod:`~tests.helpers.independent_scores` (EAP-IG written from scratch).
"""
