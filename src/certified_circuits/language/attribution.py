"""Attribution of one language task and split: per-example EAP-IG edge scores, written as the
attribution contract (docs/architecture.md, section 2).

The ``language-attribute`` stage parses its arguments and calls :func:`attribute_task`; the library
does the rest, as :func:`certified_circuits.language.evaluate.evaluate_task` does for evaluation.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from certified_circuits.language.eap_ig import RANKING, eap_ig_scores
from certified_circuits.language.models import load_language_model
from certified_circuits.language.tasks import Example
from certified_circuits.language.tokenizer import encode_examples
from certified_circuits.storage.store import write_attributions

#: the metric EAP-IG differentiates, as recorded in the attribution file
METRIC = "logit(answer) - logit(distractor), last position, per example"


def attribute_task(examples: list[Example], *, task: str, split: str, model: str, model_path: Any, out: Path | str,
                   experiment: str, device: Any, ig_steps: int, integration: str, batch_size: int) -> tuple[int, int]:
    """EAP-IG scores of every edge for every example, written to ``out`` (scorer ``eap_ig``, ranked ``absolute``).

    Args:
        examples: the prompts of one task and split (``language-tasks`` JSONL, read).
        task, split, experiment: labels written into the file.
        model, model_path: the language model (``load_language_model``).
        out: the attribution HDF5 to write (atomically).
        device: a torch device.
        ig_steps, integration, batch_size: EAP-IG's integration points and batching (:func:`eap_ig_scores`).

    Returns:
        ``(n_examples, n_edges)`` of the score matrix written.
    """
    lm = load_language_model(model, model_path)
    batch = encode_examples(examples, lm.tokenizer, max_len=lm.n_positions)
    start = time.time()
    scores = eap_ig_scores(lm.weights.to(device), batch, ig_steps=ig_steps, batch_size=batch_size, device=device,
                           integration=integration)
    graph = lm.weights.graph
    attrs = {"model": model, "model_path": str(model_path), "dataset": task, "concept": task, "split": split,
             "experiment": experiment, "scorer": "eap_ig", "ig_steps": int(ig_steps), "integration": integration,
             "metric": METRIC, "n_layers": graph.n_layers, "n_heads": graph.n_heads, "seconds": time.time() - start}
    write_attributions(out, {"eap_ig": scores}, np.zeros(graph.n_edges, dtype=np.int32), graph.edge_names(), batch.ids,
                       attrs, extras={"answer_token": batch.answer, "distractor_token": batch.distractor},
                       rankings={"eap_ig": RANKING})
    return int(scores.shape[0]), int(scores.shape[1])
