"""The columns `GraphIndex` reads of every node up front: names, ops, devices, `_class` lists.

Reading a field of a parsed node costs about a microsecond and a 1M-node graph has a million
of each, so every node's message is read once, into plain lists and dicts by position.
"""

from __future__ import annotations

import sys

from graphfix.graph.colocation import COLOCATION_ATTR, COLOCATION_PREFIX, colocation_names


class NodeColumns:
    """What the index reads of every node up front, by position: `names`, `ops`, `devices`,
    and the `_class` attrs (`points_to`: the common one naming one node; `classes`: the
    others, several names or none in the `loc:@` form)."""

    __slots__ = ("names", "ops", "devices", "points_to", "classes")

    def __init__(self):
        self.names: list[str] = []
        self.ops: list[str] = []
        self.devices: list[str] = []
        self.points_to: dict[int, str] = {}
        self.classes: dict[int, list[str]] = {}

    def read(self, node_defs, position: int) -> None:
        """Append the columns of `node_defs`, the first at `position`: one pass, each
        node's message touched once (a parsed node costs about a microsecond per field
        read, and its wrapper as much)."""
        names, ops, devices = self.names.append, self.ops.append, self.devices.append
        points_to, classes = self.points_to, self.classes
        intern = sys.intern  # a few distinct ops and devices, repeated by the million
        prefix = len(COLOCATION_PREFIX)
        for node in node_defs:
            names(node.name)
            ops(intern(node.op))
            devices(intern(node.device))
            attrs = node.attr
            if COLOCATION_ATTR in attrs:
                entries = attrs[COLOCATION_ATTR].list.s
                entry = entries[0] if len(entries) == 1 else b""
                if entry[:prefix] == COLOCATION_PREFIX:  # the common case, read a third faster
                    points_to[position] = entry[prefix:].decode()
                else:
                    classes[position] = colocation_names(entries)
            position += 1
