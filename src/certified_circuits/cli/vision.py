"""``certified-circuits vision-*`` stages (declared with :mod:`certified_circuits.cli.stages`).

- ``vision-world``: build the embedded concept world (one ``.npz`` per split + ``world.json``);
- ``vision-train``: train the world ResNet, write the checkpoint and ID/OOD accuracies (JSON);
- ``vision-filter-ood``: build the adversarial and anomaly sets by filtration against a model, and
  write the full model's accuracy on every split (the calibration numbers);
- ``vision-attribute``: per-example scores of one class on one or more splits -> attribution HDF5 (the
  built-in scorers and any additive plugin, ``--scorer module:function``);
- ``vision-discover``: a black-box discovery plugin run on every sub-dataset -> votes HDF5;
- ``vision-evaluate``: sufficiency of one class's circuits (votes + certificates) -> tidy CSV;
- ``vision-runtime``: naive vs cached certification cost (App. D);
- ``vision-select-classes``, ``vision-imagenet-c``, ``vision-prepare-oodcv``: paper-scale data.

The stages are declared in :mod:`.vision_data` (world, train, filter-ood), :mod:`.vision_circuits` (attribute,
discover, evaluate, runtime) and :mod:`.vision_imagenet` (paper-scale data), which
:data:`certified_circuits.cli.main.PLUGIN_MODULES` registers; their shared model options and loading are
:mod:`.vision_common`'s. This module lists every ``vision-*`` stage in one :class:`~.stages.Stages`
(``STAGES``, in the order of ``certified-circuits --help``) and keeps the names it exported.
"""

from __future__ import annotations

from certified_circuits.cli import vision_circuits, vision_data, vision_imagenet
from certified_circuits.cli.stages import Stages
from certified_circuits.cli.vision_circuits import additive_plugin, plugin_of_kind
from certified_circuits.cli.vision_common import model_name

__all__ = ["STAGES", "additive_plugin", "model_name", "plugin_of_kind"]

#: every ``vision-*`` stage (for a parser of the vision stages alone; ``certified-circuits`` registers the
#: three modules through ``PLUGIN_MODULES``, not this list)
STAGES = Stages([*vision_data.STAGES, *vision_circuits.STAGES, *vision_imagenet.STAGES])
