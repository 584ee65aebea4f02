"""Predict TF's placer, statically: the static half of `graphfix verify` and of `check`.

For every colocation group: merge the devices its members ask for (a conflict is TF's
"Cannot colocate nodes" error; a member that joined only by reading a ref or resource handle
has a conflicting device overridden, as TF's placer does), then ask TF's kernel registry whether every member has a
kernel for the group's device type. A group that cannot place gets TF's own message, so
what graphfix reports on a machine with no GPU is what TF says on the machine that has one.
"""

from __future__ import annotations

from typing import Container

from graphfix.graph import kernels
from graphfix.graph.devices import DeviceSpec
from graphfix.graph.index import VARIABLE_OPS, GraphIndex
from graphfix.graph.signatures import REF_OFFSET

_FIELD_WORDS = {
    "job": "jobs",
    "replica": "replicas",
    "task": "tasks",
    "device_type": "device types",
    "device_index": "device ids",
}


class Group:
    """A colocation group: its members (positions in graph order) and the device they ask for."""

    __slots__ = ("graph", "positions", "requested", "conflict")

    def __init__(self, graph: GraphIndex, positions: list[int], requested: DeviceSpec | None,
                 conflict: str | None = None):
        self.graph = graph
        self.positions = positions
        self.requested = requested  # None: members' devices conflict
        self.conflict = conflict

    @property
    def members(self) -> list:
        """The members' NodeDefs, in graph order."""
        return [self.graph.node_at(p) for p in self.positions]

    @property
    def first(self):
        return self.graph.node_at(self.positions[0])

    @property
    def variables(self) -> list:
        ops = self.graph.ops
        return [self.graph.node_at(p) for p in self.positions if ops[p] in VARIABLE_OPS]

    @property
    def anchor(self) -> str:
        """The name a finding or change about the group names: its first variable, else its
        first member."""
        ops, names = self.graph.ops, self.graph.names
        for position in self.positions:
            if ops[position] in VARIABLE_OPS:
                return names[position]
        return names[self.positions[0]]


class PlacementProblem:
    """A group TF's placer would reject, in TF's words."""

    def __init__(self, group: Group, node: str, message: str, no_kernel: list):
        self.group = group
        self.node = node  # the node TF names in its error (the group's first in graph order)
        self.message = message
        self.no_kernel = no_kernel  # members with no kernel for the requested device type

    @property
    def is_variable_group(self) -> bool:
        return bool(self.group.variables)


def merge_requested(graph: GraphIndex, positions: list[int], asked: set[str] | None = None,
                    overridable: Container[int] = ()) -> tuple[DeviceSpec | None, str | None]:
    """Merge the requested devices of the nodes at `positions` as TF's placer does (no soft
    placement): (the merged device, None), or (None, TF's message) when they conflict.
    `asked`: the distinct non-empty device strings of those nodes, if the caller has them.
    `overridable`: members that joined only by reading a handle of the group: one whose
    device conflicts with the rest's has it overridden, as TF's placer does, not an error."""
    devices = graph.devices
    if asked is None:
        asked = set(map(devices.__getitem__, positions))
        asked.discard("")
    if len(asked) <= 1:  # the common case: one device string, nothing to reconcile
        return DeviceSpec.parse(asked.pop() if asked else ""), None
    merged = DeviceSpec()
    owner = None
    later = []  # handle readers: merged after the others, overridden where they conflict
    for position in positions:
        if not devices[position]:
            continue
        if position in overridable:
            later.append(position)
            continue
        spec = DeviceSpec.parse(devices[position])
        conflict = _conflict(merged, spec)
        if conflict is not None:
            return None, (f"Cannot colocate nodes {owner} and {graph.names[position]}: Cannot "
                          f"merge devices with incompatible {conflict}: '{merged}' and '{spec}'")
        merged = merged.merge(spec)
        owner = owner or graph.names[position]
    for position in later:
        spec = DeviceSpec.parse(devices[position])
        if _conflict(merged, spec) is None:
            merged = merged.merge(spec)
    return merged, None


def _conflict(merged: DeviceSpec, spec: DeviceSpec) -> str | None:
    """The fields (in TF's words: `jobs`, `device types`) on which two devices disagree."""
    for field, word in _FIELD_WORDS.items():
        ours, theirs = getattr(merged, field), getattr(spec, field)
        if ours is not None and theirs is not None and ours != theirs:
            return word
    return None


