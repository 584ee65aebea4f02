"""update-ops: batch-norm moving averages that never update (seed 003).

The bug: `slim.batch_norm` / `tf.layers.batch_normalization` put their moving-mean and
moving-variance updates in `tf.GraphKeys.UPDATE_OPS` instead of the training path. Unless
the train op depends on them, they never run: training accuracy looks fine, inference (which
reads the moving statistics) is garbage. Multi-tower training with averaged gradients loses
them most easily::

    grads = average_gradients(tower_grads)
    train_op = opt.apply_gradients(grads, global_step=step)   # update ops never run

Found: the update ops (the MetaGraphDef's `update_ops` collection, else detected: assigns to
batch-norm moving statistics, ref and resource forms, fused or not; not a variable's
initializer, nor a Saver's restore of the statistic) that do not run with
the train op (the `train_op` collection, else the `train_op` parameter, else detected:
the graph's sink that runs after the optimizer's steps, its Apply ops or, without one, the
assigns computed from a gradient; a sink that only reads a variable, such as the beta-power
reads TF's Adam leaves after its assigns, is passed over): neither before it nor before
every sink of the graph that runs after it (a training loop runs a sink: TF's optimizers
name their own Apply op in the collection even where the script runs
`tf.group(apply_op, *update_ops)`). Only the update ops of the
training pass count: one that needs a placeholder the train op is not fed (the update ops of a
Keras functional model's construction call on its own `Input`) is not the train op's to run.

Fixed: one `NoOp` (`<train op>/update_ops`, on the train op's device or its colocation
group's) gathers the missing update ops as control inputs, and the train op gains a control
input on it. Update ops already implied are not repeated; an edge that would close a cycle
is never added. The fix changes values on purpose: the moving statistics a step now
updates, which `verify FIXED --compare ORIGINAL` sets aside and names ("equal except the N
moving statistics update-ops now updates").

Parameters:
    train_op: the train op's name (repeatable); overrides the collection and detection.
    towers: `all` (default) runs every tower's update ops; `first` only the first tower's
        (the slim `model_deploy` convention: statistics from one clone). A train op that
        already runs exactly the first tower's update ops follows that convention on purpose
        and is left alone either way.

In source (`UpdateOpsCodemod`): where a batch norm that trains is in the file (Sonnet 1.x's
`snt.BatchNorm` too, whose `update_ops_collection` is UPDATE_OPS unless told otherwise, and
one written by hand that adds its updates to UPDATE_OPS with `tf.add_to_collection` and
does not also run them where it builds them), or in code
of the run that the file's imports and calls reach (or that reaches the train op's function;
a module imported with `importlib.import_module` of a name the file spells out, from
literals and its flags' defaults, counts as imported), or where the train op's function
collects UPDATE_OPS into a list that nothing reads (its author's word that a batch norm
feeds them, its model given as an argument), or where that function is given its model as
a parameter that reads as the one class the file imports from the project that binds every
attribute the function reads of it (`train_task(model, ...)` minimizing `model.loss`, after
`from model import Model`) and that class's code builds a batch norm that trains, or where moving-average updates written by
hand (`assign_moving_average`, an `ExponentialMovingAverage`'s `apply`) go to a collection
of the code's own that nothing reads with `get_collection` (then the fix reads that
collection), each `minimize(...)` / `apply_gradients(...)` that does not run the
update ops is built under
`with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):`, spelled with
the file's own TF alias; code that already runs them is left alone (a group of the train
op's list extended with them, of the apply op built inline with them, of the list a helper
appends the apply op to that its callers, in this file or another, group with them, also
where the apply comes back from a callback that the helper hands with that list to a
function that calls it and fills the list, tf_cnn_benchmarks' `get_apply_gradients_ops_func`;
of a helper, in another file, that every caller calls inside a block over them; every
train op of a project whose session hook fetches UPDATE_OPS beside each step, a class that
reads the collection and has a `before_run` / `_before_run` method, made somewhere:
tensorpack's `RunUpdateOps`). A
batch norm counts only where it is built: not in a function or method nothing calls, nor where its training flag
is a parameter (with no default, or defaulting to False) that every call sets to False,
directly or through a parameter of the caller's own that its callers set so (a model's
`__call__` through the calls of its instances: `self.g(z, training=True)`), nor with
`updates_collections=None` in the params a helper function returns, nor in a branch on the name a loop
over its function's parameter takes (`for layer in layer_lists: if
layer.startswith("batch_norm"):`) where every call passes a list of names the branch does
not take, nor in a script's function that only branches its flag defaults do not take call
(`elif FLAGS.model == "inception_v3":` where the flag defaults to "mlp"): a run is judged
with its flag defaults, as is a block over update ops that they bind to None (`if
args.update_mean_var == False: update_ops = None`, a store_true flag): it waits on nothing,
and the train op inside is found; nor where the innermost arg_scope freezes it: the layers'
`normalizer_fn=slim.batch_norm` a scope function sets up (mobilenet's `training_scope`)
where every use enters that scope with `arg_scope([slim.batch_norm], is_training=False)`
inside it, and slim's resnet_v1 (whose only batch norms are its convolutions') under an
arg_scope whose `normalizer_params` say `is_training: False`, a keyword of the layer's call
that beats the net's own `arg_scope([batch_norm], is_training=is_training)`. An optimizer class's own `minimize` / `apply_gradients` method (a
wrapper's `self._optimizer.apply_gradients(...)`, a subclass's `super().apply_gradients(...)`)
is library code, no train op: its caller's call is judged where it is built. A loss made to
wait on the update ops that the step fetches runs them also for an apply built in a function
nested in the one that keeps that loss (an accumulated apply handed to `tf.cond`).
`optimize_loss` (contrib's, tf-slim's) runs UPDATE_OPS itself unless given `update_ops=` as
a literal list holding none of them (`update_ops=[]`): that call is reported, not fixed
(drop the argument, or pass the update ops).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Iterator

from graphfix.graph import training
from graphfix.graph.towers import tower_of
from graphfix.findings import Change, Check, Finding, IntendedChange, Watch
from graphfix.graph.index import GraphIndex
from graphfix.registry import Context, Param, Transform
from graphfix.source.prefilter import SourceTriggers
from graphfix.source.vocabulary import OPTIMIZE_LOSS, TRAIN_METHODS

if TYPE_CHECKING:
    from graphfix.source.project import FileView


def _wanted_update_ops(graph: GraphIndex, towers: str) -> list[str]:
    names, _ = training.update_ops(graph)
    if towers == "first":
        by_tower = {name: tower_of(name) for name in names}
        numbered = [t for t in by_tower.values() if t is not None]
        if numbered:
            first = min(numbered)
            names = [n for n in names if by_tower[n] in (None, first)]
    return names


def _first_tower_convention(updates: list[str], covered: set[str]) -> bool:
    """Whether the train op already runs exactly the first tower's update ops (`covered`):
    the slim `model_deploy` convention, a choice the author made, not the bug."""
    if not covered:
        return False
    towers = {u: tower_of(u) for u in updates}
    numbered = [t for t in towers.values() if t is not None]
    if not numbered:
        return False
    first = min(numbered)
    return covered == {u for u, t in towers.items() if t == first}


def _maximal(graph: GraphIndex, names: list[str]) -> list[str]:
    """Drop update ops that another of `names` already runs after (their edge is implied)."""
    chosen = set(names)
    implied = graph.ancestors(names) & chosen
    return [n for n in names if n not in implied]


def _batch_norm_reaches(view: FileView) -> bool:
    """Whether a batch norm that trains is in the file, or in code it reaches or that
    reaches it (`FileView.batch_norms_reaching`), or the file collects UPDATE_OPS into a
    list it never reads (`FileView.unread_update_ops`: its author's word that one is), or
    moving-average updates collected in a collection of the project's own that no code
    reads reach it (`FileView.unrun_collections`)."""
    return bool(view.batch_norms() or view.batch_norms_reaching() or view.unread_update_ops()
                or view.unrun_collections() or imported_classes_batch_norms(view))


def imported_classes_batch_norms(view: FileView) -> dict[tuple[str, str], tuple[str, str, int]]:
    """{class (path, name): its first batch norm that trains (path, name, line)} for each
    class the file imports from another file of the project whose code, or the code it
    calls, builds one: a model a train op's function may be given (the source rule's
    `_batch_norm_of_a_model_given`). The class's code counts as run, its maker may be a
    script no file imports."""
    from graphfix.source.project import unit_at  # (not on the graph path)

    part = view.part
    if part is None:
        return {}
    project, label = view.project, view.label
    found = {}
    for bound, *_ in part.get("imports", ()):
        for target in project.resolve(label, bound):
            if target[0] == label or target in found or project._kind(target) != "class":
                continue
            run = project.reached({target})
            norms = sorted((at, reached_label, name) for reached_label, reached_unit in run
                           for name, at in project.parts.get(reached_label, {}).get(
                               "batch_norms", ())
                           if unit_at(project.parts[reached_label], at) == reached_unit
                           and project.builds_batch_norm(reached_label, at, run))
            if norms:
                at, reached_label, name = norms[0]
                found[target] = (reached_label, name, at)
    return found


class UpdateOps(Transform):
    name = "update-ops"
    summary = "make the train op run batch-norm moving-average updates (UPDATE_OPS)"
    params = (
        Param("train_op", None, "name of the train op (repeatable); overrides detection",
              multiple=True),
        Param("towers", "all", "all: every tower's update ops; first: the first tower's only",
              choices=("all", "first")),
    )
    # The source surface lives in source.py, loaded on first use (libcst is slow to
    # import and the graph path never needs it).
    codemod = ".source:UpdateOpsCodemod"
    # A `X.minimize(...)`, `X.apply_gradients(...)` or `optimize_loss(...)` call, in a file
    # that a batch norm reaches (the project model: its own, or one its imports and calls
    # reach).
    source_triggers = SourceTriggers(calls=TRAIN_METHODS | OPTIMIZE_LOSS,
                                     in_project=_batch_norm_reaches)

    def _plan(self, graph: GraphIndex, ctx: Context):
        """(train op, missing update ops) pairs, or a Finding saying what cannot be decided."""
        updates = _wanted_update_ops(graph, ctx.options["towers"])
        if not updates:
            return [], None
        named = ctx.options["train_op"] or None
        for name in named or []:
            if name not in graph:
                return [], Finding(ctx.path, self.name, f"train_op {name!r} is not in the graph",
                                   node=name)
        trains, source = training.train_ops(graph, named)
        if not trains:
            return [], Finding(
                ctx.path, self.name,
                f"{len(updates)} update op(s) but no train op found; set "
                "--set update-ops.train_op=NAME", node=updates[0])
        if len(trains) > 1 and source == "detected":
            return [], Finding(
                ctx.path, self.name,
                f"several candidate train ops ({', '.join(trains[:5])}); set "
                "--set update-ops.train_op=NAME", node=trains[0])
        plan = []
        for train in trains:
            elsewhere = training.needing_other_feeds(graph, train, updates)
            own = [u for u in updates if u not in elsewhere]
            covered = training.run_with(graph, own, train)
            if _first_tower_convention(own, covered):
                continue
            # An update op that runs after the train op would close a cycle: never add it.
            after = graph.descendants([train])
            missing = [u for u in own if u not in covered and u != train and u not in after]
            if missing:
                plan.append((train, _maximal(graph, missing), len(own)))
        return plan, None

    def graph(self, graph: GraphIndex, ctx: Context) -> Iterator[Finding]:
        plan, undecided = self._plan(graph, ctx)
        if undecided is not None:
            yield undecided
            return
        for train, missing, total in plan:
            yield Finding(
                ctx.path, self.name,
                f"train op {train} does not run {len(missing)} of {total} update op(s) "
                f"(batch-norm moving averages never update): {', '.join(missing[:3])}"
                + (", ..." if len(missing) > 3 else ""),
                node=train, edit=partial(self._run_update_ops, train, missing, ctx),
            )

    def intended_change(self, original: GraphIndex, fixed: GraphIndex
                        ) -> IntendedChange | None:
        """The moving statistics that a training step of `fixed` updates and one of
        `original` did not: their update ops run with a train op now (the new control
        dependencies), so their values move where the original's stayed."""
        trains, _ = training.train_ops(fixed)
        newly = training.update_ops_run(fixed, trains) - training.update_ops_run(original, trains)
        variables = {training.variable_of(fixed, fixed.node(name)) for name in newly}
        variables.discard(None)
        if not variables:
            return None
        return IntendedChange(self.name, f"moving statistics {self.name} now updates",
                              sorted(variables))

    def verify_watch(self, graph: GraphIndex) -> Watch | None:
        """The moving statistics the update ops write, read before and after the steps,
        and the first step traced: which update ops ran."""
        variables = training.update_writers(graph)
        return Watch(variables=frozenset(variables), trace=True) if variables else None

    def verify_check(self, graph: GraphIndex, run) -> Check | None:
        """"update ops": every update op of the graph (batch norm's moving statistics) ran
        in the step. Proof is what ran (the traced first step, `run.devices`), not whether
        the variable changed: a moving mean can keep its value through an update that ran
        (a momentum of 1, a batch whose mean is the moving mean, a change below float32's
        resolution). A variable that changed was written, by whatever name its writer ran
        under (a function's body renames its nodes); one that kept its value fails only
        where none of its update ops ran, and is a note where one did."""
        import numpy as np

        writers = training.update_writers(graph)
        if not writers:
            return None
        before, after = run.variables_before, run.variables_after
        kept = sorted(v for v in writers if v in before and v in after
                      and np.array_equal(before[v], after[v]))
        ran = set(run.devices)
        # (a statistic that one tower's update op wrote was updated, whether or not the
        # others' ran: slim's first-clone convention runs the first tower's only)
        stuck = [v for v in kept if not ran.intersection(writers[v])]
        total = len(writers)
        if stuck:
            not_run = [op for v in stuck for op in writers[v]]
            return Check("update ops", False, (
                f"{len(not_run)} update op(s) did not run, so {len(stuck)} of {total} "
                f"update-op variable(s) never changed: {_some(not_run)}"),
                names={"did_not_run": not_run, "never_changed": stuck})
        if kept:
            return Check("update ops", True, (
                f"{total - len(kept)} of {total} update-op variable(s) "
                f"changed; noted: {len(kept)} kept their value through an update that ran: "
                f"{_some(kept)}"), names={"ran_and_kept_their_value": kept})
        return Check("update ops", True, f"all {total} update-op variable(s) changed")

    def _run_update_ops(self, train: str, missing: list[str], ctx: Context, graph: GraphIndex
                        ) -> list[Change]:
        """One NoOp gathers the `missing` update ops; the train op runs after it."""
        node_def = type(graph.node(train))()
        node_def.name = graph.unique_name(f"{train}/update_ops")
        node_def.op = "NoOp"
        node_def.device = _placed_on(graph, train)
        node_def.input.extend("^" + name for name in missing)
        barrier = graph.add_node(node_def)
        graph.add_control_input(graph.node(train), barrier.name)
        return [Change(
            ctx.path, self.name,
            f"train op {train} now runs {len(missing)} update op(s) through {barrier.name}",
            node=train,
            details={"added_nodes": [barrier.name], "update_ops": missing},
        )]


def _some(names: list[str]) -> str:
    """The first three names, and "..." for more."""
    return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")


def _placed_on(graph: GraphIndex, name: str) -> str:
    """The device the node `name` asks for, or else the first its colocation group asks for
    (a train op that follows its global step): where the new NoOp goes, so that a graph
    already placed for a cluster stays placed (and a second fix has nothing to place)."""
    device = graph.node(name).device
    if device:
        return device
    return next((node.device for node in graph.group_of(name) if node.device), "")
