"""Circuits as hannamw/EAP-IG Graph JSON: the layout of the reference's ``Graph.to_json``, which its
``Graph.from_json`` loads and MIB's circuit-localization track reads.

Layout (``src/eap/graph.py``, ``Graph.to_json``)::

    {"cfg":   {"n_layers": L, "n_heads": H, "parallel_attn_mlp": bool, "d_model": d, ...extra labels},
     "nodes": {"input": {"in_graph": bool[, "score": float]}, "a0.h0": {...}, "m0": {...}, ..., "logits": {...}},
     "edges": {"input->a0.h0<q>": {"score": float, "in_graph": bool}, "a0.h0->m0": {...}, ...}}

Names (their grammar: :mod:`certified_circuits.language.names`, which this module parses them with): nodes
``input``, ``a{l}.h{h}``, ``m{l}``, ``logits``; an edge is ``{parent}->{child}``, with the input it feeds
appended (``<q>``, ``<k>`` or ``<v>``) when the child is a head. The reference's graph
(``Graph.from_model``) has an edge from ``input`` and every node of an earlier layer into every head's q, k
and v input, every MLP and ``logits``; a head also feeds the MLP of its own layer unless
``parallel_attn_mlp`` (GPT-NeoX/Pythia, GPT-J).

What the reference's ``from_json`` does with a file, and so what this module guarantees:

* it asserts the three keys, then builds ``Graph.from_model(d["cfg"], neuron_level=True, node_scores=True)``.
  ``from_model`` copies the whole dict into ``graph.cfg`` and reads only ``n_layers``, ``n_heads``,
  ``parallel_attn_mlp`` and ``d_model``: extra ``cfg`` keys (model, task, K, setting...) are kept and
  ignored. ``d_model`` only sizes the neuron tensors, so 0 (unknown) loads too;
* it looks up every node of ``nodes`` except ``logits`` and every edge of ``edges`` in that graph (a
  ``KeyError`` otherwise): :func:`circuit_graph_json` refuses a name that is malformed or not an edge of the
  graph ``cfg`` describes, and a repeated name. Edges left out of the file keep score 0 and stay out;
* it stores scores in float32 tensors; JSON cannot hold NaN (MIB would break on it), so scores must be finite
  and the file is written with ``allow_nan=False``.

Choices of this module:

* edge-level circuit: ``in_graph`` of an edge is the caller's mask. For a certified circuit that is
  *certified in*: abstained and certified-out edges are both ``in_graph: false``, and the sidecar of
  :func:`decisions_sidecar` tells them apart. A node is ``in_graph`` iff it is the parent or the child of an
  in-graph edge, hence ``logits`` iff some edge into ``logits`` is in the graph. No node scores are written
  (the reference then sets ``nodes_scores = None``). The reference ignores ``logits``' entry (its
  ``LogitNode.in_graph`` is always true), and its ``evaluate_graph`` calls ``prune()``, which recomputes node
  membership from the edges and drops edges not connected to both ``input`` and ``logits``: the file records
  the circuit as certified, unpruned;
* node-level circuit (components are heads and MLPs): the caller gives the nodes' scores and membership;
  ``input`` and ``logits`` are always in the graph, heads and MLPs the caller does not name are out and
  carry no score (the reference leaves their score NaN, "not scored"). Every edge is written with score
  0.0 and ``in_graph`` iff both its ends are in the graph (the state the reference's ``prune`` leaves);
* nodes are written in the reference's order (``input``, then per layer the heads and the MLP, ``logits``
  last); edges in the order given.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from certified_circuits.language import names as grammar
from certified_circuits.storage.atomic import write_text
from certified_circuits.storage.documents import unique_keys

#: the keys ``Graph.from_model`` reads from ``cfg``
CFG_KEYS = ("n_layers", "n_heads", "parallel_attn_mlp", "d_model")
GRAPH_KEYS = ("cfg", "nodes", "edges")



def _plain(value: Any) -> Any:
    """A numpy scalar or array as the Python value JSON writes."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def graph_cfg(n_layers: int, n_heads: int, d_model: int, parallel_attn_mlp: bool, **extra: Any) -> dict:
    """The ``cfg`` block: the four keys the reference's ``Graph.from_model`` reads, then ``extra`` labels.

    The reference's ``from_json`` passes ``cfg`` whole to ``from_model``, which copies it into the graph's
    ``GraphConfig`` and reads only ``n_layers``, ``n_heads``, ``parallel_attn_mlp`` and ``d_model``, so labels
    such as ``model``, ``task`` or ``k`` are kept and ignored. A label may not be named like a ``dict``
    attribute (``items``, ``update``...): ``GraphConfig`` sets ``self.__dict__ = self``, so it would shadow
    the method.

    Args:
        n_layers: number of layers (>= 1).
        n_heads: query heads per layer (>= 1).
        d_model: residual width (>= 0; 0 when unknown: the reference only sizes its neuron tensors with it).
        parallel_attn_mlp: attention and MLP read the same residual (GPT-NeoX/Pythia, GPT-J).
        **extra: labels kept in the file (JSON values; numpy scalars are converted).

    Returns:
        The dict written as ``cfg``.

    Raises:
        ValueError: a size out of range, or a label named like a ``dict`` attribute.
    """
    n_layers, n_heads, d_model = int(n_layers), int(n_heads), int(d_model)
    if n_layers < 1 or n_heads < 1 or d_model < 0:
        raise ValueError(f"need n_layers >= 1, n_heads >= 1 and d_model >= 0, got {n_layers}, {n_heads}, {d_model}")
    shadowing = sorted(key for key in extra if hasattr(dict, key))
    if shadowing:
        raise ValueError(f"cfg labels {shadowing} would shadow dict methods of the reference's GraphConfig")
    return {"n_layers": n_layers, "n_heads": n_heads, "parallel_attn_mlp": bool(parallel_attn_mlp),
            "d_model": d_model, **{key: _plain(value) for key, value in extra.items()}}


