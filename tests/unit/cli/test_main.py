"""The engine's command-line stages, run in-process as Snakemake runs them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from certified_circuits.cli.main import main
from certified_circuits.storage.store import read_certificates, read_votes, write_attributions


@pytest.fixture
def attribution_file(tmp_path: Path) -> Path:
    rng = np.random.default_rng(1)
    signal = np.zeros(16)
    signal[[0, 9]] = 3.0
    return write_attributions(
        tmp_path / "attr.h5",
        {"relevance": signal + rng.normal(size=(30, 16))},
        np.repeat([0, 1], 8),
        [f"c{i}" for i in range(16)],
        [f"x{i}" for i in range(30)],
        {"concept": "toy", "model": "random"},
    )


def test_votes_then_certify(tmp_path: Path, attribution_file: Path) -> None:
    votes_path, cert_path = tmp_path / "votes.h5", tmp_path / "cert.h5"
    assert main(["votes", "--attributions", str(attribution_file), "--scorer", "relevance", "--k-grid",
                 "0.125", "0.5", "--p-del", "0.6", "--n0", "50", "--n", "300", "--seed", "4", "--out", str(votes_path)]) == 0
    votes = read_votes(votes_path)
    assert votes.selection_counts.shape == (2, 16) and votes.attrs["scorer"] == "relevance"
    assert main(["certify", "--votes", str(votes_path), "--tau", "0.95", "--alpha", "0.001", "--out", str(cert_path)]) == 0
    certificates = read_certificates(cert_path)
    assert certificates.attrs["radius"] == 1
    # the planted components 0 and 9 are certified in at K = 1/8 (one per group)
    assert certificates.decision[0, 0] == 1 and certificates.decision[0, 9] == 1


def test_the_votes_and_the_certificate_name_the_attribution_files_components(
    tmp_path: Path, attribution_file: Path, capsys: pytest.CaptureFixture
) -> None:
    """The votes stage copies the attribution file's component names; the certify stage's certificate carries
    them, so Certificate.load and inspect name the certified components (c0 and c9 here), not their indices."""
    import certified_circuits as cc

    votes_path, cert_path = tmp_path / "votes.h5", tmp_path / "cert.h5"
    main(["votes", "--attributions", str(attribution_file), "--scorer", "relevance", "--k-grid", "0.125",
          "--p-del", "0.6", "--n0", "50", "--n", "300", "--seed", "4", "--out", str(votes_path)])
    assert read_votes(votes_path).names == tuple(f"c{i}" for i in range(16))
    main(["certify", "--votes", str(votes_path), "--tau", "0.95", "--alpha", "0.001", "--out", str(cert_path)])
    certificate = cc.Certificate.load(cert_path)
    assert certificate.names == tuple(f"c{i}" for i in range(16))
    assert [certificate.names[u] for u in np.flatnonzero(certificate.certified_in[0])] == ["c0", "c9"]
    capsys.readouterr()
    assert main(["inspect", str(cert_path), "--top", "2"]) == 0
    text = capsys.readouterr().out
    assert "certified in at K 0.125 (top 2 of 2" in text
    assert "  c0 (group 0): " in text and "  c9 (group 1): " in text and "  #" not in text


def test_votes_written_before_names_were_recorded_still_certify(tmp_path: Path, attribution_file: Path) -> None:
    import h5py

    votes_path, cert_path = tmp_path / "votes.h5", tmp_path / "cert.h5"
    main(["votes", "--attributions", str(attribution_file), "--scorer", "relevance", "--k-grid", "0.125",
          "--p-del", "0.6", "--n0", "50", "--n", "300", "--seed", "4", "--out", str(votes_path)])
    with h5py.File(votes_path, "a") as handle:
        del handle["names"]  # as the votes stage wrote it before
    assert read_votes(votes_path).names is None
    assert main(["certify", "--votes", str(votes_path), "--tau", "0.95", "--alpha", "0.001", "--out", str(cert_path)]) == 0
    certificates = read_certificates(cert_path)
    assert certificates.decision[0, 0] == 1 and certificates.decision[0, 9] == 1


def test_bad_tau_stops_before_writing(tmp_path: Path, attribution_file: Path, capsys: pytest.CaptureFixture) -> None:
    votes_path = tmp_path / "votes.h5"
    main(["votes", "--attributions", str(attribution_file), "--scorer", "relevance", "--k-grid", "0.5",
          "--p-del", "0.6", "--n0", "5", "--n", "10", "--out", str(votes_path)])
    with pytest.raises(SystemExit) as exit_info:
        main(["certify", "--votes", str(votes_path), "--tau", "1.2", "--out", str(tmp_path / "c.h5")])
    assert exit_info.value.code == 2
    assert "tau=1.2 is invalid" in capsys.readouterr().err
    assert not (tmp_path / "c.h5").exists()


def test_unknown_scorer_and_bad_k_grid(tmp_path: Path, attribution_file: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        main(["votes", "--attributions", str(attribution_file), "--scorer", "rank", "--k-grid", "0.5",
              "--p-del", "0.6", "--out", str(tmp_path / "v.h5")])
    assert "has no scorer 'rank'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["votes", "--attributions", str(attribution_file), "--scorer", "relevance", "--k-grid", "0", "1.5",
              "--p-del", "0.6", "--out", str(tmp_path / "v.h5")])
    assert "outside (0, 1]" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["votes", "--attributions", str(attribution_file), "--scorer", "relevance", "--k-grid", "0.25", "nan",
              "--p-del", "0.6", "--out", str(tmp_path / "v.h5")])
    assert "nan is not finite" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # memory is estimated before anything is allocated
        main(["votes", "--attributions", str(attribution_file), "--scorer", "relevance", "--k-grid", "0.5",
              "--p-del", "0.6", "--n", "100000000", "--out", str(tmp_path / "v.h5")])
    assert exc.value.code == 2 and "GiB" in capsys.readouterr().err and not (tmp_path / "v.h5").exists()


def test_every_concept_gets_its_own_mask_draw(tmp_path: Path, attribution_file: Path) -> None:
    """Masks come from (seed, concept): two concepts with identical scores get different votes, the
    same concept always the same ones, and the file records both the config seed and the mask seed."""
    from certified_circuits.core.smoothing import mask_seed
    from certified_circuits.storage.store import read_attributions, write_attributions

    source = read_attributions(attribution_file)
    paths = {}
    for concept in ("cat", "dog"):
        attributions = tmp_path / f"{concept}.h5"
        write_attributions(attributions, source.scores, source.groups, source.names, source.example_ids,
                           {"concept": concept})
        for run in (1, 2):
            paths[concept, run] = tmp_path / f"{concept}_{run}.h5"
            assert main(["votes", "--attributions", str(attributions), "--scorer", "relevance", "--k-grid", "0.5",
                         "--p-del", "0.6", "--n0", "5", "--n", "40", "--seed", "3", "--out", str(paths[concept, run])]) == 0
    cat, cat_again, dog = (read_votes(paths[k]) for k in (("cat", 1), ("cat", 2), ("dog", 1)))
    assert np.array_equal(cat.certification_counts, cat_again.certification_counts)
    assert not np.array_equal(cat.certification_counts, dog.certification_counts)
    assert cat.attrs["seed"] == 3 and cat.attrs["mask_seed"] == mask_seed(3, "cat") != mask_seed(3, "dog")
    assert mask_seed(3, "cat") != mask_seed(4, "cat")


@pytest.mark.parametrize("bad", ["-1", "4294967296", "1.5", "12345678901234567890123"])
def test_a_bad_seed_names_the_option(tmp_path, capsys, bad):
    """Bug report: ``--seed -1`` did not name the argument."""
    with pytest.raises(SystemExit) as exit_info:
        main(["votes", "--attributions", __file__, "--scorer", "s", "--k-grid", "0.5", "--p-del", "0.5",
              "--seed", bad, "--out", str(tmp_path / "v.h5")])
    assert exit_info.value.code == 2
    assert "argument --seed" in capsys.readouterr().err


def test_certify_checks_the_exact_plan_of_its_votes(tmp_path: Path, attribution_file: Path, capsys) -> None:
    """|D| = 30 and U = 16 come from the votes file: n = 40 at tau 0.95 cannot certify (0.95^n <= 0.001/16 needs
    n >= 189), so certify refuses before writing and says why; --allow-vacuous certifies anyway (all abstain); a
    marginal setting (radius 0) is certified and its warning recorded in the file."""
    import certified_circuits as cc

    votes_path = tmp_path / "votes.h5"
    assert main(["votes", "--attributions", str(attribution_file), "--scorer", "relevance", "--k-grid", "0.125",
                 "--p-del", "0.6", "--n0", "10", "--n", "40", "--out", str(votes_path)]) == 0
    planned = cc.plan(30, 16, cc.Setting(n0=10, n=40))
    assert planned.vacuous and planned.min_samples == 189
    with pytest.raises(SystemExit) as stop:
        main(["certify", "--votes", str(votes_path), "--tau", "0.95", "--out", str(tmp_path / "c.h5")])
    assert stop.value.code == 2 and not (tmp_path / "c.h5").exists()
    err = capsys.readouterr().err
    assert "can certify nothing" in err and "min_samples = 189" in err and "--allow-vacuous" in err
    assert main(["certify", "--votes", str(votes_path), "--tau", "0.95", "--allow-vacuous",
                 "--out", str(tmp_path / "c.h5")]) == 0
    assert (read_certificates(tmp_path / "c.h5").decision == -1).all()
    # tau 0.7 at n = 40 certifies (0.7^n <= 0.001/16 from n = 28), radius 0 makes the plan marginal: recorded with the certificate
    assert main(["certify", "--votes", str(votes_path), "--tau", "0.7", "--out", str(tmp_path / "m.h5")]) == 0
    attrs = read_certificates(tmp_path / "m.h5").attrs
    assert attrs["plan_verdict"] == "marginal" and "radius 0" in attrs["plan_warnings"]


def _frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stages record their seconds in their files; a frozen clock makes two runs' files comparable byte for byte."""
    import time

    monkeypatch.setattr(time, "perf_counter", lambda: 1.0)


