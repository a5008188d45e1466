"""Vision networks: any torchvision classifier and its circuit vertices (``models``), where ``layers: auto`` puts
them (``families``), the paper's ImageNet presets (``architectures``), loading once per process (``loading``) and
capture and batched channel masking (``hooks``)."""
