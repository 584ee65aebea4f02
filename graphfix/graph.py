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
        self._output_handles: dict[str, object] = {}
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

    def output_handles(self, op: str):
        """How `op`'s outputs may be refs or resources, cached per op: None (never), a list
        of fixed output types (some a handle), "maybe" (expand the node's signature), or a
        tuple of the type attrs that make an output a resource only when one is DT_RESOURCE."""
        if op in self._output_handles:
            return self._output_handles[op]
        sig = self._ops.get(op)
        kind = None
        if sig is not None:
            args = sig["out"]
            if any(a.startswith("&") or a.split("*")[0] == "=20" for a in args):
                kind = "maybe" if any(_by_attr(a) for a in args) else (_fixed(args) or "maybe")
            elif any(_by_attr(a) for a in args):
                kind = tuple(sorted({a.strip("[]").split("*")[0] for a in args if _by_attr(a)}))
        self._output_handles[op] = kind
        return kind

    def can_take_handle(self, op: str) -> bool:
        """Whether some input of `op` may be a ref or a resource (a cheap pre-filter)."""
        sig = self._ops.get(op)
        return sig is not None and any(_may_be_handle(arg) for arg in sig["in"])


def _names_resource(value) -> bool:
    return value.type == DT_RESOURCE or DT_RESOURCE in value.list.type


def _by_attr(arg: str) -> bool:
    """An argument whose type an attr decides (it may be a resource on some node)."""
    return not arg.lstrip("&").startswith("=")


def _fixed(args: list[str]) -> list[int] | None:
    """Output types of an op whose outputs are all fixed and single (else None: expand)."""
    if any("*" in a for a in args):
        return None
    return [int(a.lstrip("&")[1:]) + REF_OFFSET * a.startswith("&") for a in args]


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
    def __init__(self):
        self.parent: dict[str, str] = {}

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
        if ra != rb:
            self.parent[rb] = ra


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
        signatures = self.signatures
        handles = self._handle_tensors()
        for node in self.graph_def.node:
            if COLOCATION_ATTR in node.attr:
                # An unknown name is still a group key: TF colocates all nodes that name it.
                for other in self.colocated_with(node):
                    groups.union(other, node.name)
            if handles.isdisjoint(node.input):
                continue  # the common case: no input can be a ref or a resource
            if node.op in RESOURCE_COLOCATION_EXEMPT:
                continue
            types = signatures.input_types(node)
            if types is None:
                continue
            for dtype, text in zip(types, node.input):
                if is_handle_type(dtype) and text in handles:
                    groups.union(parse_input(text)[0], node.name)
        self._groups = groups
        return groups

    def _handle_tensors(self) -> set[str]:
        """Input strings (`name`, `name:1`) of every tensor that may be a ref or a resource."""
        signatures = self.signatures
        kinds = signatures._output_handles
        out: set[str] = set()
        for node in self.graph_def.node:
            op = node.op
            kind = kinds[op] if op in kinds else signatures.output_handles(op)
            if kind is None:
                continue
            if isinstance(kind, tuple):  # a resource only where a type attr says so (rare)
                attrs = node.attr
                if not any(name in attrs and _names_resource(attrs[name]) for name in kind):
                    continue
                kind = "maybe"
            types = signatures.output_types(node) if kind == "maybe" else kind
            if types is None:
                continue
            for index, dtype in enumerate(types):
                if is_handle_type(dtype):
                    out.add(node.name if index == 0 else f"{node.name}:{index}")
        return out

    def group_root(self, name: str) -> str:
        """A stable representative of the colocation group holding `name`."""
        self.node(name)
        return self._colocation().find(name)

    def colocation_groups(self) -> dict[str, list]:
        """Every colocation group with more than one member or a variable: root -> NodeDefs."""
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
        return members

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
