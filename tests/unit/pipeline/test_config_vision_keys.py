"""Issue 61, class 5: the vision half of the workflow config refuses a key it does not have or an empty list as the
language half does: one ConfigError naming the key (``vision.settings: []`` once gave ``KeyError: 'scorer'`` in
experiments/fair_testbed.py, whose own check is tests/unit/project/test_fair_testbed.py). The default is accepted."""

from __future__ import annotations

from pathlib import Path

import pytest

from certified_circuits.pipeline.config_errors import ConfigError
from tests.helpers.config import check, check_text


@pytest.mark.parametrize(("text", "message"), [
    ("vision:\n  settings: []\n", "('settings' was unexpected) (at vision)"),
    ("vision:\n  settings: [{tau: 0.9, p_del: 0.6}]\n", "('settings' was unexpected) (at vision)"),
    ("vision:\n  scorers: []\n", "[] should be non-empty (at vision.scorers)"),
    ("vision:\n  certification: []\n", "[] is not of type 'object' (at vision.certification)"),
    ("vision: []\n", "[] is not of type 'object' (at vision)"),
    ("vision:\n  k_grid: []\n", "[] should be non-empty (at vision.k_grid)"),
])  # fmt: skip
def test_a_vision_key_it_lacks_or_an_empty_list_is_named(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_text(tmp_path, "config.yaml", text=text)
    assert message in str(caught.value) and "KeyError" not in str(caught.value)


def test_the_default_config_is_accepted() -> None:
    check("config.yaml")
