"""Issue 61: the compiled language models' arguments are checked where they enter, by name
(``compile_induction_noisy(distractor_scale="abc")`` raised numpy's TypeError from ``np.isfinite``)."""

from __future__ import annotations

import numpy as np
import pytest

from certified_circuits.language.compiled import (
    check_compile_arguments,
    compile_induction,
    compile_induction_noisy,
    compile_model,
)

BAD = [
    ({"distractor_scale": "abc"}, "distractor_scale must be a finite number >= 0 (1: the compiled noisy model, 0: "
                                  "silent distractors), got 'abc'"),
    ({"distractor_scale": None}, "distractor_scale must be a finite number >= 0"),
    ({"distractor_scale": True}, "distractor_scale must be a finite number >= 0"),
    ({"distractor_scale": -1}, "distractor_scale must be a finite number >= 0"),
    ({"distractor_scale": float("nan")}, "distractor_scale must be a finite number >= 0"),
    ({"distractor_scale": float("inf")}, "distractor_scale must be a finite number >= 0"),
    ({"seed": -1}, "seed must be an integer in [0, 2**32 - 1], got -1"),
    ({"seed": "0"}, "seed must be an integer in [0, 2**32 - 1], got '0'"),
    ({"seed": 2**32}, "seed must be an integer in [0, 2**32 - 1]"),
    ({"n_positions": 1}, "n_positions must be an integer in 2..1024"),
    ({"n_positions": 10**6}, "n_positions must be an integer in 2..1024"),
    ({"n_positions": 64.0}, "n_positions must be an integer in 2..1024"),
]


@pytest.mark.parametrize("change, message", BAD, ids=[str(c) for c, _ in BAD])
def test_a_bad_argument_is_a_value_error_naming_it(change, message):
    arguments = {"seed": 0, "n_positions": 64, "distractor_scale": 1.0, **change}
    with pytest.raises(ValueError) as caught:
        compile_induction_noisy(**arguments)
    assert message in str(caught.value)
    with pytest.raises(ValueError) as caught:
        compile_model("induction_noisy", **arguments)
    assert message in str(caught.value)
    if "distractor_scale" not in change:
        with pytest.raises(ValueError, match=message.split(",")[0].replace("[", r"\[").replace("*", r"\*")):
            compile_induction(arguments["seed"], arguments["n_positions"])


def test_valid_arguments_pass():
    for arguments in ({"seed": 0, "n_positions": 2}, {"seed": np.int64(2**32 - 1), "n_positions": 1024},
                      {"seed": 3, "n_positions": 64, "distractor_scale": 0}, {"seed": 3, "n_positions": 64,
                                                                               "distractor_scale": np.float32(2.5)}):
        check_compile_arguments(**arguments)
