"""The graph model every transform shares: one index over a GraphDef.

`GraphIndex` wraps a `GraphDef` message that it edits in place. It knows each node by name,
each tensor's consumers, the dtype of every edge (from TF's op signatures, without the TF
runtime), and the colocation groups exactly as TF's placer forms them:

* a node's `_class` attr lists `loc:@other` names it must share a device with;
* a data edge whose destination input is a ref type (`float_ref`) or a resource handle
  joins its two ends, unless the destination is exempt (TF's
  `IsExemptFromResourceInputColocation`).

Edits go through the index (`set_device`, `add_node`, `add_control_input`) so it stays
consistent, and `check_structure` proves an edited graph is still well formed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from functools import cache
from importlib import resources
from typing import Iterable, Iterator

from graphfix.devices import DeviceSpec

DT_RESOURCE = 20
REF_OFFSET = 100
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

# Ops that hold state on a parameter server in `replica_device_setter`, plus the hash tables
# and slot variables created with them.
VARIABLE_OPS = frozenset(
    {
        "Variable",
        "VariableV2",
        "VarHandleOp",
        "AutoReloadVariable",
        "MutableHashTable",
        "MutableHashTableV2",
        "MutableHashTableOfTensors",
        "MutableHashTableOfTensorsV2",
        "MutableDenseHashTable",
        "MutableDenseHashTableV2",
    }
)

# Loops are the one legal cycle in a TF graph: the back edge enters Merge from NextIteration.
_LOOP_BACK_EDGE_OPS = frozenset({"NextIteration", "RefNextIteration"})


class GraphError(ValueError):
    """A graph that is not well formed (dangling input, cycle, unknown colocation target)."""


def parse_input(name: str) -> tuple[str, int]:
    """Split an input string into (node name, output index); control inputs get index -1."""
    if name.startswith("^"):
        return name[1:], -1
    node, sep, port = name.rpartition(":")
    if sep and port.isdigit():
        return node, int(port)
    return name, 0


def tensor_name(node: str, index: int) -> str:
    """The input string that refers to output `index` of `node` (-1: control input)."""
    if index < 0:
        return "^" + node
    return node if index == 0 else f"{node}:{index}"


@cache
def _builtin_signatures() -> dict:
    text = resources.files("graphfix").joinpath("op_signatures.json").read_text()
    return json.loads(text)["ops"]


class OpSignatures:
    """Argument dtypes of ops: TF's built-in ops, plus ops a MetaGraphDef describes itself."""

    def __init__(self, stripped_op_list=None):
        self._ops = dict(_builtin_signatures())
        self._plans: dict[tuple[str, str], object] = {}
        if stripped_op_list is not None:
            for op in stripped_op_list.op:
                if op.name not in self._ops:
                    self._ops[op.name] = _signature_from_op_def(op)

    def known(self, op: str) -> bool:
        return op in self._ops

    def is_stateful(self, op: str) -> bool:
        return bool(self._ops.get(op, {}).get("stateful"))

    def input_types(self, node) -> list[int] | None:
        """Dtype enum of each data input of `node` (ref types are enum + 100), or None."""
        sig = self._ops.get(node.op)
        return None if sig is None else _expand(sig["in"], node, sig.get("defaults", {}))

    def output_types(self, node) -> list[int] | None:
        """Dtype enum of each output of `node` (ref types are enum + 100), or None."""
        sig = self._ops.get(node.op)
        return None if sig is None else _expand(sig["out"], node, sig.get("defaults", {}))

    def makes_resources(self, op: str) -> bool:
        """Whether `op` has an output that is always a resource handle (VarHandleOp, ...)."""
        sig = self._ops.get(op)
        return sig is not None and any(a.split("*")[0] == "=20" for a in sig["out"])

    def handle_positions(self, node, side: str, attrs_matter: bool = True) -> list[int] | None:
        """Positions of `node`'s inputs (`side="in"`) or outputs (`"out"`) that are a ref
        or a resource; None for an op this graph does not describe. Decided per op once
        where every argument is a single tensor (the common case), else per node."""
        key = (node.op, side)
        plan = self._plans.get(key, _UNPLANNED)
        if plan is _UNPLANNED:
            sig = self._ops.get(node.op)
            plan = None if sig is None else _handle_plan(sig[side], sig.get("defaults", {}))
            self._plans[key] = plan
        if plan is None:
            return None
        if plan == "expand":
            types = self.input_types(node) if side == "in" else self.output_types(node)
            return None if types is None else [i for i, t in enumerate(types) if is_handle_type(t)]
        always, by_attr = plan
        if not by_attr or not attrs_matter:
            return list(always)
        attrs = node.attr
        extra = [i for i, name, default in by_attr
                 if (attrs[name].type if name in attrs else default) == DT_RESOURCE]
        return list(always) + extra if extra else list(always)

    def can_take_handle(self, op: str) -> bool:
        """Whether some input of `op` may be a ref or a resource (a cheap pre-filter)."""
        sig = self._ops.get(op)
        return sig is not None and any(_may_be_handle(arg) for arg in sig["in"])