def test_votes_and_certify_write_the_same_bytes_from_the_words_and_from_the_tag(
        tmp_path: Path, attribution_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--setting TAG (what the workflow passes) and the words (what people type) are one setting: byte-identical
    votes and certificates, at numbers a 6-digit print would round (p_del 0.6000001, tau 0.9000001, alpha 1e-05)."""
    _frozen_clock(monkeypatch)
    common = ["votes", "--attributions", str(attribution_file), "--scorer", "relevance", "--k-grid", "0.125", "0.5"]
    words, tagged = tmp_path / "words", tmp_path / "tagged"
    for folder in (words, tagged):
        folder.mkdir()
    assert main([*common, "--p-del", "0.6000001", "--n0", "50", "--n", "300", "--seed", "4",
                 "--out", str(words / "v.h5")]) == 0
    assert main([*common, "--setting", "p0.6000001_n050_n300_s4", "--out", str(tagged / "v.h5")]) == 0
    assert main(["certify", "--votes", str(words / "v.h5"), "--tau", "0.9000001", "--alpha", "1e-05",
                 "--correction", "holm", "--out", str(words / "c.h5")]) == 0
    assert main(["certify", "--votes", str(tagged / "v.h5"), "--setting", "t0.9000001_a1e-05_holm",
                 "--out", str(tagged / "c.h5")]) == 0
    for name in ("v.h5", "c.h5"):
        assert (words / name).read_bytes() == (tagged / name).read_bytes(), name
    votes, certificates = read_votes(tagged / "v.h5"), read_certificates(tagged / "c.h5")
    assert (votes.attrs["p_del"], votes.attrs["n0"], votes.attrs["n"], votes.attrs["seed"]) == (0.6000001, 50, 300, 4)
    assert (certificates.attrs["tau"], certificates.attrs["alpha"], certificates.attrs["correction"]) == (
        0.9000001, 1e-05, "holm")
    # the defaults fill what the words leave out, as the tag would give them
    assert main([*common, "--p-del", "0.6000001", "--seed", "4", "--out", str(words / "d.h5")]) == 0
    assert main([*common, "--setting", "p0.6000001_n0100_n1000_s4", "--out", str(tagged / "d.h5")]) == 0
    assert (words / "d.h5").read_bytes() == (tagged / "d.h5").read_bytes()


def test_a_batch_takes_each_invocations_setting_tag(
        tmp_path: Path, attribution_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """A batch fills every invocation's setting before the first runs: its files equal those of single stages given
    the words, and a conflict in its last invocation stops it before the first writes anything."""
    _frozen_clock(monkeypatch)
    votes = ["votes", "--attributions", str(attribution_file), "--scorer", "relevance", "--k-grid", "0.125"]
    assert main([*votes, "--p-del", "0.6", "--n0", "20", "--n", "200", "--out", str(tmp_path / "v.h5")]) == 0
    assert main(["certify", "--votes", str(tmp_path / "v.h5"), "--tau", "0.9", "--out", str(tmp_path / "c.h5")]) == 0
    assert main(["batch", *votes, "--setting", "p0.6_n020_n200_s0", "--out", str(tmp_path / "bv.h5"), "::",
                 "certify", "--votes", str(tmp_path / "v.h5"), "--setting", "t0.9_a0.001_bonferroni",
                 "--out", str(tmp_path / "bc.h5")]) == 0  # a batch's inputs exist when it is parsed
    assert (tmp_path / "v.h5").read_bytes() == (tmp_path / "bv.h5").read_bytes()
    assert (tmp_path / "c.h5").read_bytes() == (tmp_path / "bc.h5").read_bytes()
    with pytest.raises(SystemExit) as stop:
        main(["batch", *votes, "--setting", "p0.6_n020_n200_s0", "--out", str(tmp_path / "never.h5"), "::",
              "certify", "--votes", str(tmp_path / "bv.h5"), "--setting", "t0.9_a0.001_bonferroni", "--tau", "0.9",
              "--out", str(tmp_path / "never_c.h5")])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "batch [2/2] certify: error: --setting t0.9_a0.001_bonferroni and --tau" in err
    assert not (tmp_path / "never.h5").exists() and not (tmp_path / "never_c.h5").exists()
