"""The gradient sub-graph of a multi-tower training step: the towers' gradients, how they are
averaged, and the sparse gradients (`IndexedSlices`) among them.

A graph holds no `IndexedSlices`: a sparse gradient is a pair of tensors, its values and its
indices, built by the gradient of a gather (`tf.gather`, `tf.nn.embedding_lookup`), and it is
densified by an `UnsortedSegmentSum(values, indices, rows)` wherever a dense op reads it
("Converting sparse IndexedSlices to a dense Tensor"). The CIFAR-10 multi-GPU average,
`reduce_mean(concat([expand_dims(g, 0) ...]), 0)`, is one of those ops. This module reads
these shapes; `average-gradients` decides what is wrong with them.
"""

from __future__ import annotations

import re
import struct
from types import SimpleNamespace
from typing import NamedTuple

from graphfix.graph.edges import parse_input
from graphfix.graph.index import VARIABLE_OPS, GraphIndex
from graphfix.graph.pattern import Op

# Ops that only pass a tensor on (a gradient's `tuple/control_dependency` is an Identity).
_PASS_THROUGH = frozenset({"Identity", "RefIdentity", "ReadVariableOp"})
# The optimizer's update of a variable from a sparse gradient: (values, indices) inputs.
SPARSE_UPDATE_PREFIXES = ("SparseApply", "ResourceSparseApply", "Scatter", "ResourceScatter")
DENSE_APPLY_PREFIXES = ("Apply", "ResourceApply")
# `[scope/]gradients[_N]/`: the name scope `tf.gradients` opens (`_N` on a second call).
_GRADIENTS_SCOPE = re.compile(r"(?:^|/)gradients(?:_\d+)?/")
_TUPLE_OUTPUT = re.compile(r"_grad/tuple/control_dependency(?:_(\d+))?$")


class TowerAverage(NamedTuple):
    """An average over the towers: `node` computes it from one gradient per tower,
    `per_tower` (input strings, tower order), in the `form` of the recipe that built it:
    `concat` (`reduce_mean(concat(expand_dims(g, 0)), 0)`, CIFAR-10), `stack`
    (`reduce_mean(stack(g), 0)`) or `add_n` (`add_n(g) / n`)."""

    node: str
    form: str
    per_tower: tuple[str, ...]


class SparseGradient(NamedTuple):
    """An `IndexedSlices` as the graph holds it: its values and indices tensors, and
    `rows` (the dense tensor's first dimension, a tensor) where the graph computes it."""

    values: str
    indices: str
    rows: str | None = None


def producer(index: GraphIndex, tensor: str):
    """The node that computes `tensor` (an input string), through Identity-like ops."""
    node = index.node(parse_input(tensor)[0])
    for _ in range(8):
        if node.op not in _PASS_THROUGH or not node.input:
            break
        node = index.node(parse_input(node.input[0])[0])
    return node


def _attr(node, name: str):
    """A node's attr, or the empty default where it has none, read without adding it (a
    missing key of a protobuf map would be added by reading it): TF's defaults are the
    empty values for the attrs read here (keep_dims false, axis 0)."""
    return node.attr[name] if name in node.attr else _EMPTY_ATTR


def _data_inputs(node) -> list[str]:
    return [text for text in node.input if not text.startswith("^")]


def in_gradients_scope(name: str) -> bool:
    """Whether the node `name` was built by `tf.gradients`: it is in a name scope the call
    opened (`gradients/...`, `tower_0/gradients_1/...`)."""
    return _GRADIENTS_SCOPE.search(name) is not None


def forward_op(index: GraphIndex, name: str) -> str | None:
    """The forward op that the gradient node `name` differentiates: `tf.gradients` builds
    each op's gradient in `<its scope>/<forward op>_grad/`, so the name says it. The longest
    such prefix that is a node wins (a second derivative's `gradients_1/gradients/x_grad/
    Mul_grad/Mul` differentiates `gradients/x_grad/Mul`). A caller's scope of the same name
    around the call is passed over (tf_keras' optimizers call it in `Adam/gradients`:
    `Adam/gradients/gradients/dense/MatMul_grad/MatMul_1` differentiates `dense/MatMul`).
    None for a node that names no forward op: the sums of a tensor's several gradients
    (`gradients/AddN`), `grad_ys`."""
    scope = _GRADIENTS_SCOPE.search(name)
    while scope is not None:
        rest = name[scope.end():]
        end = rest.rfind("_grad/")
        while end > 0:
            if rest[:end] in index:
                return rest[:end]
            end = rest.rfind("_grad/", 0, end)
        scope = _GRADIENTS_SCOPE.search(name, scope.end() - 1)
    return None


