"""The EAP graph's name grammar, hannamw/EAP-IG's (``src/eap/graph.py``): the one owner of formatting and
parsing node and edge names.

Grammar (layers and heads are decimal integers without leading zeros)::

    node      := "input" | "a" LAYER ".h" HEAD | "m" LAYER | "logits"
    input     := node | "a" LAYER ".h" HEAD "<" ("q" | "k" | "v") ">"        (a downstream input)
    edge      := node "->" input

``input`` is the embedding (an upstream node only), ``a{l}.h{h}`` head h of layer l, ``m{l}`` layer l's MLP,
``logits`` the unembedding's input (a downstream node only); a head is read through its q, k and v inputs,
so an edge into a head names the letter (``input->a1.h0<q>``), and only such an edge. Which edges exist in a
given graph (layer order, parallel attention) is :mod:`.graph`'s business; this module knows the shape of
names only, and :func:`parse_edge` accepts every well-formed name (``m0->a0.h0<v>`` parses; it is no edge
of any graph).

Users: :func:`~.graph.build_graph` (formats every name), :mod:`.hooked` and :mod:`.attribution` (through
the graph's names), ``reports/eap_graph.py`` (the Graph JSON writer and reader), ``reports/language_graphs.py``
and ``reports/explorer.py`` (drawing).
"""

from __future__ import annotations

import re
from typing import NamedTuple

INPUT = "input"
LOGITS = "logits"
QKV = ("q", "k", "v")
ARROW = "->"

_INT = r"(?:0|[1-9]\d*)"
#: a node name (regular expression, no groups)
NODE_PATTERN = rf"input|logits|a{_INT}\.h{_INT}|m{_INT}"
_NODE = re.compile(rf"(?:(input)|(logits)|a({_INT})\.h({_INT})|m({_INT}))")
_EDGE = re.compile(rf"({NODE_PATTERN})->({NODE_PATTERN})(?:<([qkv])>)?")


class Node(NamedTuple):
    """A parsed node name: ``kind`` is ``input``, ``head``, ``mlp`` or ``logits``; ``layer`` and ``head`` are
    None where they do not apply."""

    kind: str
    layer: int | None = None
    head: int | None = None

    def depth(self, n_layers: int) -> int:
        """The node's layer in drawing and ordering: ``input`` -1, ``logits`` ``n_layers``."""
        if self.kind == "input":
            return -1
        if self.kind == "logits":
            return n_layers
        return int(self.layer)  # type: ignore[arg-type]


class Edge(NamedTuple):
    """A parsed edge name: ``parent`` and ``child`` node names and the head input ``letter`` (or None)."""

    parent: str
    child: str
    letter: str | None


def head(layer: int, h: int) -> str:
    """``a{layer}.h{h}``."""
    return f"a{int(layer)}.h{int(h)}"


def mlp(layer: int) -> str:
    """``m{layer}``."""
    return f"m{int(layer)}"


def head_input(layer: int, h: int, letter: str) -> str:
    """A head's q, k or v input: ``a{layer}.h{h}<{letter}>``."""
    if letter not in QKV:
        raise ValueError(f"a head input is one of {QKV}, got {letter!r}")
    return f"{head(layer, h)}<{letter}>"


def edge(parent: str, child: str) -> str:
    """``{parent}->{child}``, ``child`` a downstream input name (``a1.h0<q>``, ``m2``, ``logits``)."""
    return f"{parent}{ARROW}{child}"


def is_node(name: object) -> bool:
    """Whether ``name`` is a well-formed node name."""
    return isinstance(name, str) and _NODE.fullmatch(name) is not None


def is_head_or_mlp(name: object) -> bool:
    """Whether ``name`` names a head or an MLP (a component of a node-level circuit)."""
    return is_node(name) and name not in (INPUT, LOGITS)


def is_edge(name: object) -> bool:
    """Whether ``name`` has an edge's shape ``parent->child`` (node-level component names never do)."""
    return isinstance(name, str) and ARROW in name


def parse_node(name: str) -> Node:
    """The parsed node name (ValueError naming it when malformed)."""
    match = _NODE.fullmatch(name) if isinstance(name, str) else None
    if match is None:
        raise ValueError(f"{name!r} is not an EAP node name (input, a{{l}}.h{{h}}, m{{l}}, logits)")
    if match[1]:
        return Node("input")
    if match[2]:
        return Node("logits")
    if match[5] is not None:
        return Node("mlp", int(match[5]))
    return Node("head", int(match[3]), int(match[4]))


def split_input(name: str) -> tuple[str, str | None]:
    """A downstream input name as (node, letter): ``a1.h2<q>`` -> (``a1.h2``, ``q``); ``m0`` -> (``m0``, None)."""
    node, sep, rest = name.partition("<")
    return node, (rest.rstrip(">") if sep else None)


def node_of(endpoint: str) -> str:
    """The node of an edge endpoint: ``a1.h2<q>`` -> ``a1.h2``; ``m0`` and ``logits`` unchanged."""
    return split_input(endpoint)[0]


def edge_nodes(name: str) -> tuple[str, str]:
    """(parent, child node) of an edge name read leniently, the text before ``->`` and the child's node: for
    drawing, which checks each node itself; :func:`parse_edge` checks the whole name."""
    parent, _, child = name.partition(ARROW)
    return parent, node_of(child)


def parse_edge(name: str) -> Edge:
    """(parent, child node, letter) of a well-formed edge name (ValueError naming it when malformed)."""
    match = _EDGE.fullmatch(name) if isinstance(name, str) else None
    if match is None:
        raise ValueError(f"{name!r} is not an EAP edge name (parent->child, e.g. 'a0.h1->m2' or 'input->a1.h0<q>')")
    return Edge(match[1], match[2], match[3])


def node_order(name: str, n_layers: int) -> tuple[int, int]:
    """Sort key of the reference's node order: ``input``, per layer its heads then its MLP, ``logits``."""
    node = parse_node(name)
    return node.depth(n_layers), node.head if node.kind == "head" else 1 << 62  # type: ignore[return-value]
