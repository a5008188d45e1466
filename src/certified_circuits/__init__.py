"""Certified Circuits: provably stable circuit discovery by randomized deletion smoothing.

Implements *Certified Circuits* (ICML 2026): any circuit-discovery algorithm A is run on many
randomly deleted sub-datasets (RS-Del smoothing), per-component votes are counted (Algorithm 2,
``Sample``) and every component is certified in, out or abstain with a binomial test under
family-wise error control (Algorithm 1, ``CertifyCircuit``). Certified decisions are invariant
under any ``r = floor(log(1.5 - tau) / log p_del)`` dataset edits (Theorem 1).

Modules: :mod:`smoothing` (deletion masks, vote counts), :mod:`discovery` (top-K base
algorithms), :mod:`certification` (decision rule, FWER, radius), :mod:`store` (HDF5 contracts).
"""

import time as _time

__version__ = "0.1.0"

#: When this process imported the package: start-up times (imports, model build) are measured from here.
#: It lives in the package root, which Python imports once, so ``python -m certified_circuits.cli`` and the
#: ``certified-circuits`` script see the same value.
PROCESS_START = _time.perf_counter()