def constant_value(index: GraphIndex, tensor: str) -> float | int | None:
    """The one number a Const holds (a scalar or a one-element list), else None."""
    return _const_value(producer(index, tensor))


def _const_value(node) -> float | int | None:
    """The one number of a Const node, else None."""
    if node.op != "Const":
        return None
    if "value" not in node.attr:  # (reading a missing key of a map would add it)
        return None
    proto = node.attr["value"].tensor
    for field in ("int_val", "int64_val", "float_val", "double_val"):
        values = getattr(proto, field)
        if len(values) == 1:
            return values[0]
    content = proto.tensor_content
    formats = {3: "<i", 9: "<q", 1: "<f", 2: "<d"}  # int32, int64, float, double
    fmt = formats.get(proto.dtype)
    if fmt and len(content) == struct.calcsize(fmt):
        return struct.unpack(fmt, content)[0]
    return None


def _is_zero_const(node) -> bool:
    return _const_value(node) == 0


_ZERO = Op("Const", through=_PASS_THROUGH, where=_is_zero_const)
# The towers' gradients stacked and averaged: `reduce_mean(concat([expand_dims(g, 0) ...],
# 0), 0)` (CIFAR-10) or `reduce_mean(stack(g), 0)`; or summed and divided, `add_n(g) / n`.
_MEAN_OF_STACKED = Op("Mean", Op("ConcatV2|Pack", name="stacked"), _ZERO,
                      where=lambda node: not _attr(node, "keep_dims").b)
_EXPANDED = Op("ExpandDims", Op(), _ZERO)
_SUM_DIVIDED = Op("RealDiv|Div|TrueDiv", Op("AddN", name="summed"), Op(name="count"))
# The values of a gather's gradient (TF's `_GatherGrad`): `Reshape(grad, concat([count,
# ...]))`, `count` being `expand_dims(size(ids), 0)`; its indices are `Reshape(ids, count)`.
_GATHER_VALUES = Op("Reshape", Op(), Op("ConcatV2", Op("ExpandDims", name="count"), ...),
                    through=_PASS_THROUGH)
# The dense form of an `IndexedSlices`: `UnsortedSegmentSum(values, indices, rows)`.
_DENSIFIED = Op("UnsortedSegmentSum", Op(name="values"), Op(name="indices"), Op(name="rows"),
                through=_PASS_THROUGH)


def tower_averages(index: GraphIndex) -> list[TowerAverage]:
    """Every average of two or more gradients in the graph that some node reads, in the
    three forms of `TowerAverage`."""
    found = []
    for mean in index.matches(_MEAN_OF_STACKED):
        stacked = mean["stacked"].node
        if index.is_sink(mean.name):
            continue
        if stacked.op == "ConcatV2":
            parts = _data_inputs(stacked)
            expanded = [index.match(_EXPANDED, p) for p in parts[:-1]]
            if index.match(_ZERO, parts[-1]) and len(expanded) >= 2 and all(expanded):
                found.append(TowerAverage(mean.name, "concat",
                                          tuple(e.node.input[0] for e in expanded)))
        elif _attr(stacked, "axis").i == 0 and len(stacked.input) >= 2:
            found.append(TowerAverage(mean.name, "stack", tuple(_data_inputs(stacked))))
    for divided in index.matches(_SUM_DIVIDED):
        parts = _data_inputs(divided["summed"].node)
        if (not index.is_sink(divided.name) and len(parts) >= 2
                and constant_value(index, divided["count"].tensor) == len(parts)):
            found.append(TowerAverage(divided.name, "add_n", tuple(parts)))
    return found


def densified(index: GraphIndex, tensor: str) -> SparseGradient | None:
    """The sparse gradient that `tensor` is the dense form of (`_DENSIFIED`: what converting
    an `IndexedSlices` to a tensor builds), else None."""
    found = index.match(_DENSIFIED, tensor)
    if found is None:
        return None
    return SparseGradient(*(found[k].tensor for k in ("values", "indices", "rows")))


