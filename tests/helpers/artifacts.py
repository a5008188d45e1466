"""Result trees and tables compared: a table against its golden copy (integers and text exactly, floats within a
stated tolerance), and two result trees file by file (content, not container metadata or where the tree lies)."""

from __future__ import annotations

import re
from pathlib import Path

#: Golden tolerance for float columns. Integers (counts, decisions, K, sizes), strings and per-example
#: outcome strings compare exactly; floats compare with ``|actual - expected| <= FLOAT_ATOL + FLOAT_RTOL *
#: |expected|``. Floats are machine-specific: torch's CPU kernels (BLAS gemm, reductions) round by the
#: CPU's instruction set, so on another CPU the language ``logit_diff`` columns differ in the 7th
#: significant digit (measured: 0.008899528533 vs 0.008899522324, relative 7e-7). 1e-5 leaves ten times
#: that margin and still catches any change of method (those move values in the 2nd-4th digit).
FLOAT_RTOL = 1e-5
FLOAT_ATOL = 1e-8


def assert_table_matches_golden(actual, expected, where: str) -> None:
    """Integer, boolean and text columns equal exactly; float columns within FLOAT_RTOL / FLOAT_ATOL."""
    import numpy as np
    import pandas as pd

    columns = list(expected.columns)
    assert set(columns) <= set(actual.columns), (where, set(columns) - set(actual.columns))
    assert len(actual) == len(expected), (where, len(actual), len(expected))
    key = [c for c in columns if not pd.api.types.is_float_dtype(expected[c])]
    order = lambda frame: frame[columns].sort_values(key or columns, kind="stable").reset_index(drop=True)
    actual, expected = order(actual), order(expected)
    for column in columns:
        a, e = actual[column], expected[column]
        if pd.api.types.is_float_dtype(e):
            np.testing.assert_allclose(a.to_numpy(float), e.to_numpy(float), rtol=FLOAT_RTOL, atol=FLOAT_ATOL,
                                       equal_nan=True, err_msg=f"{where}: column {column}")
        else:
            pd.testing.assert_series_equal(a, e, check_dtype=False, obj=f"{where}: column {column}")


#: Result files whose content depends on the clock (wall times, run ids) or on plotting back ends.
CLOCK_DEPENDENT = ("logs", "benchmarks", "mlflow", "tracking", "figures")


def _without_clock(value: object) -> object:
    """JSON content with wall-time entries (keys naming seconds or times) removed."""
    if isinstance(value, dict):
        return {k: _without_clock(v) for k, v in value.items() if not re.search(r"second|time|_s$", k)}
    if isinstance(value, list):
        return [_without_clock(v) for v in value]
    return value


def artifact_content(path: Path, root: Path) -> object:
    """What a result file holds, independent of container metadata (zip and HDF5 timestamps) and of
    where the results tree lies (provenance attributes and columns name input paths under ``root``)."""
    return _relative(_relative(_content(path), str(root.resolve())), str(root))


def _relative(value: object, root: str) -> object:
    if isinstance(value, str):
        return value.replace(root, "<results>")
    if isinstance(value, dict):
        return {k: _relative(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [_relative(v, root) for v in value]
    return value


def _content(path: Path) -> object:
    import h5py
    import numpy as np
    import pandas as pd
    import torch

    if path.suffix == ".csv":
        return pd.read_csv(path).to_csv()
    if path.suffix == ".npz":
        with np.load(path) as data:
            return {k: data[k].tobytes() for k in data.files}
    if path.suffix == ".h5":
        items: dict[str, object] = {}
        with h5py.File(path, "r") as f:
            def record(name: str, obj: object) -> None:
                if isinstance(obj, h5py.Dataset):
                    value = np.asarray(obj[()])
                    items[name] = value.tolist() if value.dtype == object else (value.dtype.str, value.tobytes())

            f.visititems(record)
            items["attrs"] = {k: str(v) for k, v in f.attrs.items() if not re.search(r"second|time", k)}
        return items
    if path.suffix == ".pt":
        state = torch.load(path, map_location="cpu", weights_only=False)
        state = state.get("state_dict", state) if isinstance(state, dict) else state
        return {k: (v.numpy().tobytes() if torch.is_tensor(v) else repr(v)) for k, v in state.items()}
    if path.suffix == ".json":
        import json

        return _without_clock(json.loads(path.read_text()))
    return path.read_bytes()


def assert_identical_artifacts(first: Path, second: Path, subset: bool = False) -> int:
    """Every data file of two result trees is equal (clock-dependent folders and timing tables excepted).

    Args:
        first: the reference tree.
        second: the tree checked against it.
        subset: ``second`` ran part of ``first``'s DAG: its data files must all be in ``first`` (and equal there),
            ``first`` may hold more. Otherwise both hold the same files.

    Returns:
        How many files were compared."""
    def data_files(root: Path) -> set[Path]:
        return {p.relative_to(root) for p in root.rglob("*") if p.is_file()
                and not p.relative_to(root).parts[0].lstrip(".").startswith(CLOCK_DEPENDENT) and "runtime" not in p.name
                and p.suffix in (".csv", ".npz", ".h5", ".pt", ".json", ".jsonl", ".safetensors", ".txt")}
    files = data_files(second)
    reference = data_files(first)
    assert files <= reference if subset else files == reference, sorted(files - reference if subset else files ^ reference)[:10]
    different = [str(p) for p in sorted(files)
                 if artifact_content(first / p, first) != artifact_content(second / p, second)]
    assert not different, f"{len(different)} of {len(files)} artifacts differ: {different[:10]}"
    return len(files)
