"""``certified-circuits certify-scores`` and ``inspect`` (issue 29, item 2), end to end in-process.

Every input format must give exactly the decisions of :func:`certified_circuits.certify_scores` on the same
array; the setting is sized with :func:`certified_circuits.plan` so that both sides are certified (a fixture
that certifies nothing would make the equality vacuous). ``inspect``'s printed counts are checked against
counts computed here from the arrays, not by the code under test.
"""

from __future__ import annotations

from dataclasses import replace

import re
import warnings
from pathlib import Path

import h5py
import numpy as np
import pytest

import certified_circuits as cc
from certified_circuits.cli.main import main
from certified_circuits.core.certification import certify_votes
from certified_circuits.core.smoothing import compute_votes
from certified_circuits.reports.flags import certificate_flags
from certified_circuits.storage.store import write_attributions, write_certificates, write_votes
from tests.helpers.paths import ROOT

N, U, GROUPS = 50, 64, np.repeat(np.arange(4), 16)
K_GRID = [0.25, 0.5]
SETTING = cc.Setting(p_del=0.6, n0=100, n=400, seed=3, tau=0.9, alpha=0.01)
FLAGS = ["--p-del", "0.6", "--n0", "100", "--n", "400", "--seed", "3", "--tau", "0.9", "--alpha", "0.01",
         "--k-grid", "0.25", "0.5"]
NAMES = [f"layer{g}.ch{c}" for g in range(4) for c in range(16)]


def _scores(dtype=np.float64) -> np.ndarray:
    rng = np.random.default_rng(0)
    return (rng.normal(size=(N, U)) + np.linspace(3, -3, U)).astype(dtype)


def _direct(scores: np.ndarray, groups=GROUPS, absolute: bool = False) -> cc.Certificate:
    with warnings.catch_warnings():
        warnings.simplefilter("error", cc.PlanWarning)  # the fixture's setting plans ok
        return cc.certify_scores(scores, groups, K_GRID, SETTING, absolute=absolute)


def test_the_setting_certifies_both_sides() -> None:
    assert cc.plan(N, U, SETTING).verdict == "ok"
    cert = _direct(_scores())
    assert cert.certified_in.sum() > 0 and cert.certified_out.sum() > 0


def _write(kind: str, root: Path) -> tuple[list[str], np.ndarray, bool]:
    """A score file of ``kind`` in ``root``: its certify-scores arguments, the array it holds, and its ranking."""
    groups_txt = root / "groups.txt"
    groups_txt.write_text("\n".join(" ".join(map(str, GROUPS[i:i + 16])) for i in range(0, U, 16)) + "\n")
    groups_npy = root / "groups.npy"
    np.save(groups_npy, GROUPS)
    scores = _scores()
    if kind == "npy":
        np.save(root / "s.npy", scores)
        return ["--scores", str(root / "s.npy"), "--groups", str(groups_npy)], scores, False
    if kind == "npz":
        np.savez(root / "s.npz", scores=scores, groups=GROUPS, names=np.array(NAMES))
        return ["--scores", str(root / "s.npz")], scores, False
    if kind in ("pt-tensor", "pt-dict"):
        torch = pytest.importorskip("torch")
        tensor = torch.from_numpy(scores.astype(np.float32))
        path = root / ("s.pt" if kind == "pt-tensor" else "s.pth")
        if kind == "pt-tensor":
            torch.save(tensor, path)
            return ["--scores", str(path), "--groups", str(groups_txt)], tensor.numpy(), False
        torch.save({"scores": tensor, "groups": torch.from_numpy(GROUPS), "names": NAMES}, path)
        return ["--scores", str(path)], tensor.numpy(), False
    if kind == "h5-plain":
        with h5py.File(root / "s.h5", "w") as handle:
            handle.create_dataset("matrix", data=scores)
        return ["--scores", str(root / "s.h5"), "--dataset", "matrix", "--groups", str(groups_txt)], scores, False
    assert kind == "attributions"
    other = np.random.default_rng(1).normal(size=(N, U))
    path = write_attributions(root / "a.h5", {"relevance": scores, "eap_ig": other}, GROUPS, NAMES,
                              [str(i) for i in range(N)], {"concept": "c0", "model": "m"},
                              rankings={"eap_ig": "absolute"})
    return ["--scores", str(path), "--scorer", "relevance"], scores.astype(np.float32), False


