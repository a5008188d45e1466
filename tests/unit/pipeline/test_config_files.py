"""A value that fits none of a oneOf / anyOf of config.schema.yaml is told the allowed values (issue 35, item 6b).

jsonschema says only "X is not valid under any of the given schemas"; the workflow's message
(:func:`certified_circuits.pipeline.config.condense_schema_error`, on Snakemake's own validation error) lists each
alternative in words, with the key.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from certified_circuits.pipeline.config_files import condense_schema_error
from tests.helpers.paths import ROOT

SCHEMA = ROOT / "config.schema.yaml"
NAME = "a name used in result paths and commands (letters, digits, _ and -)"


def message(config_file: str, key: str, value) -> str:
    config = copy.deepcopy(yaml.safe_load((ROOT / config_file).read_text()))
    *parents, last = key.split(".")
    node = config
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    with pytest.raises(WorkflowError) as caught:
        validate(config, str(SCHEMA), set_default=True)
    assert "not valid under any of the given schemas" in str(caught.value)  # what jsonschema said
    return condense_schema_error(str(caught.value))


@pytest.mark.parametrize("config_file, key, value, expected", [
    ("configs/smoke.yaml", "vision.selection_set", 5,
     f"config is invalid: 5 is not allowed here: use null (unset); or {NAME} (at vision.selection_set)"),
    ("configs/smoke.yaml", "language.selection_set", "val",
     "config is invalid: 'val' is not allowed here: use null (unset); or 'validation' (at language.selection_set)"),
    ("configs/smoke.yaml", "vision.concepts", "some",
     f"config is invalid: 'some' is not allowed here: use 'all'; or a non-empty list, each {NAME}, no repeats "
     "(at vision.concepts)"),
    ("configs/smoke.yaml", "vision.radius_sweep.concepts", [],
     f"config is invalid: [] is not allowed here: use 'all'; or a non-empty list, each {NAME}, no repeats "
     "(at vision.radius_sweep.concepts)"),
    ("configs/smoke.yaml", "vision.scorers", ["relevance", "grad"],
     "config is invalid: 'grad' is not allowed here: use 'relevance' or 'activation' or 'rank'; or 'conductance' "
     "(vision.conductance); or a plugin package.module:function (at vision.scorers.1)"),
    ("configs/custom.yaml", "vision.folders.n_classes", 0,
     "config is invalid: 0 is not allowed here: use null (unset); or an integer >= 1 (at vision.folders.n_classes)"),
    ("configs/custom.yaml", "vision.folders.layers", "all",
     r"config is invalid: 'all' is not allowed here: use 'auto'; or a non-empty list, each a string matching "
     r"^[A-Za-z0-9_.\-]+$, no repeats (at vision.folders.layers)"),
])
def test_a_value_that_fits_no_alternative_is_told_the_allowed_ones(config_file, key, value, expected) -> None:
    assert message(config_file, key, value) == expected


def test_other_schema_errors_are_unchanged() -> None:
    config = yaml.safe_load((ROOT / "configs/smoke.yaml").read_text())
    config["vision"]["certification"]["n"] = 10**9
    with pytest.raises(WorkflowError) as caught:
        validate(config, str(SCHEMA), set_default=True)
    assert condense_schema_error(str(caught.value)) == ("config is invalid: 1000000000 is greater than the maximum of "
                                                         "100000 (at vision.certification.n)")


def test_without_the_schema_file_the_alternatives_still_show(tmp_path: Path) -> None:
    config = yaml.safe_load((ROOT / "configs/smoke.yaml").read_text())
    config["language"]["selection_set"] = "val"
    with pytest.raises(WorkflowError) as caught:
        validate(config, str(SCHEMA), set_default=True)
    text = condense_schema_error(str(caught.value), schema_file=tmp_path / "absent.yaml")
    assert text == "config is invalid: 'val' is not allowed here: use null (unset); or 'validation' (at language.selection_set)"