def gather_gradient(index: GraphIndex, values: str) -> SparseGradient | None:
    """The sparse gradient whose values are `values`, when they are the values of a gather's
    gradient (`_GATHER_VALUES`), its indices the other Reshape by the same count (the size
    a Const where the batch has a static size)."""
    found = index.match(_GATHER_VALUES, values)
    if found is None:
        return None
    for reader, position, _ in index.consumers(found["count"].name):
        if reader != found.name and position == 1 and index.node(reader).op == "Reshape":
            return SparseGradient(values, reader)
    return None


def sparse_gradient(index: GraphIndex, tensor: str) -> SparseGradient | None:
    """`tensor` as a sparse gradient: the dense form of one, or a gather gradient's values."""
    return densified(index, tensor) or gather_gradient(index, tensor)


def variable_read(index: GraphIndex, tensor: str) -> str | None:
    """The variable an input reads directly (through Identity-like ops: `var/read`, a
    resource variable's `ReadVariableOp`, or the handle itself), else None."""
    source = producer(index, tensor)
    if source.op in VARIABLE_OPS:
        return source.name
    if source.op in _PASS_THROUGH and source.input:  # `producer` stopped early
        first = index.node(parse_input(source.input[0])[0])
        if first.op in VARIABLE_OPS:
            return first.name
    return None


def variable_reads(index: GraphIndex, node) -> set[str]:
    """The variables a node reads directly (`variable_read` of each data input)."""
    return {v for v in (variable_read(index, t) for t in _data_inputs(node)) if v is not None}


def gradient_variable(index: GraphIndex, tensor: str) -> str | None:
    """The variable a gradient tensor is the gradient of, read from the gradient sub-graph
    `tf.gradients` builds: `gradients/<forward op>_grad/tuple/control_dependency_k` is the
    gradient of the forward op's input k (a batch norm's offset, beside its input); another
    `gradients/<forward op>_grad/...` node differentiates a forward op that reads one
    variable; an `AddN` sums the gradients of one variable read twice. None where that does
    not say one variable."""
    own = parse_input(tensor)[0]
    tuple_output = _TUPLE_OUTPUT.search(own)
    if tuple_output is not None:  # before following the Identity: it names the input
        forward = forward_op(index, own)
        if forward is None:
            return None
        inputs = _data_inputs(index.node(forward))
        k = int(tuple_output.group(1) or 0)
        return variable_read(index, inputs[k]) if k < len(inputs) else None
    node = producer(index, tensor)
    if node.op == "UnsortedSegmentSum":  # a densified sparse gradient: its values say
        return gradient_variable(index, node.input[0])
    forward = forward_op(index, node.name)
    if forward is None:
        if node.op != "AddN":
            return None
        found = {gradient_variable(index, part) for part in _data_inputs(node)}
        return found.pop() if len(found) == 1 else None
    reads = variable_reads(index, index.node(forward))
    return reads.pop() if len(reads) == 1 else None


_EMPTY_ATTR = SimpleNamespace(b=False, i=0)

# How far below an average the optimizer's update of it may be: a sparse update reads it
# through the optimizer's own ops (Neg, Mul by the rate, deduplication's UnsortedSegmentSum).
_UPDATE_DEPTH = 6


def updates_reading(index: GraphIndex, average: str) -> list:
    """The optimizer's updates of a variable (dense Apply ops, sparse ones and scatters)
    that read the average `average` directly or through the optimizer's few ops between
    (`_UPDATE_DEPTH` data edges at most), in graph order. A walk of the few nodes below it,
    not of the whole graph below: a training graph has an average per variable."""
    found, seen, frontier = set(), {average}, [average]
    for _ in range(_UPDATE_DEPTH):
        below = []
        for name in frontier:
            for reader, _, output in index.consumers(name):
                if output < 0 or reader in seen:
                    continue
                seen.add(reader)
                if index.ops[index.position(reader)].startswith(
                        DENSE_APPLY_PREFIXES + SPARSE_UPDATE_PREFIXES):
                    found.add(reader)
                else:
                    below.append(reader)
        frontier = below
    return [index.node(name) for name in sorted(found, key=index.position)]