def _check_node(name: str, n_layers: int, n_heads: int, where: str) -> None:
    node = grammar.parse_node(name)
    if node.kind in ("head", "mlp") and (node.depth(n_layers) >= n_layers or (node.head or 0) >= n_heads):
        raise ValueError(f"{where}: node {name!r} is not in a graph of {n_layers} layers and {n_heads} heads")


def _endpoints(name: str, cfg: Mapping[str, Any]) -> tuple[str, str]:
    """Parent and child of an edge of the graph ``cfg`` describes; ValueError naming the edge otherwise."""
    parent, child, qkv = grammar.parse_edge(name)
    n_layers, n_heads = int(cfg["n_layers"]), int(cfg["n_heads"])
    if parent == grammar.LOGITS or child == grammar.INPUT:
        raise ValueError(f"{name!r}: 'logits' has no outgoing and 'input' no incoming edges")
    up_node, down_node = grammar.parse_node(parent), grammar.parse_node(child)
    if (down_node.kind == "head") != (qkv is not None):
        raise ValueError(f"{name!r}: an edge into a head names its input (<q>, <k> or <v>), and only such an edge")
    _check_node(parent, n_layers, n_heads, f"edge {name!r}")
    _check_node(child, n_layers, n_heads, f"edge {name!r}")
    up, down = up_node.depth(n_layers), down_node.depth(n_layers)
    same_layer_ok = (up == down and up_node.kind == "head" and down_node.kind == "mlp"
                     and not cfg["parallel_attn_mlp"])
    if not (up < down or same_layer_ok):
        raise ValueError(f"{name!r} is not an edge of the graph (parallel_attn_mlp={bool(cfg['parallel_attn_mlp'])}): "
                         f"a node feeds only later layers, and a head its own layer's MLP in sequential blocks")
    return parent, child


def _check_cfg(cfg: Mapping[str, Any]) -> None:
    missing = [key for key in CFG_KEYS if key not in cfg]
    if missing:
        raise ValueError(f"cfg lacks {missing}: the reference's Graph.from_model reads {list(CFG_KEYS)} (graph_cfg)")


def _mask(values: Any, what: str) -> np.ndarray:
    """A bool [E] mask from bools or 0/1 (a decision array with -1 would silently count abstentions as in)."""
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional, got shape {array.shape}")
    if array.dtype != bool and not np.isin(array, (0, 1)).all():
        raise ValueError(f"{what} must hold booleans (or 0/1), got values {sorted(set(array.tolist()))[:5]}: "
                         f"for a certified circuit pass decision == 1")
    return array.astype(bool)


