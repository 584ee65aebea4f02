"""feed-to-assign: a variable fed through `feed_dict` while an optimizer updates it (seed 003).

The bug::

    sess.run(train_op, feed_dict={embeddings: value})

    InvalidArgumentError: Input 0 of node Adam/update_embeddings/AssignSub was passed float
    from _recv_embeddings_0:0 incompatible with expected float_ref

A fed tensor replaces the variable's ref output, so the optimizer's in-place update has
nothing to write to (TF 2.x says `_arg_...` where TF 1.x said `_recv_...`). The value must
be assigned to the variable, not fed in its place.

Found: in a graph, the variables named by the `variables` parameter, and every SavedModel
signature input bound to a variable (its ref output, its `read`, or a `ReadVariableOp` of it).

Fixed: per variable `V`, a constant number of nodes, made once:

* `V/feed` — a `PlaceholderWithDefault` whose default is `V`'s current value;
* `V/feed_assign` — `Assign` (or `AssignVariableOp`) of `V/feed` into `V`;
* every reader of `V`'s value (its `read`, `ReadVariableOp`s) runs after `V/feed_assign`.

A run that feeds `V/feed:0` computes from the fed value and leaves it in `V`, where the
optimizer then updates it; a run that does not feed it assigns `V` to itself and computes
exactly as before. SavedModel signature inputs bound to `V` are rebound to `V/feed:0`. The
change report lists each rename (`V:0 -> V/feed:0`) so callers can update their feeds;
`graphfix.runtime.load_variable_feeds` helps code that cannot be rewritten.

Parameters:
    variables: names of the variables that are fed (repeatable, or comma-separated).

In source: a feed entry keyed by a variable that an optimizer (or an assign) updates leaves
the feed, and the variable is loaded just before the run: `var.load(value, sess)`, through
`run_step_fn` for a MonitoredSession. A load feeds the variable's initializer, so it adds no
op to the graph however often it runs. Any variable stays in the feed of a run that writes
no variable (an evaluation of the loss or a metric at fed weights, a decay schedule at a fed
step: TF reads the fed value for that run alone, where a load would keep it for the train
runs after it), and a variable no optimizer updates (a step counter, a learning rate only
the optimizer reads, a trainable one that no optimizer or assign the program may run
writes: none it reaches trains every trainable variable or names it in its `var_list`)
wherever nothing updates it; a run that fetches nothing but the variables it feeds stores
nothing, and gets the load too.
Feeds of placeholders and tensors stay; variables known only at run time (keys taken from a
collection, fed by name) and runs a load cannot safely precede are reported, not fixed. See
`FeedToAssignCodemod`.
"""

from __future__ import annotations

from functools import partial
from typing import Iterator

from graphfix.findings import Change, Edit, Finding
from graphfix.graph.colocation import COLOCATION_ATTR
from graphfix.graph.index import VARIABLE_OPS, GraphIndex
from graphfix.graph.pattern import Op
from graphfix.graph.signatures import is_handle_type
from graphfix.registry import Context, Param, Transform
from graphfix.source.prefilter import SourceTriggers



def fed_variable_error(dtype: str = "float", updated: str = "an optimizer updates it") -> str:
    """What TF says when a run feeds a variable it also updates: the updating op gets the
    fed value (a `dtype`) where it needs the variable itself (a `dtype`_ref)."""
    return (f"feeding it while {updated} fails: \"Input 0 of node ... was passed {dtype} from "
            f"_arg_...:0 incompatible with expected {dtype}_ref\"")


_FLOAT_REF_ERROR = fed_variable_error()
_RESOURCE_READS = frozenset({"ReadVariableOp", "ResourceGather", "ResourceGatherNd"})
_SAVE_OPS = frozenset({"SaveV2", "Save", "SaveSlices"})


# What a tensor bound to a variable is: its output, its `read`, or a read of it.
_VARIABLE_OR_A_READ = (Op(VARIABLE_OPS, name="variable"),
                       Op("Identity|ReadVariableOp", Op(VARIABLE_OPS, name="variable")))


def _variable_behind(graph: GraphIndex, tensor: str) -> str | None:
    """The variable a tensor name stands for (`_VARIABLE_OR_A_READ`)."""
    found = next(filter(None, (graph.match(p, tensor) for p in _VARIABLE_OR_A_READ)), None)
    return None if found is None else found["variable"].name


def _signature_bindings(graph: GraphIndex) -> list[tuple[str, str, str]]:
    """(signature key, input key, variable) for every signature input bound to a variable."""
    meta = getattr(graph, "meta_graph", None)
    if meta is None:
        return []
    found = []
    for key, signature in sorted(meta.signature_def.items()):
        for input_key, info in sorted(signature.inputs.items()):
            variable = _variable_behind(graph, info.name)
            if variable is not None:
                found.append((key, input_key, variable))
    return found


def _dtype_name(variable) -> str:
    """A variable node's value type as TF's messages name it (DT_FLOAT -> "float")."""
    from graphfix.graph import proto

    if "dtype" not in variable.attr:
        return "float"
    return proto.DataType.Name(variable.attr["dtype"].type).removeprefix("DT_").lower()


def _fed_variables(graph: GraphIndex, ctx: Context) -> dict[str, str]:
    """Variable -> why it counts as fed, in a stable order."""
    fed = {}
    for name in ctx.options["variables"]:
        fed.setdefault(name, "named by feed-to-assign.variables")
    for key, input_key, variable in _signature_bindings(graph):
        fed.setdefault(variable, f"signature {key!r} input {input_key!r} is bound to it")
    return fed


