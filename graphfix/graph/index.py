"""The graph model every transform shares: one index over a GraphDef.

`GraphIndex` wraps a `GraphDef` message that it edits in place. It knows each node by name,
each tensor's consumers, the dtype of every edge (from TF's op signatures, without the TF
runtime: `graphfix.graph.signatures`), and the colocation groups exactly as TF's placer
forms them (`graphfix.graph.colocation`). What it reads of every node is kept in columns
(`graphfix.graph.columns`) and an edge table (`graphfix.graph.edges`).

Edits go through the index (`set_device`, `add_node`, `add_control_input`, `replace_input`,
`prune`) so it stays consistent, and `check_changes` proves the edits left it well formed
(`check_structure` proves a whole graph). What an edit looks for can be said as an op-type
pattern (`graphfix.graph.pattern.Op`, `match`, `matches`), with `read_elsewhere` for what
must stay.
"""

from __future__ import annotations

from collections import defaultdict
from functools import cached_property
from array import array
from itertools import chain, compress, repeat
from operator import sub
from typing import Container, Iterable, Iterator, Mapping, Sequence

from graphfix.graph.colocation import (LOWERED_CONTROL_FLOW, RESOURCE_COLOCATION_EXEMPT,
                                       ColocationGroups, lowered_before_placement,
                                       star_members)
from graphfix.graph.columns import NodeColumns
from graphfix.graph.edges import input_source, parse_input, read_edge_table, tensor_name
from graphfix.graph.pattern import Match, Op
from graphfix.graph.pattern import match as match_pattern
from graphfix.graph.signatures import DT_RESOURCE, EXPAND, EXPAND_BY_ATTR, OpSignatures, is_tf_op
from graphfix.graph import validity
from graphfix.graph.validity import GraphError

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

# What a run feeds: a feed of a node that is gone fails ("refers to a Tensor which does not
# exist"), so `prune` keeps them, read or not.
_GRAPH_INPUTS = frozenset({"Placeholder", "PlaceholderV2", "PlaceholderWithDefault"})
# Loops are the one legal cycle in a TF graph: the back edge enters Merge from NextIteration.
_LOOP_BACK_EDGE_OPS = frozenset({"NextIteration", "RefNextIteration"})
# Readers of new edges `check_changes` proves acyclic one walk each; more, one whole check.
_MAX_CYCLE_WALKS = 64


