"""What in a graph is training: variables, update ops, train ops, towers, replicas.

Shared by the transforms that reason about a training step (`update-ops`, which also
declares the moving statistics its fix makes a step update) and by `verify` (which proves
each update op ran). A MetaGraphDef's own collections win over
detection: `update_ops` and `train_op` say what the author meant.
"""

from __future__ import annotations

import re

from graphfix.graph.edges import parse_input
from graphfix.graph.gradients import (all_reduce_peers, forward_op,
                                      variables_of_applied_gradients)
from graphfix.graph.index import VARIABLE_OPS, GraphIndex

ASSIGN_OPS = frozenset({
    "Assign", "AssignAdd", "AssignSub",
    "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp",
})
# Statistics that batch norm keeps outside the gradient path.
_MOVING_STAT = re.compile(r"(^|/)(moving_mean|moving_variance|renorm_mean|renorm_stddev"
                          r"|renorm_mean_weight|renorm_stddev_weight)$")
_MOVING_STAT_LINE = re.compile(_MOVING_STAT.pattern, re.MULTILINE)
_APPLY_PREFIXES = ("Apply", "ResourceApply", "SparseApply", "ResourceSparseApply")
_NOT_TRAIN = re.compile(r"(^|/)(save|restore|init|report_uninitialized|summaries?)(_\d+)?(/|$)")


def collection(index: GraphIndex, key: str) -> list[str] | None:
    """Node names in a MetaGraphDef collection (None when there is no such collection)."""
    meta = getattr(index, "meta_graph", None)
    if meta is None or key not in meta.collection_def:
        return None
    values = meta.collection_def[key].node_list.value
    names = dict.fromkeys(parse_input(v)[0] for v in values)  # ordered, without repeats
    return [n for n in names if n in index]


def variable_of(index: GraphIndex, node) -> str | None:
    """The variable op an assign-like node writes (following Identity of the handle)."""
    position = _variable_at(index, index.position(node))
    return None if position is None else index.names[position]


def _variable_at(index: GraphIndex, position: int) -> int | None:
    sources = index.sources(position)
    if not sources or sources[0] < 0:
        return None
    return _variable_from(index, sources[0])


def is_initializer(index: GraphIndex, position: int) -> bool:
    """Whether the node at `position` is a variable's own initializer: the assign TF names
    `<variable>/Assign`, run once, when the variables are initialized."""
    if index.ops[position] not in ASSIGN_OPS:
        return False
    variable = _variable_at(index, position)
    return variable is not None and index.names[position] == f"{index.names[variable]}/Assign"


def detect_update_ops(index: GraphIndex) -> list[str]:
    """Batch-norm moving-average updates: assigns to moving statistics, not initializers."""
    names = index.names
    variable_names = "\n".join(map(names.__getitem__, index.positions_of(VARIABLE_OPS)))
    # One search over all the names at once; the words first (a fast scan, where the
    # pattern is tried at every position: 0.13 s over 200k names).
    if not (("moving_" in variable_names or "renorm_" in variable_names)
            and _MOVING_STAT_LINE.search(variable_names)):
        return []  # no moving statistics, so nothing can update one
    found = []
    for position in index.positions_of(ASSIGN_OPS):
        sources = index.sources(position)
        if not sources or sources[0] < 0 or names[position] == names[sources[0]] + "/Assign":
            continue  # a variable's own initializer (the common case: skip it cheaply)
        variable = _variable_at(index, position)
        if variable is None or not _MOVING_STAT.search(names[variable]):
            continue
        if names[position] == f"{names[variable]}/Assign":  # the variable's own initializer
            continue
        if is_restore(index, position):
            continue
        found.append(names[position])
    return found


# Ops that read tensors from a checkpoint: the Saver's restore (V2, and V1's two forms).
RESTORE_OPS = frozenset({"RestoreV2", "Restore", "RestoreSlice"})


def is_restore(index: GraphIndex, position: int) -> bool:
    """Whether the assign at `position` writes a value read from a checkpoint (a Saver's
    restore op, through the `Identity` a resource variable's restore puts between): it runs
    when the Saver restores, never in a training step. A Saver of a batch-normed model
    holds one for each moving statistic (`save/Assign_4`, `save/AssignVariableOp_4`)."""
    sources = index.sources(position)
    value = sources[1] if len(sources) > 1 else -1
    for _ in range(8):
        if value < 0:
            return False
        op = index.ops[value]
        if op in RESTORE_OPS:
            return True
        if op != "Identity":
            return False
        value = index.sources(value)[0]
    return False


