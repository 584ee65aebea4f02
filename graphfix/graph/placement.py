"""Predict TF's placer, statically: the static half of `graphfix verify` and of `check`.

For every colocation group: merge the devices its members ask for (a conflict is TF's
"Cannot colocate nodes" error; a member that joined only by reading a ref or resource handle
has a conflicting device overridden, as TF's placer does), then ask TF's kernel registry whether every member has a
kernel for the group's device type. A group that cannot place gets TF's own message, so
what graphfix reports on a machine with no GPU is what TF says on the machine that has one.
"""

from __future__ import annotations

from typing import Container, Iterable, Sequence

from graphfix.graph import kernels
from graphfix.graph.colocation import (COLOCATION_ATTR, LOWERED_CONTROL_FLOW,
                                       RESOURCE_COLOCATION_EXEMPT, UnionFind,
                                       colocation_names, lowered_before_placement)
from graphfix.graph.edges import parse_input
from graphfix.graph.devices import DeviceSpec
from graphfix.graph.index import VARIABLE_OPS, GraphIndex
from graphfix.graph.signatures import DT_RESOURCE, REF_OFFSET

_FIELD_WORDS = {
    "job": "jobs",
    "replica": "replicas",
    "task": "tasks",
    "device_type": "types",
    "device_index": "ids",
}


class Group:
    """A colocation group: its members (positions in graph order) and the device they ask for."""

    __slots__ = ("graph", "positions", "requested", "conflict", "conflict_node")

    def __init__(self, graph: GraphIndex, positions: list[int], requested: DeviceSpec | None,
                 conflict: str | None = None, conflict_node: str | None = None):
        self.graph = graph
        self.positions = positions
        self.requested = requested  # None: members' devices conflict
        self.conflict = conflict
        self.conflict_node = conflict_node  # the member TF names in the conflict

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
    def holds_variable(self) -> bool:
        ops = self.graph.ops
        return any(ops[p] in VARIABLE_OPS for p in self.positions)

    def asked_by(self, node) -> str:
        """The device `node`, a member, asks for itself once imported (`imported_device`)."""
        return self.graph.imported_device(self.graph.position(node))

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
    """A group TF's placer would reject, in TF's words. `kind`: `no-kernel` (a member has no
    kernel for the group's device type), `conflict` (members ask for devices that cannot
    merge; `no_kernel` then lists the members that lack one on the type they ask for
    themselves), `no-device` (the group asks for a device the target devices do not have),
    `soft-placed` (no kernel on the device it asks for, but with soft placement TF's placer
    moves the whole group to the CPU of the same job and task, where every member has one:
    no refusal, the group just does not run where the graph asked; `problems`'s
    `soft_placement`)."""

    def __init__(self, group: "Group | BodyGroup", node: str, message: str, no_kernel: list,
                 kind: str = "no-kernel"):
        self.group = group
        self.node = node  # the node TF names in its error (the group's first in graph order)
        self.message = message
        self.no_kernel = no_kernel  # members with no kernel for the requested device type
        self.kind = kind

    @property
    def is_variable_group(self) -> bool:
        return bool(self.group.variables)

    @property
    def refused(self) -> bool:
        """Whether TF fails on the group (every kind but `soft-placed`)."""
        return self.kind != "soft-placed"


def merge_requested(graph: GraphIndex, positions: list[int], asked: set[str] | None = None
                    ) -> tuple[DeviceSpec | None, str | None]:
    """Merge the requested devices of the group at `positions` as TF's placer does (no soft
    placement), after TF's Python importer: (the merged device, None), or (None, TF's
    message) when they conflict (`placer_merge`). `asked`: the distinct non-empty devices
    the members ask for (`GraphIndex.imported_device`), if the caller has them."""
    if asked is None:
        asked = _asked(graph, positions)
    if len(asked) <= 1:  # the common case: one device string, nothing to reconcile
        return DeviceSpec.parse(next(iter(asked)) if asked else ""), None
    merged, conflict, _ = placer_merge(graph, positions)
    return merged, conflict