# The ops between the towers' gradients and an update that applies their sum: the sum (an
# `add_n`, NCCL's and the collective all-reduces, the recipe's `reduce_mean` of the stacked
# gradients), the mean's division or scaling, a cast, and the copies, slices and reshapes
# that carry the reduced tensor to each device (tf.distribute's broadcast is an `Identity`
# per device; a packed all-reduce concatenates the gradients, reduces them, and splits them
# back).
_REDUCING = frozenset({
    "Identity", "AddN", "Add", "AddV2", "Mul", "RealDiv", "Div", "TrueDiv", "Cast",
    "Mean", "Sum", "ConcatV2", "Pack", "ExpandDims", "Reshape", "Squeeze", "Split",
    "SplitV", "Slice", "StridedSlice", "Unpack", "NcclReduce", "NcclBroadcast",
})
# The all-reduces whose every member takes one tower's tensor and gives its tower the sum of
# all the members' (NCCL's `all_sum`, the collective ops): the members of one reduction
# share NCCL's `shared_name`, or a collective's group and instance keys (attributes, inputs
# from V2 on).
_ALL_REDUCE_MEMBERS = frozenset({"NcclAllReduce", "CollectiveReduce", "CollectiveReduceV2"})
# How many of those ops an update may read its gradients through.
_REDUCING_DEPTH = 12


def all_reduce_peers(index: GraphIndex) -> dict[str, tuple[str, ...]]:
    """Each member of a cross-device all-reduce (`_ALL_REDUCE_MEMBERS`) -> every member of
    its reduction, itself included: what a member's output is the sum of."""
    reductions: dict[tuple, list[str]] = {}
    for position in index.positions_of(_ALL_REDUCE_MEMBERS):
        node = index.node_at(position)
        key = _reduction_key(index, node)
        if key is not None:
            reductions.setdefault(key, []).append(node.name)
    return {name: tuple(members) for members in reductions.values() for name in members}


def _reduction_key(index: GraphIndex, node) -> tuple | None:
    """What the members of one all-reduce share (None where the graph does not say)."""
    if node.op == "NcclAllReduce":
        name = node.attr["shared_name"].s if "shared_name" in node.attr else b""
        return (node.op, name) if name else None
    if node.op == "CollectiveReduce":
        if "group_key" not in node.attr or "instance_key" not in node.attr:
            return None
        return node.op, node.attr["group_key"].i, node.attr["instance_key"].i
    inputs = _data_inputs(node)  # V2: (input, group_size, group_key, instance_key, ...)
    keys = [constant_value(index, t) for t in inputs[2:4]] if len(inputs) >= 4 else [None]
    return None if None in keys else (node.op, *keys)


def variables_of_applied_gradients(index: GraphIndex, update,
                                   peers: dict[str, tuple[str, ...]] | None = None) -> set[str]:
    """The variables whose gradients the optimizer's update `update` (a node) applies: its
    data inputs followed up through the ops that sum, scale and carry gradients
    (`_REDUCING`, and an all-reduce member through all its `peers`, `all_reduce_peers`) to
    the gradients `tf.gradients` built (`gradient_variable`). One variable's own gradient
    gives that variable; an all-reduce of the towers' gradients of their copies gives every
    copy. The walk stops in `tf.gradients`' own scopes: what lies above a gradient is the
    backward pass, not a sum across towers."""
    peers = all_reduce_peers(index) if peers is None else peers
    found: set[str] = set()
    seen: set[str] = set()
    frontier = _data_inputs(update)
    for _ in range(_REDUCING_DEPTH):
        above = []
        for tensor in frontier:
            name = parse_input(tensor)[0]
            if name in seen or name not in index:
                continue
            seen.add(name)
            variable = gradient_variable(index, tensor)
            if variable is not None:
                found.add(variable)
                continue
            node = index.node(name)
            if in_gradients_scope(name):
                continue
            if name in peers:  # the sum of every member's tensor
                above.extend(index.node(peer).input[0] for peer in peers[name])
            elif node.op in _REDUCING:
                above.extend(_data_inputs(node))
        if not above:
            break
        frontier = above
    return found
