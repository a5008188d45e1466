"""Vision base algorithms: the paper's scorers (``scorers``: relevance, activation, rank, spurious index), a
user's additive or black-box plugin (``plugins``) and the attribution files they fill (``attribution``)."""