def _finite(values: Any, names: Sequence[str], what: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{what} scores must be one-dimensional, got shape {array.shape}")
    bad = np.flatnonzero(~np.isfinite(array))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{what} {names[i]!r} has score {array[i]} ({bad.size} non-finite in all): "
                         f"Graph JSON needs finite scores")
    return array


def circuit_graph_json(cfg: Mapping[str, Any], edge_names: Sequence[str], scores: np.ndarray | None,
                       in_graph: np.ndarray | None, *, node_scores: np.ndarray | None = None,
                       node_names: Sequence[str] | None = None, node_in_graph: np.ndarray | None = None) -> dict:
    """The Graph JSON dict of one circuit (module docstring: layout and rules).

    Args:
        cfg: the ``cfg`` block (:func:`graph_cfg`); its graph must hold every edge named.
        edge_names: edges ``parent->child[<q|k|v>]``, written in this order (usually every edge of the graph).
        scores: float [E] edge scores, finite. Node level: None, or all zero.
        in_graph: bool [E] (or 0/1) the circuit's edges. Node level: None, or equal to the node rule.
        node_scores: node level: float [N] finite scores of ``node_names``.
        node_names: node level: the components, heads ``a{l}.h{h}`` and MLPs ``m{l}``.
        node_in_graph: node level: bool [N] (or 0/1) the circuit's components.

    Returns:
        ``{"cfg", "nodes", "edges"}``: nodes are every node of an edge name, plus ``logits``.

    Raises:
        ValueError: lengths disagree, a score is not finite (the message names the edge or node), a name is
            malformed, repeated or not in the graph of ``cfg``, a mask is not boolean, or the node-level
            arguments are incomplete or contradict the node rule.
    """
    _check_cfg(cfg)
    edge_names = list(edge_names)
    n_layers, n_heads = int(cfg["n_layers"]), int(cfg["n_heads"])
    node_level = node_names is not None or node_scores is not None or node_in_graph is not None
    for what, values in (("scores", scores), ("in_graph", in_graph)):
        if values is None and not node_level:
            raise ValueError(f"an edge-level circuit needs {what}")
        if values is not None and len(values) != len(edge_names):
            raise ValueError(f"{len(edge_names)} edge names but {len(values)} {what}: they must have one entry per edge")
    if len(set(edge_names)) != len(edge_names):
        seen: set[str] = set()
        repeated = next(n for n in edge_names if n in seen or seen.add(n))
        raise ValueError(f"edge {repeated!r} is named more than once")
    ends = [_endpoints(name, cfg) for name in edge_names]
    names = sorted({n for pair in ends for n in pair} | {grammar.LOGITS}, key=lambda n: grammar.node_order(n, n_layers))
    nodes: dict[str, dict[str, Any]] = {n: {"in_graph": False} for n in names}

    if not node_level:
        edge_scores = _finite(scores, edge_names, "edge")
        edge_in = _mask(in_graph, "in_graph")
        for (parent, child), keep in zip(ends, edge_in):
            if keep:
                nodes[parent]["in_graph"] = nodes[child]["in_graph"] = True
    else:
        if node_names is None or node_scores is None or node_in_graph is None:
            raise ValueError("a node-level circuit needs node_names, node_scores and node_in_graph together")
        node_names = list(node_names)
        if not (len(node_names) == len(node_scores) == len(node_in_graph)):
            raise ValueError(f"{len(node_names)} node names, {len(node_scores)} node scores and {len(node_in_graph)} "
                             f"node_in_graph flags: they must have one entry per node")
        if len(set(node_names)) != len(node_names):
            raise ValueError("a node is named more than once in node_names")
        values = _finite(node_scores, node_names, "node")
        keep_nodes = _mask(node_in_graph, "node_in_graph")
        for name, score, keep in zip(node_names, values, keep_nodes):
            if not grammar.is_head_or_mlp(name):
                raise ValueError(f"node {name!r}: the components of a node-level circuit are heads a{{l}}.h{{h}} "
                                 f"and MLPs m{{l}}")
            _check_node(name, n_layers, n_heads, "node_names")
            if name not in nodes:
                raise ValueError(f"node {name!r} is in no edge of edge_names")
            nodes[name] = {"in_graph": bool(keep), "score": float(score)}
        for always in (grammar.INPUT, grammar.LOGITS):
            if always in nodes:
                nodes[always]["in_graph"] = True
        edge_in = np.array([nodes[p]["in_graph"] and nodes[c]["in_graph"] for p, c in ends], dtype=bool)
        if in_graph is not None and not np.array_equal(_mask(in_graph, "in_graph"), edge_in):
            bad = edge_names[int(np.flatnonzero(_mask(in_graph, "in_graph") != edge_in)[0])]
            raise ValueError(f"node level: in_graph disagrees with the node rule (both ends in the graph) at {bad!r}")
        if scores is not None and np.any(np.asarray(scores, dtype=np.float64) != 0):
            raise ValueError("node level: edges are written with score 0.0; pass scores=None (or zeros)")
        edge_scores = np.zeros(len(edge_names))
    edges = {name: {"score": float(s), "in_graph": bool(k)} for name, s, k in zip(edge_names, edge_scores, edge_in)}
    return {"cfg": {key: _plain(value) for key, value in cfg.items()}, "nodes": nodes, "edges": edges}