def groups(graph: GraphIndex, *, with_request_only: bool = True,
           variables_only: bool = False) -> list[Group]:
    """The colocation groups of a graph (by default only those that ask for a device;
    `variables_only`: only those holding a variable)."""
    out = []
    devices = graph.devices
    every = graph.variable_groups() if variables_only else graph.colocation_groups()
    overridable = graph.handle_joined()
    for positions in every.values():
        asked = set(map(devices.__getitem__, positions))
        asked.discard("")
        if asked or not with_request_only:
            out.append(Group(graph, positions,
                             *merge_requested(graph, positions, asked, overridable)))
    return out


def problems(graph: GraphIndex, group_list: list[Group] | None = None) -> list[PlacementProblem]:
    """Every group that TF's placer would refuse to place, with TF's wording."""
    found = []
    for group in group_list if group_list is not None else groups(graph):
        if group.conflict:
            found.append(PlacementProblem(group, group.first.name, group.conflict, []))
            continue
        wanted = group.requested.device_type if group.requested else None
        if not wanted:
            continue
        if wanted.upper() == "GPU":
            kernels.require_gpu_kernels()
        lacking = [n for n in group.members if not kernels.supports(n, wanted)]
        if not lacking:
            continue
        node = _named_by_placer(group, graph)
        found.append(PlacementProblem(group, node.name, _message(group, node, wanted), lacking))
    return found


def _is_generator(node, graph: GraphIndex) -> bool:
    outputs = graph.signatures.output_types(node)
    return not graph.data_inputs(node) and outputs is not None and len(outputs) == 1 and (
        outputs[0] < REF_OFFSET
    )


def _named_by_placer(group: Group, graph: GraphIndex):
    """The member TF's placer fails on first: it walks nodes in graph order but defers
    generators (no inputs, one non-ref output: Const, VarHandleOp) until their consumers."""
    for node in group.members:
        if not _is_generator(node, graph):
            return node
    return group.first


def _message(group: Group, node, device_type: str) -> str:
    merged = group.requested.to_string()
    own = DeviceSpec.parse(node.device).to_string() if node.device else ""
    if own == merged:
        reason = (
            f"Could not satisfy explicit device specification '{merged}' because no "
            f"supported kernel for {device_type.upper()} devices is available."
        )
    else:
        reason = (
            f"Could not satisfy explicit device specification '{own}' because the node "
            f"{node.name} was colocated with a group of nodes that required incompatible "
            f"device '{merged}'."
        )
    return f"Cannot assign a device for operation {node.name}: {reason}"


def explain(problem: PlacementProblem) -> str:
    """Which members lack the kernel and with what attrs: `VariableV2 Variable (dtype=DT_INT32)`."""
    parts = [
        f"{n.op} {n.name} ({kernels.describe_attrs(n)})" if kernels.describe_attrs(n)
        else f"{n.op} {n.name}"
        for n in problem.no_kernel
    ]
    size = len(problem.group.members)
    return f"no {problem.group.requested.device_type} kernel for: {'; '.join(parts)}; group of {size}"


_DTYPE_BYTES = {1: 4, 2: 8, 3: 4, 4: 1, 5: 2, 6: 1, 7: 8, 8: 8, 9: 8, 10: 1, 14: 2, 17: 2,
                18: 16, 19: 2, 22: 4, 23: 8}


def variable_bytes(node) -> int:
    """A variable's size in bytes from its `shape` and `dtype` attrs (unknown dims count 1)."""
    elements = 1
    if "shape" in node.attr:
        for dim in node.attr["shape"].shape.dim:
            elements *= max(dim.size, 1)
    return elements * _DTYPE_BYTES.get(node.attr["dtype"].type, 4)


def summary(graph: GraphIndex) -> list[str]:
    """Ops and variable bytes per requested device (a group member naming no device is
    counted on its group's device): one line per device, busiest first."""
    ops: dict[str, int] = {}
    size: dict[str, int] = {}
    devices, kinds = graph.devices, graph.ops
    for positions in graph.colocation_groups().values():
        merged, _ = merge_requested(graph, positions)
        group_device = merged.to_string() if merged else ""
        for position in positions:
            own = devices[position]
            device = DeviceSpec.parse(own).to_string() if own else group_device
            device = device or "(no device: the placer chooses)"
            ops[device] = ops.get(device, 0) + 1
            if kinds[position] in VARIABLE_OPS:
                size[device] = size.get(device, 0) + variable_bytes(graph.node_at(position))
    return [f"{device}: {count} op(s), {size.get(device, 0)} variable byte(s)"
            for device, count in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))]