_UNPLANNED = object()


def _handle_plan(args: list[str], defaults: dict):
    """For an op's argument list: "expand" if some argument is a list or repeated, else
    (positions always a handle, ((position, type attr, its default), ...) that are a handle
    when the attr is DT_RESOURCE)."""
    if any("*" in a or "[" in a for a in args):
        return "expand"
    always, by_attr = [], []
    for position, arg in enumerate(args):
        if arg.startswith("&") or arg == "=20":
            always.append(position)
        elif not arg.startswith("="):
            by_attr.append((position, arg, defaults.get(arg)))
    return tuple(always), tuple(by_attr)


def _may_be_handle(arg: str) -> bool:
    # A ref, a resource, or a type chosen by an attr (Identity of a resource handle).
    return arg.startswith("&") or not arg.startswith("=") or arg.split("*")[0] == "=20"


def _signature_from_op_def(op) -> dict:
    def encode(arg):
        out = "&" if arg.is_ref else ""
        if arg.type_list_attr:
            return out + "[" + arg.type_list_attr + "]"
        out += arg.type_attr if arg.type_attr else "=" + str(arg.type)
        return out + ("*" + arg.number_attr if arg.number_attr else "")

    return {"in": [encode(a) for a in op.input_arg], "out": [encode(a) for a in op.output_arg]}


def _attr(node, name: str, defaults: dict):
    if name in node.attr:
        value = node.attr[name]
        kind = value.WhichOneof("value")
        if kind == "type":
            return value.type
        if kind == "i":
            return value.i
        if kind == "list":
            return list(value.list.type)
    return defaults.get(name)


def _expand(args: list[str], node, defaults: dict) -> list[int] | None:
    types: list[int] = []
    for arg in args:
        ref = arg.startswith("&")
        arg = arg.lstrip("&")
        if arg.startswith("["):
            listed = _attr(node, arg[1:-1], defaults)
            if listed is None:
                return None
            types.extend(t + REF_OFFSET * ref for t in listed)
            continue
        kind, _, count_attr = arg.partition("*")
        dtype = int(kind[1:]) if kind.startswith("=") else _attr(node, kind, defaults)
        count = _attr(node, count_attr, defaults) if count_attr else 1
        if dtype is None or count is None:
            return None
        types.extend([dtype + REF_OFFSET * ref] * count)
    return types


def is_handle_type(dtype: int) -> bool:
    """A ref or resource dtype: the edges that bind a consumer to a variable's device."""
    return dtype == DT_RESOURCE or dtype > REF_OFFSET


class _UnionFind:
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

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        ours = self.members.pop(ra, None) or [ra]
        theirs = self.members.pop(rb, None) or [rb]
        if len(ours) < len(theirs):
            ra, rb, ours, theirs = rb, ra, theirs, ours
        self.parent[rb] = ra
        ours.extend(theirs)
        self.members[ra] = ours


