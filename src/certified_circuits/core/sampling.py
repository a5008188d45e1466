"""The naive ``Sample`` of Algorithm 2: run a black-box discovery algorithm on every sub-dataset.

``A(kept_indices) -> bool circuit`` runs once per deletion mask; the counts are integer sums, so they
do not depend on how the masks are split among worker processes. The cached path for mean-score top-K
algorithms is :func:`certified_circuits.core.smoothing.vote_counts` (the same votes, one matrix product).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from certified_circuits.core.validation import check_count

#: ``algorithm(kept_indices) -> bool circuit``: the black-box discovery algorithm A of the paper.
Algorithm = Callable[[np.ndarray], Any]


def circuit_output(output: Any, shape: tuple[int, ...] | None, call: str) -> np.ndarray:
    """Check one output of the algorithm: a boolean (or 0/1) array of the same shape every call.

    Args:
        output: what the algorithm returned.
        shape: the shape of its first output (None on the first call).
        call: which call it was, for the error.

    Returns:
        the circuit as a bool array.

    Raises:
        ValueError: not ``[U]`` or ``[nK, U]``, values other than 0/1, or another shape than before.
    """
    circuit = np.asarray(output)
    if circuit.ndim not in (1, 2) or circuit.size == 0:
        raise ValueError(
            f"the algorithm returned shape {circuit.shape} on {call}: it must return a bool "
            "circuit [U] (one circuit) or [nK, U] (one per K)"
        )
    if circuit.dtype != bool:
        if not np.isin(circuit, (0, 1)).all():
            raise ValueError(
                f"the algorithm returned values other than 0/1 on {call}: return a bool mask "
                "(True keeps a component in the circuit), not scores"
            )
        circuit = circuit.astype(bool)
    if shape is not None and circuit.shape != shape:
        raise ValueError(
            f"the algorithm returned shape {circuit.shape} on {call} but {shape} before: "
            "it must return the same components every time"
        )
    return circuit


def _count_chunk(algorithm: Algorithm, masks: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Votes of one chunk of masks (runs in a worker process when ``workers > 1``)."""
    counts = np.zeros(shape, dtype=np.int64)
    for s in range(masks.shape[0]):
        counts += circuit_output(algorithm(np.flatnonzero(masks[s])), shape, f"sub-dataset {s} of a chunk")
    return counts


def sample_votes(
    algorithm: Algorithm,
    masks: np.ndarray,
    shape: tuple[int, ...],
    *,
    workers: int = 1,
    progress: bool = True,
    desc: str = "sub-datasets",
) -> np.ndarray:
    """Algorithm 2 (``Sample``), naive: ``sum_s A(D ⊙ eps_s)`` over the rows of ``masks``.

    Args:
        algorithm: ``A(kept_indices) -> bool circuit`` of ``shape``.
        masks: bool ``[n_samples, n_examples]``, True keeps an example.
        shape: the circuit shape (from the algorithm's output on the full dataset).
        workers: processes to run sub-datasets in (1: this process). With ``workers > 1`` the algorithm
            must be picklable (a module-level function or an instance of a module-level class); the
            processes are started with ``spawn`` (safe with torch and CUDA). Counts are integer sums, so
            they do not depend on ``workers``.
        progress: a tqdm bar on stderr.
        desc: the bar's label.

    Returns:
        int32 counts of ``shape``: how many sub-datasets put each component in the circuit.
    """
    from tqdm.auto import tqdm

    workers = check_count("workers", workers, minimum=1)
    n_samples = masks.shape[0]
    bar = tqdm(total=n_samples, desc=desc, unit="sub-dataset", disable=not progress)
    counts = np.zeros(shape, dtype=np.int64)
    try:
        if workers == 1:
            for s in range(n_samples):
                counts += circuit_output(algorithm(np.flatnonzero(masks[s])), shape, f"sub-dataset {s}")
                bar.update(1)
        else:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor, as_completed

            size = max(1, -(-n_samples // (4 * workers)))  # ~4 chunks per worker: balance and a live bar
            chunks = [masks[i : i + size] for i in range(0, n_samples, size)]
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
                futures = {pool.submit(_count_chunk, algorithm, chunk, shape): len(chunk) for chunk in chunks}
                for future in as_completed(futures):
                    counts += future.result()
                    bar.update(futures[future])
    finally:
        bar.close()
    return counts.astype(np.int32)
