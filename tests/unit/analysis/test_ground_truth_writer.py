"""The ground-truth format's one writer (analysis/recovery.write_ground_truth, issue 52 item 3): a valid document
round-trips through the one reader; an invalid one is refused by name before anything is written (no file, no
temporary file, an existing file kept); and no other module builds or writes the document."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import numpy as np
import pytest

from certified_circuits.analysis.component_truth import per_component_block, split_truth
from certified_circuits.analysis.recovery import GROUND_TRUTH_FORMAT, read_ground_truth, write_ground_truth
from tests.helpers.paths import ROOT

PACKAGE = ROOT / "src" / "certified_circuits"
NAMES = [f"layer1.{i}" for i in range(14)]
#: planted 0..12, effects 0.9 x 11, then 0.3 (grey: between epsilon 0.1 and delta 0.5), 0.05 (null); 13 not planted
#: at 0.1, so epsilon = 0.1, delta = 5 x 0.1 = 0.5, the truth is layer1.0 .. layer1.10 and layer1.11 is grey
EFFECTS = np.array([0.9] * 11 + [0.3, 0.05, 0.1])
PLANTED = np.array([True] * 13 + [False])


def _block() -> dict:
    split = split_truth(EFFECTS, PLANTED)
    return per_component_block(NAMES, EFFECTS, PLANTED, split, metric="class logit", ablation="mean",
                               unit="the whole truth's effect")


def _concepts() -> dict:
    return {
        "circle": {"components": NAMES[:11], "verification": {"passed": True, "recovery": 0.93,
                                                              "per_component": _block()}},
        "square": {"components": ["layer1.0", "layer1.13"], "verification": {"passed": False, "recovery": 0.41}},
    }


def _write(path: Path, concepts: dict, kind: str = "vision"):
    return write_ground_truth(path, experiment="world", kind=kind, model="planted_world_resnet own=[2]",
                              how="by construction", names=NAMES, concepts=concepts, planted={"own": [2]})


def test_a_valid_document_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "gt.json"
    written = _write(path, _concepts())
    truth = read_ground_truth(path)
    assert truth == written  # the writer returns the truth as the reader reads it
    assert (truth.experiment, truth.kind, truth.model, truth.how) == ("world", "vision",
                                                                      "planted_world_resnet own=[2]", "by construction")
    assert truth.n_components == 14 and list(truth.concepts) == ["circle", "square"]
    assert truth.concepts["circle"] == tuple(f"layer1.{i}" for i in range(11))
    assert truth.concepts["square"] == ("layer1.0", "layer1.13")
    assert truth.grey("circle") == ("layer1.11",) and truth.grey("square") == ()
    assert truth.verified("circle") is True and truth.verified("square") is False
    block = truth.verification["circle"]["per_component"]
    assert block["epsilon"] == pytest.approx(0.1, abs=1e-12) and block["delta"] == pytest.approx(0.5, abs=1e-12)
    assert block["dropped"] == ["layer1.11", "layer1.12"] and block["effects"]["layer1.11"] == 0.3
    assert truth.verification["circle"]["recovery"] == 0.93 and truth.verification["square"]["recovery"] == 0.41
    raw = json.loads(path.read_text())
    assert list(raw) == ["format", "experiment", "kind", "model", "how", "n_components", "planted", "concepts"]
    assert raw["format"] == "certified-circuits/ground-truth/1" and raw["planted"] == {"own": [2]}
    assert [p.name for p in tmp_path.iterdir()] == ["gt.json"]  # no temporary file left


def _with(concept: str, **entry) -> dict:
    concepts = _concepts()
    concepts[concept] = {**concepts[concept], **entry}
    return concepts


INVALID = {
    "component not in the model": (_with("square", components=["layer1.0", "layer9.9"]),
                                   r"concept 'square' names 1 component\(s\) that the model's 14 components do not "
                                   r"have: 'layer9.9'"),
    "missing passed": (_with("square", verification={"recovery": 0.41}),
                       r"concept 'square': verification has no 'passed'"),
    "passed as a string": (_with("square", verification={"passed": "false"}),
                           r"concept 'square': verification.passed is 'false' \(str\), expected JSON true or false"),
    "grey component also true": (_with("circle", components=NAMES[:12]),
                                 r"per_component.dropped .* lists true ones: \['layer1.11'\]"),
    "component twice": (_with("square", components=["layer1.0", "layer1.0"]),
                        r"concept 'square' lists \['layer1.0'\] more than once"),
    "no components": (_with("square", components=[]), r"concept 'square' needs 'components', a non-empty list"),
    "every component true": (_with("square", components=NAMES), r"concept 'square' marks all 14 components true"),
    "NaN number": (_with("square", verification={"passed": False, "recovery": math.nan}),
                   r"concepts.square.verification.recovery is nan \(JSON has no NaN"),
    "numpy scalar": (_with("square", verification={"passed": False, "recovery": np.float32(0.4)}),
                     r"concepts.square.verification.recovery is a float32 \(not a JSON value"),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_an_invalid_document_is_refused_and_nothing_is_written(tmp_path: Path, case: str) -> None:
    concepts, message = INVALID[case]
    path = tmp_path / "gt.json"
    with pytest.raises(ValueError, match=message) as caught:
        _write(path, concepts)
    assert str(caught.value).startswith(f"{path} (not written): ")
    if case not in ("component not in the model", "every component true"):  # those two carry truth_mask's own fix
        assert "nothing was written" in str(caught.value)
    assert list(tmp_path.iterdir()) == []  # no file at the path, no temporary file


def test_an_invalid_kind_is_refused_and_an_existing_file_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "gt.json"
    _write(path, _concepts())
    before = path.read_bytes()
    with pytest.raises(ValueError, match=r"gt.json \(not written\): kind is 'audio', expected 'vision' or 'language'"):
        _write(path, _concepts(), kind="audio")
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["gt.json"]


# ------------------------------------------------------------------------------ one writer (architecture)


def _modules() -> dict[str, ast.Module]:
    """Every Python module of the package and of experiments/, parsed, by path relative to the repository."""
    files = sorted(PACKAGE.rglob("*.py")) + sorted((ROOT / "experiments").glob("*.py"))
    return {str(p.relative_to(ROOT)): ast.parse(p.read_text(encoding="utf-8")) for p in files}


def _called(tree: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Call) and name in (getattr(n.func, "id", None), getattr(n.func, "attr", None))
               for n in ast.walk(tree))


def test_the_format_is_built_and_written_in_one_function() -> None:
    """The format string is defined once and used only by its reader and writer (analysis/recovery.py); the one dict
    with 'format' and 'concepts' keys is built in write_ground_truth, the one function there that calls write_json;
    the vision and language ground-truth modules call it, and the two stages call them."""
    reader = "src/certified_circuits/analysis/recovery.py"
    modules = _modules()
    naming, building = set(), []
    for path, tree in modules.items():
        for node in ast.walk(tree):
            if ((isinstance(node, ast.Name) and node.id == "GROUND_TRUTH_FORMAT")
                    or (isinstance(node, ast.Attribute) and node.attr == "GROUND_TRUTH_FORMAT")
                    or (isinstance(node, ast.alias) and node.name == "GROUND_TRUTH_FORMAT")
                    or (isinstance(node, ast.Constant) and node.value == GROUND_TRUTH_FORMAT)):
                naming.add(path)
            keys = ({k.value for k in node.keys if isinstance(k, ast.Constant)} if isinstance(node, ast.Dict)
                    else {k.arg for k in node.keywords} if isinstance(node, ast.Call)
                    and getattr(node.func, "id", None) == "dict" else set())
            if {"format", "concepts"} <= keys:
                building.append((path, node.lineno))
    assert naming == {reader}
    functions = {f.name: f for f in ast.walk(modules[reader]) if isinstance(f, ast.FunctionDef)}
    writer = functions["write_ground_truth"]
    assert building == [(reader, next(n.lineno for n in ast.walk(writer) if isinstance(n, ast.Dict)))]
    assert [name for name, f in functions.items() if _called(f, "write_json")] == ["write_ground_truth"]
    callers = {path for path, tree in modules.items() if _called(tree, "write_ground_truth")}
    assert callers == {f"src/certified_circuits/{domain}/ground_truth.py" for domain in ("vision", "language")}
    assert {path for path, tree in modules.items() if _called(tree, "write_class_truths")} == {
        "src/certified_circuits/cli/vision_data.py"}
    assert {path for path, tree in modules.items() if _called(tree, "write_induction_truth")} == {
        "src/certified_circuits/cli/language.py"}
