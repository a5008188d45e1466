"""Vision half of Certified Circuits (paper Sec. 4-5, App. A.1, D), grouped by what it holds.

- ``networks``: any torchvision classifier and its components (``models``, ``families``, ``architectures``,
  ``loading``, ``hooks``);
- ``data``: images and concept datasets (``folders``, ``image_sets``, ``images``, ``imagenet``,
  ``corruption``, ``world``);
- ``scoring``: the base algorithms' scores (``scorers``, ``plugins``, ``attribution``);
- here: world-model training and OOD filtration (``train``), sufficiency with a specificity control
  (``evaluate``), the naive vs cached runtime table (``runtime``).

The ``vision-*`` stages live in ``certified_circuits.cli``.
"""
