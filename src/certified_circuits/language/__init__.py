"""Language half of Certified Circuits (paper Sections 4-5, Appendix A.2 and C).

Modules: :mod:`.tasks` (IOI / IOI-Hard / Greater-Than generators), :mod:`.tokenizer`, :mod:`.models`
(embedded tiny GPT-2 and GPT-2 Small, TransformerBridge), :mod:`.graph` (EAP graph),
:mod:`.names` (the node and edge name grammar), :mod:`.methods` (the attribution method registry),
:mod:`.forward` (node-decomposed forward with edge patching), :mod:`.eap_ig` (per-example EAP-IG scores),
:mod:`.patching` (circuit-restricted evaluation), :mod:`.train` (embedded model training),
:mod:`.cli` (``certified-circuits language-*`` subcommands).
"""
