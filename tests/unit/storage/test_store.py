"""HDF5 contracts: round trips, validation errors that name the file and the fix, atomic writes."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from certified_circuits.core.certification import certify_votes
from certified_circuits.core.smoothing import compute_votes
from certified_circuits.storage.store import (
    StoreError,
    atomic_path,
    read_attributions,
    read_certificates,
    read_votes,
    write_attributions,
    write_certificates,
    write_votes,
)


def _attributions(path: Path, n_examples: int = 6, n_components: int = 8) -> Path:
    rng = np.random.default_rng(0)
    return write_attributions(
        path,
        scores={"relevance": rng.normal(size=(n_examples, n_components)), "activation": rng.random((n_examples, n_components))},
        groups=np.repeat([0, 1], n_components // 2),
        names=[f"layer{i // 4 + 1}.{i % 4}" for i in range(n_components)],
        example_ids=[f"img{i}" for i in range(n_examples)],
        attrs={"model": "toy", "concept": "c0", "split": "concept"},
        extras={"spurious_index": np.linspace(0, 1, n_components)},
    )


def test_attributions_round_trip(tmp_path: Path) -> None:
    path = _attributions(tmp_path / "a.h5")
    loaded = read_attributions(path)
    assert set(loaded.scores) == {"relevance", "activation"}
    assert loaded.scores["relevance"].dtype == np.float32 and loaded.scores["relevance"].shape == (6, 8)
    assert loaded.groups.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert loaded.names[5] == "layer2.1" and loaded.example_ids[-1] == "img5"
    assert loaded.attrs["concept"] == "c0" and "package_version" in loaded.attrs
    np.testing.assert_allclose(loaded.extras["spurious_index"], np.linspace(0, 1, 8))


def test_votes_and_certificates_round_trip(tmp_path: Path) -> None:
    attributions = read_attributions(_attributions(tmp_path / "a.h5"))
    votes = compute_votes(attributions.scores["relevance"], attributions.groups, [0.25, 0.5], 0.5, 20, 50, seed=3)
    write_votes(tmp_path / "v.h5", votes)
    loaded = read_votes(tmp_path / "v.h5")
    np.testing.assert_array_equal(loaded.certification_counts, votes.certification_counts)
    np.testing.assert_array_equal(loaded.baseline, votes.baseline)
    assert loaded.attrs["n"] == 50 and loaded.attrs["p_del"] == 0.5 and loaded.attrs["seed"] == 3
    certificates = certify_votes(loaded, tau=0.6, alpha=0.05)
    write_certificates(tmp_path / "c.h5", certificates)
    again = read_certificates(tmp_path / "c.h5")
    np.testing.assert_array_equal(again.decision, certificates.decision)
    assert again.attrs["radius"] == 0 and again.attrs["correction"] == "bonferroni"


def test_missing_file_names_the_stage(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"not found; run the votes stage"):
        read_votes(tmp_path / "nope.h5")


def test_truncated_file_is_reported_with_the_fix(tmp_path: Path) -> None:
    path = _attributions(tmp_path / "a.h5")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    with pytest.raises(StoreError, match=r"a\.h5.*(truncated or corrupt|cannot be read).*rerun"):
        read_attributions(path)


def test_missing_dataset_and_wrong_shape_are_named(tmp_path: Path) -> None:
    path = _attributions(tmp_path / "a.h5")
    with h5py.File(path, "a") as handle:
        del handle["examples/id"]
    with pytest.raises(StoreError, match="'examples/id' is missing"):
        read_attributions(path)
    path = _attributions(tmp_path / "b.h5")
    with h5py.File(path, "a") as handle:
        del handle["scores/relevance"]
        handle["scores/relevance"] = np.zeros((6, 7), dtype=np.float32)
    with pytest.raises(StoreError, match=r"'scores/relevance' has shape \[6, 7\], expected \[6, 8\]"):
        read_attributions(path)


def test_certificates_with_invalid_decisions_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "c.h5"
    with h5py.File(path, "w") as handle:
        handle["k_grid"] = np.array([0.5])
        handle["decision"] = np.array([[2, 0]], dtype=np.int8)
        handle["majority"] = np.zeros((1, 2), dtype=bool)
        handle["pvalue"] = np.zeros((1, 2))
        handle.attrs.update(tau=0.9, alpha=0.01, correction="bonferroni", radius=1)
    with pytest.raises(StoreError, match="outside"):
        read_certificates(path)


def test_atomic_path_leaves_nothing_behind_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "out.h5"
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("interrupted")
    assert not target.exists() and list(target.parent.iterdir()) == []
    with atomic_path(target) as tmp:
        tmp.write_text("whole")
    assert target.read_text() == "whole" and [p.name for p in target.parent.iterdir()] == ["out.h5"]


def test_writer_rejects_shape_mismatch_before_writing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="expected"):
        write_attributions(tmp_path / "x.h5", {"relevance": np.zeros((3, 4))}, np.zeros(5, dtype=int),
                           [str(i) for i in range(5)], ["a", "b", "c"], {})
    assert not (tmp_path / "x.h5").exists()


def test_corrupt_bytes_give_a_store_error_naming_the_file(tmp_path: Path) -> None:
    """Random bytes written over the inside of a valid file (not a truncation): every read either still
    succeeds or raises StoreError with the file's name, never a bare h5py KeyError/RuntimeError; and
    some of the 40 damaged files must be detected (else the test would prove nothing)."""
    import random

    from certified_circuits.storage.store import StoreError, read_attributions, write_attributions

    path = tmp_path / "a.h5"
    write_attributions(path, {"relevance": np.arange(40, dtype=float).reshape(5, 8)}, np.zeros(8, int),
                       [f"u{i}" for i in range(8)], [str(i) for i in range(5)], {"concept": "x"})
    clean = path.read_bytes()
    detected = 0
    for trial in range(40):
        data = bytearray(clean)
        rng = random.Random(trial)
        start = rng.randrange(256, len(data) - 128)
        data[start:start + 96] = bytes(rng.randrange(256) for _ in range(96))
        damaged = tmp_path / f"damaged{trial}.h5"
        damaged.write_bytes(bytes(data))
        try:
            read_attributions(damaged)
        except StoreError as error:
            assert str(damaged) in str(error) and "rerun" in str(error)
            detected += 1
    assert detected >= 5


@pytest.mark.parametrize("bad", [[0.5, float("nan")], [0.5, 7.0], [0.0, 0.5]])
def test_a_votes_file_with_an_invalid_k_grid_is_rejected_before_certification(tmp_path: Path, bad) -> None:
    """Bug report: ``certify`` accepted a votes file whose k_grid held NaN and 7.0."""
    from certified_circuits.cli.main import main

    votes = compute_votes(np.random.default_rng(0).normal(size=(6, 4)), np.zeros(4, int), [0.5, 1.0],
                          p_del=0.5, n0=5, n=20, seed=0)
    path = write_votes(tmp_path / "v.h5", votes)
    with h5py.File(path, "r+") as handle:
        handle["k_grid"][...] = np.array(bad)
    with pytest.raises(StoreError, match=r"dataset 'k_grid' is invalid .*\(0, 1\]"):
        read_votes(path)
    out = tmp_path / "c.h5"
    with pytest.raises(SystemExit) as exit_info:
        main(["certify", "--votes", str(path), "--tau", "0.9", "--alpha", "0.01", "--out", str(out)])
    assert exit_info.value.code == 2
    assert not out.exists()


def test_attributions_record_each_scorers_ranking(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    common = dict(groups=np.zeros(3, int), names=["a", "b", "c"], example_ids=["x", "y"], attrs={})
    path = write_attributions(tmp_path / "a.h5", scores={"eap_ig": rng.normal(size=(2, 3)), "act": rng.random((2, 3))},
                              rankings={"eap_ig": "absolute"}, **common)
    loaded = read_attributions(path)
    assert loaded.rankings == {"eap_ig": "absolute", "act": "signed"}
    assert loaded.absolute("eap_ig") and not loaded.absolute("act")
    with pytest.raises(ValueError, match="'signed' .* or 'absolute'"):
        write_attributions(tmp_path / "b.h5", scores={"s": rng.normal(size=(2, 3))}, rankings={"s": "abs"}, **common)
    with pytest.raises(ValueError, match="no scores"):
        write_attributions(tmp_path / "b.h5", scores={"s": rng.normal(size=(2, 3))}, rankings={"t": "signed"}, **common)
    with h5py.File(path, "r+") as handle:  # a file of an older version: no ranking recorded
        del handle["scores/eap_ig"].attrs["ranking"]
    with pytest.raises(StoreError, match="ranking convention.*rerun the attribution stage"):
        read_attributions(path)


def test_votes_rank_as_the_attribution_file_says(tmp_path: Path) -> None:
    """Votes of an 'absolute' scorer rank |mean|: a strongly negative component is in the top-1 circuit."""
    from certified_circuits.cli.main import main
    from certified_circuits.storage.store import read_votes

    scores = np.tile([[-5.0, 1.0, 0.5, 0.2]], (4, 1))
    common = dict(groups=np.zeros(4, int), names=list("abcd"), example_ids=list("wxyz"), attrs={"concept": "c"})
    baselines = {}
    for ranking in ("signed", "absolute"):
        path = write_attributions(tmp_path / f"{ranking}.h5", scores={"s": scores}, rankings={"s": ranking}, **common)
        out = tmp_path / f"{ranking}_votes.h5"
        assert main(["votes", "--attributions", str(path), "--scorer", "s", "--k-grid", "0.25", "--p-del", "0.5",
                     "--n0", "5", "--n", "10", "--out", str(out)]) == 0
        baselines[ranking] = read_votes(out).baseline[0].tolist()
    assert baselines == {"signed": [False, True, False, False], "absolute": [True, False, False, False]}
