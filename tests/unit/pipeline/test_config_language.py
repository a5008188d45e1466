"""language.mib: a submission's task/model pairs and K grid are refused at parse time, listing MIB's valid pairs
(hannamw/MIB-circuit-track utils.py COL_MAPPING)."""

from __future__ import annotations

import copy

import pytest
import yaml
from snakemake.utils import validate

from certified_circuits.pipeline.config_language import check_language
from certified_circuits.pipeline.config_errors import ConfigError
from certified_circuits.pipeline.plans.language import mib_model_name
from tests.helpers.fresh import fresh_output
from tests.helpers.paths import ROOT

FRACTIONS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5]


def smoke(**mib) -> dict:
    config = yaml.safe_load((ROOT / "configs" / "smoke.yaml").read_text())
    config["language"]["mib"] = {**config["language"].get("mib", {}), **mib}
    validate(config, str(ROOT / "config.schema.yaml"), set_default=True)
    return config


def test_a_submission_of_a_pair_mib_does_not_evaluate_is_refused_listing_the_valid_pairs() -> None:
    config = smoke(model="qwen2.5", submission=True)
    config["language"]["tasks"] = ["ioi", "greater_than"]
    with pytest.raises(ConfigError) as error:
        check_language(copy.deepcopy(config["language"]))
    text = str(error.value)
    assert "language.mib.submission" in text and "MIB does not evaluate greater-than_qwen2.5" in text
    assert "ioi_gpt2, ioi_qwen2.5, ioi_gemma2, ioi_llama3, mcqa_qwen2.5, mcqa_gemma2, mcqa_llama3, " \
           "arithmetic-addition_llama3, arithmetic-subtraction_llama3, arc-easy_gemma2, arc-easy_llama3, " \
           "arc-challenge_llama3" in text


def test_a_submission_needs_mibs_model_and_fractions_in_the_grid() -> None:
    config = smoke(submission=True)
    with pytest.raises(ConfigError, match="a submission names MIB's model"):
        check_language(copy.deepcopy(config["language"]))
    config = smoke(model="gpt2", submission=True)  # the smoke grid is [0.1, 0.5]
    with pytest.raises(ConfigError, match=r"add \[0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.2\] to language.k_grid"):
        check_language(copy.deepcopy(config["language"]))
    config["language"]["k_grid"] = FRACTIONS
    check_language(copy.deepcopy(config["language"]))  # ioi_gpt2 with MIB's grid: accepted
    assert mib_model_name(config) == "gpt2"


def test_without_submission_any_pair_exports_and_mibs_names_are_checked_by_the_schema() -> None:
    config = smoke(model_name="tiny-gpt2")
    config["language"]["tasks"] = ["ioi", "greater_than"]
    config["language"]["settings"]["greater_than"] = config["language"]["settings"]["ioi"]
    check_language(copy.deepcopy(config["language"]))
    assert mib_model_name(config) == "tiny-gpt2"
    with pytest.raises(Exception, match="'gpt-2' is not one of"):
        smoke(model="gpt-2")
    config["language"]["level"] = "node"
    with pytest.raises(ConfigError, match="MIB's circuit files are edge circuits, but language.level is 'node'"):
        check_language(copy.deepcopy(config["language"]))
    with pytest.raises(ConfigError, match="only one of language.mib.model"):
        check_language(copy.deepcopy(smoke(model="gpt2", model_name="x")["language"]))


def test_the_submission_config_of_docs_mib_is_valid() -> None:
    """docs/mib.md's config (its yaml block) validates and passes the submission checks (paths aside)."""
    import re

    from certified_circuits.pipeline.config_language import check_language_mib

    text = (ROOT / "docs" / "mib.md").read_text()
    [block] = re.findall(r"```yaml\n(.*?)```", text, re.S)
    config = yaml.safe_load(block)
    validate(config, str(ROOT / "config.schema.yaml"), set_default=True)
    language = config["language"]
    language["tasks"] = list(language["task_files"])
    check_language_mib(language)
    assert mib_model_name(config) == "qwen2.5"


def test_the_mib_config_check_loads_no_pandas() -> None:
    """Parsing the Snakefile checks language.mib (:func:`check_language_mib`): its MIB constants come from
    ``analysis/mib_constants.py``, not through ``reports.mib``, so a fresh interpreter that imports the config module
    and runs the check (a valid submission and a refused one) has not loaded pandas (nor torch)."""
    code = (
        "import sys\n"
        "from certified_circuits.analysis.mib_constants import SUBMISSION_FRACTIONS\n"
        "import certified_circuits.pipeline.config\n"
        "from certified_circuits.pipeline.config_language import ConfigError, check_language_mib\n"
        "language = {'tasks': ['ioi'], 'level': 'edge', 'k_grid': list(SUBMISSION_FRACTIONS),\n"
        "            'mib': {'export': True, 'submission': True, 'model': 'gpt2'}}\n"
        "check_language_mib(language)\n"
        "try:\n"
        "    check_language_mib({**language, 'tasks': ['mcqa']})  # mcqa_gpt2: not a pair MIB evaluates\n"
        "except ConfigError as error:\n"
        "    assert 'valid task/model pairs' in str(error), error\n"
        "else:\n"
        "    raise AssertionError('a pair MIB does not evaluate passed')\n"
        "print([m for m in ('pandas', 'torch', 'matplotlib') if m in sys.modules])\n"
    )
    assert fresh_output(code) == "[]"