def update_ops(index: GraphIndex) -> tuple[list[str], str]:
    """(update op names, where they came from: "collection" or "detected")."""
    listed = collection(index, "update_ops")
    if listed:
        return listed, "collection"
    return detect_update_ops(index), "detected"


def update_writers(index: GraphIndex) -> dict[str, list[str]]:
    """Each variable an update op writes -> the update ops that write it (one per tower
    that runs the batch norm)."""
    names, _ = update_ops(index)
    writers: dict[str, list[str]] = {}
    for name in names:
        variable = variable_of(index, index.node(name))
        if variable is not None:
            writers.setdefault(variable, []).append(name)
    return writers


def run_with(index: GraphIndex, updates: list[str], train: str) -> set[str]:
    """Those of `updates` that run whenever the train op runs as a training loop runs it:
    the loop runs a sink of the graph, so an update op counts when it runs before the train
    op, or before every sink that runs after the train op. TF's optimizers put their own
    Apply op in the TRAIN_OP collection, whatever the script groups around it:
    `tf.group(apply_op, *update_ops)` or slim's `with_dependencies([update_op], loss)` run
    the update ops beside that op, not before it."""
    sinks = [name for name in index.descendants([train]) if index.is_sink(name)]
    covered = index.run_before(updates, train)
    if sinks:
        covered |= set.intersection(*(index.run_before(updates, sink) for sink in sinks))
    return covered


def update_ops_run(index: GraphIndex, trains: list[str] | None = None) -> set[str]:
    """The update ops (`update_ops`) that run with any of the train ops (`train_ops`, or
    those of `trains` in the graph): those a training step runs (`run_with`)."""
    updates, _ = update_ops(index)
    trains = train_ops(index)[0] if trains is None else [t for t in trains if t in index]
    if not updates or not trains:
        return set()
    return set().union(*(run_with(index, updates, train) for train in trains))


# Ops that write a variable given as a data input: assigns, optimizer steps, scatters.
_WRITER_PREFIXES = _APPLY_PREFIXES + ("Scatter", "ResourceScatter")


def variables_written_after(index: GraphIndex, names: list[str]) -> set[str]:
    """The variables that `names`, or the ops computed from them, write: each variable
    (through Identity) an assign, an optimizer step or a scatter takes as a data input (the
    variable an optimizer updates and its slots). What a change at `names` can reach of the
    values a training step leaves behind (a global step's increment that only runs after
    the updates is not computed from them)."""
    after = computed_from(index, names)
    written = set()
    for name in after:
        position = index.position(name)
        op = index.ops[position]
        if op not in ASSIGN_OPS and not op.startswith(_WRITER_PREFIXES):
            continue
        for source, _ in index.data_inputs(name):
            variable = _variable_from(index, index.position(source)) if source in index else None
            if variable is not None:
                written.add(index.names[variable])
    return written


def computed_from(index: GraphIndex, names: list[str]) -> set[str]:
    """`names` and the nodes whose inputs are computed from them: their descendants along
    data edges (a control edge orders a node, it gives it no value)."""
    found = {n for n in names if n in index}
    todo = list(found)
    while todo:
        for reader, _, output in index.consumers(todo.pop()):
            if output >= 0 and reader not in found:
                found.add(reader)
                todo.append(reader)
    return found


def _variable_from(index: GraphIndex, position: int) -> int | None:
    """The variable op at `position` or behind its Identity ops (None if another op)."""
    for _ in range(8):
        op = index.ops[position]
        if op in VARIABLE_OPS:
            return position
        sources = index.sources(position)
        if op not in ("Identity", "RefIdentity") or not sources or sources[0] < 0:
            return None
        position = sources[0]
    return None


def variable_read_by(index: GraphIndex, name: str) -> str | None:
    """The variable that node `name` is, or reads (a ref variable's `read` Identity, a
    resource variable's `ReadVariableOp`); None for any other node."""
    if name not in index:
        return None
    position = index.position(name)
    sources = index.sources(position)
    if index.ops[position] == "ReadVariableOp" and sources and sources[0] >= 0:
        position = sources[0]
    position = _variable_from(index, position)
    return None if position is None else index.names[position]