def _readers(graph: GraphIndex, variable) -> list:
    """Nodes that read the variable's value (not its ref or handle), saving aside."""
    resource = variable.op == "VarHandleOp"
    readers = []
    for name, position, index in graph.consumers(variable.name):
        consumer = graph.node(name)
        if index < 0 or consumer.op in _SAVE_OPS:
            continue
        if resource:
            if consumer.op in _RESOURCE_READS:
                readers.append(consumer)
            continue
        types = graph.signatures.input_types(consumer)
        if types is not None and position < len(types) and not is_handle_type(types[position]):
            readers.append(consumer)
    return readers


def _attr_copy(target, source, name: str, as_name: str | None = None) -> None:
    if name in source.attr:
        target.attr[as_name or name].CopyFrom(source.attr[name])


class FeedToAssign(Transform):
    name = "feed-to-assign"
    summary = "feed variables through a placeholder and an assign, not in place of the variable"
    params = (
        Param("variables", None, "names of the variables that are fed", multiple=True),
    )
    # The source surface lives in source.py, loaded on first use (libcst is slow to
    # import and the graph path never needs it).
    codemod = ".source:FeedToAssignCodemod"
    # A run given a feed that may hold a variable. Whether a feed may hold one takes
    # following names through assignments, which no call list says: the predicate (loaded
    # on first use, as the codemod); then the project model's reading of its keys, with
    # what the files its imports connect it to assign.
    source_triggers = SourceTriggers(words=("run(", "eval("),
                                     where=".prechecks:may_feed_a_variable",
                                     in_project=".prechecks:model_may_feed_a_variable")

    def graph(self, graph: GraphIndex, ctx: Context) -> Iterator[Finding | Edit]:
        renames: dict[str, str] = {}  # each fed variable's output -> its feed
        for variable, why in _fed_variables(graph, ctx).items():
            if variable not in graph or graph.node(variable).op not in VARIABLE_OPS:
                yield Finding(ctx.path, self.name, f"{variable!r} is not a variable",
                              node=variable)
                continue
            renames[f"{variable}:0"] = f"{variable}/feed:0"
            if f"{variable}/feed_assign" in graph:
                continue  # already fixed
            yield Finding(ctx.path, self.name,
                          f"variable {variable} is fed ({why}); "
                          f"{fed_variable_error(_dtype_name(graph.node(variable)))}",
                          node=variable, edit=partial(self._feed_through_assign, variable, ctx))
        # Then, once every feed is made, an edit no finding reports: the signature inputs
        # bound to a fed variable (fed now or by an earlier fix) are rebound to its feed.
        yield partial(self._rebind_signatures, ctx, renames)

    def _feed_through_assign(self, variable_name: str, ctx: Context, graph: GraphIndex
                             ) -> list[Change]:
        feed, assign, readers = self._add_feed(graph, graph.node(variable_name))
        return [Change(
            ctx.path, self.name,
            f"variable {variable_name}: feed {feed}:0 (assigned by {assign}) instead of "
            f"{variable_name}:0; {len(readers)} reader(s) run after the assign",
            node=variable_name,
            details={"feed": f"{feed}:0", "assign_op": assign,
                     "renames": {f"{variable_name}:0": f"{feed}:0"},
                     "added_nodes": [f"{variable_name}/feed/default", feed, assign]},
        )]

    def _add_feed(self, graph: GraphIndex, variable):
        proto = type(variable)
        name = variable.name
        resource = variable.op == "VarHandleOp"
        readers = _readers(graph, variable)

        default = proto(name=f"{name}/feed/default", device=variable.device)
        if resource:
            default.op = "ReadVariableOp"
            default.input.append(name)
            _attr_copy(default, variable, "dtype")
        else:
            default.op = "Identity"
            default.input.append(name)
            _attr_copy(default, variable, "dtype", "T")
        graph.add_node(default)

        feed = proto(name=f"{name}/feed", op="PlaceholderWithDefault")
        feed.input.append(default.name)
        _attr_copy(feed, variable, "dtype")
        _attr_copy(feed, variable, "shape")
        graph.add_node(feed)

        assign = proto(name=f"{name}/feed_assign", device=variable.device)
        assign.input.extend([name, feed.name])
        if resource:
            assign.op = "AssignVariableOp"
            _attr_copy(assign, variable, "dtype")
        else:
            assign.op = "Assign"
            _attr_copy(assign, variable, "dtype", "T")
            assign.attr["use_locking"].b = True
            assign.attr["validate_shape"].b = True
            assign.attr[COLOCATION_ATTR].list.s.append(f"loc:@{name}".encode())
        graph.add_node(assign)

        for reader in readers:
            graph.add_control_input(graph.node(reader.name), assign.name)
        return feed.name, assign.name, readers

    def _rebind_signatures(self, ctx: Context, renames: dict[str, str], graph: GraphIndex
                           ) -> list[Change]:
        meta = getattr(graph, "meta_graph", None)
        if meta is None:
            return []
        changes = []
        for key, input_key, variable in _signature_bindings(graph):
            target = renames.get(f"{variable}:0")
            info = meta.signature_def[key].inputs[input_key]
            if target is None or info.name == target:
                continue
            old = info.name
            info.name = target
            changes.append(Change(
                ctx.path, self.name,
                f"signature {key!r} input {input_key!r}: {old} -> {target}",
                node=variable, details={"renames": {old: target}, "signature": key},
            ))
        return changes
