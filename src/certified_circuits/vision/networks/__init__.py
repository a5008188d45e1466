"""Vision networks: the model type and its circuit vertices (``models``), the embedded world's ResNet
(``world_resnet``), weights files and the world checkpoint (``checkpoints``), any torchvision classifier and its
preprocessing (``classifiers``), where a network's components are (``components``), where ``layers: auto`` puts
them (``families``), the paper's ImageNet presets (``architectures``), the one loader and its per-process cache
(``loading``) and capture and batched channel masking (``hooks``)."""
