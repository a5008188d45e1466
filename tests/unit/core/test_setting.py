"""A setting's fields (core/setting.py): tau and p_del are printed with enough digits to tell them apart (issue 35,
item 6d), and a field of the wrong type is refused when the ``Setting`` is built (issue 28, item 4).

One helper prints a setting's value everywhere (:func:`certified_circuits.core.setting.number`, exact):
tau 0.9999999 reads "0.9999999", never "1" (what ``%g`` printed), and p_del 0.6000001 never "0.6".
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

import certified_circuits as cc
from certified_circuits.cli.main import main
from certified_circuits.core.setting import Setting, SettingTypeError, number
from certified_circuits.pipeline.plans.setting_plans import ConfigPlan


def test_the_helper_is_exact() -> None:
    assert [number(0.9999999), number(0.6000001), number(0.95), number(1e-05), number(0.001)] == [
        "0.9999999", "0.6000001", "0.95", "1e-05", "0.001"]
    assert f"{0.9999999:g}" == "1"  # what the plan printed before


def test_the_plan_and_its_warnings_print_tau_and_p_del_exactly() -> None:
    p = cc.plan(50, 3840, cc.Setting(p_del=0.6000001, tau=0.9999999, n=1000))
    text = str(p)
    assert "setting: p_del 0.6000001, n0 100, n 1000, tau 0.9999999, alpha 0.001, bonferroni" in text
    [problem] = p.problems()
    assert "(tau 0.9999999, alpha 0.001, U = 3,840)" in problem
    # max_tau is rounded down, so the bound it prints holds, and never reads 1
    assert "max_tau = 0.9849" in problem and p.max_tau >= 0.9849
    line = ConfigPlan("vision world", "vision.certification", p).lines()[0]
    assert "tau 0.9999999" in line


def test_a_max_tau_just_below_one_never_prints_as_one() -> None:
    p = cc.plan(50, 1, cc.Setting(p_del=0.6, tau=0.99999999, n=100_000, alpha=0.5))
    assert p.max_tau > 0.99999 and "max_tau at n = 100000: 0.99999" in str(p)
    assert "1.00000" not in str(p)


def test_certify_scores_and_inspect_print_the_setting_exactly(tmp_path: Path, capsys, caplog) -> None:
    scores = np.random.default_rng(0).normal(size=(20, 6))
    np.save(tmp_path / "s.npy", scores)
    out = tmp_path / "c.h5"
    with caplog.at_level(logging.INFO):
        code = main(["certify-scores", "--scores", str(tmp_path / "s.npy"), "--k-grid", "0.5", "--p-del", "0.6000001",
                     "--tau", "0.7000001", "--n0", "20", "--n", "200", "--out", str(out), "--allow-vacuous"])
    assert code == 0
    logged = capsys.readouterr().err + caplog.text
    assert "p_del 0.6000001" in logged and "tau 0.7000001" in logged
    assert main(["inspect", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "p_del 0.6000001, n0 20, n 200, seed 0, tau 0.7000001, alpha 0.001" in shown


# ------------------------------------------------------------------------------ Setting field types


@pytest.mark.parametrize("field, value, message", [
    ("tau", "0.9", "tau='0.9' is invalid: expected a number (int, float or numpy number), got str; write tau=0.9"),
    ("p_del", "0.5", "p_del='0.5' is invalid: expected a number"),
    ("n", "100", "n='100' is invalid: expected an integer (int or numpy integer), got str; write n=100"),
    ("n", True, "n=True is invalid: expected an integer (int or numpy integer), got bool"),
    ("seed", False, "seed=False is invalid"),
    ("alpha", True, "alpha=True is invalid: expected a number"),
    ("n0", 10.0, "n0=10.0 is invalid: expected an integer"),
    ("correction", 1, "correction=1 is invalid: expected a string"),
])
def test_setting_fields_of_the_wrong_type_are_refused(field: str, value: object, message: str) -> None:
    with pytest.raises(SettingTypeError) as caught:
        Setting(**{field: value})
    assert message in str(caught.value)
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, TypeError)


def test_numpy_numbers_stay_accepted_as_plain_python_numbers() -> None:
    setting = Setting(p_del=np.float64(0.6), n0=np.int32(100), n=np.int64(1000), seed=np.uint8(3), tau=np.float32(0.75))
    assert setting == Setting(p_del=0.6, n0=100, n=1000, seed=3, tau=float(np.float32(0.75)))
    assert type(setting.n) is int and type(setting.p_del) is float and setting.tag.startswith("p0.6_n0100_n1000_s3/")