def placer_merge(graph: GraphIndex, positions: list[int]
                 ) -> tuple[DeviceSpec | None, str | None, str | None]:
    """The device TF's placer gives the group at `positions`, in its order
    (colocation_graph.cc, `ColocationGraph::Initialize`): (merged device, None, None), or
    (None, TF's message, the node TF names first) where it refuses.

    Each member asks for the device TF's importer leaves it (`imported_device`). First
    the ref and resource edges join their ends, in graph order (`PlacerMerge.handle_edge`),
    then the `_class` lists, node by node (`PlacerMerge.colocate`): a gradient colocated
    with a tower-1 `ResourceGather` asks for tower 1's GPU, while the gather itself was
    moved to its variable's device by the resource edge."""
    names = graph.names
    merge = PlacerMerge()
    for position in positions:
        merge.add(position, graph.imported_device(position), _makes_handle(graph, position))
    members = set(positions)
    for source, consumer in graph.handle_pairs():
        if consumer in members and source in members:
            conflict = merge.handle_edge(source, consumer, names[source], names[consumer])
            if conflict:
                return None, conflict, names[consumer]
    conflict, named = merge.colocate(positions, names.__getitem__,
                                     lambda p: graph.colocated_with(p))
    if conflict:
        return None, conflict, names[named]
    return merge.merged(), None, None


class PlacerMerge:
    """The device merging of TF's colocation graph over a few members (any hashable keys):
    a union-find whose roots hold the requested device and the device of the resources
    the set makes (`Member` in colocation_graph.cc)."""

    def __init__(self):
        self.parent: dict = {}
        self.size: dict = {}
        self.requested: dict = {}
        self.resource: dict = {}

    def add(self, key, device: str, makes_handle: bool = False) -> None:
        """A member asking for `device`; `makes_handle`: it makes the ref or resource it
        gives (a variable), so its device is the resource's and is never overridden."""
        spec = DeviceSpec.parse(device)
        self.parent[key], self.size[key], self.requested[key] = key, 1, spec
        self.resource[key] = spec if makes_handle else _ANY

    def find(self, key):
        parent, root = self.parent, key
        while parent[root] != root:
            root = parent[root]
        while parent[key] != root:
            parent[key], key = root, parent[key]
        return root

    def _join(self, new_root, old_root) -> None:
        self.parent[old_root] = new_root
        self.size[new_root] += self.size.pop(old_root)
        self.requested[new_root] = self.requested[new_root].merge(self.requested[old_root])
        self.resource[new_root] = self.resource[new_root].merge(self.resource[old_root])

    def handle_edge(self, source, consumer, source_name: str, consumer_name: str
                    ) -> str | None:
        """Join the two ends of a ref or resource edge (`ColocateResourceOrRefEdge`): the
        consumer's side, asking for a device incompatible with the handle's side, has its
        request overridden (no error); TF's message where both sides hold resources made
        on incompatible devices."""
        giver, taker = self.find(source), self.find(consumer)
        if giver == taker:
            return None
        resource, requested = self.resource, self.requested
        if _conflict(resource[giver], resource[taker]) is not None:
            return (f"Cannot place the graph because a reference or resource edge connects "
                    f"colocation groups with incompatible resource devices: "
                    f"{resource[giver].to_string()} vs {resource[taker].to_string()}. The "
                    f"edge src node is {source_name} , and the dst node is {consumer_name}")
        if _conflict(requested[giver], requested[taker]) is not None:
            requested[taker] = resource[taker].merge(requested[giver])
        self._join(giver, taker)
        return None

    def colocate(self, keys, name_of, listed_names) -> tuple[str | None, object]:
        """Join the `_class` lists of `keys` (in graph order; `listed_names(key)`: the names
        its `_class` lists), each key after its listed names with its own (`name_of(key)`),
        as `ColocateAllNodes` does: (TF's "Cannot colocate nodes" message, the key it names
        first) at the first incompatible merge, else (None, None)."""
        first_with: dict[str, object] = {}
        size, requested, resource = self.size, self.requested, self.resource
        for key in keys:
            for spec in (*listed_names(key), name_of(key)):
                other = first_with.setdefault(spec, key)
                ours, theirs = self.find(key), self.find(other)
                if ours == theirs:
                    continue
                # (the larger side stays the root, and TF names its device first)
                new_root, old_root = ((theirs, ours) if size[theirs] > size[ours]
                                      else (ours, theirs))
                field = (_conflict(requested[new_root], requested[old_root])
                         or _conflict(resource[new_root], resource[old_root]))
                if field is not None:
                    return (f"Cannot colocate nodes {name_of(key)} and {name_of(other)}: "
                            f"Cannot merge devices with incompatible {field}: "
                            f"'{requested[new_root].to_string()}' and "
                            f"'{requested[old_root].to_string()}'"), key
                self._join(new_root, old_root)
        return None, None

    def merged(self, keys=None) -> DeviceSpec:
        """The device the members (`keys`, default all) are merged to."""
        merged = DeviceSpec()
        for root in {self.find(k) for k in (self.parent if keys is None else keys)}:
            merged = merged.merge(self.requested[root])
        return merged