class GraphIndex:
    """An index over a GraphDef that it edits in place (see the module docstring).

    Nodes are known by name and by position (their index in `graph_def.node`, graph order).
    What every pass needs is read from the message once, into columns: `names`, `ops` and
    `devices` (lists by position). Inputs and `_class` lists are read on first use, the
    inputs only of the nodes that need them: reading a field of a parsed node costs about
    a microsecond, and a 1M-node graph has a million of each.
    """

    def __init__(self, graph_def, signatures: OpSignatures | None = None):
        self.graph_def = graph_def
        self.signatures = signatures or OpSignatures()
        self._node_defs = graph_def.node
        columns = self._columns = NodeColumns()
        columns.read(self._node_defs, 0)
        self.names, self.ops, self.devices = columns.names, columns.ops, columns.devices
        self._points_to, self._classes = columns.points_to, columns.classes
        self._positions: dict[str, int] = dict(zip(self.names, range(len(self.names))))
        if len(self._positions) != len(self.names):
            raise GraphError("two nodes are named "
                             f"{validity.shown(validity.duplicate_name(self.names))}")
        self._kinds: set[str] | None = None
        self._by_op: dict[str, list[int]] = {}
        self._edges: tuple[array, array] | None = None
        self._dangling_read = False  # whether the edge table holds an input from no node
        # Edges added after the edge table was read: reader position -> source positions.
        self._added_sources: dict[int, list[int]] = {}
        self._step = None  # `_sources_step`'s function for the tables as they are
        self._consumers: dict[int, list[int]] | None = None
        self._read: set[int] | None = None  # positions some node reads
        self._groups: ColocationGroups | None = None
        self._handle_pairs: list[tuple[int, int]] = []  # (set with the groups: `handle_pairs`,
        self._handle_joined: set[int] = set()  # `handle_joined`)
        self._listed: set[int] | None = None  # (`colocation_listed`)
        self._group_positions: dict[str, list[int]] | None = None
        # Nodes whose inputs or op an edit changed (a ref or resource edge may have moved).
        self.rewired: set[int] = set()
        # What edits added since the last `check_changes`: (reader, input text), new nodes.
        self._unchecked_inputs: list[tuple[int, str]] = []
        self._unchecked_nodes: list[int] = []
        # Where the nodes the index read stand once `prune` removed some: the position each
        # node of the graph as read had, for the nodes now before the edits' added ones
        # (None: none removed, every node read stands where it stood).
        self.kept_positions: list[int] | None = None
        self._read_count = len(self.names)

    # -- reading ---------------------------------------------------------------------------

    def __contains__(self, name: str) -> bool:
        return name in self._positions

    def __iter__(self) -> Iterator:
        return iter(self._node_defs)

    def __len__(self) -> int:
        return len(self.names)

    def node(self, name: str):
        """The NodeDef called `name`; GraphError if there is none."""
        return self._node_defs[self.position(name)]

    def node_at(self, position: int):
        """The NodeDef at `position` in graph order."""
        return self._node_defs[position]

    def position(self, node_or_name) -> int:
        """A node's index in the GraphDef (graph order, as TF's placer walks it)."""
        name = node_or_name if isinstance(node_or_name, str) else node_or_name.name
        try:
            return self._positions[name]
        except KeyError:
            raise GraphError(f"no node named {name!r}") from None

    def positions_of(self, op_names: Iterable[str]) -> list[int]:
        """Positions of the nodes whose op is one of `op_names`, in graph order."""
        found = list(self._positions_for(set(op_names)).values())
        if len(found) == 1:
            return list(found[0])
        return sorted(p for positions in found for p in positions)

    @cached_property
    def library_names(self) -> frozenset[str]:
        """The names of the graph's library functions (a node whose op is one calls it)."""
        return frozenset(f.signature.name for f in self.graph_def.library.function)

    def is_custom_op(self, op: str) -> bool:
        """Whether `op` is a custom op: neither one of TF's own ops (`is_tf_op`) nor a
        function of the graph's library."""
        return not is_tf_op(op) and op not in self.library_names

    def op_kinds(self) -> set[str]:
        """The distinct ops of the graph."""
        if self._kinds is None:
            self._kinds = set(self.ops)
        return self._kinds

    def _positions_for(self, kinds: set[str]) -> dict[str, list[int]]:
        """op -> positions of its nodes, for the `kinds` the graph has (one pass over the ops
        for all the kinds not asked for before)."""
        cache = self._by_op
        missing = {k for k in kinds if k not in cache and k in self.op_kinds()}
        if missing:
            ops = self.ops
            hits = list(compress(range(len(ops)), map(missing.__contains__, ops)))
            if len(missing) == 1:
                cache[missing.pop()] = hits
            else:
                found: dict[str, list[int]] = {k: [] for k in missing}
                for position in hits:
                    found[ops[position]].append(position)
                cache.update(found)
        return {k: cache[k] for k in kinds if k in cache}

    def inputs(self, position: int) -> tuple[str, ...]:
        """The input strings of the node at `position` (`name`, `name:1`, `^name`), read
        from the message (not kept: a 1M-node graph has a million of them)."""
        return tuple(self._node_defs[position].input)

    def _edge_table(self) -> tuple[array, array]:
        """Every node's sources as positions, data and control inputs in input order (-1
        for an input from no node): one flat array and each node's offset into it, its
        sources being `flat[offsets[p]:offsets[p + 1]]`. Read once for the whole-graph
        walks; ints in two arrays take a tenth of the memory of the input strings."""
        if self._edges is None:
            flat, offsets = self._edges = read_edge_table(self._node_defs, self._positions)
            self._dangling_read = -1 in flat
            self._added_sources = {}
            self._step = None
        return self._edges

    def _sources_step(self):
        """A function: position -> the positions of the node's sources (-1: from no node).
        Made once per state of the tables (`sources` asks it thousands of times)."""
        flat, offsets = self._edge_table()
        if self._step is not None:
            return self._step
        added = self._added_sources
        if not added:
            self._step = lambda p: flat[offsets[p]:offsets[p + 1]]
            return self._step
        read = len(offsets) - 1

        def sources(p):
            own = flat[offsets[p]:offsets[p + 1]] if p < read else ()
            more = added.get(p)
            return [*own, *more] if more else own
        self._step = sources
        return sources

    def sources(self, position: int) -> Sequence[int]:
        """Positions of the nodes that the node at `position` reads, data then control
        inputs, in input order (-1 for an input from no node)."""
        return self._sources_step()(position)

    def _read_positions(self) -> set[int]:
        if self._read is None:
            flat, _ = self._edge_table()
            self._read = set(flat)
            for sources in self._added_sources.values():
                self._read.update(sources)
        return self._read

    def is_sink(self, name: str) -> bool:
        """Whether no node reads `name` (a train op, a saver's ops, summaries)."""
        return self.position(name) not in self._read_positions()

    def _consumer_table(self) -> dict[int, list[int]]:
        """Source position -> positions of the nodes reading it (repeats where it is read
        twice; -1 collects the nodes with an input from no node)."""
        if self._consumers is None:
            flat, offsets = self._edge_table()
            table: dict[int, list[int]] = defaultdict(list)
            # The reader of each edge, in the order of `flat` (one loop over the edges).
            readers = chain.from_iterable(map(repeat, range(len(offsets) - 1),
                                              map(sub, offsets[1:], offsets)))
            for source, reader in zip(flat, readers):
                table[source].append(reader)
            for reader, sources in self._added_sources.items():
                for source in sources:
                    table[source].append(reader)
            self._consumers = table
        return self._consumers

    def successors(self, name: str) -> list[str]:
        """The nodes that read `name` (data or control), each once, in graph order."""
        names = self.names
        readers = self._consumer_table().get(self._positions.get(name, -2), ())
        return [names[p] for p in sorted(set(readers))]

    def consumers(self, name: str) -> list[tuple[str, int, int]]:
        """(consumer name, input position, output index of `name`; -1 control) for each use."""
        found = []
        readers = self._consumer_table().get(self._positions.get(name, -2), ())
        for position in dict.fromkeys(readers):
            for k, text in enumerate(self.inputs(position)):
                source, index = parse_input(text)
                if source == name:
                    found.append((self.names[position], k, index))
        return found

    def data_inputs(self, node) -> list[tuple[str, int]]:
        """(source node, output index) for each data input of `node`, in order."""
        out = []
        for text in self.inputs(self.position(node)):
            if text.startswith("^"):
                break  # control inputs always come last
            out.append(parse_input(text))
        return out

    def data_input_texts(self, position: int) -> list[str]:
        """The data input strings of the node at `position` (`name`, `name:1`), in order."""
        out = []
        for text in self._node_defs[position].input:
            if text[:1] == "^":
                break  # control inputs always come last
            out.append(text)
        return out

    def position_or_none(self, name: str) -> int | None:
        """`position(name)`, or None where no node has that name."""
        return self._positions.get(name)

    # -- patterns --------------------------------------------------------------------------

    def match(self, pattern: Op, node_or_tensor) -> Match | None:
        """The match of `pattern` (`graphfix.graph.pattern.Op`) at a node (a NodeDef, its
        name, or an input string naming one of its outputs, `name:1`), or None where the
        node does not have that shape."""
        if not isinstance(node_or_tensor, str):
            node_or_tensor = node_or_tensor.name
        return match_pattern(self, pattern, node_or_tensor)

    def matches(self, pattern: Op) -> list[Match]:
        """Every match of `pattern` in the graph, in graph order of the matched nodes (the
        candidates are the nodes of the pattern's ops: one pass over the ops, made once)."""
        candidates = (range(len(self.names)) if pattern.ops is None
                      else self.positions_of(pattern.ops))
        names = self.names
        found = (match_pattern(self, pattern, names[p]) for p in candidates)
        return [m for m in found if m is not None]

    def read_elsewhere(self, names: Iterable[str], besides: Container[str] = ()) -> set[str]:
        """Those of `names` that a node not among `besides` reads (data or control input) or
        names in its `_class`, or that the MetaGraphDef holds (a collection, a signature,
        the saver): a node an edit may not drop."""
        names = [n for n in names if n in self._positions]
        if not names:
            return set()
        table = self._consumer_table()
        held = self._held_names()
        found = set()
        wanted = {self._positions[n]: n for n in names}
        for position, name in wanted.items():
            if name in held or any(self.names[r] not in besides
                                   for r in table.get(position, ())):
                found.add(name)
        if len(found) < len(wanted):
            asked = set(wanted.values())
            for position in self.colocation_listed():
                if self.names[position] in besides:
                    continue
                for other in self.colocated_with(position):
                    if other in asked and other != self.names[position]:
                        found.add(other)
        return found

    def _held_names(self) -> frozenset[str] | _HeldNames:
        """The node names the MetaGraphDef refers to: its `node_list` collections, its
        signatures' tensors, its saver's; a serialized collection entry (a VariableDef) is
        searched for the name itself."""
        meta = getattr(self, "meta_graph", None)
        if meta is None:
            return frozenset()
        return _HeldNames(meta)

    def __repr__(self) -> str:
        return f"<GraphIndex of {len(self.names)} nodes>"

    def colocated_with(self, node_or_position) -> list[str]:
        """Names listed in the node's `_class` attr (`loc:@name`)."""
        position = (node_or_position if isinstance(node_or_position, int)
                    else self.position(node_or_position))
        one = self._points_to.get(position)
        return [one] if one is not None else self._classes.get(position, [])

    # -- colocation groups -----------------------------------------------------------------

    def _colocation(self) -> ColocationGroups:
        if self._groups is None:
            edges = self._handle_edges()
            self._groups = ColocationGroups(self.names, self._positions, self._points_to,
                                            self._classes, edges)
            # Consumers that joined their group only by reading a handle: where their own
            # device conflicts with the group's, TF's placer overrides it (colocation_graph.cc,
            # EnsureCompatibilityAcrossResourceEdge: requested devices are not an error).
            positions = self._positions
            self._handle_pairs = [(positions[source], positions[consumer])
                                  for source, consumer in edges]
            sources = {source for source, _ in self._handle_pairs}
            self._handle_joined = ({consumer for _, consumer in self._handle_pairs}
                                   - sources - self.colocation_listed())
        return self._groups

    def colocation_listed(self) -> set[int]:
        """Positions of the nodes that have a `_class` attr. TF's Python importer
        (`import_graph_def`, `import_meta_graph`) drops such a node's own device and gives it
        that of the first node it names that has one: its own device never decides where
        its group goes."""
        if self._listed is None:
            names = self.names
            # (a node naming only itself names nothing: the importer skips its own name)
            self._listed = {p for p, name in self._points_to.items() if name != names[p]}
            self._listed.update(p for p, listed in self._classes.items()
                                if any(name != names[p] for name in listed))
        return self._listed

    def handle_joined(self) -> set[int]:
        """Positions of the nodes that are in their colocation group only because they read
        a ref or resource handle of it (no `_class` of their own, no handle they give): a
        tower's `ReadVariableOp`, whose requested device TF's placer overrides."""
        self._colocation()
        return self._handle_joined

    def handle_pairs(self) -> list[tuple[int, int]]:
        """(handle's node, consumer) positions of every ref and resource edge the placer
        colocates (`_handle_edges`), in graph order of the consumers: the order in which
        TF's placer joins them, before any `_class` (colocation_graph.cc, `Initialize`)."""
        self._colocation()
        return self._handle_pairs

    def imported_device(self, position: int) -> str:
        """The device the node at `position` asks for once TF's Python importer has read
        the graph (`import_graph_def`, `import_meta_graph`): its own, or, for a node with a
        `_class` (`colocation_listed`), that of the first node it names that has one when
        the importer reaches it (a named node with a `_class` of its own has its imported
        device if it comes earlier, none yet if later), else none."""
        if position not in self.colocation_listed():
            return self.devices[position]
        positions, devices, listed = self._positions, self.devices, self._listed
        one = self._points_to.get(position)
        if one is not None:  # (the common case: one name, of a node with no `_class`)
            other = positions.get(one)
            if other is not None and other not in listed:
                return devices[other]
        for name in self.colocated_with(position):
            other = positions.get(name)
            if other is None or other == position:
                continue
            if other not in listed:
                device = devices[other]
            else:
                device = self.imported_device(other) if other < position else ""
            if device:
                return device
        return ""

    def _handle_edges(self) -> list[tuple[str, str]]:
        """(handle's node, consumer) for each ref or resource edge the placer colocates and
        no `_class` of the consumer already does (a ref variable's `Assign` names it in both).

        As TF's placer decides it, by the consumer's input type: an argument declared a ref
        or a resource joins whatever node feeds it; an argument typed by an attr only when
        fed a resource (a ref into `T` is a value, read through). Control flow the session
        lowers before placing (`lowered_before_placement`) joins nothing itself: its
        resource inputs join the body nodes that read them (`placement.body_groups`)."""
        resources = self._resource_tensors()
        names, node_defs = self.names, self._node_defs
        points_to, classes = self._points_to, self._classes
        # The edge table has every input's source already (the graph's check read it): a
        # node's inputs are read again only for the attr-typed ones, to tell which output.
        sources_of = self._sources_step()
        lowered = {p for p in self.positions_of(LOWERED_CONTROL_FLOW)
                   if lowered_before_placement(node_defs[p])}
        edges = []
        for position, fixed, by_attr in self._handle_inputs(bool(resources)):
            if position in lowered:
                continue
            sources = sources_of(position)
            count = len(sources)
            one = points_to.get(position)
            named = (one,) if one is not None else classes.get(position, ())
            for k in fixed:
                if k < count:
                    source = sources[k]
                    # (the common case, a ref variable's Assign, names it in `_class` too)
                    if source >= 0 and names[source] not in named:
                        edges.append((names[source], names[position]))
            if by_attr:
                inputs = node_defs[position].input[:]  # (one call for all: each read makes a str)
                for k in by_attr:
                    if k < count:
                        source = resources.get(inputs[k])
                        if source is not None and source not in named:
                            edges.append((source, names[position]))
        return edges

    def _handle_inputs(self, resources_exist: bool
                       ) -> Iterator[tuple[int, Sequence[int], Sequence[int]]]:
        """(position, ref or resource input positions, input positions typed by an attr)
        for each node that has any, decided per op where its signature allows. Attr-typed
        inputs count only where the graph has resources."""
        signatures = self.signatures
        node_defs = self._node_defs
        plans = {op: signatures.handle_plan(op, "in") for op in self.op_kinds()
                 if op not in RESOURCE_COLOCATION_EXEMPT}
        plans = {op: plan for op, plan in plans.items() if plan == EXPAND or (
            resources_exist if plan == EXPAND_BY_ATTR else
            plan is not None and (plan[0] or (resources_exist and plan[1])))}
        found = []
        for op, positions in self._positions_for(set(plans)).items():
            plan = plans[op]
            if isinstance(plan, str):
                for position in positions:
                    fixed = signatures.handle_positions(node_defs[position], "in")
                    if fixed:
                        found.append((position, fixed, ()))
                continue
            fixed, by_attr = plan
            attr_typed = tuple(k for k, _, _ in by_attr) if resources_exist else ()
            if fixed or attr_typed:
                found.extend((position, fixed, attr_typed) for position in positions)
        return iter(found)

    def _resource_tensors(self) -> dict[str, str]:
        """Every tensor that is a resource handle: its input string (`name`, `name:1`) -> its
        node. None in a graph where no op makes a resource and no argument holds one (a
        graph of ref variables: no Identity's `T` is ever read)."""
        signatures = self.signatures
        kinds = self.op_kinds()
        if not (any(signatures.makes_resources(op) for op in kinds) or self._resource_args()):
            return {}
        plans = {op: signatures.handle_plan(op, "out") for op in kinds}
        plans = {op: plan for op, plan in plans.items() if plan is not None and (
            isinstance(plan, str) or plan[1] or any(
                signatures.is_resource_output(op, k) for k in plan[0]))}
        resources: dict[str, str] = {}
        names, node_defs = self.names, self._node_defs
        for op, positions in self._positions_for(set(plans)).items():
            plan = plans[op]
            if isinstance(plan, str) or plan[1]:
                for position in positions:
                    types = signatures.output_types(node_defs[position]) or ()
                    for k, dtype in enumerate(types):
                        if dtype == DT_RESOURCE:
                            name = names[position]
                            resources[tensor_name(name, k)] = name
                continue
            nodes = [names[p] for p in positions]
            for k in plan[0]:
                if signatures.is_resource_output(op, k):
                    resources.update(zip(
                        nodes if k == 0 else [tensor_name(n, k) for n in nodes], nodes))
        return resources

    def _resource_args(self) -> bool:
        """Whether a placeholder or function argument of the graph holds a resource."""
        for position in self.positions_of(("Placeholder", "PlaceholderWithDefault", "_Arg")):
            attrs = self._node_defs[position].attr
            for key in ("dtype", "T"):
                if key in attrs and attrs[key].type == DT_RESOURCE:
                    return True
        return False

    def group_root(self, name: str) -> str:
        """A stable representative of the colocation group holding `name`."""
        return self._colocation().root_of(self.position(name))

    def group_roots(self, positions: Iterable[int]) -> list[str]:
        """`group_root` of the nodes at `positions`, each root once, in order."""
        root_of = self._colocation().root_of
        return list(dict.fromkeys(map(root_of, positions)))

    def group_members(self, root: str) -> list[int]:
        """Positions of the group whose root is `root` (`group_root`), in graph order:
        one group's, without forming every group (`colocation_groups`)."""
        return self._colocation().members(root)

    def colocation_groups(self) -> dict[str, list[int]]:
        """Every colocation group (singletons too): root -> member positions, graph order."""
        if self._group_positions is None:
            root_of = self._colocation().root_of
            out: dict[str, list[int]] = {}
            for position in range(len(self.names)):
                root = root_of(position)
                if root in out:
                    out[root].append(position)
                else:
                    out[root] = [position]
            self._group_positions = out
        return self._group_positions

    def variable_groups(self) -> dict[str, list[int]]:
        """The colocation groups that hold a variable op: root -> member positions, in
        graph order, the groups in the order of their first variable."""
        groups = self._colocation()
        names, points_to, pointing = self.names, self._points_to, groups.pointing
        joined, joined_roots = groups.joins.parent, groups.joins.members
        out: dict[str, list[int]] = {}
        for position in self.positions_of(VARIABLE_OPS):
            name = names[position]
            if position in points_to or name in joined or name in joined_roots:
                root = groups.root_of(position)
                if root not in out:
                    out[root] = groups.members(root)
                continue
            # The common case, a star: the variable and the nodes whose `_class` names it
            # (as `members` finds it, without looking up what is known here).
            out[name] = star_members(position, pointing.get(name, ()))
        return out

    def group_of(self, name: str) -> list:
        """All NodeDefs that TF's placer must put on one device together with `name`."""
        groups = self._colocation()
        return [self._node_defs[p] for p in groups.members(groups.root_of(self.position(name)))]

    # -- editing ---------------------------------------------------------------------------

    def set_device(self, position: int, device: str) -> bool:
        """Set the requested device of the node at `position`; return whether it changed."""
        if self.devices[position] == device:
            return False
        self._node_defs[position].device = device
        self.devices[position] = device
        return True

    def set_devices(self, positions: Iterable[int], new_device: Mapping[str, str]) -> list[int]:
        """Give each node at `positions` that asks for a device `new_device[its device]`;
        return the positions whose device changed (one loop for the thousands of nodes
        a fix moves at once)."""
        devices, node_defs = self.devices, self._node_defs
        changed = []
        for position in positions:
            device = devices[position]
            if device:
                target = new_device[device]
                if target != device:
                    node_defs[position].device = target
                    devices[position] = target
                    changed.append(position)
        return changed

    def add_node(self, node_def):
        """Append a copy of `node_def`; return the stored NodeDef."""
        if node_def.name in self._positions:
            raise GraphError(f"node {node_def.name!r} already exists")
        stored = self.graph_def.node.add()
        stored.CopyFrom(node_def)
        position = len(self.names)
        self._columns.read([stored], position)
        self._positions[stored.name] = position
        if self._kinds is not None:
            self._kinds.add(self.ops[position])
        if self.ops[position] in self._by_op:
            self._by_op[self.ops[position]].append(position)
        if self._dangling_read:  # the new name may be what an input of the graph named
            self._drop_edge_tables()
        self._groups = self._group_positions = None  # its `_class` or handle inputs may join
        self._listed = None
        self._unchecked_nodes.append(position)
        self._record_inputs(position, stored.input)
        return stored

    def replace_node(self, node_def):
        """Put `node_def` in the place of the node of its name (its position, so its readers
        read it still) and return the stored NodeDef: an edit that changes a node's op."""
        position = self.position(node_def.name)
        stored = self._node_defs[position]
        old_op = self.ops[position]
        stored.CopyFrom(node_def)
        self._points_to.pop(position, None)
        self._classes.pop(position, None)
        read = NodeColumns()
        read.read([stored], position)
        self.ops[position], self.devices[position] = read.ops[0], read.devices[0]
        self._points_to.update(read.points_to)
        self._classes.update(read.classes)
        self._kinds = None
        self._by_op.pop(old_op, None)
        self._by_op.pop(self.ops[position], None)
        self._inputs_changed(position, stored.input)
        self._unchecked_nodes.append(position)
        return stored

    def _inputs_changed(self, position: int, texts: Iterable[str]) -> None:
        """An edge was taken away: the tables are read again when next needed (one read for
        all the edits of a fix; an edit adding edges only extends them, `_record_inputs`),
        the groups formed again (a handle edge may have moved), and the new inputs checked
        by `check_changes`."""
        self._drop_edge_tables()
        self._groups = self._group_positions = None
        self._listed = None
        self._unchecked_inputs.extend((position, text) for text in texts)
        self.rewired.add(position)

    def add_control_input(self, node, source: str) -> bool:
        """Make `node` run after `source`; return whether an edge was added."""
        position = self.position(node)
        inputs = self.inputs(position)
        text = "^" + source
        if text in inputs or source in {input_source(i) for i in inputs}:
            return False
        self._node_defs[position].input.append(text)
        self._record_inputs(position, [text])
        return True

    def replace_input(self, node, source: str, replacement: str) -> int:
        """Make `node` read `replacement` where it reads `source`. A node's name as `source`
        stands for all its outputs: each data input `source:k` becomes `replacement:k` (or
        `replacement` itself where that names an output, `name:1`), a control input
        `^source` becomes `^replacement`. An output as `source` (`name:1`, `name:0`) changes
        only the inputs that read that one tensor, to `replacement` (its output 0, or the
        output it names). Returns how many inputs changed. The replacement must give what
        the input takes (same dtype, ref or resource): the caller's to know,
        `check_changes` proves the new edges name nodes and close no cycle."""
        position = self.position(node)
        stored = self._node_defs[position].input
        wanted_name, wanted_index = _named_output(source)
        into_name, into_index = _named_output(replacement)
        changed = []
        for k, text in enumerate(stored):
            name, index = parse_input(text)
            if name != wanted_name or (wanted_index is not None and index != wanted_index):
                continue
            if index < 0:
                stored[k] = "^" + into_name
            elif into_index is not None:
                stored[k] = tensor_name(into_name, into_index)
            else:  # (a node for a node keeps the output; for an output, its output 0)
                stored[k] = tensor_name(into_name, index if wanted_index is None else 0)
            changed.append(stored[k])
        if changed:
            self._inputs_changed(position, changed)
        return len(changed)

    def prune(self, candidates: Iterable[str]) -> list[str]:
        """Remove what an edit left dead, starting from `candidates` (the nodes it bypassed):
        a candidate that no node reads (`read_elsewhere`: no input, no `_class`, nothing
        the MetaGraphDef holds), whose op has no side effect (not stateful, no variable;
        a placeholder stays, and an op graphfix knows no signature of: a custom op, a
        function call), goes, and then so do the inputs it alone read, in turn. Returns
        the removed names, in graph order. Positions after a removed node move down
        (`kept_positions` says where each node the index read now stands) and the index is
        read again: one prune for an edit's candidates together, not one a node."""
        signatures = self.signatures
        dead: set[int] = set()
        todo = [self._positions[n] for n in dict.fromkeys(candidates) if n in self._positions]
        table = self._consumer_table()
        held = self._held_names()
        named = {other for p in self.colocation_listed() for other in self.colocated_with(p)}
        while todo:
            position = todo.pop()
            name, op = self.names[position], self.ops[position]
            if (position in dead or name in held or name in named or op in VARIABLE_OPS
                    or op in _GRAPH_INPUTS or not signatures.known(op)
                    or signatures.is_stateful(op)
                    or any(r not in dead for r in table.get(position, ()))):
                continue
            dead.add(position)
            todo.extend(s for s in self.sources(position) if s >= 0 and s not in dead)
        removed = [self.names[p] for p in sorted(dead)]
        if dead:
            self._remove(sorted(dead))
        return removed

    def _remove(self, dead: list[int]) -> None:
        """Take the nodes at `dead` (positions, ascending) out of the graph and read the
        index again, the edits' records renumbered."""
        gone = set(dead)
        new_position = array("l", repeat(-1, len(self.names)))
        k = 0
        for position in range(len(self.names)):
            if position not in gone:
                new_position[position] = k
                k += 1
        for position in reversed(dead):
            del self._node_defs[position]
        # (the nodes the index read come first, the edits' added ones after them)
        before = range(self._read_count) if self.kept_positions is None else self.kept_positions
        kept = [old for now, old in enumerate(before) if new_position[now] >= 0]
        rewired = {new_position[p] for p in self.rewired if new_position[p] >= 0}
        inputs = [(new_position[r], t) for r, t in self._unchecked_inputs
                  if new_position[r] >= 0]
        nodes = [new_position[p] for p in self._unchecked_nodes if new_position[p] >= 0]
        meta, read_count = getattr(self, "meta_graph", None), self._read_count
        self.__init__(self.graph_def, self.signatures)
        self._read_count, self.kept_positions = read_count, kept
        self.rewired, self._unchecked_inputs, self._unchecked_nodes = rewired, inputs, nodes
        if meta is not None:
            self.meta_graph = meta

    def unique_name(self, base: str) -> str:
        """`base`, or `base_1`, `base_2`, ... whichever is free."""
        name, k = base, 0
        while name in self._positions:
            k += 1
            name = f"{base}_{k}"
        return name

    def _drop_edge_tables(self) -> None:
        self._edges = self._consumers = self._read = None

    def _record_inputs(self, position: int, texts: Iterable[str]) -> None:
        """Note new inputs of the node at `position` for `check_changes`, and add them to
        the edge and consumer tables if read (an edit costs its own edges, not a re-read of
        every node's inputs)."""
        texts = list(texts)
        self._unchecked_inputs.extend((position, text) for text in texts)
        if self._edges is None:
            return
        get = self._positions.get
        sources = [get(input_source(text), -1) for text in texts]
        if -1 in sources:  # a node added later may be its source: read the tables again
            self._drop_edge_tables()
            return
        self._added_sources.setdefault(position, []).extend(sources)
        self._step = None
        if self._consumers is not None:
            for source in sources:
                self._consumers[source].append(position)
        if self._read is not None:
            self._read.update(sources)

    # -- checking --------------------------------------------------------------------------

    def check_changes(self) -> None:
        """`check_structure` for what was added since the last check: GraphError if a new
        input names no node, a new node's `_class` names no node, or a new edge closes a
        cycle. The graph as read is not proved again: its faults are not the edit's."""
        inputs, nodes = self._unchecked_inputs, self._unchecked_nodes
        if not inputs and not nodes:
            return
        positions, names = self._positions, self.names
        by_reader: dict[int, list[int]] = {}
        for reader, text in inputs:
            source = positions.get(input_source(text))
            if source is None:
                raise GraphError(f"node {validity.shown(names[reader])} "
                                 f"{validity.input_problem(text)}")
            by_reader.setdefault(reader, []).append(source)
        for position in nodes:
            for other in self.colocated_with(position):
                if other not in positions:
                    raise GraphError(f"node {names[position]!r} expects to be colocated "
                                     f"with unknown node {other!r}")
        if len(by_reader) > _MAX_CYCLE_WALKS:
            self.check_structure()
            return
        # A cycle through new edges into `reader` runs from `reader` back to one of their
        # sources: one walk up from those sources per reader.
        back = set(self.positions_of(_LOOP_BACK_EDGE_OPS))
        for reader, sources in by_reader.items():
            if self._runs_after(sources, {reader}, back):
                raise GraphError(f"cycle through {names[reader]}")
        inputs.clear()
        nodes.clear()

    def _runs_after(self, positions: Iterable[int], targets: Container[int],
                   back: Container[int] = ()) -> bool:
        """Whether one of `targets` is among `positions` or runs before one of them
        (walking up their inputs, stopping at the first found; not through `back` nodes,
        a loop's NextIteration for one)."""
        step = self._sources_step()
        seen = bytearray(len(self.names))
        stack = [p for p in positions if p not in back]
        while stack:
            position = stack.pop()
            if position in targets:
                return True
            for nearby in step(position):
                if nearby >= 0 and not seen[nearby] and nearby not in back:
                    seen[nearby] = 1
                    stack.append(nearby)
        return False

    def check_structure(self) -> None:
        """GraphError naming the first thing that makes the graph invalid, as
        `graphfix.graph.validity` defines it (names, ops, inputs, `_class`, cycles; the
        function library is `index_for`'s to check, once per graph read)."""
        self._unchecked_inputs.clear()
        self._unchecked_nodes.clear()
        names = self.names
        validity.check_names(names, self._positions)
        validity.check_ops(self.op_kinds(), names, self.ops)
        if self._added_sources:
            self._drop_edge_tables()  # one table of every edge, the edits' included
        flat, offsets = self._edge_table()
        validity.check_inputs(names, flat, offsets, self.inputs)
        validity.check_colocation(names, self._positions, self._points_to, self._classes)
        back = set(self.positions_of(_LOOP_BACK_EDGE_OPS))
        if validity.edges_run_forward(flat, offsets, back):
            return
        stuck = validity.cycle_members(len(names), self._consumer_table(), back)
        if stuck:
            raise GraphError(f"cycle through {', '.join(sorted(names[p] for p in stuck)[:5])}")

    def ancestors(self, names: Iterable[str]) -> set[str]:
        """Every node that must run before any of `names` (data and control inputs)."""
        starts = [p for p in map(self._positions.get, names) if p is not None]
        return self._reached(starts, self._sources_step())

    def run_before(self, names: Iterable[str], target: str) -> set[str]:
        """Those of `names` that must run before `target` (its ancestors among them). A name
        no node reads runs before nothing; for the others, the walk up from `target` stops
        once it has met them all (a train op's update ops are a few steps up, its
        ancestors most of the graph)."""
        read, positions = self._read_positions(), self._positions
        wanted = bytearray(len(self.names))
        left = 0
        for position in map(positions.get, names):
            if position is not None and position in read and not wanted[position]:
                wanted[position] = 1
                left += 1
        start = positions.get(target)
        if not left or start is None:
            return set()
        step = self._sources_step()
        seen = bytearray(len(self.names))
        stack, found = [start], []
        while stack and len(found) < left:
            for nearby in step(stack.pop()):
                if nearby >= 0 and not seen[nearby]:
                    seen[nearby] = 1
                    stack.append(nearby)
                    if wanted[nearby]:
                        found.append(nearby)
        return set(map(self.names.__getitem__, found))

    def descendants(self, names: Iterable[str]) -> set[str]:
        """Every node that runs after any of `names` (data and control edges)."""
        starts = [p for p in map(self._positions.get, names) if p is not None]
        read = self._read_positions()
        if not any(p in read for p in starts):
            return set()  # sinks (a train op, most often): no need for every node's readers
        if self._consumers is None:
            found = self._reached_down_the_graph(starts)
            if found is not None:
                return found
        consumers = self._consumer_table()
        return self._reached(starts, lambda p: consumers.get(p, ()))

    def _reached_down_the_graph(self, starts: list[int]) -> set[str] | None:
        """`descendants` without a table of consumers, where the graph allows: one pass down
        from the first start, a node reached when one of its sources is. Right when every
        edge from that start on runs forward in graph order (as TF writes a graph without
        loops); None where one does not. Descendants of an optimizer's steps are the few
        nodes after them: this reads those, not every node's readers."""
        flat, offsets = self._edge_table()
        if self._added_sources or self._dangling_read:
            return None
        first = min(starts)
        if max(flat[:offsets[first + 1]], default=-1) >= first:
            return None  # a node up to the first start reads it or a later one
        marked = bytearray(len(self.names))
        for position in starts:
            marked[position] = 1
        is_marked, names, reached = marked.__getitem__, self.names, []
        for position in range(first + 1, len(offsets) - 1):
            sources = flat[offsets[position]:offsets[position + 1]]
            if not sources:
                continue
            if max(sources) >= position:
                return None  # a loop's back edge, or an edit's
            if any(map(is_marked, sources)):
                marked[position] = 1
                reached.append(position)
        return set(map(names.__getitem__, reached))

    def _reached(self, starts: list[int], step) -> set[str]:
        """The nodes reached from the nodes at `starts` (not counting themselves unless
        reached again) by repeating `step`: position -> next positions."""
        seen = bytearray(len(self.names))
        stack = list(starts)
        while stack:
            for nearby in step(stack.pop()):
                if nearby >= 0 and not seen[nearby]:
                    seen[nearby] = 1
                    stack.append(nearby)
        return set(compress(self.names, seen))


