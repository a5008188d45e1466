"""MIB's reading of a submission, reimplemented independently of the package (tests/unit/reports/test_mib_submission.py
and the smoke run's MIB check in tests/integration/test_workflow.py use it).

What hannamw/MIB-circuit-track (b759df3) does with a submitted file: EAP-IG's (7af394a) ``Graph.from_model`` (the edge
matrix: forward nodes ``input``, then per layer the heads and the MLP; backward nodes per layer the heads' q, k, v
inputs and the MLP, then ``logits``; an edge from every earlier node, a head feeding its own layer's MLP),
``Graph.from_json`` (every edge's ``score`` and ``in_graph``), ``apply_topn(n, absolute)`` (reset, scores of non-edges
-inf, ``argsort`` descending, the first n in) and ``Graph.prune`` (a node stays with an incoming edge, ``input`` always,
and an outgoing one; an edge with both ends, ``logits`` always), driven as ``evaluate_area_under_curve`` drives it:
``n = int(pct * len(graph.edges))``. Ties in ``argsort`` are left open by torch, so every selection is made with ties
broken both ways.

Two prunes. At 7af394a ``apply_topn(..., reset=True)`` sets ``nodes_in_graph`` to the nodes with an incoming and an
outgoing top-n edge, and ``prune``'s loop stops when the nodes it computes equal ``nodes_in_graph``: after
``apply_topn`` that holds at once, so ``prune`` removes the edges of the dropped nodes once and stops
(:meth:`MIBGraph.prune_once`); ``weighted_edge_count`` is read then. ``evaluate_graph`` calls ``prune`` again
before it evaluates, and that call repeats until the nodes do not change (:meth:`MIBGraph.prune`, the fixed point;
EAP-IG 55a2be2, later than the pin, makes the first call repeat too).
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

    def top_n(self, n: int, absolute: bool, reverse_ties: bool) -> np.ndarray:
        """The n best edges by score (``|score|`` when ``absolute``), before any prune."""
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
        return keep.reshape(s.shape)

    def apply_topn(self, n: int, absolute: bool, reverse_ties: bool, one_pass: bool = False) -> np.ndarray:
        """The circuit evaluated (``prune`` to the fixed point, as ``evaluate_graph`` leaves it), or with
        ``one_pass`` the one ``apply_topn(prune=True)`` leaves at 7af394a, whose size MIB records."""
        keep = self.top_n(n, absolute, reverse_ties)
        return self.prune_once(keep) if one_pass else self.prune(keep)

    def _alive(self, in_graph: np.ndarray) -> np.ndarray:
        """The forward nodes with an outgoing edge and an incoming one (``input`` always)."""
        outgoing = in_graph.any(1)
        incoming = (in_graph.any(0).astype(float) @ self.f2b.T.astype(float)) > 0
        incoming[0] = True
        return outgoing & incoming

    def _remask(self, in_graph: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """The edges whose parent and child node are in ``nodes`` (``logits`` always)."""
        back = nodes.astype(float) @ self.f2b.astype(float)
        back[-1] = 1
        return in_graph & (np.outer(nodes, back) > 0)

    def prune_once(self, in_graph: np.ndarray) -> np.ndarray:
        """``apply_topn(prune=True)`` at 7af394a: one removal of the edges of the nodes not alive in ``in_graph``."""
        return self._remask(in_graph, self._alive(in_graph))

    def prune(self, in_graph: np.ndarray) -> np.ndarray:
        """``prune`` repeated until nothing changes (``evaluate_graph``'s second call at 7af394a)."""
        while True:
            pruned = self._remask(in_graph, self._alive(in_graph))
            if np.array_equal(pruned, in_graph):
                return pruned
            in_graph = pruned

    def dead(self, in_graph: np.ndarray) -> np.ndarray:
        """The edges outside ``in_graph`` that no subset of them can put on an ``input`` -> ``logits`` path: those
        whose child does not reach ``logits`` along ``in_graph``, and those whose parent reaches it but is not
        reached from ``input`` (by matrix steps, independently of reports/mib.py)."""
        f2b = self.f2b
        reached = np.zeros(f2b.shape[0], bool)  # forward nodes reached from input
        reached[0] = True
        while True:
            into = (in_graph & reached[:, None]).any(0)  # backward nodes fed by a reached node
            new = reached | (f2b & into[None, :]).any(1)
            if np.array_equal(new, reached):
                break
            reached = new
        reaching = np.zeros(f2b.shape[0], bool)  # forward nodes that reach logits
        while True:
            child_reaches = (f2b & reaching[:, None]).any(0)
            child_reaches[-1] = True  # logits
            new = (in_graph & child_reaches[None, :]).any(1)
            if np.array_equal(new, reaching):
                break
            reaching = new
        return self.real & ~in_graph & (~child_reaches[None, :] | (reaching & ~reached)[:, None])

    def mask(self, names, values) -> np.ndarray:
        m = np.zeros(self.real.shape, bool)
        for name, v in zip(names, values):
            m[self.index[name]] = bool(v)
        return m


def check_as_mib_evaluates(root, pair: str, method: str = "certified-EAP-IG-inputs_patching_edge") -> int:
    """Every binary file of ``root`` (``report-mib``'s output) read and re-ranked as MIB does, with ties both ways
    and both rankings: one top n whatever the ranking and the tie order (the scores are distinct and positive), the
    circuit in it, and the circuit evaluated ``prune(in_graph)`` wherever the notes say the membership is kept.

    Returns:
        The number of files whose evaluated circuit is not empty.
    """
    notes = json.loads((root / "notes" / f"{pair}.json").read_text())
    non_empty = 0
    for note in notes["fractions"]:
        g = MIBGraph.from_json(root / "multiple_circuits" / method / pair / note["file"])
        n = int(note["fraction"] * len(g.index))
        assert g.in_graph.sum() == note["n_in"] <= n
        top = g.top_n(n, False, False)
        for absolute in (False, True):
            for reverse in (False, True):
                assert np.array_equal(g.top_n(n, absolute, reverse), top), note["file"]
        assert (top >= g.in_graph).all()
        evaluated = g.prune(top)
        assert np.array_equal(g.prune(g.prune_once(top)), evaluated)  # evaluate_graph's second prune
        if note["keeps_membership"]:
            assert np.array_equal(evaluated, g.prune(g.in_graph)), note["file"]
        else:  # MIB evaluates n edges: the certified circuit and more
            assert (evaluated >= g.prune(g.in_graph)).all()
        non_empty += bool(evaluated.any())
    return non_empty