@pytest.mark.parametrize("kind", ["npy", "npz", "pt-tensor", "pt-dict", "h5-plain", "attributions"])
def test_every_format_gives_the_decisions_of_certify_scores(kind: str, tmp_path: Path, capsys) -> None:
    args, held, absolute = _write(kind, tmp_path)
    out = tmp_path / "cert.h5"
    assert main(["certify-scores", *args, *FLAGS, "--out", str(out)]) == 0
    expected = _direct(held, absolute=absolute)
    got = cc.Certificate.load(out)
    assert got.decision.dtype == np.int8 and np.array_equal(got.decision, expected.decision)
    assert np.array_equal(got.certification_counts, expected.certification_counts)
    assert np.array_equal(got.selection_counts, expected.selection_counts)
    assert (got.decision == 1).sum() > 0 and (got.decision == 0).sum() > 0
    assert got.setting == SETTING and np.array_equal(got.groups, GROUPS)
    assert got.attrs["plan_verdict"] == "ok" and got.attrs["plan_warnings"] == ""
    if kind in ("npz", "pt-dict", "attributions"):
        assert got.names == tuple(NAMES)
    err = capsys.readouterr().err
    for k, row in zip(K_GRID, expected.decision):
        assert f"K {k:g}: {(row == 1).sum()} in, {(row == 0).sum()} out, {(row == -1).sum()} abstain" in err
    assert f"radius {expected.radius}" in err


def test_an_absolute_attribution_scorer_ranks_by_the_absolute_mean(tmp_path: Path) -> None:
    _write("attributions", tmp_path)
    out = tmp_path / "abs.h5"
    assert main(["certify-scores", "--scores", str(tmp_path / "a.h5"), "--scorer", "eap_ig", *FLAGS,
                 "--n", "1000", "--out", str(out)]) == 0
    other = np.random.default_rng(1).normal(size=(N, U)).astype(np.float32)
    expected = cc.certify_scores(other, GROUPS, K_GRID, SETTING.replace(n=1000), absolute=True)
    got = cc.Certificate.load(out)
    assert got.attrs["absolute"] and got.attrs["scorer"] == "eap_ig"
    assert np.array_equal(got.decision, expected.decision)


def test_defaults_are_settings_and_a_names_file_names_the_components(tmp_path: Path) -> None:
    np.save(tmp_path / "s.npy", _scores())
    (tmp_path / "names.txt").write_text("\n".join(NAMES) + "\n")
    out = tmp_path / "cert.h5"
    assert main(["certify-scores", "--scores", str(tmp_path / "s.npy"), "--names", str(tmp_path / "names.txt"),
                 "--out", str(out)]) == 0
    got = cc.Certificate.load(out)
    assert got.setting == cc.Setting() and got.names == tuple(NAMES)
    from certified_circuits.cli.scores import DEFAULT_K_GRID

    expected = cc.certify_scores(_scores(), np.zeros(U, dtype=int), list(DEFAULT_K_GRID), cc.Setting())
    assert np.array_equal(got.decision, expected.decision) and np.array_equal(got.k_grid, DEFAULT_K_GRID)


