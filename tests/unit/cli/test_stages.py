"""The stages' shared option checks (cli/stages.py; issue 45): the bound on a mean-ablation fill's reference images,
refused by the vision stages before any image is loaded and equal to config.schema.yaml's maximum."""

from __future__ import annotations

import pytest
import yaml
from snakemake.utils import validate

from certified_circuits.cli.stages import MAX_REFERENCE_SIZE
from tests.helpers.paths import ROOT, SCHEMA


@pytest.mark.parametrize("stage", ["vision-ground-truth", "vision-evaluate"])
def test_reference_size_is_bounded_where_the_fill_would_load_too_many_images(
        stage: str, capsys: pytest.CaptureFixture) -> None:
    from certified_circuits.cli.main import main

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
