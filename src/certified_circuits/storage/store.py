"""HDF5 data contracts between stages (docs/architecture.md, section 2), with atomic writes and validated reads.

Every writer goes through :func:`atomic_path`: the file is written under a temporary name in the
destination folder and renamed into place only when complete, so an interrupted job never leaves a
half-written output that a resumed workflow would mistake for a finished one.

Every reader checks that the file opens, that each required dataset exists with the contracted dtype
kind and shape, and raises :class:`StoreError` naming the file, what is wrong and how to fix it.

Contracts
---------
attributions  ``scores/{scorer}`` float32 [n_examples, U] with attribute ``ranking`` (signed | absolute: how
              its base algorithm ranks the mean score); ``components/group`` int32 [U];
              ``components/name`` str [U]; ``examples/id`` str [n_examples]; optional
              ``extras/{name}``; attrs: model, dataset, split, concept, package version, config digest.
votes         ``k_grid`` float64 [nK]; ``baseline`` bool [nK, U]; ``selection_counts`` and
              ``certification_counts`` int32 [nK, U]; ``groups`` int32 [U]; attrs: p_del, n0, n, seed,
              n_examples, scorer.
certificates  ``decision`` int8 [nK, U] in {1, 0, -1}; ``majority`` bool [nK, U]; ``pvalue`` float64
              [nK, U]; ``k_grid`` float64 [nK]; attrs: tau, alpha, correction, radius.
certificate   the public API's :class:`certified_circuits.api.Certificate` (:func:`write_certificate`): the
              union of votes and certificates, shape [U] or [nK, U], with every setting as attributes.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import h5py
import numpy as np

from certified_circuits import __version__
from certified_circuits.storage.atomic import atomic_path
from certified_circuits.core.contracts import Attributions, Certificates, Votes
from certified_circuits.core.discovery import RANKINGS
from certified_circuits.core.validation import check_k_grid

STR_DTYPE = h5py.string_dtype(encoding="utf-8")


class StoreError(RuntimeError):
    """A results file is missing, truncated or does not follow its contract."""


def _plain(value: Any) -> Any:
    """HDF5 attributes from plain Python values (numpy scalars converted, None as '')."""
    if value is None:
        return ""
    if isinstance(value, np.generic):
        return value.item()
    return value


def _write_attrs(handle: h5py.File, attrs: Mapping[str, Any]) -> None:
    for key, value in attrs.items():
        handle.attrs[key] = _plain(value)


def _read_attrs(handle: h5py.File) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in handle.attrs.items():
        out[key] = value.item() if isinstance(value, np.generic) else value
    return out


@contextlib.contextmanager
def _open_for_read(path: str | os.PathLike, producer: str) -> Iterator[h5py.File]:
    """Open ``path`` for reading; any failure inside (a damaged header, heap or chunk makes h5py raise
    OSError, KeyError or RuntimeError) becomes a :class:`StoreError` that names the file and the fix."""
    path = Path(path)
    if not path.exists():
        raise StoreError(f"{path}: file not found; run the {producer} stage that produces it")
    try:
        handle = h5py.File(path, "r")
    except OSError as exc:
        raise StoreError(
            f"{path}: not a readable HDF5 file ({exc}); it is truncated or corrupt: delete it and rerun "
            f"the {producer} stage"
        ) from exc
    with handle:
        try:
            yield handle
        except StoreError:
            raise
        except (OSError, KeyError, RuntimeError, ValueError, TypeError) as exc:
            raise StoreError(
                f"{path}: corrupt HDF5 file ({type(exc).__name__}: {exc}): delete it and rerun the {producer} stage"
            ) from exc


def _dataset(handle: h5py.File, name: str, kind: str, shape: tuple[int | None, ...], producer: str) -> np.ndarray:
    """Read ``name`` and check its dtype kind (numpy ``dtype.kind`` letters) and shape (None = any)."""
    where = f"{handle.filename}: dataset '{name}'"
    if name not in handle:
        raise StoreError(f"{where} is missing; the file does not follow the {producer} contract: rerun that stage")
    try:
        data = handle[name][()]
    except Exception as exc:  # h5py raises OSError/KeyError variants on damaged chunks
        raise StoreError(f"{where} cannot be read ({exc}): delete the file and rerun the {producer} stage") from exc
    data = np.asarray(data)
    if kind == "str":
        if data.dtype.kind not in ("O", "S", "U"):
            raise StoreError(f"{where} should hold strings, found dtype {data.dtype}")
        data = np.array([d.decode() if isinstance(d, bytes) else str(d) for d in data.ravel()], dtype=object)
    elif data.dtype.kind not in kind:
        raise StoreError(f"{where} has dtype {data.dtype}, the contract needs kind '{kind}'")
    if len(shape) != data.ndim or any(s is not None and s != d for s, d in zip(shape, data.shape)):
        want = "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
        raise StoreError(f"{where} has shape {list(data.shape)}, expected {want}")
    return data


def _k_grid(handle: h5py.File, producer: str) -> np.ndarray:
    """The ``k_grid`` dataset, checked like a configured grid: finite fractions in (0, 1]."""
    k_grid = _dataset(handle, "k_grid", "f", (None,), producer)
    try:
        check_k_grid(k_grid)
    except ValueError as exc:
        raise StoreError(f"{handle.filename}: dataset 'k_grid' is invalid ({exc}); the file is damaged or was "
                         f"not written by the {producer} stage: delete it and rerun that stage") from exc
    return k_grid


def _write_file(path: str | os.PathLike, datasets: Mapping[str, np.ndarray], attrs: Mapping[str, Any]) -> Path:
    """One HDF5 file of named datasets and attributes (plus the package version), written atomically."""
    path = Path(path)
    with atomic_path(path) as tmp:
        with h5py.File(tmp, "w") as handle:
            for name, data in datasets.items():
                handle.create_dataset(name, data=data)
            _write_attrs(handle, {"package_version": __version__, **attrs})
    return path


# --------------------------------------------------------------------------- attributions


def write_attributions(
    path: str | os.PathLike,
    scores: Mapping[str, np.ndarray],
    groups: np.ndarray,
    names: Sequence[str],
    example_ids: Sequence[str],
    attrs: Mapping[str, Any],
    extras: Mapping[str, np.ndarray] | None = None,
    rankings: Mapping[str, str] | None = None,
) -> Path:
    """Write the attribution contract atomically.

    Args:
        path: the HDF5 file to write.
        scores: scorer name -> float ``[n_examples, n_components]`` per-example scores.
        groups: int ``[n_components]`` group (layer) of each component.
        names: component names; example_ids: example names.
        attrs: labels (model, concept, split, ...), written as file attributes.
        extras: further named arrays (``extras/{name}``).
        rankings: scorer -> ranking convention of its base algorithm (``signed`` | ``absolute``,
            :data:`certified_circuits.core.discovery.RANKINGS`), written as the ``ranking`` attribute of
            ``scores/{scorer}``; a scorer not named ranks ``signed``.

    Returns:
        ``path``.
    """
    from certified_circuits.core.discovery import check_ranking

    unknown = sorted(set(rankings or {}) - set(scores))
    if unknown:
        raise ValueError(f"rankings name scorers {unknown} that have no scores: name only {sorted(scores)}")
    rankings = {scorer: check_ranking((rankings or {}).get(scorer, "signed"), f"rankings[{scorer!r}]")
                for scorer in scores}
    groups = np.asarray(groups)
    n_components, n_examples = groups.shape[0], len(example_ids)
    if not scores:
        raise ValueError("scores is empty: give at least one scorer's [n_examples, n_components] matrix")
    if len(names) != n_components:
        raise ValueError(f"{len(names)} component names for {n_components} components")
    for scorer, matrix in scores.items():
        if np.shape(matrix) != (n_examples, n_components):
            raise ValueError(
                f"scores['{scorer}'] has shape {np.shape(matrix)}, expected ({n_examples}, {n_components})"
            )
    path = Path(path)
    with atomic_path(path) as tmp:
        with h5py.File(tmp, "w") as handle:
            for scorer, matrix in scores.items():
                dataset = handle.create_dataset(f"scores/{scorer}", data=np.asarray(matrix, dtype=np.float32))
                dataset.attrs["ranking"] = rankings[scorer]
            handle.create_dataset("components/group", data=groups.astype(np.int32))
            handle.create_dataset("components/name", data=np.asarray(list(names), dtype=object), dtype=STR_DTYPE)
            handle.create_dataset("examples/id", data=np.asarray(list(example_ids), dtype=object), dtype=STR_DTYPE)
            for name, value in (extras or {}).items():
                handle.create_dataset(f"extras/{name}", data=np.asarray(value))
            _write_attrs(handle, {"package_version": __version__, **attrs})
    return path


def read_attributions(path: str | os.PathLike) -> Attributions:
    """Read and validate an attribution file."""
    producer = "attribution"
    with _open_for_read(path, producer) as handle:
        groups = _dataset(handle, "components/group", "iu", (None,), producer)
        n_components = groups.shape[0]
        names = _dataset(handle, "components/name", "str", (n_components,), producer)
        ids = _dataset(handle, "examples/id", "str", (None,), producer)
        if "scores" not in handle or not len(handle["scores"]):
            raise StoreError(f"{path}: group 'scores' is missing or empty; rerun the attribution stage")
        scores = {
            scorer: _dataset(handle, f"scores/{scorer}", "f", (ids.shape[0], n_components), producer)
            for scorer in handle["scores"]
        }
        extras = {name: np.asarray(handle[f"extras/{name}"][()]) for name in handle.get("extras", {})}
        rankings = {}
        for scorer in scores:
            ranking = handle[f"scores/{scorer}"].attrs.get("ranking")
            if ranking not in RANKINGS:
                raise StoreError(f"{path}: scores/{scorer} does not record its ranking convention ('signed' or "
                                 "'absolute'); it was written by an older version: rerun the attribution stage")
            rankings[scorer] = str(ranking)
        return Attributions(
            rankings=rankings,
            scores=scores,
            groups=groups.astype(np.int32),
            names=list(names),
            example_ids=list(ids),
            attrs=_read_attrs(handle),
            extras=extras,
        )


# --------------------------------------------------------------------------- votes


def write_votes(path: str | os.PathLike, votes: Votes) -> Path:
    """Write the votes contract atomically."""
    n_k, n_components = votes.selection_counts.shape
    for name in ("baseline", "certification_counts"):
        if getattr(votes, name).shape != (n_k, n_components):
            raise ValueError(f"votes.{name} has shape {getattr(votes, name).shape}, expected {(n_k, n_components)}")
    datasets = {
        "k_grid": np.asarray(votes.k_grid, dtype=np.float64), "baseline": votes.baseline.astype(bool),
        "selection_counts": votes.selection_counts.astype(np.int32),
        "certification_counts": votes.certification_counts.astype(np.int32),
        "groups": np.asarray(votes.groups, dtype=np.int32)}
    if votes.names is not None:
        if len(votes.names) != n_components:
            raise ValueError(f"votes.names has {len(votes.names)} names for {n_components} components")
        datasets["names"] = np.asarray([str(name) for name in votes.names], dtype=STR_DTYPE)
    return _write_file(path, datasets, votes.attrs)


def read_votes(path: str | os.PathLike) -> Votes:
    """Read and validate a votes file."""
    producer = "votes"
    with _open_for_read(path, producer) as handle:
        k_grid = _k_grid(handle, producer)
        selection = _dataset(handle, "selection_counts", "iu", (k_grid.shape[0], None), producer)
        shape = selection.shape
        votes = Votes(
            k_grid=k_grid,
            baseline=_dataset(handle, "baseline", "b", shape, producer),
            selection_counts=selection,
            certification_counts=_dataset(handle, "certification_counts", "iu", shape, producer),
            groups=_dataset(handle, "groups", "iu", (shape[1],), producer),
            attrs=_read_attrs(handle),
            names=tuple(_dataset(handle, "names", "str", (shape[1],), producer)) if "names" in handle else None,
        )
        for key in ("p_del", "n0", "n", "seed", "n_examples"):
            if key not in votes.attrs:
                raise StoreError(f"{path}: attribute '{key}' is missing; rerun the votes stage")
        return votes


# --------------------------------------------------------------------------- certificates


def write_certificates(path: str | os.PathLike, certificates: Certificates) -> Path:
    """Write the certificates contract atomically."""
    shape = certificates.decision.shape
    for name in ("majority", "pvalue"):
        if getattr(certificates, name).shape != shape:
            raise ValueError(f"certificates.{name} has shape {getattr(certificates, name).shape}, expected {shape}")
    return _write_file(path, {
        "k_grid": np.asarray(certificates.k_grid, dtype=np.float64), "decision": certificates.decision.astype(np.int8),
        "majority": certificates.majority.astype(bool), "pvalue": certificates.pvalue.astype(np.float64)},
        certificates.attrs)


def read_certificates(path: str | os.PathLike) -> Certificates:
    """Read and validate a certificates file."""
    producer = "certification"
    with _open_for_read(path, producer) as handle:
        k_grid = _k_grid(handle, producer)
        decision = _dataset(handle, "decision", "i", (k_grid.shape[0], None), producer)
        if decision.size and not np.isin(decision, (-1, 0, 1)).all():
            raise StoreError(f"{path}: dataset 'decision' holds values outside {{1, 0, -1}}; rerun certification")
        certificates = Certificates(
            k_grid=k_grid,
            decision=decision.astype(np.int8),
            majority=_dataset(handle, "majority", "b", decision.shape, producer),
            pvalue=_dataset(handle, "pvalue", "f", decision.shape, producer),
            attrs=_read_attrs(handle),
        )
        for key in ("tau", "alpha", "correction", "radius"):
            if key not in certificates.attrs:
                raise StoreError(f"{path}: attribute '{key}' is missing; rerun the certification stage")
        return certificates


# --------------------------------------------------------------------------- certificate (public API)

#: settings stored as attributes of a :class:`certified_circuits.api.Certificate` file
SETTING_KEYS = ("p_del", "n0", "n", "seed", "tau", "alpha", "correction")


def write_certificate(path: str | os.PathLike, certificate: Any) -> Path:
    """Write a :class:`certified_circuits.api.Certificate` atomically, settings included (``cert.save``).

    The file holds ``decision``, ``pvalue``, ``majority``, ``baseline``, ``selection_counts`` and
    ``certification_counts`` (the certificate's shape, ``[U]`` or ``[nK, U]``), ``k_grid``, ``groups`` and
    ``names`` (str ``[U]``) when known, and attributes ``p_del, n0, n, seed, tau, alpha, correction, radius, n_examples`` plus
    the certificate's own ``attrs``. With a K grid (and groups) it satisfies both the votes and the
    certificates contracts above, so :func:`read_votes` and :func:`read_certificates` read it too.

    Returns:
        The path written.
    """
    shape = certificate.decision.shape
    arrays = {"decision": certificate.decision.astype(np.int8), "pvalue": certificate.pvalue.astype(np.float64),
              "majority": certificate.majority.astype(bool), "baseline": certificate.baseline.astype(bool),
              "selection_counts": certificate.selection_counts.astype(np.int32),
              "certification_counts": certificate.certification_counts.astype(np.int32)}
    for name, data in arrays.items():
        if data.shape != shape:
            raise ValueError(f"certificate.{name} has shape {data.shape}, expected {shape}")
    if certificate.k_grid is not None:
        arrays["k_grid"] = np.asarray(certificate.k_grid, dtype=np.float64)
    if certificate.groups is not None:
        arrays["groups"] = np.asarray(certificate.groups, dtype=np.int32)
    names = getattr(certificate, "names", None)
    if names is not None:
        if len(names) != shape[-1]:
            raise ValueError(f"certificate.names has {len(names)} names for {shape[-1]} components")
        arrays["names"] = np.asarray([str(name) for name in names], dtype=STR_DTYPE)
    setting = certificate.setting
    return _write_file(path, arrays, {**certificate.attrs, "kind": "certificate",
                                      **{key: getattr(setting, key) for key in SETTING_KEYS},
                                      "radius": certificate.radius, "n_examples": int(certificate.n_examples)})


def read_certificate(path: str | os.PathLike) -> dict[str, Any]:
    """Read and validate a file written by :func:`write_certificate`.

    Returns:
        The fields of :class:`certified_circuits.api.Certificate` (``Certificate.load`` builds it):
        the six arrays, ``setting`` (a dict of the :data:`SETTING_KEYS`), ``n_examples``, ``k_grid``,
        ``groups`` and ``names`` (None when absent: files written before names existed) and ``attrs`` (the caller's labels).

    Raises:
        StoreError: the file is missing, damaged, or not a certificate; the message names the fix.
    """
    producer = "certify_algorithm/certify_scores (Certificate.save)"
    with _open_for_read(path, producer) as handle:
        attrs = _read_attrs(handle)
        missing = [key for key in (*SETTING_KEYS, "n_examples") if key not in attrs]
        if missing or "decision" not in handle:
            raise StoreError(f"{path}: not a file written by Certificate.save (missing {missing or ['decision']}); "
                             "write it with cert.save(path)")
        decision = _dataset(handle, "decision", "i", (None,) * handle["decision"].ndim, producer)
        if decision.ndim not in (1, 2) or not np.isin(decision, (-1, 0, 1)).all():
            raise StoreError(f"{path}: dataset 'decision' must be [U] or [nK, U] in {{1, 0, -1}}")
        shape = decision.shape
        fields: dict[str, Any] = {
            "decision": decision.astype(np.int8),
            "pvalue": _dataset(handle, "pvalue", "f", shape, producer),
            "selection_counts": _dataset(handle, "selection_counts", "iu", shape, producer).astype(np.int32),
            "certification_counts": _dataset(handle, "certification_counts", "iu", shape, producer).astype(np.int32),
            "majority": _dataset(handle, "majority", "b", shape, producer),
            "baseline": _dataset(handle, "baseline", "b", shape, producer),
            "k_grid": _dataset(handle, "k_grid", "f", (shape[0],), producer) if "k_grid" in handle else None,
            "groups": _dataset(handle, "groups", "iu", (shape[-1],), producer) if "groups" in handle else None,
            "names": tuple(_dataset(handle, "names", "str", (shape[-1],), producer)) if "names" in handle else None,
            "setting": {key: attrs.pop(key) for key in SETTING_KEYS},
            "n_examples": int(attrs.pop("n_examples")),
        }
        for key in ("radius", "package_version", "kind"):
            attrs.pop(key, None)
        fields["attrs"] = attrs
        return fields
