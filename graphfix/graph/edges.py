"""A node's inputs: as the strings a NodeDef holds (`name`, `name:1`, `^name`) and as the
edge table `GraphIndex` walks (every node's sources as positions, in two int arrays).
"""

from __future__ import annotations

from array import array
from typing import Mapping


def parse_input(name: str) -> tuple[str, int]:
    """Split an input string into (node name, output index); control inputs get index -1."""
    if name[:1] == "^":
        return name[1:], -1
    node, sep, port = name.rpartition(":")
    if sep and port.isdigit():
        return node, int(port)
    return name, 0


def input_source(name: str) -> str:
    """The node an input string (`name`, `name:1`, `^name`) comes from."""
    if name[:1] == "^":
        return name[1:]
    node, sep, port = name.rpartition(":")
    return node if sep and port.isdigit() else name


def tensor_name(node: str, index: int) -> str:
    """The input string that refers to output `index` of `node` (-1: control input)."""
    if index < 0:
        return "^" + node
    return node if index == 0 else f"{node}:{index}"


def read_edge_table(node_defs, positions: Mapping[str, int]) -> tuple[array, array]:
    """`GraphIndex`'s edge table of `node_defs`, whose names are at `positions`: the
    sources of every node as positions (-1 for an input from no node), flat, and each
    node's offset into them."""
    texts: list[str] = []
    offsets = array("i", [0])
    extend, mark = texts.extend, offsets.append
    for node in node_defs:
        extend(node.input[:])  # (a slice is a fifth faster than iterating upb's list)
        mark(len(texts))
    # An input naming a node's first output is the node's name (node names hold no ':'
    # and no '^'): one lookup settles most inputs.
    found = list(map(positions.get, texts))
    unsettled = [k for k, position in enumerate(found) if position is None]
    sources = map(input_source, map(texts.__getitem__, unsettled))
    for k, position in zip(unsettled, map(positions.get, sources)):
        found[k] = -1 if position is None else position
    return array("i", found), offsets
