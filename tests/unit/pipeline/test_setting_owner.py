"""One owner for each fact of a setting (issue 27, item 2): :class:`Setting` validates it and gives its defaults;
its tag is written by ``Setting.tag`` and read back only by ``Setting.from_tag``; the words of a report read
columns or attributes where the data has them; the workflow's runtime job passes the whole setting."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from certified_circuits.core.setting import Setting
from certified_circuits.reports.words import row_words, short_words, tag_words

ROOT = Path(__file__).resolve().parents[3]

SETTINGS = [
    Setting(),
    Setting(p_del=0.95, n0=20, n=100, seed=3, tau=0.9, alpha=0.05, correction="holm"),
    Setting(p_del=1e-05, n0=5, n=7, seed=2**62, tau=0.9999999, alpha=1e-05),
    Setting(p_del=0.6000001, tau=0.5),
]


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.tag)
def test_from_tag_inverts_tag_exactly(setting: Setting) -> None:
    assert Setting.from_tag(setting.tag) == setting


@pytest.mark.parametrize("tag, match", [
    ("not a tag", "is not a setting tag"),
    ("p0.6_n0100_n1000_s0", "is not a setting tag"),  # the votes half only
    ("p0.60_n0100_n1000_s0/t0.95_a0.001_bonferroni", "as Setting.tag writes it"),  # not written by Setting.tag
    ("p0.6_n0100_n1000_s00/t0.95_a0.001_bonferroni", "as Setting.tag writes it"),
    ("p0.6_n0100_n1000_s0/t1.5_a0.001_bonferroni", "tau=1.5 is invalid"),  # Setting's own check
    ("p0.6_n0100_n1000_s0/t0.95_a0.001_sidak", "correction='sidak' is invalid"),
    ("pabc_n0100_n1000_s0/t0.95_a0.001_holm", "does not name a valid setting"),
])
def test_from_tag_refuses_what_tag_would_not_write(tag: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Setting.from_tag(tag)


def test_words_read_columns_and_fall_back_to_the_tag() -> None:
    assert tag_words(Setting(p_del=0.95, tau=0.9).tag) == "tau 0.9, p_del 0.95, r = 9" == short_words(0.9, 0.95)
    assert tag_words("p0.60_n0100_n1000_s0/t0.95_a0.001_bonferroni") == "p0.60_n0100_n1000_s0/t0.95_a0.001_bonferroni"
    # a row's columns win over its tag (the tag is only a name); without the columns the tag is read
    row = {"tau": 0.85, "p_del": 0.99, "setting": Setting().tag}
    assert row_words(row) == "tau 0.85, p_del 0.99, r = 42"
    assert row_words({"setting": Setting().tag}) == "tau 0.95, p_del 0.6, r = 1"


def test_words_parse_no_tag_themselves() -> None:
    source = (ROOT / "src/certified_circuits/reports/words.py").read_text()
    assert "import re" not in source and "fullmatch" not in source


def test_runtime_defaults_and_checks_are_the_settings() -> None:
    from certified_circuits.vision.runtime import measure_naive_vs_cached

    default = Setting()
    parameters = inspect.signature(measure_naive_vs_cached).parameters
    for name in ("p_del", "tau", "alpha", "seed", "correction"):
        assert parameters[name].default == getattr(default, name), name
    with pytest.raises(ValueError, match="tau=1.5 is invalid"):  # Setting's check, before any model work
        measure_naive_vs_cached(None, None, 0, [10], [0.5], tau=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="correction='sidak' is invalid"):
        measure_naive_vs_cached(None, None, 0, [10], [0.5], correction="sidak")  # type: ignore[arg-type]


def _runtime_argv(tmp_path: Path, *extra: str) -> list[str]:
    checkpoint, data = tmp_path / "model.pt", tmp_path / "concept.npz"
    checkpoint.write_bytes(b"x")
    data.write_bytes(b"x")
    return ["vision-runtime", "--model", "world", "--checkpoint", str(checkpoint), "--data", str(data),
            "--concept", "circle", "--out-stem", str(tmp_path / "runtime"), *extra]


def test_runtime_cli_defaults_are_the_settings(tmp_path: Path) -> None:
    from certified_circuits.cli.main import build_parser
    from certified_circuits.cli.stages import resolve_setting

    args = resolve_setting(build_parser().parse_args(_runtime_argv(tmp_path)))
    default = Setting()
    assert (args.p_del, args.tau, args.alpha, args.seed, args.correction) == (
        default.p_del, default.tau, default.alpha, default.seed, default.correction)


def test_runtime_cli_refuses_an_invalid_setting_before_loading(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from certified_circuits.cli.main import main

    with pytest.raises(SystemExit) as exc:  # the checkpoint is not a model: reaching it would fail differently
        main(_runtime_argv(tmp_path, "--tau", "1.5"))
    assert exc.value.code == 2 and "tau=1.5 is invalid" in capsys.readouterr().err


def test_the_runtime_rule_passes_the_whole_setting(tmp_path: Path) -> None:
    """vision_runtime gets the main setting as its whole tag through the one writer of a setting's options
    (pipeline/plans/certification.py), with numbers exact: the stage reads back every field but n0 and n (its own
    --n list)."""
    from certified_circuits.cli.main import build_parser
    from certified_circuits.cli.stages import resolve_setting
    from certified_circuits.pipeline.plans.certification import runtime_options

    rules = (ROOT / "rules/vision_reports.smk").read_text()
    rule = rules[rules.index("rule vision_runtime:"):]
    rule = rule[:rule.index("\nif ")]
    assert "setting=certification.runtime_options(VSETTING)" in rule and " {params.setting} " in rule
    setting = Setting(p_del=0.6000001, n0=5, n=7, seed=3, tau=0.9999999, alpha=1e-05, correction="holm")
    assert runtime_options(setting) == "--setting p0.6000001_n05_n7_s3/t0.9999999_a1e-05_holm"
    argv = _runtime_argv(tmp_path, *runtime_options(setting).split(), "--n", "10", "20")
    args = resolve_setting(build_parser().parse_args(argv))
    assert (args.p_del, args.seed, args.tau, args.alpha, args.correction) == (0.6000001, 3, 0.9999999, 1e-05, "holm")
    assert args.n == [10, 20] and not hasattr(args, "n0")  # the sample sizes are --n's, not the tag's