_ANY = DeviceSpec()


def _makes_handle(graph: GraphIndex, position: int) -> bool:
    """Whether TF's placer takes the node's device as the device of a resource it makes
    (`IsRefOrResourceGeneratorNode`: no data input, one output, a ref or a resource), a
    device no resource edge overrides."""
    node = graph.node_at(position)
    if any(text[:1] != "^" for text in node.input):
        return False
    outputs = graph.signatures.output_types(node)
    return (outputs is not None and len(outputs) == 1
            and (outputs[0] >= REF_OFFSET or outputs[0] == DT_RESOURCE))


def _asked(graph: GraphIndex, positions: list[int]) -> set[str]:
    """The distinct devices the members at `positions` ask for once imported
    (`GraphIndex.imported_device`)."""
    devices, listed, imported = graph.devices, graph.colocation_listed(), graph.imported_device
    asked = {imported(p) if p in listed else devices[p] for p in positions}
    asked.discard("")
    return asked


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
    every = graph.variable_groups() if variables_only else graph.colocation_groups()
    devices, listed, imported = graph.devices, graph.colocation_listed(), graph.imported_device
    parse = DeviceSpec.parse
    for positions in every.values():
        if len(positions) == 1:  # (most groups: one node, one device string, no set to make)
            position = positions[0]
            device = imported(position) if position in listed else devices[position]
            if device or not with_request_only:
                out.append(Group(graph, positions, parse(device)))
            continue
        asked = _asked(graph, positions)
        if asked or not with_request_only:
            out.append(_group(graph, positions, asked))
    return out


def _group(graph: GraphIndex, positions: list[int], asked: set[str]) -> Group:
    """The group of the members at `positions`, which ask for the devices `asked`."""
    if len(asked) <= 1:  # the common case: one device string, nothing to reconcile
        return Group(graph, positions, DeviceSpec.parse(next(iter(asked), "")))
    return Group(graph, positions, *placer_merge(graph, positions))


def groups_holding(graph: GraphIndex, positions: Iterable[int], *,
                   within: int | None = None) -> list[Group]:
    """The colocation groups (asking for a device) that hold a node at `positions`;
    `within`: only their members before that position (the nodes a graph had before an
    edit added more)."""
    out = []
    for root in graph.group_roots(positions):
        members = graph.group_members(root)
        if within is not None:
            members = [p for p in members if p < within]
        asked = _asked(graph, members)
        if asked:
            out.append(_group(graph, members, asked))
    return out


def problems(graph: GraphIndex, group_list: list[Group] | None = None, *,
             targets: Sequence[str] = (), functions: bool = True,
             soft_placement: bool = False) -> list[PlacementProblem]:
    """Every group that TF's placer would refuse to place, with TF's wording: those of
    `group_list` (default: every group that asks for a device), then, with `functions`,
    those of the function bodies the graph calls (`body_problems`). `targets`: the devices
    the graph will run on, in TF's spelling (none given: any device the graph names).

    `soft_placement`: the session places the graph with `allow_soft_placement=True`. TF's
    placer then does not refuse a group for want of a kernel on the device type it asks
    for: it drops the device type and index and places the whole group on a device of the
    same job and task that has a kernel for every member, the CPU (measured under TF 2.21
    with XLA_CPU standing in for a GPU: an int32 `VariableV2`, a `ScalarSummary` fail
    without soft placement and run on the CPU with it). Such a group is a `soft-placed`
    problem, not a refusal (`PlacementProblem.refused`); one whose members lack a kernel on
    the CPU too is still refused, with TF's message. A `_class` conflict of device types
    or ids is no refusal either: TF's placer then leaves the colocation out (the BERT
    towers' gather gradient places, measured under TF 2.21); one of jobs, replicas or
    tasks, a resource edge's conflict and a missing device are as without soft placement."""
    found = []
    for group in group_list if group_list is not None else groups(graph):
        problem = _problem(group, graph, targets, soft_placement)
        if problem is not None:
            found.append(problem)
    if functions:
        found.extend(body_problems(graph, targets, soft_placement))
    return found


