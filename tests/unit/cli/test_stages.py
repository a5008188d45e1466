"""The stages' shared option checks (cli/stages.py): the bound on a mean-ablation fill's reference images (issue 45),
refused by the vision stages before any image is loaded and equal to config.schema.yaml's maximum; a stage's setting
as the words or as one ``--setting TAG``, never both (issue 52)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate

from certified_circuits.cli.main import build_parser, main
from certified_circuits.cli.stages import MAX_REFERENCE_SIZE, SETTING_WORDS, add_setting_tag, resolve_setting
from certified_circuits.core.setting import Setting
from tests.helpers.paths import ROOT, SCHEMA


@pytest.mark.parametrize("stage", ["vision-ground-truth", "vision-evaluate"])
def test_reference_size_is_bounded_where_the_fill_would_load_too_many_images(
        stage: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as caught:
        main([stage, "--reference-size", str(MAX_REFERENCE_SIZE + 1)])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "Traceback" not in err
    assert f"--reference-size: {MAX_REFERENCE_SIZE + 1} is above {MAX_REFERENCE_SIZE}" in err
    assert "loads its reference images as one batch" in err


def test_the_schema_bounds_mean_reference_size_by_the_same_number() -> None:
    schema = yaml.safe_load(SCHEMA.read_text())
    bound = schema["properties"]["vision"]["properties"]["mean_reference_size"]
    assert (bound["minimum"], bound["maximum"]) == (1, MAX_REFERENCE_SIZE) == (1, 5000)
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["vision"]["mean_reference_size"] = MAX_REFERENCE_SIZE + 1
    with pytest.raises(Exception, match="5001 is greater than the maximum of 5000"):
        validate(config, str(SCHEMA), set_default=True)


# ---------------------------------------------------------------------------------- a stage's setting (issue 52)

#: the stages that take ``--setting TAG``, with the kind of tag each takes
TAGGED = {"votes": "votes", "vision-discover": "votes", "certify": "decision", "stability": "setting",
          "report-attack": "setting", "certify-scores": "setting", "vision-runtime": "runtime"}
DEFAULT = Setting()
#: each stage's words and their defaults (None: needed, given or in --setting), as before the tag existed
WORDS = {
    "votes": {"p_del": None, "n0": 100, "n": 1000, "seed": 0},
    "vision-discover": {"p_del": None, "n0": 100, "n": 1000, "seed": 0},
    "certify": {"tau": None, "alpha": 0.001, "correction": "bonferroni"},
    "stability": {"p_del": None, "n0": 100, "n": 1000, "seed": 0, "tau": None, "alpha": 0.001,
                  "correction": "bonferroni"},
    "report-attack": {"p_del": None, "n0": 100, "n": 1000, "seed": 0, "tau": None, "alpha": 0.001,
                      "correction": "bonferroni"},
    "certify-scores": {"p_del": 0.6, "n0": 100, "n": 1000, "seed": 0, "tau": 0.95, "alpha": 0.001,
                       "correction": "bonferroni"},
    "vision-runtime": {"p_del": 0.6, "seed": 0, "tau": 0.95, "alpha": 0.001, "correction": "bonferroni"},
    "plan": {"p_del": 0.6, "n0": 100, "n": 1000, "tau": 0.95, "alpha": 0.001, "correction": "bonferroni"},
}


def subparsers() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_setting_word_is_declared_by_the_helpers_with_its_defaults() -> None:
    """--p-del, --n0, --tau, --alpha and --correction come from add_votes_setting / add_decision_setting in every
    stage (no stage repeats them), each stage keeps its defaults and needed words, and exactly the stages that run
    an algorithm take --setting, of their kind."""
    found = {}
    for name, parser in subparsers().items():
        words = parser.get_default(SETTING_WORDS)
        options = {o for a in parser._actions for o in a.option_strings}
        for word, flag in (("p_del", "--p-del"), ("n0", "--n0"), ("tau", "--tau"), ("alpha", "--alpha"),
                           ("correction", "--correction")):
            if flag in options:
                assert words is not None and word in words.defaults, f"{name} declares {flag} itself"
        if words is not None:
            found[name] = words
            assert ("--setting" in options) == (words.kind is not None), name
    assert {name: words.defaults for name, words in found.items()} == WORDS
    assert {name: words.kind for name, words in found.items() if words.kind} == TAGGED


def test_setting_needs_the_words_declared_first() -> None:
    with pytest.raises(TypeError, match="--setting of kind 'decision' needs the words"):
        add_setting_tag(argparse.ArgumentParser(), "decision")


def _argv(stage: str, tmp_path: Path) -> list[str]:
    """A stage's invocation with every option but its setting (the inputs exist; none is read before the setting)."""
    out = str(tmp_path / "out.h5")
    model = ["--model", "world", "--checkpoint", __file__, "--data", __file__, "--concept", "circle"]
    return {
        "votes": ["votes", "--attributions", __file__, "--scorer", "s", "--k-grid", "0.5", "--out", out],
        "certify": ["certify", "--votes", __file__, "--out", out],
        "stability": ["stability", "--attributions", __file__, "--scorer", "s", "--k-grid", "0.5", "--out", out],
        "report-attack": ["report-attack", "--scorer", "s", "--k-grid", "0.5", "--out-dir", str(tmp_path / "out")],
        "certify-scores": ["certify-scores", "--scores", __file__, "--out", out],
        "vision-runtime": ["vision-runtime", *model, "--out-stem", str(tmp_path / "out")],
    }[stage]


