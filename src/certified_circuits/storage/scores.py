"""Score files of ``certify-scores``: per-example scores ``[N, U]`` read from any file by its suffix (``.npy``,
``.npz``, ``.pt``/``.pth``, an attribution file or any HDF5: :func:`read_scores`), with the groups and names the file
holds or a ``--groups`` / ``--names`` file gives (:func:`read_groups`, :func:`read_names`), each checked against the
scores (:func:`checked_scores`, :func:`checked_groups`, :func:`checked_names`). A file that cannot serve raises
:class:`ScoreFileError`, whose message names the file and the fix (the command line shows it and exits 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from certified_circuits.storage.arrays import ArrayFileError, read_npy, read_npz


class ScoreFileError(ValueError):
    """A score, groups or names file that cannot serve; the message names the file, the problem and the fix."""


#: suffixes ``certify-scores`` reads
SCORE_SUFFIXES = (".npy", ".npz", ".pt", ".pth", ".h5", ".hdf5")


class Scores:
    """What a score file gives: the matrix, and its groups, names, ranking and labels when it holds them."""

    def __init__(self, scores: np.ndarray, groups: Any = None, names: Any = None, absolute: bool | None = None,
                 attrs: dict[str, Any] | None = None) -> None:
        self.scores, self.groups, self.names, self.absolute = scores, groups, names, absolute
        self.attrs = dict(attrs or {})


def _to_numpy(value: Any, what: str, path: Path) -> np.ndarray:
    if type(value).__module__.split(".")[0] == "torch":
        return value.detach().cpu().numpy()
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise ScoreFileError(f"{path}: {what} is not an array ({exc})") from exc


#: how a score file is written again, for the message of one that cannot be read (:mod:`.arrays`)
_NPY_FIX = "Write it again from your scores with numpy.save(PATH, scores) (a float array [N, U])."


_NPZ_FIX = ("Write it again from your scores with numpy.savez(PATH, scores=S, groups=G, names=N) (groups and names "
            "optional; numbers and strings, no Python objects).")


def _read_npy(path: Path) -> Scores:
    try:
        return Scores(read_npy(path, _NPY_FIX))
    except ArrayFileError as exc:
        raise ScoreFileError(str(exc)) from None


def _read_npz(path: Path) -> Scores:
    try:
        arrays = read_npz(path, _NPZ_FIX)
    except ArrayFileError as exc:
        raise ScoreFileError(str(exc)) from None
    if "scores" not in arrays:
        raise ScoreFileError(f"{path} has no array 'scores' (it holds {list(arrays)}); write it with "
                         "numpy.savez(path, scores=S, groups=G, names=N) (groups and names optional)")
    return Scores(arrays["scores"], arrays.get("groups"), arrays.get("names"))


def _read_torch(path: Path) -> Scores:
    import torch

    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # pickle and zip errors of every kind: the message is the user's fix
        raise ScoreFileError(f"{path}: torch.load(weights_only=True) cannot read it ({type(exc).__name__}: {exc}); save "
                         "a tensor, or a dict {'scores': tensor, 'groups': ..., 'names': [...]}, with torch.save") \
            from exc
    if isinstance(loaded, dict):
        if "scores" not in loaded:
            raise ScoreFileError(f"{path} holds a dict without 'scores' (keys {sorted(map(str, loaded))}); save "
                             "{'scores': tensor [N, U], 'groups': ..., 'names': [...]} (groups and names optional)")
        groups = loaded.get("groups")
        return Scores(_to_numpy(loaded["scores"], "'scores'", path),
                      None if groups is None else _to_numpy(groups, "'groups'", path), loaded.get("names"))
    if type(loaded).__module__.split(".")[0] != "torch":
        raise ScoreFileError(f"{path} holds a {type(loaded).__name__}, not a tensor or a dict with 'scores'; save "
                         "torch.save(scores, path) or torch.save({'scores': scores}, path)")
    return Scores(_to_numpy(loaded, "the tensor", path))


def is_attribution_file(handle: Any) -> bool:
    """Whether an open HDF5 file is an attribution file (``scores/<scorer>`` and ``components/group``)."""
    import h5py

    return isinstance(handle.get("scores"), h5py.Group) and "components/group" in handle


def _read_h5(path: Path, scorer: str | None, dataset: str) -> Scores:
    import h5py

    from certified_circuits.storage.store import read_attributions

    try:
        with h5py.File(path, "r") as handle:
            if not is_attribution_file(handle):
                if scorer is not None:
                    raise ScoreFileError(f"{path} is not an attribution file (no 'scores/<scorer>' and "
                                     "'components/group'): --scorer applies to attribution files; use --dataset NAME")
                found = handle.get(dataset)
                if not isinstance(found, h5py.Dataset):
                    names: list[str] = []
                    handle.visititems(lambda name, item: names.append(name) if isinstance(item, h5py.Dataset) else None)
                    raise ScoreFileError(f"{path} has no dataset '{dataset}' (it holds {names or 'no datasets'}); "
                                     "name the score matrix with --dataset NAME")
                return Scores(np.asarray(found[()]), attrs={"dataset": dataset})
    except OSError as exc:
        raise ScoreFileError(f"{path}: not a readable HDF5 file ({exc})") from exc
    attributions = read_attributions(path)
    held = sorted(attributions.scores)
    if scorer is None:
        if len(held) > 1:
            raise ScoreFileError(f"{path} holds several score matrices {held}: choose one with --scorer")
        scorer = held[0]
    if scorer not in attributions.scores:
        raise ScoreFileError(f"{path} has no scorer '{scorer}'; it holds {held}: pass --scorer {held[0]}"
                         + (f" (or one of {held[1:]})" if len(held) > 1 else ""))
    labels = {key: attributions.attrs[key] for key in ("model", "concept", "split", "experiment")
              if key in attributions.attrs}
    return Scores(attributions.scores[scorer], attributions.groups, list(attributions.names),
                  attributions.absolute(scorer), {"scorer": scorer, **labels})


def read_scores(path: Path, scorer: str | None = None, dataset: str = "scores") -> Scores:
    """The scores (and groups, names, ranking when the file holds them) of a score file, by its suffix."""
    suffix = path.suffix.lower()
    if suffix == ".npy":
        found = _read_npy(path)
    elif suffix == ".npz":
        found = _read_npz(path)
    elif suffix in (".pt", ".pth"):
        found = _read_torch(path)
    elif suffix in (".h5", ".hdf5"):
        found = _read_h5(path, scorer, dataset)
    else:
        raise ScoreFileError(f"{path}: unknown score file type '{suffix}'; give one of {', '.join(SCORE_SUFFIXES)}")
    if scorer is not None and suffix not in (".h5", ".hdf5"):
        raise ScoreFileError(f"--scorer {scorer} applies to attribution files (.h5), not to {path.name}: drop it")
    return found


def read_groups(path: Path) -> np.ndarray:
    """The group id of each component from ``path``: a ``.npy``, or a text file of integers (whitespace, comma or
    line separated)."""
    if path.suffix.lower() == ".npy":
        try:
            return read_npy(path, "Write it again with numpy.save(PATH, groups) (one integer per component).")
        except ArrayFileError as exc:
            raise ScoreFileError(str(exc)) from None
    values = []
    for line_number, line in enumerate(path.read_text().splitlines(), 1):
        for token in line.replace(",", " ").split():
            try:
                values.append(int(token))
            except ValueError as exc:
                raise ScoreFileError(f"{path}:{line_number}: '{token}' is not an integer group id; a groups file holds one "
                                 "integer per component (whitespace, comma or line separated), or is a .npy") from exc
    return np.asarray(values, dtype=np.int64)


def read_names(path: Path) -> list[str]:
    """The component names of ``path``, one a line (trailing blank lines dropped)."""
    lines = path.read_text().splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def checked_scores(scores: np.ndarray, path: Path) -> np.ndarray:
    """``scores`` if it is a finite numeric ``[n_examples, n_components]`` matrix; ScoreFileError naming the fix."""
    if scores.dtype.kind not in "fiu":
        raise ScoreFileError(f"{path}: scores have dtype {scores.dtype}; they must be numbers [n_examples, n_components]")
    if scores.ndim != 2 or min(scores.shape) < 1:
        fix = " (one example? reshape to [1, U])" if scores.ndim == 1 else ""
        raise ScoreFileError(f"{path}: scores have shape {list(scores.shape)}; they must be a non-empty 2-D array "
                         f"[n_examples, n_components]{fix}")
    bad = ~np.isfinite(scores)
    if bad.any():
        example, component = (int(i) for i in np.argwhere(bad)[0])
        raise ScoreFileError(f"{path}: scores hold {int(bad.sum())} NaN or infinite value(s) (the first at example "
                         f"{example}, component {component}); remove those examples or impute the values")
    return scores


def checked_groups(groups: Any, n_components: int, where: str) -> np.ndarray:
    """``groups`` as 1-D integers, one per component (whole floats accepted); ScoreFileError naming the fix."""
    groups = np.asarray(groups)
    if groups.dtype.kind == "f" and np.isfinite(groups).all() and (groups == np.round(groups)).all():
        groups = groups.astype(np.int64)
    if groups.dtype.kind not in "iu" or groups.ndim != 1:
        raise ScoreFileError(f"{where}: groups must be 1-D integers (one group id per component), got dtype "
                         f"{groups.dtype} and shape {list(groups.shape)}")
    if groups.shape[0] != n_components:
        raise ScoreFileError(f"{where}: {groups.shape[0]} group ids for {n_components} components (the scores' second "
                         "axis); give one group id per component")
    return groups


def checked_names(names: Any, n_components: int, where: str) -> tuple[str, ...]:
    """``names`` as strings, one per component; ScoreFileError naming the fix."""
    names = [str(name) for name in np.asarray(names, dtype=object).ravel()] if names is not None else []
    if len(names) != n_components:
        raise ScoreFileError(f"{where}: {len(names)} component names for {n_components} components (the scores' second "
                         "axis); give one name per component (one per line in a --names file)")
    return tuple(names)