def _problem(group: Group, graph: GraphIndex, targets: Sequence[str],
             soft_placement: bool = False) -> PlacementProblem | None:
    if group.conflict:
        if soft_placement and _soft_placement_merges(group.conflict):
            return None
        # TF names the conflict first; what each member would meet once it is resolved is
        # said too, so that one pass finds both.
        lacking = []
        for node in group.members:
            kind = DeviceSpec.parse(group.asked_by(node)).device_type
            if kind and lacks_kernel(node, kind, graph.library_names):
                lacking.append(node)
        named = getattr(group, "conflict_node", None) or group.first.name
        return PlacementProblem(group, named, group.conflict, lacking, "conflict")
    wanted = group.requested.device_type if group.requested else None
    if not wanted:
        return None
    if targets and not _available(group.requested, targets):
        node = _named_by_placer(group, graph)
        return PlacementProblem(group, node.name, _missing_device_message(
            node.name, group.requested, targets), [], "no-device")
    lacking = _lacking(group, wanted, graph)
    if not lacking:
        return None
    node = _named_by_placer(group, graph)
    if soft_placement and wanted.upper() != "CPU" and not _lacking(group, "CPU", graph):
        return PlacementProblem(group, node.name, _soft_message(group, node, wanted),
                                lacking, "soft-placed")
    return PlacementProblem(group, node.name, _message(group, node, wanted), lacking)


def _soft_placement_merges(conflict: str) -> bool:
    """Whether soft placement gets past a conflict TF's placer reports (`PlacerMerge`): a
    `_class` colocation whose devices differ only in type or id (`MergeDevNames` clears
    those fields instead of failing, and `ColocateNodeToGroup` goes on without the
    colocation)."""
    return conflict.startswith("Cannot colocate nodes ") and (
        "with incompatible types: " in conflict or "with incompatible ids: " in conflict)


def _soft_message(group: "Group | BodyGroup", node, device_type: str) -> str:
    """What TF's placer does with a group it soft-places (see `problems`)."""
    return (f"No supported kernel for {device_type.upper()} devices for operation "
            f"{node.name} on '{group.requested.to_string()}': allow_soft_placement moves its "
            f"group to the CPU")


def _lacking(group: "Group | BodyGroup", device_type: str, graph: GraphIndex) -> list:
    """The members TF's placer finds no kernel for on `device_type`. A main-graph member
    is read only where its op's kernels depend on its attrs (`kernels.verdict`)."""
    kind = device_type.upper()
    library = graph.library_names
    if isinstance(group, BodyGroup):
        return [node for node in group.members if lacks_kernel(node, kind, library)]
    if kind == "GPU":
        kernels.require_gpu_kernels()
    ops, node_at, node_test = graph.ops, graph.node_at, kernels.node_test
    out = []
    for position in group.positions:
        op = ops[position]
        test = node_test(op, kind)
        if test is None or op in library:
            continue
        node = node_at(position)
        if not test(node):
            out.append(node)
    return out


def lacks_kernel(node, device_type: str, library: Container[str] = ()) -> bool:
    """Whether TF's placer finds `node` no kernel on `device_type`. A library function's op
    runs anywhere, as TF says (see `kernels.verdict` for an op this TF has no kernel for)."""
    kind = device_type.upper()
    if kind == "GPU":
        kernels.require_gpu_kernels()
    if node.op in library:
        return False
    supported = kernels.verdict(node.op, kind)
    return supported is False or (supported is None and not kernels.supports(node, kind))


def _available(requested: DeviceSpec, targets: Sequence[str]) -> bool:
    """Whether `requested` matches a device of `targets` field by field, as TF matches a
    requested device against a process's devices (a field either leaves unset matches);
    every process has its one CPU."""
    if (requested.device_type or "").upper() == "CPU":
        return requested.device_index in (None, 0)
    fields = ("job", "replica", "task", "device_type", "device_index")
    for target in map(DeviceSpec.parse, targets):
        pairs = ((getattr(requested, f), getattr(target, f)) for f in fields)
        if all(ours is None or theirs is None or str(ours).upper() == str(theirs).upper()
               for ours, theirs in pairs):
            return True
    return False