def write_graph_json(path: str | os.PathLike, graph_dict: Mapping[str, Any]) -> Path:
    """Write a Graph JSON dict atomically.

    Args:
        path: the ``.json`` file (its folder is created).
        graph_dict: :func:`circuit_graph_json`'s dict.

    Returns:
        ``path``.

    Raises:
        ValueError: a block is missing, or a value is NaN or infinite (``allow_nan=False``); nothing is written.
    """
    missing = [key for key in GRAPH_KEYS if key not in graph_dict]
    if missing:
        raise ValueError(f"not a Graph JSON dict: missing {missing} (needs {list(GRAPH_KEYS)})")
    try:
        text = json.dumps(graph_dict, allow_nan=False)
    except ValueError as err:
        raise ValueError(f"{path}: Graph JSON cannot hold NaN or infinite values ({err})") from err
    return write_text(path, text)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_read_cfg(cfg: Mapping[str, Any]) -> None:
    """The ``cfg`` keys the reference reads, with the types :func:`graph_cfg` writes."""
    _check_cfg(cfg)
    for key in ("n_layers", "n_heads"):
        if not (isinstance(cfg[key], int) and not isinstance(cfg[key], bool) and cfg[key] >= 1):
            raise ValueError(f"cfg[{key!r}] must be an integer >= 1, got {cfg[key]!r}")
    if not (isinstance(cfg["d_model"], int) and not isinstance(cfg["d_model"], bool) and cfg["d_model"] >= 0):
        raise ValueError(f"cfg['d_model'] must be an integer >= 0, got {cfg['d_model']!r}")
    if not isinstance(cfg["parallel_attn_mlp"], bool):
        raise ValueError(f"cfg['parallel_attn_mlp'] must be true or false, got {cfg['parallel_attn_mlp']!r}")


def _check_read_edge(name: str, info: Any, cfg: Mapping[str, Any]) -> None:
    """One entry of ``edges``: an edge of the graph ``cfg`` describes, a finite score and a bool in_graph."""
    _endpoints(name, cfg)
    if not isinstance(info, dict):
        raise ValueError(f"edge {name!r}: its entry must be an object {{'score', 'in_graph'}}, got {info!r}")
    if "score" not in info or info["score"] is None:
        raise ValueError(f"edge {name!r} has no score: the writer gives every edge a finite score")
    if not (_is_number(info["score"]) and math.isfinite(info["score"])):
        raise ValueError(f"edge {name!r} has score {info['score']!r}: Graph JSON needs a finite number")
    if not isinstance(info.get("in_graph"), bool):
        raise ValueError(f"edge {name!r} has in_graph {info.get('in_graph')!r}: it must be true or false "
                         f"(a decision such as -1 or 0/1 is not a membership)")


