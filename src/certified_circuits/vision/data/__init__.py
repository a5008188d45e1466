"""Vision data: class folders of any names (``folders``), uniform image sets (``image_sets``), image decoding
(``images``), paper-scale ImageNet, ImageNet-C and OOD-CV (``imagenet``, ``corruption``) and the embedded
concept world (``world``)."""
