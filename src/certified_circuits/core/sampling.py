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


class AlgorithmError(RuntimeError):
    """A discovery algorithm (or a plug-in scorer) raised: the message names it, the concept when known and
    the sub-dataset or batch; the algorithm's own exception is the ``__cause__``."""


def algorithm_name(algorithm: Any) -> str:
    """How errors name an algorithm: a plug-in by its ``module:function`` entry, else its qualified name."""
    spec = getattr(algorithm, "spec", None)
    if isinstance(spec, str):
        return f"plug-in {spec}"
    name = getattr(algorithm, "__qualname__", None) or type(algorithm).__qualname__
    return f"algorithm {getattr(algorithm, '__module__', None) or type(algorithm).__module__}.{name}"


def run_algorithm(algorithm: Algorithm, kept: np.ndarray, call: str, n_examples: int | None = None) -> Any:
    """``algorithm(kept)``; an exception it raises becomes one :class:`AlgorithmError` line naming the
    algorithm, its concept (an ``algorithm.concept`` attribute) and ``call``, with the original as cause."""
    try:
        return algorithm(kept)
    except Exception as exc:
        concept = getattr(algorithm, "concept", None)
        where = f"concept {concept!r}, " if concept not in (None, "") else ""
        of = f" of {n_examples}" if n_examples is not None else ""
        raise AlgorithmError(
            f"{algorithm_name(algorithm)} failed on {where}{call} ({len(kept)}{of} examples kept): "
            f"{type(exc).__name__}: {exc}"
        ) from exc


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


def _count_chunk(
    algorithm: Algorithm, masks: np.ndarray, shape: tuple[int, ...], start: int = 0, desc: str = "sub-datasets"
) -> np.ndarray:
    """Votes of one chunk of masks (runs in a worker process when ``workers > 1``); ``start``: its first index."""
    counts = np.zeros(shape, dtype=np.int64)
    for s in range(masks.shape[0]):
        call = f"sub-dataset {start + s} of {desc}"
        counts += circuit_output(run_algorithm(algorithm, np.flatnonzero(masks[s]), call, masks.shape[1]), shape, call)
    return counts


def _check_picklable(algorithm: Algorithm, workers: int) -> None:
    import pickle

    try:
        pickle.dumps(algorithm)
    except Exception as exc:
        raise ValueError(
            f"workers={workers} runs the {algorithm_name(algorithm)} in other processes, but it cannot be pickled "
            f"({type(exc).__name__}: {exc}): define it as a module-level function (or an instance of a "
            f"module-level class) instead of a lambda, a nested function or a closure, or pass workers=1"
        ) from exc


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

    Raises:
        AlgorithmError: the algorithm raised; one line names it and the sub-dataset, the original is the cause.
        ValueError: ``workers > 1`` and the algorithm cannot be pickled (the message gives the fix).
    """
    from tqdm.auto import tqdm

    workers = check_count("workers", workers, minimum=1)
    n_samples = masks.shape[0]
    bar = tqdm(total=n_samples, desc=desc, unit="sub-dataset", disable=not progress)
    counts = np.zeros(shape, dtype=np.int64)
    try:
        if workers == 1:
            for s in range(n_samples):
                counts += _count_chunk(algorithm, masks[s : s + 1], shape, s, desc)
                bar.update(1)
        else:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor, as_completed

            _check_picklable(algorithm, workers)
            size = max(1, -(-n_samples // (4 * workers)))  # ~4 chunks per worker: balance and a live bar
            starts = range(0, n_samples, size)
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
                futures = {
                    pool.submit(_count_chunk, algorithm, masks[i : i + size], shape, i, desc): len(masks[i : i + size])
                    for i in starts
                }
                for future in as_completed(futures):
                    counts += future.result()
                    bar.update(futures[future])
    finally:
        bar.close()
    return counts.astype(np.int32)