def rewired(original: GraphIndex, fixed: GraphIndex) -> list[tuple[str, str, str]]:
    """(node, the node it read, the node it reads now) for each data input a fix moved:
    nodes of both graphs, of the same op, whose input k comes from another node in `fixed`
    (a node whose op changed was rebuilt, not rewired)."""
    found = []
    for node in fixed:
        if node.name not in original:
            continue
        before = original.node(node.name)
        if before.op != node.op or list(before.input) == list(node.input):
            continue
        for old, new in zip(original.data_inputs(before), fixed.data_inputs(node)):
            if old[0] != new[0]:
                found.append((node.name, old[0], new[0]))
    return found


# Ops a run cannot compute unless the caller feeds them (PlaceholderWithDefault has a value).
FED_OPS = frozenset({"Placeholder", "PlaceholderV2"})
# Ops a run may be given a value for (a feed replaces PlaceholderWithDefault's default).
FEEDABLE_OPS = FED_OPS | {"PlaceholderWithDefault"}


def needing_other_feeds(index: GraphIndex, target: str, names: list[str]) -> set[str]:
    """Those of `names` that need a placeholder the run of `target` does not: making `target`
    run them would make every run of it fail for a feed it never took. Keras graph-mode
    models hold such update ops: a functional model's construction call on its own `Input`
    builds a batch norm's updates too, beside those of the calls the loss is computed from."""
    placeholders = [index.names[p] for p in index.positions_of(FED_OPS)]
    others = set(placeholders) - index.run_before(placeholders, target)
    return index.descendants(others) & set(names) if others else set()


def apply_ops(index: GraphIndex) -> list[str]:
    """Optimizer steps: the Apply*/ResourceApply* ops that write gradients into variables."""
    names = index.names
    kinds = {op for op in set(index.ops) if op.startswith(_APPLY_PREFIXES)}
    return [names[p] for p in index.positions_of(kinds)] if kinds else []


def optimizer_steps(index: GraphIndex) -> list[str]:
    """The ops whose run writes an optimizer's update into the variables: its Apply ops,
    or, in a graph without one, the assigns whose value is computed from a gradient (a
    tf_keras optimizer that updates with `assign` ops, as its legacy RMSprop does; an update
    written by hand, `w.assign_sub(lr * grad)`)."""
    applying = apply_ops(index)
    if applying:
        return applying
    seeds = gradient_seeds(index)
    if not seeds:
        return []
    from_gradients = computed_from(index, seeds)
    return [index.names[p] for p in index.positions_of(ASSIGN_OPS)
            if index.names[p] in from_gradients]


# `tf.gradients`' seed of d(loss)/d(loss): `[scope/]gradients[_N]/grad_ys_K` (or `/Fill`).
_GRADIENT_SEED = re.compile(r"gradients(?:_\d+)?/(grad_ys_\d+|Fill)$")


def gradient_seeds(index: GraphIndex) -> list[str]:
    """The `Fill` ops that `tf.gradients` starts its backward pass from, one per loss: every
    gradient of the graph is computed from one of them."""
    names = index.names
    return [names[p] for p in index.positions_of({"Fill"}) if _GRADIENT_SEED.search(names[p])]


def detect_train_ops(index: GraphIndex) -> list[str]:
    """The ops a training loop runs: the sinks of the graph that run after the optimizer's
    steps (`optimizer_steps`): the group `apply_gradients` returns, the `AssignAdd` of its
    global step, a loss read after the step as slim's `create_train_op` returns it; save,
    restore, initialization and summaries aside. A read of a variable's value
    (`is_value_read`) is one only where no other sink runs after the steps (a script that
    runs `identity(global_step)` after its step)."""
    applying = optimizer_steps(index)
    if not applying:
        return []
    after = index.descendants(applying) | set(applying)
    sinks = [name for name in after if index.is_sink(name) and not _NOT_TRAIN.search(name)]
    steps = [name for name in sinks if not is_value_read(index, name)]
    return sorted(steps or sinks, key=index.position)


def is_value_read(index: GraphIndex, name: str) -> bool:
    """Whether the node `name` only gives a variable's value (a resource variable's
    `ReadVariableOp`, a ref variable's `Identity`): its run writes nothing, so it is never a
    step, whatever it is ordered after. TF's Adam leaves two such sinks in every graph of
    resource variables: `assign` reads each beta power again after writing it, and nothing
    takes that read; the group it returns is the step."""
    return index.ops[index.position(name)] not in VARIABLE_OPS and \
        variable_read_by(index, name) is not None


def train_ops(index: GraphIndex, named: list[str] | None = None) -> tuple[list[str], str]:
    """(train op names, where from: "parameter", "collection" or "detected")."""
    if named:
        return named, "parameter"
    listed = collection(index, "train_op")
    if listed:
        return listed, "collection"
    return detect_train_ops(index), "detected"