def test_a_vacuous_setting_stops_before_writing(tmp_path: Path, capsys) -> None:
    np.save(tmp_path / "s.npy", _scores())
    out = tmp_path / "cert.h5"
    with pytest.raises(SystemExit) as stop:
        main(["certify-scores", "--scores", str(tmp_path / "s.npy"), "--n", "10", "--out", str(out)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "min_samples" in err and "--allow-vacuous" in err and "Traceback" not in err
    assert not out.exists()


def test_allow_vacuous_writes_the_verdict_that_reports_flag(tmp_path: Path, caplog) -> None:
    np.save(tmp_path / "s.npy", _scores())
    out = tmp_path / "cert.h5"
    assert main(["certify-scores", "--scores", str(tmp_path / "s.npy"), "--n", "10", "--allow-vacuous",
                 "--out", str(out)]) == 0
    got = cc.Certificate.load(out)
    assert got.attrs["plan_verdict"] == "vacuous" and "min_samples" in got.attrs["plan_warnings"]
    assert (got.decision == -1).all()
    flags = certificate_flags(got.decision, {**got.attrs, **got.setting.__dict__, "n_examples": N}, "scores")
    assert {f.code for f in flags} == {"plan", "certified-nothing"}
    assert "plan (vacuous): nothing can be certified" in caplog.text  # logged on stderr


def test_a_marginal_setting_warns_on_stderr_and_is_recorded(tmp_path: Path, caplog) -> None:
    np.save(tmp_path / "s.npy", _scores())
    out = tmp_path / "cert.h5"
    assert main(["certify-scores", "--scores", str(tmp_path / "s.npy"), "--p-del", "0.95", "--out", str(out)]) == 0
    expected = cc.plan(N, U, cc.Setting(p_del=0.95))
    assert expected.verdict == "marginal"
    got = cc.Certificate.load(out)
    assert got.attrs["plan_verdict"] == "marginal"
    assert got.attrs["plan_warnings"] == "\n".join(expected.problems())
    assert "plan (marginal): IN cannot be certified" in caplog.text  # the PlanWarning, logged on stderr


def _bad(tmp_path: Path, case: str) -> tuple[list[str], str]:
    scores = _scores()
    if case == "missing":
        return ["--scores", str(tmp_path / "nowhere.npy")], "file not found"
    if case == "one-dimensional":
        np.save(tmp_path / "s.npy", scores[0])
        return ["--scores", str(tmp_path / "s.npy")], "must be a non-empty 2-D array [n_examples, n_components]"
    if case == "nan":
        scores[2, 5] = np.nan
        np.save(tmp_path / "s.npy", scores)
        return ["--scores", str(tmp_path / "s.npy")], "1 NaN or infinite value(s) (the first at example 2, component 5)"
    if case == "groups-length":
        np.save(tmp_path / "s.npy", scores)
        np.save(tmp_path / "g.npy", GROUPS[:10])
        return ["--scores", str(tmp_path / "s.npy"), "--groups", str(tmp_path / "g.npy")], \
            "10 group ids for 64 components"
    if case == "groups-text":
        np.save(tmp_path / "s.npy", scores)
        (tmp_path / "g.txt").write_text("0 1\n2 x\n")
        return ["--scores", str(tmp_path / "s.npy"), "--groups", str(tmp_path / "g.txt")], \
            "g.txt:2: 'x' is not an integer group id"
    if case == "names-length":
        np.savez(tmp_path / "s.npz", scores=scores, names=np.array(NAMES[:3]))
        return ["--scores", str(tmp_path / "s.npz")], "3 component names for 64 components"
    if case == "npz-without-scores":
        np.savez(tmp_path / "s.npz", matrix=scores)
        return ["--scores", str(tmp_path / "s.npz")], "has no array 'scores' (it holds ['matrix'])"
    if case == "unknown-scorer":
        _write("attributions", tmp_path)
        return ["--scores", str(tmp_path / "a.h5"), "--scorer", "ig"], \
            "has no scorer 'ig'; it holds ['eap_ig', 'relevance']"
    if case == "several-scorers":
        _write("attributions", tmp_path)
        return ["--scores", str(tmp_path / "a.h5")], "holds several score matrices ['eap_ig', 'relevance']: " \
                                                     "choose one with --scorer"
    if case == "h5-without-dataset":
        with h5py.File(tmp_path / "s.h5", "w") as handle:
            handle.create_dataset("matrix", data=scores)
        return ["--scores", str(tmp_path / "s.h5")], "has no dataset 'scores' (it holds ['matrix'])"
    if case == "absolute-against-the-file":
        _write("attributions", tmp_path)
        return ["--scores", str(tmp_path / "a.h5"), "--scorer", "relevance", "--absolute"], "drop --absolute"
    if case == "empty-npy":
        (tmp_path / "s.npy").write_bytes(b"")
        return ["--scores", str(tmp_path / "s.npy")], "s.npy: cannot be read as numeric arrays: it is empty (0 bytes)"
    if case == "not-a-tensor":
        pytest.importorskip("torch")
        (tmp_path / "s.pt").write_bytes(b"garbage")
        return ["--scores", str(tmp_path / "s.pt")], "torch.load(weights_only=True) cannot read it"
    assert case == "bad-suffix"
    (tmp_path / "s.csv").write_text("1,2\n")
    return ["--scores", str(tmp_path / "s.csv")], "unknown score file type '.csv'"


@pytest.mark.parametrize("case", ["missing", "one-dimensional", "nan", "groups-length", "groups-text", "names-length",
                                  "npz-without-scores", "unknown-scorer", "several-scorers", "h5-without-dataset",
                                  "absolute-against-the-file", "empty-npy", "not-a-tensor", "bad-suffix"])
def test_bad_input_is_named_before_any_work(case: str, tmp_path: Path, capsys) -> None:
    args, message = _bad(tmp_path, case)
    out = tmp_path / "cert.h5"
    with pytest.raises(SystemExit) as stop:
        main(["certify-scores", *args, "--out", str(out)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists()


# ---------------------------------------------------------------------------------------------- inspect

COUNTS = re.compile(r"^  K ([0-9.e-]+): (\d+) in, (\d+) out, (\d+) abstain$", re.M)


def _printed_counts(text: str) -> dict[float, tuple[int, int, int]]:
    return {float(k): (int(i), int(o), int(a)) for k, i, o, a in COUNTS.findall(text)}


def _counts(decision: np.ndarray, k_grid) -> dict[float, tuple[int, int, int]]:
    return {float(k): (int((row == 1).sum()), int((row == 0).sum()), int((row == -1).sum()))
            for k, row in zip(k_grid, decision)}


def test_inspect_a_certificate(tmp_path: Path, capsys) -> None:
    cert = _direct(_scores())
    from dataclasses import replace

    path = replace(cert, names=tuple(NAMES), attrs={"concept": "c0"}).save(tmp_path / "cert.h5")
    assert main(["inspect", str(path), "--top", "3"]) == 0
    text = capsys.readouterr().out
    assert "certificate (Certificate.save)" in text
    assert "p_del 0.6, n0 100, n 400, seed 3, tau 0.9, alpha 0.01, bonferroni; radius 1" in text
    assert _printed_counts(text) == _counts(cert.decision, K_GRID)
    assert "plan: ok (recomputed" in text and "labels: concept=c0" in text
    # the certified-in components of each K, most certification votes first, with their names and votes
    for i, k in enumerate(K_GRID):
        chosen = np.flatnonzero(cert.decision[i] == 1)
        best = chosen[np.argsort(-cert.certification_counts[i, chosen], kind="stable")][0]
        assert f"certified in at K {k:g} (top {min(3, chosen.size)} of {chosen.size}" in text
        assert f"  {NAMES[best]} (group {GROUPS[best]}): {cert.certification_counts[i, best]} votes" in text


def test_a_certificate_without_names_still_loads_and_inspects(tmp_path: Path, capsys) -> None:
    cert = _direct(_scores())
    assert cert.names is None
    path = cert.save(tmp_path / "old.h5")
    with h5py.File(path, "r") as handle:
        assert "names" not in handle  # as written before the field existed
    loaded = cc.Certificate.load(path)
    assert loaded.names is None and np.array_equal(loaded.decision, cert.decision)
    assert main(["inspect", str(path)]) == 0
    text = capsys.readouterr().out
    assert _printed_counts(text) == _counts(cert.decision, K_GRID) and "  #" in text


def test_names_round_trip_through_save_and_load(tmp_path: Path) -> None:
    from dataclasses import replace

    cert = replace(_direct(_scores()), names=tuple(NAMES))
    assert cc.Certificate.load(cert.save(tmp_path / "named.h5")).names == tuple(NAMES)
    with pytest.raises(ValueError, match="3 names for 64 components"):
        replace(cert, names=("a", "b", "c")).save(tmp_path / "wrong.h5")


def test_inspect_workflow_votes_and_certificates(tmp_path: Path, capsys) -> None:
    scores = _scores()
    votes = compute_votes(scores, GROUPS, K_GRID, 0.6, 100, 400, seed=3,
                          attrs={"concept": "c0", "scorer": "relevance", "split": "concept", "experiment": "world"})
    certificates = certify_votes(votes, 0.9, 0.01)
    votes_path = write_votes(tmp_path / "votes.h5", votes)
    certs_path = write_certificates(tmp_path / "certs.h5", certificates)
    assert (certificates.decision == 1).any() and (certificates.decision == 0).any()
    assert main(["inspect", str(certs_path)]) == 0
    alone = capsys.readouterr().out
    assert "certificates (workflow certify stage)" in alone and "radius 1" in alone
    assert _printed_counts(alone) == _counts(certificates.decision, K_GRID)
    assert "plan: ok (recomputed from the file's setting, |D| = 50, U = 64)" in alone
    assert main(["inspect", str(votes_path), str(certs_path), "--top", "2"]) == 0
    both = capsys.readouterr().out
    assert "votes (workflow votes stage" in both and f"with the votes of {votes_path}" in both
    assert _printed_counts(both) == _counts(certificates.decision, K_GRID)
    for k, row in zip(K_GRID, votes.baseline):
        assert f"  K {k:g}: {int(row.sum())} of {U}" in both
    i = 1
    chosen = np.flatnonzero(certificates.decision[i] == 1)
    best = chosen[np.argsort(-votes.certification_counts[i, chosen], kind="stable")][0]
    assert f"  #{best} (group {GROUPS[best]}): {votes.certification_counts[i, best]} votes" in both
    # votes that record their components' names (the votes stage copies the attribution file's) name them
    named = write_votes(tmp_path / "named.h5", replace(votes, names=tuple(NAMES)))
    assert main(["inspect", str(named), str(certs_path), "--top", "2"]) == 0
    text = capsys.readouterr().out
    assert f"  {NAMES[best]} (group {GROUPS[best]}): {votes.certification_counts[i, best]} votes" in text
    assert "  #" not in text


def test_inspect_an_attribution_file(tmp_path: Path, capsys) -> None:
    _write("attributions", tmp_path)
    assert main(["inspect", str(tmp_path / "a.h5"), "--top", "2"]) == 0
    text = capsys.readouterr().out
    assert "a.h5: attributions" in text and f"examples: {N}, components: {U} (4 groups)" in text
    assert "scorers: eap_ig (absolute), relevance (signed)" in text
    relevance = _scores().astype(np.float32).astype(np.float64).mean(axis=0)
    eap_ig = np.random.default_rng(1).normal(size=(N, U)).astype(np.float32).astype(np.float64).mean(axis=0)
    top = np.argsort(-relevance, kind="stable")[:2]
    block = text[text.index("highest mean score of relevance"):]
    assert [line.split(" (")[0].strip() for line in block.splitlines()[1:3]] == [NAMES[u] for u in top]
    best_abs = int(np.argmax(np.abs(eap_ig)))
    assert f"highest |mean| score of eap_ig (top 2 of {U}):\n  {NAMES[best_abs]} " in text


def test_inspect_refuses_a_file_of_no_known_kind(tmp_path: Path, capsys) -> None:
    with h5py.File(tmp_path / "other.h5", "w") as handle:
        handle.create_dataset("weights", data=np.zeros(3))
    np.save(tmp_path / "s.npy", _scores())
    for path, message in ((tmp_path / "other.h5", "of no kind inspect knows (datasets ['weights']"),
                          (tmp_path / "s.npy", "not an HDF5 file")):
        with pytest.raises(SystemExit) as stop:
            main(["inspect", str(path)])
        assert stop.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("stage", ["certify-scores", "inspect"])
def test_help_has_an_example(stage: str, capsys) -> None:
    with pytest.raises(SystemExit):
        main([stage, "--help"])
    assert f"Example: bin/certified-circuits {stage} " in capsys.readouterr().out


def test_the_library_page_example_prints_what_it_shows(tmp_path: Path, monkeypatch, capsys) -> None:
    """docs/library.md's "Certify any score file": its python block, then each `$ bin/certified-circuits` line of the shell
    block prints exactly the lines below it (stderr and stdout together; the shell block is not run by
    tests/unit/project/test_docs_examples.py, which runs only `plan` commands)."""
    import shlex

    readme = (ROOT / "docs" / "library.md").read_text()
    section = readme[readme.index("## Certify any score file"):]
    section = section[:section.index("\n## ")]
    python = section[section.index("```python\n") + 10:]
    python = python[:python.index("```")]
    shell = section[section.index("```\n$ ") + 4:]
    shell = shell[:shell.index("```")]
    monkeypatch.chdir(tmp_path)
    exec(compile(python, "docs/library.md", "exec"), {"__name__": "__main__"})
    commands = re.split(r"^\$ bin/certified-circuits ", shell, flags=re.M)[1:]
    assert len(commands) == 2
    for command in commands:
        line, _, expected = command.partition("\n")
        assert expected.strip(), f"docs/library.md shows no output for {line}"
        assert main(shlex.split(line)) == 0
        printed = capsys.readouterr()
        assert (printed.err + printed.out).strip() == expected.strip(), line


@pytest.mark.parametrize("setting, fix", [
    (["--n", "1000000000"], "lower --n (or --n0)"),
    (["--setting", "p0.5_n0100_n1000000000_s0/t0.9_a0.01_bonferroni"],
     "lower n (or n0) in --setting p0.5_n0100_n1000000000_s0/t0.9_a0.01_bonferroni"),
])
def test_masks_too_large_for_memory_are_refused_naming_the_option_before_any_draw(setting: list[str], fix: str,
                                                                                  tmp_path: Path, capsys) -> None:
    """Issue 61: n = 10^9 failed with numpy's "Unable to allocate 298 GiB"; the votes stage's one estimate
    (cli.main.check_votes_memory) now refuses it first, naming the option that sets n."""
    np.save(tmp_path / "s.npy", _scores())
    out = tmp_path / "cert.h5"
    with pytest.raises(SystemExit) as stop:
        main(["certify-scores", "--scores", str(tmp_path / "s.npy"), *setting, "--out", str(out)])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Traceback" not in err
    assert f"n0 + n = 1000000100 masks over {N} examples and {U} components need about" in err
    assert f"GiB (limit 8 GiB): {fix}" in err and not out.exists()