def _missing_device_message(node: str, requested: DeviceSpec, targets: Sequence[str]) -> str:
    available = ["/job:localhost/replica:0/task:0/device:CPU:0"] + [
        _fully_named(DeviceSpec.parse(target)) for target in targets]
    return (f"Cannot assign a device for operation {node}: {{{{node {node}}}}} was explicitly "
            f"assigned to {requested.to_string()} but available devices are "
            f"[ {', '.join(available)} ]. Make sure the device specification refers to a "
            f"valid device.")


def _fully_named(spec: DeviceSpec) -> str:
    """A device as TF lists a process's devices: every field set (`/job:localhost/...`)."""
    return DeviceSpec("localhost" if spec.job is None else spec.job,
                      0 if spec.replica is None else spec.replica,
                      0 if spec.task is None else spec.task, spec.device_type,
                      0 if spec.device_index is None else spec.device_index).to_string()


# Ops that call library functions through function-valued attrs: functional control flow
# and the call ops. (tf.data's ops take functions too, but run them on the input pipeline's
# CPU, not on the device of the call.)
CALL_OPS = frozenset({"While", "StatelessWhile", "_While", "If", "StatelessIf", "_If", "Case",
                      "StatelessCase", "PartitionedCall", "StatefulPartitionedCall", "For",
                      "SymbolicGradient", "RemoteCall"})


class BodyGroup:
    """A colocation group inside a function body (its members joined by the names their
    `_class` lists, nodes of the body or not, and by resource edges), with the device it
    asks for once each member has inherited the device of its call site. Where the body is
    inlined by control flow TF lowers before placing, members that read a resource the
    call passes in are in that resource's main-graph group too (`bound`: its roots): TF's
    placer gives them its device, so they move with it."""

    __slots__ = ("function", "members", "asked", "requested", "conflict", "caller", "bound",
                 "conflict_node")

    def __init__(self, function: str, members: list, asked: list[str],
                 requested: DeviceSpec | None, conflict: str | None, caller: str,
                 bound: frozenset[str] = frozenset(), conflict_node: str | None = None):
        self.function = function
        self.members = members  # NodeDefs of the body, in its order
        self.asked = dict(zip((node.name for node in members), asked))
        self.requested = requested
        self.conflict = conflict
        self.caller = caller  # the node whose call placed the body (`fn/node` when nested)
        self.bound = bound  # roots of the main-graph groups whose resources members read
        self.conflict_node = conflict_node

    def asked_by(self, node) -> str:
        """The device `node`, a member, asks for once it inherits its call site's."""
        return self.asked[node.name]

    @property
    def first(self):
        return self.members[0]

    @property
    def variables(self) -> list:
        return [node for node in self.members if node.op in VARIABLE_OPS]

    @property
    def holds_variable(self) -> bool:
        return bool(self.variables)

    @property
    def anchor(self) -> str:
        """`function/node`: the body's first variable, else its first member."""
        return f"{self.function}/{(self.variables or self.members)[0].name}"


def inherited_device(device: str, caller: str) -> str:
    """The device a function body's node asks for once its call is inlined (TF's
    `MultiDeviceFunctionBodyPlacer`): none of its own -> the call site's; a partial one
    -> the call site's job, replica and task fill those it leaves unset."""
    if not device:
        return caller
    if not caller:
        return device
    own, theirs = DeviceSpec.parse(device), DeviceSpec.parse(caller)
    return own.replace(job=own.job if own.job is not None else theirs.job,
                       replica=own.replica if own.replica is not None else theirs.replica,
                       task=own.task if own.task is not None else theirs.task).to_string()


def called_functions(node, library: Container[str]) -> list[str]:
    """The library functions `node` calls: its op, or its function-valued attrs."""
    out = [node.op] if node.op in library else []
    if node.op in CALL_OPS:
        for value in node.attr.values():
            if value.HasField("func"):
                out.append(value.func.name)
            out.extend(f.name for f in value.list.func)
    return [name for name in out if name in library]


