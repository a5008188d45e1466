"""Issue 61, class 2: files are told apart by what they are (resolved path and file identity), not by their
folder's name. ``report-hypotheses`` refuses a seed's ``truth_size.csv`` that is a symlink or hard link to another
seed's; ``stability`` refuses one path given for two outputs (or an output that is an input); ``report-stability``
refuses one table given twice by another spelling. Each refusal exits 2 in one line, no traceback, nothing written;
distinct files are still accepted."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from certified_circuits.cli.main import main
from certified_circuits.cli.stages import InputError, check_distinct_inputs, check_distinct_outputs
from certified_circuits.storage.paths import file_identity
from tests.helpers.truth_size_tables import certificate, write_seed

SETTING = "p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni"


def _refused(capsys: pytest.CaptureFixture, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    return err


def _seeds(tmp_path: Path) -> tuple[Path, Path]:
    rows = [row for concept in "ab" for row in certificate(concept)]
    return write_seed(tmp_path / "s0" / "testbed", rows), write_seed(tmp_path / "s1" / "testbed", rows)


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_a_seeds_table_linked_to_another_seeds_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                          link: str) -> None:
    s0, s1 = _seeds(tmp_path)
    (s1 / "truth_size.csv").unlink()
    (os.symlink if link == "symlink" else os.link)(s0 / "truth_size.csv", s1 / "truth_size.csv")
    out = tmp_path / "out"
    err = _refused(capsys, ["report-hypotheses", "--run", "0", str(s0), "--run", "1", str(s1), "--out-dir", str(out)])
    assert f"error: {s1 / 'truth_size.csv'} (--run 1) is the truth-size table of another seed, also given as " \
           f"{s0 / 'truth_size.csv'} (--run 0)" in err and "pass each file once" in err
    assert not out.exists()


def test_distinct_seed_tables_are_accepted(tmp_path: Path) -> None:
    s0, s1 = _seeds(tmp_path)
    assert main(["report-hypotheses", "--run", "0", str(s0), "--run", "1", str(s1), "--out-dir",
                 str(tmp_path / "out")]) == 0


def _stability(tmp_path: Path, *outputs: str) -> list[str]:
    attributions, truth = tmp_path / "a.h5", tmp_path / "truth.json"
    attributions.write_bytes(b"x")
    truth.write_text("{}")
    return ["stability", "--attributions", str(attributions), "--scorer", "relevance", "--k-grid", "0.1",
            "--setting", SETTING, "--ground-truth", str(truth), *outputs]


@pytest.mark.parametrize(("outputs", "message"), [
    (["--out", "X.csv", "--out-truth-size", "X.csv"], "--out-truth-size X.csv is also given as --out"),
    (["--out", "X.csv", "--out-truth-size", "sub/../X.csv"], "--out-truth-size sub/../X.csv is also given as --out"),
    (["--out", "X.csv", "--out-truth-size", "T.csv", "--out-truth-size-equal", "X.csv"],
     "--out-truth-size-equal X.csv is also given as --out"),
    (["--out", "a.h5"], "--out a.h5 is also given as input --attributions"),
])  # fmt: skip
def test_one_path_for_two_outputs_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture,
                                             monkeypatch: pytest.MonkeyPatch, outputs: list[str], message: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    err = _refused(capsys, _stability(tmp_path, *outputs))
    assert message in err and "give each output its own path" in err
    assert not (tmp_path / "X.csv").exists() and not (tmp_path / "T.csv").exists()


def test_an_existing_output_hard_linked_to_another_is_refused(tmp_path: Path) -> None:
    (tmp_path / "x.csv").write_text("old\n")
    os.link(tmp_path / "x.csv", tmp_path / "y.csv")
    args = argparse.Namespace(out=tmp_path / "x.csv", out_truth_size=tmp_path / "y.csv")
    with pytest.raises(InputError, match="--out-truth-size .*y.csv is also given as --out"):
        check_distinct_outputs(args, ("--out", "--out-truth-size"))
    check_distinct_outputs(argparse.Namespace(out=tmp_path / "x.csv", out_truth_size=None), ("--out", "--out-truth-size"))
    check_distinct_outputs(argparse.Namespace(out=tmp_path / "x.csv", out_truth_size=tmp_path / "z.csv"),
                           ("--out", "--out-truth-size"))


def test_file_identity_sees_through_spellings_and_links(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("a\n")
    (tmp_path / "b.csv").write_text("a\n")
    os.symlink(tmp_path / "a.csv", tmp_path / "link.csv")
    assert file_identity(tmp_path / "a.csv") == file_identity(tmp_path / "link.csv")
    assert file_identity(tmp_path / "a.csv") == file_identity(tmp_path / "." / "a.csv")
    assert file_identity(tmp_path / "a.csv") != file_identity(tmp_path / "b.csv")  # same content, two files
    check_distinct_inputs([("--x", tmp_path / "a.csv"), ("--x", tmp_path / "b.csv")])
    with pytest.raises(InputError, match="link.csv \\(--x\\) is the file also given as .*a.csv \\(--x\\)"):
        check_distinct_inputs([("--x", tmp_path / "a.csv"), ("--x", tmp_path / "link.csv")])


def test_report_stability_refuses_a_table_given_twice_by_a_link(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "s.csv").write_text("x\n")
    os.link(tmp_path / "s.csv", tmp_path / "t.csv")
    out = tmp_path / "out"
    err = _refused(capsys, ["report-stability", "--inputs", str(tmp_path / "s.csv"), str(tmp_path / "t.csv"),
                            "--out-dir", str(out)])
    assert f"{tmp_path / 't.csv'} (--inputs) is the file also given as {tmp_path / 's.csv'} (--inputs)" in err
    assert not out.exists()


def test_stability_refuses_masks_too_large_for_memory_before_any_draw(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture) -> None:
    """Issue 61: every stage that draws masks estimates their memory first (cli.main.check_votes_memory, the votes
    stage's one estimate); n = 10^9 over 20 examples and 8 components needs about 208.6 GiB (1,000,000,100 x 28 x 8
    bytes), refused naming --setting."""
    import numpy as np

    from certified_circuits.storage.store import write_attributions

    attributions = write_attributions(tmp_path / "a.h5", {"relevance": np.ones((20, 8))}, np.zeros(8, np.int32),
                                      [f"c{i}" for i in range(8)], [str(i) for i in range(20)], {"concept": "a"})
    tag = "p0.6_n0100_n1000000000_s0/t0.95_a0.001_bonferroni"
    out = tmp_path / "stability.csv"
    err = _refused(capsys, ["stability", "--attributions", str(attributions), "--scorer", "relevance", "--k-grid",
                            "0.5", "--setting", tag, "--out", str(out)])
    assert "1000000100 masks over 20 examples and 8 components need about 208.6 GiB (limit 8 GiB)" in err
    assert f"lower n (or n0) in --setting {tag}" in err and not out.exists()


def test_report_attack_refuses_masks_too_large_for_memory_before_any_draw(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture) -> None:
    """The attack draws masks over |D| plus its pool at most: 20 + 10 examples and 8 components at n = 10^9 need
    1,000,000,100 x 38 x 8 bytes, about 283.1 GiB; refused naming --setting, nothing written."""
    import numpy as np

    from certified_circuits.storage.store import write_attributions

    names, groups = [f"c{i}" for i in range(8)], np.zeros(8, np.int32)
    concept = write_attributions(tmp_path / "a.h5", {"relevance": np.ones((20, 8))}, groups, names,
                                 [str(i) for i in range(20)], {"concept": "a"})
    pool = write_attributions(tmp_path / "pool.h5", {"relevance": np.ones((10, 8))}, groups, names,
                              [f"p{i}" for i in range(10)], {"concept": "a"})
    tag = "p0.6_n0100_n1000000000_s0/t0.95_a0.001_bonferroni"
    out = tmp_path / "attack"
    err = _refused(capsys, ["report-attack", "--class", str(concept), str(pool), "--scorer", "relevance",
                            "--k-grid", "0.5", "--setting", tag, "--out-dir", str(out)])
    assert "1000000100 masks over 30 examples and 8 components need about 283.1 GiB (limit 8 GiB)" in err
    assert f"lower n (or n0) in --setting {tag}" in err and not out.exists()
