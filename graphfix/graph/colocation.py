"""Colocation groups as TF's placer forms them, and the union-find that joins them.

A node's `_class` attr lists `loc:@other` names it must share a device with (the nodes that
list one name are one group, whether a node has that name or not: TF keys its groups by
the name); a data edge whose destination input is a ref type (`float_ref`) or a resource
handle joins its two ends, unless the destination is exempt (TF's
`IsExemptFromResourceInputColocation`, the ops of `RESOURCE_COLOCATION_EXEMPT`) or is
control flow TF lowers before placing (`lowered_before_placement`), whose resource inputs
join the body nodes that read them instead (`graphfix.graph.placement.body_groups`).
TF's order (resource edges, then `_class`) decides the group's device:
`graphfix.graph.placement.placer_merge`.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

COLOCATION_ATTR = "_class"
COLOCATION_PREFIX = b"loc:@"

# Ops TF registers with REGISTER_INPUT_COLOCATION_EXEMPTION: a resource input does not pull
# them onto the resource's device.
RESOURCE_COLOCATION_EXEMPT = frozenset(
    {
        "IdentityN",
        "PartitionedCall",
        "StatefulPartitionedCall",
        "MapDataset",
        "FlatMapDataset",
        "InterleaveDataset",
        "ParallelInterleaveDataset",
        "ParallelInterleaveDatasetV2",
        "ParallelInterleaveDatasetV3",
        "ParallelInterleaveDatasetV4",
        "MapAndBatchDataset",
        "GroupByWindowDataset",
        "ScanDataset",
        "DeleteMultiDeviceIterator",
    }
)


# Functional control flow TF's session rewrites before placing the graph
# (lower_functional_ops.cc, a pre-placement pass) where the op carries
# `_lower_using_switch_merge` (as a control-flow-v2 `tf.cond` or `while_loop` built in a
# graph has): the op is gone by then, each input passes through a Switch (or Enter) on its
# source's device into the branch bodies, inlined with the call site's device. So its
# resource inputs join no group of the op's own (they would join every variable a branch
# updates into one); each joins the group of the body nodes that read it, whose requested
# devices the resource's overrides. Value: how many inputs come before the ones forwarded
# to the bodies' arguments (the predicate, the branch index).
LOWERED_CONTROL_FLOW = {"If": 1, "StatelessIf": 1, "Case": 1, "StatelessCase": 1,
                        "While": 0, "StatelessWhile": 0}
LOWERING_ATTR = "_lower_using_switch_merge"


def lowered_before_placement(node) -> bool:
    """Whether TF's session lowers `node` (functional control flow) before placing."""
    return (node.op in LOWERED_CONTROL_FLOW and LOWERING_ATTR in node.attr
            and node.attr[LOWERING_ATTR].b)


class UnionFind:
    """Disjoint sets of names that also keep each set's members (for groups on demand)."""

    def __init__(self):
        self.parent: dict[str, str] = {}
        self.members: dict[str, list[str]] = {}

    def find(self, item: str) -> str:
        parent = self.parent
        if item not in parent:
            return item
        root = item
        while parent.get(root, root) != root:
            root = parent[root]
        while item != root:
            item, parent[item] = parent[item], root
        return root

    def union_all(self, edges: Iterable[tuple[str, str]]) -> None:
        """Join the two ends of every edge (one loop with the lookups inlined: a 1M-node
        graph has a million edges to join)."""
        parent, members, find = self.parent, self.members, self.find
        for a, b in edges:
            ra = find(a) if a in parent else a
            if b not in parent and b not in members:
                # The common case: `b` is still alone (a `read` naming its variable), so it
                # joins `a`'s set as it is (always the larger of the two).
                if ra != b:
                    parent[b] = ra
                    joined = members.get(ra)
                    if joined is None:
                        members[ra] = [ra, b]
                    else:
                        joined.append(b)
                continue
            rb = find(b) if b in parent else b
            if ra == rb:
                continue
            ours = members.pop(ra, None) or [ra]
            theirs = members.pop(rb, None) or [rb]
            if len(ours) < len(theirs):
                ra, rb, ours, theirs = rb, ra, theirs, ours
            parent[rb] = ra
            ours.extend(theirs)
            members[ra] = ours


class ColocationGroups:
    """The colocation groups of a graph, as TF's placer forms them: a node joins every name
    its `_class` lists (`loc:@name`, a node or not) and, through a ref or resource edge,
    the node that feeds it the handle.

    Most nodes that name anything name exactly one node (a variable's `Assign`, `read`,
    optimizer slots and updates: a star around the variable). They are kept as lists per
    name they point at (`pointing`), in graph order, outside the union-find, which joins
    only names that something else connects (a `_class` of several names, a handle edge, a
    name pointed at that itself points elsewhere): a million-node graph's stars cost a
    list append each instead of a union.
    """

    def __init__(self, names: Sequence[str], positions: Mapping[str, int],
                 points_to: Mapping[int, str], classes: Mapping[int, list[str]],
                 handle_edges: Iterable[tuple[str, str]]):
        """`names` and `positions`: the nodes by position and by name; `points_to`: position
        -> the one name its `_class` lists; `classes`: position -> the names of any other
        `_class`; `handle_edges`: (handle's node, consumer) for the ref and resource edges."""
        self.names, self.positions = names, positions
        self.points_to = points_to
        self.pointing: dict[str, list[int]] = {}
        pointing = self.pointing
        for position, target in self.points_to.items():
            if target in pointing:
                pointing[target].append(position)
            else:
                pointing[target] = [position]
        joins = UnionFind()
        joins.union_all([(other, names[p]) for p, others in classes.items() for other in others])
        joins.union_all(handle_edges)
        # A name that points elsewhere and is itself pointed at or joined: one group.
        points_to, get = self.points_to, positions.get
        chained = [(points_to[p], name) for name in [*pointing, *joins.parent, *joins.members]
                   if (p := get(name)) is not None and p in points_to and points_to[p] != name]
        joins.union_all(chained)
        self.joins = joins

    def root_of(self, position: int) -> str:
        """The representative name of the group holding the node at `position`."""
        name = self.points_to.get(position)
        if name is None:
            name = self.names[position]
        joins = self.joins
        return joins.find(name) if name in joins.parent else name

    def members(self, root: str) -> list[int]:
        """Positions of the group whose representative is `root`, in graph order."""
        get, pointing = self.positions.get, self.pointing
        joined = self.joins.members.get(root)
        if joined is None:  # a star (or a lone node): the name and what points at it
            return star_members(get(root), pointing.get(root, ()))
        found = {p for p in map(get, joined) if p is not None}
        for name in joined:
            found.update(pointing.get(name, ()))
        return sorted(found)


def star_members(own: int | None, around: Sequence[int]) -> list[int]:
    """A star's members in graph order: the node at `own` (None: the name is no node's)
    and `around`, the nodes whose `_class` names it (in graph order)."""
    if own is None:
        return list(around)
    if not around or own < around[0]:
        return [own, *around]
    return sorted({own, *around})


def colocation_names(entries) -> list[str]:
    """The node names in a `_class` attr's entries (`loc:@name`)."""
    prefix = len(COLOCATION_PREFIX)
    return [s[prefix:].decode() for s in entries if s.startswith(COLOCATION_PREFIX)]