def body_groups(graph: GraphIndex) -> list[BodyGroup]:
    """The colocation groups of every function body the graph calls, once per device a call
    gives it (nested calls inherit from their own call node), that ask for a device. A
    body inlined by control flow TF lowers before placing (`lowered_before_placement`)
    has its resource arguments bound to the main-graph groups of what the call passes in
    (`BodyGroup.bound`), nested calls passing theirs on."""
    library = {f.signature.name: f for f in graph.graph_def.library.function}
    if not library:
        return []
    pending = []
    for position in graph.positions_of(library.keys() | CALL_OPS):
        node = graph.node_at(position)
        passed = _passed_resources(node, lambda name: _main_root(graph, name))
        for name in called_functions(node, library):
            pending.append((name, _requested_at(graph, position), graph.names[position],
                            _bound_arguments(library[name], passed)))
    devices: dict[str, str] = {}  # main-graph root -> its group's device

    def device_of(root: str) -> str:
        if root not in devices:
            merged, _ = merge_requested(graph, graph.colocation_groups()[root])
            devices[root] = merged.to_string() if merged else ""
        return devices[root]

    seen, out = set(), []
    while pending:
        name, caller, site, arguments = pending.pop(0)
        key = (name, caller, tuple(sorted(arguments.items())))
        if key in seen:
            continue
        seen.add(key)
        nodes = list(library[name].node_def)
        asked = [inherited_device(node.device, caller) for node in nodes]
        reads = _resource_reads(graph, nodes, arguments)
        bound = _bound_nodes(nodes, reads, arguments)
        for node, device in zip(nodes, asked):
            passed = _passed_resources(node, lambda text: arguments.get(text) or bound.get(text))
            for called in called_functions(node, library):
                pending.append((called, device, f"{name}/{node.name}",
                                _bound_arguments(library[called], passed)))
        out.extend(_groups_of_body(name, nodes, asked, site, reads, device_of))
    return out


# Marks a main-graph group's root among a body's node names (no node name holds it).
_MAIN = "\0"


def _main_root(graph: GraphIndex, name: str) -> str | None:
    return graph.group_root(name) if name in graph else None


def _passed_resources(node, root_of) -> dict[int, str]:
    """For a call TF lowers before placing: argument index -> the main-graph group root of
    what the call passes there (`root_of(source name)`; None: nothing bound)."""
    if not lowered_before_placement(node):
        return {}
    skip = LOWERED_CONTROL_FLOW[node.op]
    data = [text for text in node.input if text[:1] != "^"][skip:]
    out = {}
    for k, text in enumerate(data):
        root = root_of(parse_input(text)[0])
        if root is not None:
            out[k] = root
    return out


def _bound_arguments(function, passed: dict[int, str]) -> dict[str, str]:
    """The resource arguments of `function` that a call binds: argument name -> root."""
    return {arg.name: passed[k] for k, arg in enumerate(function.signature.input_arg)
            if arg.type == DT_RESOURCE and k in passed}


def _resource_reads(graph: GraphIndex, nodes: list, arguments: dict[str, str]
                    ) -> list[tuple[int, str]]:
    """(body node index, source) for each ref or resource input of the body's nodes that
    comes from a body node (its name) or a bound argument (`_MAIN` + the main-graph root)."""
    index = {node.name: k for k, node in enumerate(nodes)}
    reads = []
    for k, node in enumerate(nodes):
        if node.op in RESOURCE_COLOCATION_EXEMPT or lowered_before_placement(node):
            continue
        handles = graph.signatures.handle_positions(node, "in") or ()
        data = [text for text in node.input if text[:1] != "^"]
        for j in handles:
            if j >= len(data):
                continue
            source = data[j].split(":", 1)[0]
            if source in arguments:
                reads.append((k, _MAIN + arguments[source]))
            elif source in index:
                reads.append((k, source))
    return reads


def _bound_nodes(nodes: list, reads: list[tuple[int, str]], arguments: dict[str, str]
                 ) -> dict[str, str]:
    """Body node name -> the main-graph root whose resource it reads (through body nodes
    that pass a handle on, an Identity for one)."""
    bound: dict[str, str] = {}
    for k, source in reads:  # (a body's nodes come in an order where sources lead)
        root = source[1:] if source[:1] == _MAIN else bound.get(source)
        if root is not None:
            bound.setdefault(nodes[k].name, root)
    return bound


def _requested_at(graph: GraphIndex, position: int) -> str:
    """The device the node at `position` asks for: its own, else its group's."""
    own = graph.devices[position]
    if own:
        return own
    merged, _ = merge_requested(graph, graph.colocation_groups()[
        graph.group_root(graph.names[position])])
    return merged.to_string() if merged else ""