def _named_output(text: str) -> tuple[str, int | None]:
    """(node, output) of `text` where it names an output (`name:1`, `name:0`), (node, None)
    where it is a node's name alone."""
    node, sep, port = text.rpartition(":")
    if sep and port.isdigit():
        return node, int(port)
    return text, None


class _HeldNames:
    """`in`: whether a MetaGraphDef refers to a node name (see `GraphIndex._held_names`)."""

    def __init__(self, meta):
        names: set[str] = set()
        blobs = []
        for collection in meta.collection_def.values():
            kind = collection.WhichOneof("kind")
            if kind == "node_list":
                names.update(input_source(v) for v in collection.node_list.value)
            elif kind == "bytes_list":
                blobs.extend(collection.bytes_list.value)
        for signature in meta.signature_def.values():
            for info in (*signature.inputs.values(), *signature.outputs.values()):
                names.add(input_source(info.name))
        saver = meta.saver_def
        for text in (saver.filename_tensor_name, saver.save_tensor_name, saver.restore_op_name):
            if text:
                names.add(input_source(text))
        self.names = names
        self.blob = b"\0".join(blobs)

    def __contains__(self, name: str) -> bool:
        return name in self.names or (bool(self.blob) and name.encode() in self.blob)


def index_for(graph_def, meta_graph=None) -> GraphIndex:
    """A GraphIndex for one graph as read; a MetaGraphDef adds its op list and collections.
    GraphError if the graph is invalid (`graphfix.graph.validity`): no transform, placement
    or run sees a graph that is not one."""
    ops = meta_graph.meta_info_def.stripped_op_list if meta_graph is not None else None
    index = GraphIndex(graph_def, OpSignatures(ops))
    index.check_structure()
    if graph_def.HasField("library"):
        validity.check_library(graph_def.library)
    if meta_graph is not None:
        validity.check_collections(meta_graph, index._positions)
    index.meta_graph = meta_graph
    return index
