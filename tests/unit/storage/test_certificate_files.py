"""One certificate type across the API and the workflow, and result files of earlier runs keep loading.

The files under ``tests/unit/data/legacy_results`` were written by the code of commit e55e80d (see its
README), before the workflow's ``certify`` stage wrote whole certificates.
"""

from pathlib import Path

import numpy as np
import pytest

import certified_circuits as cc
from certified_circuits.cli.main import main
from certified_circuits.core.certification import check_certified_from
from certified_circuits.core.smoothing import compute_votes
from certified_circuits.storage.store import read_certificates, read_votes
from tests.helpers.paths import UNIT_DATA

LEGACY = UNIT_DATA / "legacy_results"
SETTING = cc.Setting(p_del=0.85, n0=60, n=300, seed=5, tau=0.65, alpha=0.01)
#: the decisions those files hold (integers: exact on any CPU)
LEGACY_DECISIONS = np.array([[1, -1, -1, 0, 0, 0, 1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0]])


def _scores() -> np.ndarray:
    return np.random.default_rng(7).normal(size=(40, 12)) + np.linspace(2, -2, 12)


def test_legacy_workflow_files_load_as_one_certificate() -> None:
    cert = cc.Certificate.from_files(LEGACY / "votes.h5", LEGACY / "certificates.h5")
    np.testing.assert_array_equal(cert.decision, LEGACY_DECISIONS)
    assert cert.setting == SETTING and cert.n_examples == 40 and cert.radius == 1
    assert cert.attrs["scorer"] == "relevance" and cert.attrs["concept"] == "c1"
    assert cert.selection_counts.shape == cert.baseline.shape == (2, 12)
    assert int(cert.certified_in.sum()) == 9 and int(cert.abstained.sum()) == 2


def test_legacy_api_certificate_loads() -> None:
    cert = cc.Certificate.load(LEGACY / "certificate.h5")
    np.testing.assert_array_equal(cert.decision, LEGACY_DECISIONS)
    assert cert.setting == SETTING and cert.names is None and cert.attrs == {"concept": "c1", "absolute": False}


def test_the_one_path_reproduces_the_legacy_decisions() -> None:
    votes = read_votes(LEGACY / "votes.h5")
    cert = cc.certify_votes(votes, SETTING.tau, SETTING.alpha)
    np.testing.assert_array_equal(cert.decision, LEGACY_DECISIONS)
    legacy = read_certificates(LEGACY / "certificates.h5")
    np.testing.assert_allclose(cert.pvalue, legacy.pvalue, rtol=1e-12, atol=0)  # same formula; another CPU may round the last bit
    np.testing.assert_array_equal(cert.majority, legacy.majority)
    assert cert.attrs["plan_verdict"] == "ok"


def test_certify_scores_is_counted_votes_then_certify_votes() -> None:
    scores, groups = _scores(), np.repeat([0, 1], 6)
    direct = cc.certify_scores(scores, groups, [0.34, 0.5], SETTING, device="cpu")
    votes = compute_votes(scores, groups, [0.34, 0.5], SETTING.p_del, SETTING.n0, SETTING.n, SETTING.seed, device="cpu")
    through = cc.certify_votes(votes, SETTING.tau, SETTING.alpha)
    np.testing.assert_array_equal(direct.decision, through.decision)
    np.testing.assert_array_equal(direct.decision, LEGACY_DECISIONS)  # the scores the legacy files came from


def test_the_certify_stage_writes_a_certificate_that_every_reader_loads(tmp_path: Path) -> None:
    out = tmp_path / "certificates.h5"
    assert main(["certify", "--votes", str(LEGACY / "votes.h5"), "--tau", "0.65", "--alpha", "0.01", "--out", str(out)]) == 0
    whole = cc.Certificate.load(out)  # the API's type, from the workflow's file
    paired = cc.Certificate.from_files(LEGACY / "votes.h5", out)
    decisions = read_certificates(out)  # what the reports read
    for decision in (whole.decision, paired.decision, decisions.decision):
        np.testing.assert_array_equal(decision, LEGACY_DECISIONS)
    check_certified_from(read_votes(LEGACY / "votes.h5"), decisions, "votes", "certificates")
    assert whole.setting == SETTING and whole.attrs["scorer"] == "relevance" and whole.attrs["plan_verdict"] == "ok"
    assert decisions.attrs["radius"] == 1 and decisions.attrs["tau"] == 0.65


def test_certify_votes_refuses_a_vacuous_setting_before_deciding() -> None:
    votes = read_votes(LEGACY / "votes.h5")
    with pytest.raises(cc.VacuousSettingError, match="min_samples"):
        cc.certify_votes(votes, 0.999, 0.01)  # n = 300 cannot reach tau 0.999 at alpha/U
    with pytest.raises(ValueError, match="lacks"):
        cc.certify_votes(type(votes)(votes.k_grid, votes.baseline, votes.selection_counts,
                                     votes.certification_counts, votes.groups, attrs={}), 0.65, 0.01)
