"""No exact ties decided by index in the fair testbed's language model (issue 59): the noisy compiled induction model
(language/compiled.py, ``induction_noisy``, seed 3, the first pre-registered seed) scored with EAP-IG (inputs, 5
steps, reference points, as experiments/noise_sweep.py's ``score_prompts``): among its live edges (a non-zero score on
some prompt of D) the ranking score |mean| over D and over bootstrap resamples of D has no two equal values, so the
top-K's lower-index rule never decides a membership (its one top-K group is every edge)."""

from __future__ import annotations

import numpy as np
import torch

from certified_circuits.analysis.stability import bootstrap_indices
from certified_circuits.language.compiled import compile_model
from certified_circuits.language.eap_ig import eap_ig_scores
from certified_circuits.language.forward import GPT2Weights
from certified_circuits.language.methods import check_method
from certified_circuits.language.tasks import generate_splits
from certified_circuits.language.tokenizer import encode_examples

#: |D|: the first prompts of ``language-tasks --task induction --seed 0`` (the testbed's D is the first 100)
PROMPTS = 10
RESAMPLES = 3
IG_STEPS = 5


def test_live_edges_never_tie_on_their_eap_ig_ranking_score():
    torch.set_num_threads(1)
    hf, tok, _ = compile_model("induction_noisy", 3, distractor_scale=1.0)
    weights = GPT2Weights.from_hf(hf)
    batch = encode_examples(generate_splits("induction", 0, PROMPTS)["train"], tok, max_len=hf.config.n_positions)
    spec = check_method("EAP-IG-inputs", "edge", IG_STEPS, "reference")
    conv = spec.convention("edge", IG_STEPS, "reference")
    scores = eap_ig_scores(weights, batch, ig_steps=IG_STEPS, points=list(conv.points), progress=False,
                           factor=spec.factor).astype(np.float64)
    live = (scores != 0).any(axis=0)
    assert scores.shape == (PROMPTS, 310) and 200 < live.sum() < 310  # some edges are exactly zero: not live
    for b, rows in enumerate([np.arange(PROMPTS), *bootstrap_indices(PROMPTS, RESAMPLES, 0)]):
        ranking = np.abs(scores[rows].mean(axis=0))[live]
        values, counts = np.unique(ranking, return_counts=True)
        assert (counts == 1).all(), f"sample {b}: {int((counts > 1).sum())} tied values, e.g. {values[counts > 1][:3]}"