def _groups_of_body(function: str, nodes: list, asked: list[str], caller: str,
                    reads: list[tuple[int, str]], device_of) -> list[BodyGroup]:
    """The groups of one body as TF's placer forms them once it is inlined: joined by the
    names their `_class` lists (a branch's optimizer step lists the variable's placeholder
    name, no node of the body), by resource edges, and through the main-graph groups of
    bound arguments (`_MAIN` + root in `reads`; `device_of(root)`: that group's device,
    which overrides the members that read its resource)."""
    joins = UnionFind()
    classes = [colocation_names(node.attr[COLOCATION_ATTR].list.s)
               if COLOCATION_ATTR in node.attr else [] for node in nodes]
    joins.union_all((other, node.name) for node, listed in zip(nodes, classes)
                    for other in listed)
    joins.union_all((source, nodes[k].name) for k, source in reads)
    members: dict[str, list[int]] = {}
    for k, node in enumerate(nodes):
        members.setdefault(joins.find(node.name), []).append(k)
    reads_of: dict[int, list[str]] = {}
    for k, source in reads:
        reads_of.setdefault(k, []).append(source)
    out = []
    for positions in members.values():
        bound = frozenset(source[1:] for k in positions for source in reads_of.get(k, ())
                          if source[:1] == _MAIN)
        if not bound and not any(asked[k] for k in positions):
            continue
        merge = PlacerMerge()
        for k in positions:
            merge.add(k, asked[k], _makes_body_handle(nodes[k]))
        for root in bound:
            merge.add(_MAIN + root, device_of(root), True)
        conflict = named = None
        for k in positions:
            for source in reads_of.get(k, ()):
                key = source if source[:1] == _MAIN else next(
                    (j for j in positions if nodes[j].name == source), None)
                if key is not None and conflict is None:
                    conflict = merge.handle_edge(key, k, source.removeprefix(_MAIN), nodes[k].name)
                    named = k if conflict else None
        if conflict is None:
            conflict, named = merge.colocate(positions, lambda k: nodes[k].name,
                                             classes.__getitem__)
        requested = None if conflict else merge.merged()
        out.append(BodyGroup(function, [nodes[k] for k in positions],
                             [asked[k] for k in positions], requested, conflict, caller,
                             bound, nodes[named].name if named is not None else None))
    return out


def _makes_body_handle(node) -> bool:
    """`_makes_handle` for a body node: an op that makes a variable, no inputs."""
    return node.op in VARIABLE_OPS and not any(t[:1] != "^" for t in node.input)


def body_members_by_root(graph: GraphIndex) -> dict[str, list[tuple[str, object]]]:
    """Main-graph group root -> (function, NodeDef) of each function-body node TF's placer
    puts in that group (`BodyGroup.bound`): what moves with the group."""
    out: dict[str, list[tuple[str, object]]] = {}
    seen = set()
    for group in body_groups(graph):
        for root in group.bound:
            for node in group.members:
                if (root, group.function, node.name) not in seen:
                    seen.add((root, group.function, node.name))
                    out.setdefault(root, []).append((group.function, node))
    return out


def move_body_members(graph: GraphIndex, positions: Sequence[int],
                      bodies: dict[str, list[tuple[str, object]]], new_device,
                      target: str) -> list[str]:
    """Give the body nodes in the group of the main-graph nodes at `positions` (`bodies`:
    `body_members_by_root`) the device the group moves to: `new_device[their device]`,
    or `target` for one that asks for none (it would inherit its call site's). Returns
    `function/node` for each node whose device changed."""
    if not bodies:  # (most graphs call no function: no root to look up for each member)
        return []
    roots = {graph.group_root(graph.names[p]) for p in positions}
    moved = []
    for root in roots:
        for function, node in bodies.get(root, ()):
            device = new_device[node.device] if node.device else target
            if node.device != device:
                node.device = device
                moved.append(f"{function}/{node.name}")
    return moved


def body_problems(graph: GraphIndex, targets: Sequence[str] = (),
                  soft_placement: bool = False) -> list[PlacementProblem]:
    """The groups of function bodies that TF's placer would refuse (see `body_groups`),
    each group once (the first call that makes it fail), the message naming the function;
    `soft_placement` as for `problems`."""
    found, reported = [], set()
    for group in body_groups(graph):
        key = (group.function, group.first.name)
        if key in reported:
            continue
        problem = _problem(group, graph, targets, soft_placement)
        if problem is not None:
            reported.add(key)
            problem.message += f" (in the body of function {group.function}, called by {group.caller})"
            found.append(problem)
    return found