@pytest.mark.parametrize("stage, tag, words", [
    ("votes", "p0.6_n0100_n1000_s0", ["--n0", "100"]),
    ("certify", "t0.95_a0.001_bonferroni", ["--correction", "holm"]),
    ("stability", "p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni", ["--seed", "0", "--tau", "0.9"]),
    ("report-attack", "p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni", ["--p-del", "0.6"]),
    ("certify-scores", "p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni", ["--alpha", "0.01"]),
    ("vision-runtime", "p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni", ["--tau", "0.9"]),
])
def test_the_tag_and_a_word_it_gives_are_refused_together_before_any_work(
        stage: str, tag: str, words: list[str], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as stop:
        main([*_argv(stage, tmp_path), "--setting", tag, *words])
    err = capsys.readouterr().err
    given = " ".join(w for w in words if w.startswith("--"))
    assert stop.value.code == 2 and "Traceback" not in err
    assert f"certified-circuits {stage}: error: --setting {tag} and {given} both give the setting's" in err
    assert "pass --setting alone, or the words" in err and "without --setting" in err
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("stage, missing", [
    ("votes", "--p-del"), ("certify", "--tau"), ("stability", "--p-del, --tau"), ("report-attack", "--p-del, --tau"),
])
def test_a_needed_word_given_neither_way_keeps_the_required_error(
        stage: str, missing: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as stop:
        main(_argv(stage, tmp_path))
    err = capsys.readouterr().err
    assert stop.value.code == 2
    assert f"{stage}: error: the following arguments are required: {missing} (or --setting TAG instead)" in err


@pytest.mark.parametrize("stage, tag, message", [
    ("votes", "p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni", "is not a votes tag (p{p_del}_n0{n0}_n{n}_s{seed}"),
    ("certify", "p0.6_n0100_n1000_s0", "is not a decision tag (t{tau}_a{alpha}_{correction}"),
    ("stability", "t0.95_a0.001_bonferroni", "is not a setting tag (p{p_del}_n0{n0}_n{n}_s{seed}/t{tau}"),
    ("certify", "t0.95_a1e-3_bonferroni", "alpha is written '0.001', not '1e-3'"),
    ("votes", "p1.5_n0100_n1000_s0", "p_del=1.5 is invalid"),
])
def test_a_tag_of_the_wrong_part_or_form_is_refused_when_parsed(
        stage: str, tag: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as stop:
        main([*_argv(stage, tmp_path), "--setting", tag])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and f"argument --setting: {tag!r} " in err and message in err


def test_resolution_fills_the_words_exactly_and_leaves_the_tag_for_the_record(tmp_path: Path) -> None:
    tag = "p0.6000001_n05_n7_s3/t0.9999999_a1e-05_holm"
    args = resolve_setting(build_parser().parse_args([*_argv("stability", tmp_path), "--setting", tag]))
    assert (args.p_del, args.n0, args.n, args.seed, args.tau, args.alpha, args.correction) == (
        0.6000001, 5, 7, 3, 0.9999999, 1e-05, "holm")
    assert args.setting == tag and SETTING_WORDS not in vars(args)  # the job record holds the words and the tag
    # the words, the rest from the defaults: certify-scores with none is Setting()
    args = resolve_setting(build_parser().parse_args(_argv("certify-scores", tmp_path)))
    fields = ("p_del", "n0", "n", "seed", "tau", "alpha", "correction")
    assert tuple(getattr(args, f) for f in fields) == tuple(getattr(DEFAULT, f) for f in fields)
    args = resolve_setting(build_parser().parse_args([*_argv("certify", tmp_path), "--tau", "0.9"]))
    assert (args.tau, args.alpha, args.correction, args.setting) == (0.9, 0.001, "bonferroni", None)
