"""Certified Circuits: provably stable circuit discovery by randomized deletion smoothing.

Implements *Certified Circuits* (ICML 2026): any circuit-discovery algorithm A is run on many
randomly deleted sub-datasets (RS-Del smoothing), per-component votes are counted (Algorithm 2,
``Sample``) and every component is certified in, out or abstain with a binomial test under
family-wise error control (Algorithm 1, ``CertifyCircuit``). Certified decisions are invariant
under any ``r = floor(log(1.5 - tau) / log p_del)`` dataset edits (Theorem 1).

The public API (this namespace; numpy and scipy only, no torch, pandas or mlflow)::

    import certified_circuits as cc
    setting = cc.Setting(p_del=0.6, n0=100, n=1000, seed=0, tau=0.95, alpha=0.001, correction="bonferroni")
    print(cc.plan(n_examples, n_components, setting))           # will it certify anything? (exact)
    cert = cc.certify_algorithm(algorithm, n_examples, setting)   # algorithm(kept_indices) -> bool [U] or [nK, U]
    cert = cc.certify_scores(scores, groups, k_grid, setting)     # per-example scores [N, U], top-K per group
    cert = cc.certify_votes(votes, tau, alpha)                    # counted votes (a workflow votes file)
    cert.decision, cert.radius; cert.save(path); cc.Certificate.load(path)

The layers below it (``core``, ``commands``, ``storage``, ``analysis``, ``reports``, ``vision``, ``language``,
``pipeline``, ``cli``) are described in docs/architecture.md; ``commands`` owns how a shell command of the project
is written (``COMMAND``, the plan command), which the engine never names.
"""

import time as _time

#: When this process imported the package: start-up times (imports, model build) are measured from here.
#: It lives in the package root, which Python imports once, so ``python -m certified_circuits.cli`` and the
#: ``certified-circuits`` script see the same value.
PROCESS_START = _time.perf_counter()

__version__ = "0.1.0"

#: public name -> the module that defines it. Loaded on first use (PEP 562): ``import certified_circuits``
#: costs nothing, so the hundreds of short ``certified-circuits`` jobs of a workflow do not pay for scipy.
_PUBLIC = {
    "Algorithm": "certified_circuits.api",
    "Certificate": "certified_circuits.api",
    "certify_algorithm": "certified_circuits.api",
    "certify_scores": "certified_circuits.api",
    "certify_votes": "certified_circuits.api",
    "certified_radius": "certified_circuits.core.certification",
    "max_certifiable_tau": "certified_circuits.core.certification",
    "min_samples": "certified_circuits.core.certification",
    "Plan": "certified_circuits.core.planning",
    "PlanWarning": "certified_circuits.core.planning",
    "Suggestion": "certified_circuits.core.planning",
    "VacuousSettingError": "certified_circuits.core.planning",
    "plan": "certified_circuits.core.planning",
    "ABSTAIN": "certified_circuits.core.contracts",
    "IN": "certified_circuits.core.contracts",
    "OUT": "certified_circuits.core.contracts",
    "TopKDiscovery": "certified_circuits.core.discovery",
    "top_k_circuit": "certified_circuits.core.discovery",
    "Setting": "certified_circuits.core.setting",
    "selection_and_certification_masks": "certified_circuits.core.smoothing",
}


def __getattr__(name: str):
    if name in _PUBLIC:
        import importlib

        value = getattr(importlib.import_module(_PUBLIC[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'certified_circuits' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))


__all__ = [
    "ABSTAIN",
    "IN",
    "OUT",
    "Algorithm",
    "Plan",
    "PlanWarning",
    "Suggestion",
    "VacuousSettingError",
    "Certificate",
    "Setting",
    "TopKDiscovery",
    "__version__",
    "certified_radius",
    "certify_algorithm",
    "certify_scores",
    "certify_votes",
    "max_certifiable_tau",
    "min_samples",
    "plan",
    "selection_and_certification_masks",
    "top_k_circuit",
]
