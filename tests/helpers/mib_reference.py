"""MIB's reading of a submission, reimplemented independently of the package (tests/unit/test_mib_submission.py
and the smoke run's MIB check in tests/integration/test_workflow.py use it).

What hannamw/MIB-circuit-track (b759df3) does with a submitted file: EAP-IG's (7af394a) ``Graph.from_model`` (the edge
matrix: forward nodes ``input``, then per layer the heads and the MLP; backward nodes per layer the heads' q, k, v
inputs and the MLP, then ``logits``; an edge from every earlier node, a head feeding its own layer's MLP),
``Graph.from_json`` (every edge's ``score`` and ``in_graph``), ``apply_topn(n, absolute)`` (reset, scores of non-edges
-inf, ``argsort`` descending, the first n in) and ``Graph.prune`` (a node stays with an incoming edge, ``input`` always,
and an outgoing one; an edge with both ends, ``logits`` always; repeated until the nodes do not change), driven as
``evaluate_area_under_curve`` drives it: ``n = int(pct * len(graph.edges))``. Ties in ``argsort`` are left open by
torch, so every selection is made with ties broken both ways.
"""

from __future__ import annotations

import json

import numpy as np

PERCENTAGES = (.001, .002, .005, .01, .02, .05, .1, .2, .5, 1)  # evaluation.py, verbatim
BINARY_PCTS = PERCENTAGES[:-1]  # README: the 9 binary circuits, 0.1% .. 50%


class MIBGraph:
    """EAP-IG's Graph, as matrices, built from a ``cfg`` (sequential blocks)."""

    def __init__(self, cfg: dict):
        L, H = cfg["n_layers"], cfg["n_heads"]
        assert not cfg["parallel_attn_mlp"]
        self.fwd = {"input": 0}
        self.bwd: dict[str, int] = {}
        for layer in range(L):
            for h in range(H):
                self.fwd[f"a{layer}.h{h}"] = 1 + layer * (H + 1) + h
                for j, letter in enumerate("qkv"):
                    self.bwd[f"a{layer}.h{h}<{letter}>"] = layer * (3 * H + 1) + j * H + h
            self.fwd[f"m{layer}"] = 1 + layer * (H + 1) + H
            self.bwd[f"m{layer}"] = layer * (3 * H + 1) + 3 * H
        n_fwd, n_bwd = 1 + L * (H + 1), L * (3 * H + 1) + 1
        self.bwd["logits"] = n_bwd - 1
        self.f2b = np.zeros((n_fwd, n_bwd), bool)
        for name, i in self.fwd.items():
            if name.startswith("a"):
                for letter in "qkv":
                    self.f2b[i, self.bwd[f"{name}<{letter}>"]] = True
            elif name.startswith("m"):
                self.f2b[i, self.bwd[name]] = True
        self.real = np.zeros((n_fwd, n_bwd), bool)
        self.index: dict[str, tuple[int, int]] = {}
        stream = ["input"]
        for layer in range(L):
            heads = [f"a{layer}.h{h}" for h in range(H)]
            for parent in stream:
                for head in heads:
                    for letter in "qkv":
                        self._add(parent, f"{head}<{letter}>")
            stream += heads
            for parent in stream:
                self._add(parent, f"m{layer}")
            stream.append(f"m{layer}")
        for parent in stream:
            self._add(parent, "logits")
        self.scores = np.zeros((n_fwd, n_bwd), np.float32)
        self.in_graph = np.zeros((n_fwd, n_bwd), bool)

    def _add(self, parent: str, child: str) -> None:
        ij = (self.fwd[parent], self.bwd[child])
        self.real[ij] = True
        self.index[f"{parent}->{child}"] = ij

    @classmethod
    def from_json(cls, path) -> "MIBGraph":
        d = json.loads(path.read_text())
        assert all(k in d for k in ("cfg", "nodes", "edges"))
        g = cls(d["cfg"])
        for name, info in d["edges"].items():
            g.scores[g.index[name]] = info["score"]  # a KeyError here: a name MIB's graph does not have
            g.in_graph[g.index[name]] = info["in_graph"]
        return g

    def apply_topn(self, n: int, absolute: bool, reverse_ties: bool) -> np.ndarray:
        s = self.scores.astype(np.float64)
        s = np.abs(s) if absolute else s
        s[~self.real] = -np.inf
        flat = s.ravel()
        idx = np.arange(flat.size)
        if reverse_ties:  # descending score, ties to the higher index
            order = np.lexsort((-idx, -flat))
        else:
            order = np.lexsort((idx, -flat))
        keep = np.zeros(flat.size, bool)
        keep[order[:n]] = True
        return self.prune(keep.reshape(s.shape))

    def prune(self, in_graph: np.ndarray) -> np.ndarray:
        in_graph = in_graph.copy()
        nodes = np.zeros(in_graph.shape[0], bool)
        first = True
        while True:
            out_ = in_graph.any(1)
            inc = (in_graph.any(0).astype(float) @ self.f2b.T.astype(float)) > 0
            inc[0] = True
            new = out_ & inc
            if not first and np.array_equal(new, nodes):
                break
            first = False
            same = np.array_equal(new, nodes)
            nodes = new
            back = nodes.astype(float) @ self.f2b.astype(float)
            back[-1] = 1
            in_graph &= np.outer(nodes, back) > 0
            if same:
                break
        return in_graph

    def mask(self, names, values) -> np.ndarray:
        m = np.zeros(self.real.shape, bool)
        for name, v in zip(names, values):
            m[self.index[name]] = bool(v)
        return m


def check_as_mib_evaluates(root, pair: str, method: str = "certified-EAP-IG-inputs_patching_edge") -> int:
    """Every binary file of ``root`` (``report-mib``'s output) read and re-ranked as MIB does, with ties both ways
    and both rankings: the circuit evaluated is ``prune(in_graph)`` wherever the notes say the membership is kept.

    Returns:
        The number of files whose evaluated circuit is not empty.
    """
    notes = json.loads((root / "notes" / f"{pair}.json").read_text())
    non_empty = 0
    for note in notes["fractions"]:
        g = MIBGraph.from_json(root / "multiple_circuits" / method / pair / note["file"])
        n = int(note["fraction"] * len(g.index))
        assert g.in_graph.sum() == note["n_in"] <= n
        for absolute in (False, True):
            for reverse in (False, True):
                evaluated = g.apply_topn(n, absolute, reverse)
                if note["keeps_membership"]:
                    assert np.array_equal(evaluated, g.prune(g.in_graph)), note["file"]
                else:  # MIB evaluates n edges: the certified circuit and more
                    assert (evaluated >= g.prune(g.in_graph)).all()
        non_empty += bool(evaluated.any())
    return non_empty