def _check_read_node(name: str, info: Any, cfg: Mapping[str, Any]) -> None:
    """One entry of ``nodes``: a node of the graph, a bool in_graph and, if given, a finite score."""
    if not grammar.is_node(name):
        raise ValueError(f"node {name!r} is not an EAP node name (input, a{{l}}.h{{h}}, m{{l}}, logits)")
    _check_node(name, int(cfg["n_layers"]), int(cfg["n_heads"]), "nodes")
    if not isinstance(info, dict) or not isinstance(info.get("in_graph"), bool):
        raise ValueError(f"node {name!r}: its entry must be an object with a true/false in_graph, got {info!r}")
    if "score" in info and not (_is_number(info["score"]) and math.isfinite(info["score"])):
        raise ValueError(f"node {name!r} has score {info['score']!r}: a node score must be a finite number, "
                         f"or left out (not scored)")


def read_graph_json(path: str | os.PathLike) -> dict:
    """Read a Graph JSON file (ours or the reference's), refusing what :func:`circuit_graph_json` refuses.

    The reference's ``Graph.from_json`` fails late (a ``KeyError`` deep in ``from_model``) or not at all (a
    NaN or ``null`` score, an ``in_graph`` of -1 that Python treats as true). This reader checks every entry
    first, so a file written by another tool is refused with the file and the entry named.

    Args:
        path: the ``.json`` file.

    Returns:
        The dict ``{"cfg", "nodes", "edges"}``.

    Raises:
        ValueError: naming the file, when it is not UTF-8 or not JSON; a block or a ``cfg`` key that
            ``Graph.from_model`` reads is missing or of the wrong type; a name is given twice; an edge is not
            an edge of the graph ``cfg`` describes, has no score or a non-finite one, or an ``in_graph`` that
            is not a bool; a node is not in the graph, lacks a bool ``in_graph`` or has a non-finite score.
    """
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path} is not UTF-8 text (byte {err.start}: {err.reason}): Graph JSON is UTF-8 JSON") from err
    try:
        d = json.loads(text, object_pairs_hook=unique_keys)  # a name given twice would keep only its last entry
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not JSON: {err}") from err
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from err
    if not isinstance(d, dict):
        raise ValueError(f"{path} is not an EAP-IG Graph JSON: the top level is a {type(d).__name__}, not an object")
    missing = [key for key in GRAPH_KEYS if not isinstance(d.get(key), dict)]
    if missing:
        raise ValueError(f"{path} is not an EAP-IG Graph JSON: missing or not objects: {missing} "
                         f"(needs {list(GRAPH_KEYS)})")
    try:
        _check_read_cfg(d["cfg"])
        for name, info in d["nodes"].items():
            _check_read_node(name, info, d["cfg"])
        for name, info in d["edges"].items():
            _check_read_edge(name, info, d["cfg"])
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from err
    return d


def decisions_sidecar(edge_names: Sequence[str], decision: np.ndarray, *, k: float,
                      setting: Mapping[str, Any]) -> dict:
    """The certificate beside a certified circuit's Graph JSON, which shows only in the graph or not.

    Args:
        edge_names: the components certified (edges, or heads and MLPs for a node-level circuit).
        decision: int [U] in {1 in, 0 out, -1 abstain}.
        k: the circuit size K.
        setting: the certification setting (p_del, n0, n, seed, tau, alpha, correction, radius...); numpy
            values are converted to Python ones.

    Returns:
        ``{"k", "setting", "in", "out", "abstain", "counts"}``: the names of each decision, in the given order,
        and their counts.

    Raises:
        ValueError: lengths disagree, or a decision is not 1, 0 or -1.
    """
    decision = np.asarray(decision)
    if decision.ndim != 1 or len(decision) != len(edge_names):
        raise ValueError(f"{len(edge_names)} names but decision has shape {decision.shape}: one entry per name")
    bad = sorted(set(decision.tolist()) - {1, 0, -1})
    if bad:
        raise ValueError(f"decisions must be 1 (in), 0 (out) or -1 (abstain), got {bad[:5]}")
    groups = {label: [n for n, d in zip(edge_names, decision) if d == value]
              for label, value in (("in", 1), ("out", 0), ("abstain", -1))}
    k = _plain(k)
    if not isinstance(k, (int, float)) or not math.isfinite(k):
        raise ValueError(f"k must be a finite number, got {k!r}")
    return {"k": k, "setting": {key: _plain(value) for key, value in setting.items()}, **groups,
            "counts": {label: len(names) for label, names in groups.items()}}