def detect_loss(index: GraphIndex) -> str | None:
    """The tensor the optimizer differentiates: `tf.gradients` seeds it with a Fill named
    `gradients/grad_ys_0` (or `gradients/Fill`), consumed by `gradients/<loss>_grad/...`."""
    for seed in gradient_seeds(index):
        for consumer in index.successors(seed):
            forward = forward_op(index, consumer)
            if forward is not None:
                return f"{forward}:0"
    return "loss:0" if "loss" in index else None


def collection_variables(index: GraphIndex, key: str) -> list[str] | None:
    """The variable ops of a MetaGraphDef's variable collection (`local_variables`,
    `global_step`: serialized VariableDefs); None when there is no such collection."""
    meta = getattr(index, "meta_graph", None)
    if meta is None or key not in meta.collection_def:
        return None
    from graphfix.graph import proto

    names = []
    for value in meta.collection_def[key].bytes_list.value:
        variable = proto.VariableDef()
        try:
            variable.ParseFromString(value)
        except Exception:  # (a collection of another kind under this key: not variables)
            return None
        name = parse_input(variable.variable_name)[0]
        if name in index and index.ops[index.position(name)] in VARIABLE_OPS:
            names.append(name)
    return names


def global_step(index: GraphIndex) -> str | None:
    """The global step variable: the `global_step` collection's, else a variable so named."""
    listed = collection_variables(index, "global_step")
    if listed:
        return listed[0]
    if "global_step" in index and index.ops[index.position("global_step")] in VARIABLE_OPS:
        return "global_step"
    return None


def worker_local_variables(index: GraphIndex) -> set[int]:
    """Positions of the variables each worker keeps for itself, never on a parameter server:
    those of the `local_variables` collection (TF's `replica_device_setter` has a TODO to
    keep them off the ps), and those created under `colocate_with` a node that is not a
    variable (the device setter never sees an op made there: SyncReplicasOptimizer's
    `sync_rep_local_step` is colocated with a `NoOp` on the worker, "to prevent it being
    placed on the PS")."""
    names = index.names
    local = {index.position(n) for n in collection_variables(index, "local_variables") or ()}
    listed = index.colocation_listed()
    for position in index.positions_of(VARIABLE_OPS):
        if position in listed:
            anchors = [n for n in index.colocated_with(position) if n != names[position]]
            if anchors and anchors[0] in index and \
                    index.ops[index.position(anchors[0])] not in VARIABLE_OPS:
                local.add(position)
    return local


class Replicas:
    """Replicated training, read from a graph: each tower keeps its own copy of a variable
    on its own device, and every copy's update applies the same sum of all the copies'
    gradients (an all-reduce: tf.distribute's mirrored variables, `w` and `w/replica_1`;
    tf_cnn_benchmarks' `--variable_update=replicated`; an `add_n` of the towers' gradients
    each tower applies to its own copy), so copies that start equal stay equal. Such copies
    are meant, and so is an average of their gradients; copies that are not all updated by
    the sum are not replicas (a tower's copy that never trains, or trains on its own
    gradient alone). The optimizer's updates are read on first use: a graph whose rules ask
    nothing of replicas pays nothing."""

    def __init__(self, index: GraphIndex):
        self._index = index
        self._updates: dict[str, list[str]] | None = None
        self._peers: dict[str, tuple[str, ...]] = {}
        self._applied: dict[str, set[str]] = {}

    def replicated(self, variables) -> bool:
        """Whether `variables` (two or more) are replicas of one another: each has an
        optimizer update, and every update of each applies the gradients of them all."""
        variables = set(variables)
        if len(variables) < 2:
            return False
        return all(self._applied_to(variable) >= variables for variable in variables)

    def _applied_to(self, variable: str) -> set[str]:
        """The variables whose gradients every optimizer update of `variable` applies
        (none when no update writes it)."""
        if variable not in self._applied:
            if self._updates is None:
                self._updates, self._peers = {}, all_reduce_peers(self._index)
                for update in apply_ops(self._index):
                    written = variable_of(self._index, update)
                    if written is not None:
                        self._updates.setdefault(written, []).append(update)
            applied = [variables_of_applied_gradients(self._index, self._index.node(update),
                                                      self._peers)
                       for update in self._updates.get(variable, ())]
            self._applied[variable] = set.intersection(*applied) if applied else set()
        return self._applied[variable]
