"""Attribution of one language task and split: per-example EAP-IG scores of every edge (or every head
and MLP, ``level="node"``), written as the attribution contract (docs/architecture.md, section 2).

Which implementation runs (:func:`score_examples`): GPT-2 models (the embedded one, GPT-2 Small) with a
method that interpolates the input or nothing (:attr:`~.methods.MethodSpec.decomposed`) at edge level take
the decomposed fast path (:mod:`.eap_ig`); every other model, method and level runs through the
TransformerBridge hooks (:mod:`.hooked`). Both compute the same
scores (tests/unit/language/test_hooked.py checks them against each other on GPT-2).

The ``language-attribute`` stage parses its arguments and calls :func:`attribute_task`; the library
does the rest, as :func:`certified_circuits.language.evaluate.evaluate_task` does for evaluation.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from certified_circuits.language.eap_ig import eap_ig_scores
from certified_circuits.language.hooked import attribution_scores
from certified_circuits.language.methods import check_method, method_spec
from certified_circuits.language.models import LanguageModel, load_language_model
from certified_circuits.language.tasks import Example
from certified_circuits.language.tokenizer import EncodedBatch, encode_examples
from certified_circuits.storage.store import write_attributions

#: the metric EAP-IG differentiates, as recorded in the attribution file
METRIC = "logit(answer) - logit(distractor), last position, per example"


def uses_fast_path(lm: LanguageModel, method: str, level: str) -> bool:
    """True when the GPT-2 decomposed forward computes these scores (module docstring)."""
    return lm.weights is not None and level == "edge" and method_spec(method).decomposed


def score_examples(lm: LanguageModel, batch: EncodedBatch, *, method: str = "EAP-IG-inputs", level: str = "edge",
                   ig_steps: int = 5, integration: str = "reference", batch_size: int = 16, device: Any = "cpu",
                   progress: bool = True) -> np.ndarray:
    """Signed per-example scores, float32 [n_examples, n_components] (edges, or heads and MLPs).

    Args:
        lm: the model (:func:`~.models.load_language_model`), already on ``device``.
        batch: encoded prompts.
        method, level, ig_steps, integration: :mod:`.hooked`'s module docstring.
        batch_size, device, progress: batching, device and the stderr progress bar.

    Returns:
        The score matrix in the component order of :func:`component_names`.
    """
    spec = check_method(method, level, ig_steps, integration)
    if uses_fast_path(lm, method, level):
        conv = spec.convention(level, ig_steps, integration)
        # an input or no interpolation at edge level: no rule of the reference's beyond its points applies
        if conv.input_gradient != "always" or conv.mlp_node_gradient != "output":
            raise RuntimeError(f"the decomposed forward does not compute {conv}")
        return eap_ig_scores(lm.weights, batch, ig_steps=ig_steps, batch_size=batch_size, device=device,
                             points=list(conv.points), progress=progress, desc=method,
                             factor=spec.factor_for(integration))
    return attribution_scores(lm.bridge, lm.graph, batch, method=method, level=level, ig_steps=ig_steps,
                              integration=integration, batch_size=batch_size, device=device, progress=progress)


def component_names(lm: LanguageModel, level: str) -> list[str]:
    """Edge names (``a0.h1->m2``, canonical order) or node names (``a0.h1``, ``m2``; forward order)."""
    return lm.graph.edge_names() if level == "edge" else lm.graph.node_names()


def attribute_task(examples: list[Example], *, task: str, split: str, model: str, model_path: Any, out: Path | str,
                   experiment: str, device: Any, ig_steps: int, integration: str, batch_size: int,
                   method: str = "EAP-IG-inputs", level: str = "edge") -> tuple[int, int]:
    """Scores of every component for every example, written to ``out`` (scorer ``eap_ig``, ranked as the method's
    registry entry says: :data:`~.methods.METHODS`).

    Args:
        examples: the prompts of one task and split (``language-tasks`` JSONL, read).
        task, split, experiment: labels written into the file.
        model, model_path: the language model (``load_language_model``: embedded, gpt2 or hf).
        out: the attribution HDF5 to write (atomically).
        device: a torch device.
        ig_steps, integration, batch_size: the IG points, the convention (:class:`~.methods.Convention`:
            ``reference`` (default), ``endpoint`` or ``hannamw``, the reference's code) and batching. The file
            records ``integration`` and what it resolved to for this method and level: ``ig_points`` (the
            alphas), ``input_gradient`` and ``mlp_node_gradient``, and for ``CEAP`` ``conductance_term`` (its
            step term; docs/reference_parity.md).
        method: a registered method (:data:`~.methods.METHODS`: ``EAP``, ``EAP-IG-inputs`` (default),
            ``EAP-IG-activations``, ``clean-corrupted``, ``grad-x-act``, ``CEAP``), recorded in the file with its
            ranking.
        level: ``edge`` (every EAP edge a component) or ``node`` (every head and MLP), recorded in the file.

    Returns:
        ``(n_examples, n_components)`` of the score matrix written.
    """
    spec = check_method(method, level, ig_steps, integration)
    # an hf model's bridge is checked against the HF model on these very prompts before any score
    lm = load_language_model(model, model_path, prompts=[t for e in examples for t in (e.clean, e.corrupted)],
                             device=device)
    batch = encode_examples(examples, lm.tokenizer, max_len=lm.n_positions)
    start = time.time()
    scores = score_examples(lm, batch, method=method, level=level, ig_steps=ig_steps, integration=integration,
                            batch_size=batch_size, device=device)
    graph = lm.graph
    names = component_names(lm, level)
    attrs = {"model": model, "model_path": str(model_path), "dataset": task, "concept": task, "split": split,
             "experiment": experiment, "scorer": "eap_ig", "method": method, "level": level,
             "method_interpolates": spec.interpolates, "method_description": spec.description,
             "ig_steps": int(ig_steps), "integration": integration,
             **spec.convention(level, ig_steps, integration).attrs(), "metric": METRIC, "n_layers": graph.n_layers,
             "n_heads": graph.n_heads, "parallel_attn_mlp": int(graph.parallel_attn_mlp),
             "d_model": int(lm.graph_cfg()["d_model"]), "seconds": time.time() - start}
    write_attributions(out, {"eap_ig": scores}, np.zeros(len(names), dtype=np.int32), names, batch.ids,
                       attrs, extras={"answer_token": batch.answer, "distractor_token": batch.distractor},
                       rankings={"eap_ig": spec.ranking})
    return int(scores.shape[0]), int(scores.shape[1])