class GraphIndex:
    """An index over a GraphDef that it edits in place (see the module docstring)."""

    def __init__(self, graph_def, signatures: OpSignatures | None = None):
        self.graph_def = graph_def
        self.signatures = signatures or OpSignatures()
        self.nodes: dict[str, object] = {n.name: n for n in graph_def.node}
        if len(self.nodes) != len(graph_def.node):
            seen: set[str] = set()
            dup = next(n.name for n in graph_def.node if n.name in seen or seen.add(n.name))
            raise GraphError(f"duplicate node name {dup!r}")
        self._consumers: dict[str, list[tuple[object, int, int]]] | None = None
        self._groups: _UnionFind | None = None
        self._positions: dict[str, int] | None = None
        self._group_members: dict[str, list] | None = None
        self.edges_changed = False

    # -- reading ---------------------------------------------------------------------------

    def __contains__(self, name: str) -> bool:
        return name in self.nodes

    def __iter__(self) -> Iterator:
        return iter(self.graph_def.node)

    def node(self, name: str):
        """The NodeDef called `name`; GraphError if there is none."""
        try:
            return self.nodes[name]
        except KeyError:
            raise GraphError(f"no node named {name!r}") from None

    def consumers(self, name: str) -> list[tuple[object, int, int]]:
        """(consumer NodeDef, input position, output index of `name`; -1 control) for each use."""
        if self._consumers is None:
            table: dict[str, list] = defaultdict(list)
            for node in self.graph_def.node:
                for position, text in enumerate(node.input):
                    source, index = parse_input(text)
                    table[source].append((node, position, index))
            self._consumers = table
        return self._consumers.get(name, [])

    def data_inputs(self, node) -> list[tuple[str, int]]:
        """(source node, output index) for each data input of `node`, in order."""
        out = []
        for text in node.input:
            if text.startswith("^"):
                break  # control inputs always come last
            out.append(parse_input(text))
        return out

    def colocated_with(self, node) -> list[str]:
        """Names listed in the node's `_class` attr (`loc:@name`)."""
        if COLOCATION_ATTR not in node.attr:
            return []
        return [
            s[len(COLOCATION_PREFIX) :].decode()
            for s in node.attr[COLOCATION_ATTR].list.s
            if s.startswith(COLOCATION_PREFIX)
        ]

    # -- colocation groups -----------------------------------------------------------------

    def _colocation(self) -> _UnionFind:
        if self._groups is not None:
            return self._groups
        groups = _UnionFind()
        handle_positions = self.signatures.handle_positions
        handles, attrs_matter = self._handle_tensors()
        for node in self.graph_def.node:
            if COLOCATION_ATTR in node.attr:
                # An unknown name is still a group key: TF colocates all nodes that name it.
                for other in self.colocated_with(node):
                    groups.union(other, node.name)
            if handles.isdisjoint(node.input):
                continue  # the common case: no input can be a ref or a resource
            if node.op in RESOURCE_COLOCATION_EXEMPT:
                continue
            inputs = node.input
            for position in handle_positions(node, "in", attrs_matter) or ():
                if position < len(inputs) and inputs[position] in handles:
                    groups.union(parse_input(inputs[position])[0], node.name)
        self._groups = groups
        return groups

    def _handle_tensors(self) -> tuple[set[str], bool]:
        """Input strings (`name`, `name:1`) of every tensor that may be a ref or a resource,
        and whether attrs can make one (only if some op in the graph makes resources: a
        graph of ref variables never needs each Identity's `T` read)."""
        signatures = self.signatures
        handle_positions = signatures.handle_positions
        kinds = {node.op for node in self.graph_def.node}
        attrs_matter = any(signatures.makes_resources(op) for op in kinds) or any(
            op in ("Placeholder", "PlaceholderWithDefault", "_Arg") for op in kinds)
        out: set[str] = set()
        for node in self.graph_def.node:
            for index in handle_positions(node, "out", attrs_matter) or ():
                out.add(node.name if index == 0 else f"{node.name}:{index}")
        return out, attrs_matter

    def group_root(self, name: str) -> str:
        """A stable representative of the colocation group holding `name`."""
        self.node(name)
        return self._colocation().find(name)

    def colocation_groups(self) -> dict[str, list]:
        """Every colocation group (singletons too): root -> NodeDefs in graph order."""
        if self._group_members is not None:
            return self._group_members
        groups = self._colocation()
        parent, find = groups.parent, groups.find
        members: dict[str, list] = {}
        for node in self.graph_def.node:
            name = node.name
            root = find(name) if name in parent else name
            if root in members:
                members[root].append(node)
            else:
                members[root] = [node]
        self._group_members = members
        return members

    def variable_groups(self) -> dict[str, list]:
        """The colocation groups that hold a variable op: root -> NodeDefs (in the order the
        groups were joined; sort by `position` where graph order matters)."""
        groups = self._colocation()
        parent, nodes = groups.parent, self.nodes
        out: dict[str, list] = {}
        for node in self.graph_def.node:
            if node.op in VARIABLE_OPS:
                root = groups.find(node.name) if node.name in parent else node.name
                if root not in out:
                    names = groups.members.get(root, [root])
                    out[root] = [nodes[n] for n in names if n in nodes]
        return out

    def position(self, node) -> int:
        """A node's index in the GraphDef (graph order, as TF's placer walks it)."""
        if self._positions is None:
            self._positions = {n.name: i for i, n in enumerate(self.graph_def.node)}
        return self._positions[node.name]

    def group_of(self, name: str) -> list:
        """All NodeDefs that TF's placer must put on one device together with `name`."""
        root = self.group_root(name)
        return [n for n in self.graph_def.node if self._colocation().find(n.name) == root]

    # -- editing ---------------------------------------------------------------------------

    def set_device(self, node, device: str) -> bool:
        """Set a node's requested device; return whether it changed."""
        if node.device == device:
            return False
        node.device = device
        return True

    def add_node(self, node_def):
        """Append a copy of `node_def`; return the stored NodeDef."""
        if node_def.name in self.nodes:
            raise GraphError(f"node {node_def.name!r} already exists")
        stored = self.graph_def.node.add()
        stored.CopyFrom(node_def)
        self.nodes[stored.name] = stored
        self._invalidate()
        return stored

    def add_control_input(self, node, source: str) -> bool:
        """Make `node` run after `source`; return whether an edge was added."""
        text = "^" + source
        if text in node.input or source in {parse_input(i)[0] for i in node.input}:
            return False
        node.input.append(text)
        self._invalidate()
        return True

    def unique_name(self, base: str) -> str:
        """`base`, or `base_1`, `base_2`, ... whichever is free."""
        name, k = base, 0
        while name in self.nodes:
            k += 1
            name = f"{base}_{k}"
        return name

    def _invalidate(self) -> None:
        self._consumers = None
        self._groups = None
        self._positions = None
        self._group_members = None
        self.edges_changed = True

    # -- checking --------------------------------------------------------------------------

    def check_structure(self) -> None:
        """Raise GraphError for a dangling input, an unknown colocation target or a cycle."""
        nodes = self.nodes
        indegree: dict[str, int] = {}
        successors: dict[str, list[str]] = defaultdict(list)
        for node in self.graph_def.node:
            count = 0
            for text in node.input:
                source = parse_input(text)[0]
                if source not in nodes:
                    raise GraphError(f"node {node.name!r} has input {text!r} from no node")
                if nodes[source].op in _LOOP_BACK_EDGE_OPS:
                    continue
                successors[source].append(node.name)
                count += 1
            for other in self.colocated_with(node):
                if other not in nodes:
                    raise GraphError(
                        f"node {node.name!r} expects to be colocated with unknown node {other!r}"
                    )
            indegree[node.name] = count
        ready = [name for name, count in indegree.items() if count == 0]
        done = 0
        while ready:
            name = ready.pop()
            done += 1
            for succ in successors.get(name, ()):
                indegree[succ] -= 1
                if indegree[succ] == 0:
                    ready.append(succ)
        if done != len(indegree):
            stuck = sorted(name for name, count in indegree.items() if count > 0)
            raise GraphError(f"cycle through {', '.join(stuck[:5])}")

    def ancestors(self, names: Iterable[str]) -> set[str]:
        """Every node that must run before any of `names` (data and control inputs)."""
        seen: set[str] = set()
        stack = list(names)
        while stack:
            name = stack.pop()
            node = self.nodes.get(name)
            if node is None:
                continue
            for text in node.input:
                source = parse_input(text)[0]
                if source not in seen:
                    seen.add(source)
                    stack.append(source)
        return seen


def placement_spec(node) -> DeviceSpec:
    """The device a node asks for (its `device` field), parsed."""
    return DeviceSpec.parse(node.device)
