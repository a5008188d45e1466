"""Vision half of Certified Circuits (paper Sec. 4-5, App. A.1, D).

Modules: ``world`` (embedded concept world), ``corruption`` (ImageNet-C defocus blur), ``models``
(world ResNet, any torchvision classifier with its components; ``families``: where ``layers: auto``
puts them; ``architectures``: the paper's ImageNet presets), ``folders`` (class index and class
folders of any names), ``plugins`` (a user's additive or black-box base algorithm), ``hooks``
(capture and batched channel masking), ``scorers`` (relevance / activation / rank, spurious index),
``imagenet`` and ``data`` (paper-scale ImageFolder loaders, uniform image sets), ``train``
(world model training, OOD filtration), ``attribution`` (HDF5 attributions), ``evaluate``
(sufficiency with a specificity control), ``cli`` (``vision-*`` subcommands).
"""
