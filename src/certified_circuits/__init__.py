"""Certified Circuits: provably stable circuit discovery by randomized deletion smoothing.

Implements *Certified Circuits* (ICML 2026): any circuit-discovery algorithm A is run on many
randomly deleted sub-datasets (RS-Del smoothing), per-component votes are counted (Algorithm 2,
``Sample``) and every component is certified in, out or abstain with a binomial test under
family-wise error control (Algorithm 1, ``CertifyCircuit``). Certified decisions are invariant
under any ``r = floor(log(1.5 - tau) / log p_del)`` dataset edits (Theorem 1).

The public API (this namespace; numpy and scipy only, no torch, pandas or mlflow)::

    import certified_circuits as cc
    setting = cc.Setting(p_del=0.6, n0=100, n=1000, seed=0, tau=0.95, alpha=0.001, correction="bonferroni")
    cert = cc.certify_algorithm(algorithm, n_examples, setting)   # algorithm(kept_indices) -> bool [U] or [nK, U]
    cert = cc.certify_scores(scores, groups, k_grid, setting)     # per-example scores [N, U], top-K per group
    cert.decision, cert.radius; cert.save(path); cc.Certificate.load(path)

The layers below it (``core``, ``storage``, ``analysis``, ``reports``, ``vision``, ``language``,
``pipeline``, ``cli``) are described in docs/architecture.md.
"""

import time as _time

#: When this process imported the package: start-up times (imports, model build) are measured from here.
#: It lives in the package root, which Python imports once, so ``python -m certified_circuits.cli`` and the
#: ``certified-circuits`` script see the same value.
PROCESS_START = _time.perf_counter()

__version__ = "0.1.0"

from certified_circuits.api import Algorithm, Certificate, certify_algorithm, certify_scores  # noqa: E402
from certified_circuits.core.certification import (  # noqa: E402
    certified_radius,
    max_certifiable_tau,
    min_samples,
)
from certified_circuits.core.contracts import ABSTAIN, IN, OUT  # noqa: E402
from certified_circuits.core.discovery import TopKDiscovery, top_k_circuit  # noqa: E402
from certified_circuits.core.setting import Setting  # noqa: E402
from certified_circuits.core.smoothing import selection_and_certification_masks  # noqa: E402

__all__ = [
    "ABSTAIN",
    "IN",
    "OUT",
    "Algorithm",
    "Certificate",
    "Setting",
    "TopKDiscovery",
    "__version__",
    "certified_radius",
    "certify_algorithm",
    "certify_scores",
    "max_certifiable_tau",
    "min_samples",
    "selection_and_certification_masks",
    "top_k_circuit",
]