def _is_generator(node, signatures) -> bool:
    outputs = signatures.output_types(node)
    return (not any(text[:1] != "^" for text in node.input) and outputs is not None
            and len(outputs) == 1 and outputs[0] < REF_OFFSET)


def first_refused(found: list[PlacementProblem], graph: GraphIndex) -> PlacementProblem:
    """Of problems in graph order, the one TF's placer meets first (generators deferred, as
    in `_named_by_placer`)."""
    return next((p for p in found if not _is_generator(
        _named_by_placer(p.group, graph), graph.signatures)), found[0])


def _named_by_placer(group: "Group | BodyGroup", graph: GraphIndex):
    """The member TF's placer fails on first: it walks nodes in graph order but defers
    generators (no inputs, one non-ref output: Const, VarHandleOp) until their consumers."""
    for node in group.members:
        if not _is_generator(node, graph.signatures):
            return node
    return group.first


def _message(group: Group, node, device_type: str) -> str:
    merged = group.requested.to_string()
    own = DeviceSpec.parse(group.asked_by(node)).to_string() if group.asked_by(node) else ""
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
    """Which members lack the kernel and with what attrs: `no GPU kernel for: VariableV2
    Variable (dtype=DT_INT32); group of 3`; for a conflict, those that lack one on the
    device they ask for themselves; "" where no member lacks one."""
    if not problem.no_kernel:
        return ""
    parts = [describe_member(n) for n in problem.no_kernel]
    size = len(problem.group.members)
    if problem.kind == "conflict":
        return (f"and with no kernel on the device each asks for: {'; '.join(parts)}; "
                f"group of {size}")
    return f"no {problem.group.requested.device_type} kernel for: {'; '.join(parts)}; group of {size}"


def describe_member(node) -> str:
    """A member as the kernel findings name it: `VariableV2 Variable (dtype=DT_INT32)`."""
    attrs = kernels.describe_attrs(node)
    return f"{node.op} {node.name} ({attrs})" if attrs else f"{node.op} {node.name}"


def lacking_kernels(group: "Group | BodyGroup", device_type: str, graph: GraphIndex) -> list:
    """The members of `group` that TF's registry has no kernel for on `device_type` (where
    a group could move: it places there only if this is empty)."""
    return _lacking(group, device_type, graph)


# Bytes per element of a DataType enum value (a variable's, a tensor's size).
DTYPE_BYTES = {1: 4, 2: 8, 3: 4, 4: 1, 5: 2, 6: 1, 7: 8, 8: 8, 9: 8, 10: 1, 14: 2, 17: 2,
                18: 16, 19: 2, 22: 4, 23: 8}


def variable_bytes(node) -> int:
    """A variable's size in bytes from its `shape` and `dtype` attrs (unknown dims count 1)."""
    elements = 1
    if "shape" in node.attr:
        for dim in node.attr["shape"].shape.dim:
            elements *= max(dim.size, 1)
    return elements * DTYPE_BYTES.get(node.attr["dtype"].type, 4)


NO_DEVICE = "(no device: the placer chooses)"


def node_devices(graph: GraphIndex) -> list[str]:
    """The device each node (by position) is counted on: its own, else its colocation
    group's merged request, else NO_DEVICE."""
    out = [NO_DEVICE] * len(graph)
    devices = graph.devices
    for positions in graph.colocation_groups().values():
        merged, _ = merge_requested(graph, positions)
        group_device = merged.to_string() if merged else ""
        for position in positions:
            own = devices[position]
            out[position] = (DeviceSpec.parse(own).to_string() if own else group_device
                             ) or NO_DEVICE
    return out


def device_totals(graph: GraphIndex) -> dict[str, tuple[int, int]]:
    """Ops and variable bytes per requested device (`node_devices`), busiest first:
    device -> (ops, variable bytes)."""
    ops: dict[str, int] = {}
    size: dict[str, int] = {}
    kinds = graph.ops
    for position, device in enumerate(node_devices(graph)):
        ops[device] = ops.get(device, 0) + 1
        if kinds[position] in VARIABLE_OPS:
            size[device] = size.get(device, 0) + variable_bytes(graph.node_at(position))
    return {device: (count, size.get(device, 0))
            for device, count in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))}


def summary(graph: GraphIndex) -> list[str]:
    """`device_totals` as one line per device, busiest first."""
    return [f"{device}: {count} op(s), {size} variable byte(s)"
            for device, (count, size) in device_totals(graph).items()]
