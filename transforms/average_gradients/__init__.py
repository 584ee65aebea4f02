"""average-gradients: the towers' average that crashes, densifies, or trains the wrong rows (seed 003).

The bug: the CIFAR-10 multi-GPU recipe averages each variable's gradient over the towers::

    def average_gradients(tower_grads):
        average_grads = []
        for grad_and_vars in zip(*tower_grads):
            grads = [tf.expand_dims(g, 0) for g, _ in grad_and_vars]
            grad = tf.reduce_mean(tf.concat(axis=0, values=grads), 0)
            average_grads.append((grad, grad_and_vars[0][1]))
        return average_grads

and breaks in three ways. A variable the tower's loss does not reach has a `None` gradient:
`tf.expand_dims(None)` raises *"None values not supported"* (tensorflow#13403). An embedding's
gradient is an `IndexedSlices`: `expand_dims` turns it into a dense `[vocab, dim]` tensor per
tower (*"Converting sparse IndexedSlices to a dense Tensor of unknown shape. This may consume
a large amount of memory"*, tensorflow#2283, #5252); the fix that circulates in those threads
averages the values and keeps tower 0's indices, which sends every other tower's rows to tower
0's ids. And `zip(*tower_grads)` pairs gradients by position: towers whose lists come in
different orders, or that each made their own variables (`shared-variables`), average
gradients of different variables and apply the result to one of them.

Found, in the gradient sub-graph between the towers' gradients and the optimizer's updates
(`graphfix.graph.gradients`): an average over the towers (`reduce_mean` of a concat of
`expand_dims`, of a `stack`, or `add_n / n`) that some update reads, and
- whose towers' gradients are densified sparse gradients (`UnsortedSegmentSum` of values by
  indices): a warning, the step is right but holds n + 1 dense copies of the variable;
- whose towers' gradients are the values of gather gradients, feeding a sparse update whose
  indices come from one tower only: an error, the other towers' rows land on the wrong ids;
- whose towers' gradients are of different variables (read from `gradients/<op>_grad/`, the
  op each differentiates, and the variable it reads): an error, not fixable here (make the
  towers share their variables, or pair gradients by variable). Replicated training is not
  that (`graphfix.graph.training.Replicas`): each tower keeps its own copy of the variables,
  and every copy's update applies the same all-reduced sum of all the copies' gradients
  (tf.distribute's mirrored variables, tf_cnn_benchmarks' `--variable_update=replicated`);
  an average applied to one copy while another copy never trains, or trains alone, is.
A `None` gradient never reaches a graph (building it raises); the source rule fixes it.

Fixed: the average is rebuilt sparse, `IndexedSlices(concat(values) / n, concat(indices))`,
as nodes beside it (`<average>/sparse/values`, `/indices`, `/towers`, `/average`). A gradient
descent update (`ApplyGradientDescent`, its resource form) becomes the scatter TF's optimizer
builds for a sparse gradient (`ScatterSub` / `ResourceScatterSub` of `lr * values`, under the
same name); any other dense update reads the one dense tensor of the sparse average
(`UnsortedSegmentSum`, `<average>/sparse/dense`), the same numbers without the towers' dense
copies; a sparse update reads the concatenated values and indices in place of tower 0's.
That last fix changes values on purpose (the other towers' rows now train at their own
ids): `verify FIXED --compare ORIGINAL` sets aside the variables those updates train and
names them; the densified average's fix computes the same numbers and is compared.

In source (`AverageGradientsCodemod`): a function shaped like `average_gradients` (a loop
over `zip(*tower_grads)` that averages with `reduce_mean` of `concat`/`stack`, or `add_n` over
the count) that does not handle `None` or `IndexedSlices`, where the code of the run (the file
and the files its imports connect it to) shows the model it averages for breaking it: a
trainable `tf.Variable` made under a reusing variable scope (the project model's
`FileView.reusing_regions`) in code that runs once per tower (`FileView.tower_code`: made
anew in every tower, so another tower's loss does not reach it: a `None` gradient; the
code of a model object a tower function is given counts, `vgg.inference` in `def
tower_loss(scope, vgg)`: `FileView.tower_code_through_objects`; a recipe that skips `None`
breaks too, as a later tower's list names the earlier towers' copies, with `None`, before
its own: each variable is averaged over tower 0 alone and zip drops the later towers'
copies, so only tower 0's batch trains: reported, not rewritten, as the rewrite would raise
on the lists and the towers need their variables shared, `shared-variables`' fix), a
library module that makes variables (a Sonnet module, `snt.Module(build)`) constructed in
code that runs once per tower (each tower trains its own copy, so the towers' lists pair
different variables whether `None` is skipped or not: reported, not rewritten, as the
towers need one module built outside them; one constructed in a module's own build
function is that module's part), a batch norm whose settings put its moving mean and variance in
TRAINABLE_VARIABLES (`variables_collections=[tf.GraphKeys.TRAINABLE_VARIABLES]`, facenet's
models: no loss reaches them, a `None` gradient), or a lookup of a variable
(`embedding_lookup`, `nce_loss`, a `gather` of a trainable one, named or held as
`self.<name>`: an `IndexedSlices`; a lookup of a tensor computed from the table, a
zero-padded `concat` of its rows from 1, differentiates it through a slice, densely, and
does not count). In
another file than the recipe's, only code the towers may run counts: a unit the recipe's file
or its callers reach (a loss function of a package that nothing calls gives no gradient). A
dense model of shared, reached variables is right as it is and left alone. The function is rewritten to skip `None`, keep `IndexedSlices` sparse as above,
and raise where the towers' lists differ in length or a tuple names more than one variable
(towers that do not share their variables: `shared-variables` fixes those); a function doing
more than the recipe (a summary in its loop) is reported, not rewritten. The recipe's loop
written inline, wherever it is (in a method beside the towers, at a training script's top
level: a loop over `zip(*towers)` that reads (gradient, variable) pairs and averages), is
found the same way, except that a lookup counts for it only in the code the towers run
(`FileView.tower_code`: the loop sits beside its towers, whose code the project model
reads; a lookup in a method no tower calls gives no tower an IndexedSlices). The loop alone
is rewritten, as is the loop of a function that does more than average (one that applies
the average too keeps applying it); a loop that keeps the averages in two lists (gradients,
variables) or whose names are read after it is reported, not rewritten. A `None` check
commented out is no check.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Iterator

from graphfix.findings import Change, Finding, IntendedChange
from graphfix.graph import gradients, training
from graphfix.graph.gradients import SparseGradient, TowerAverage
from graphfix.graph.edges import parse_input
from graphfix.graph.index import GraphIndex
from graphfix.registry import Context, Transform
from graphfix.source.prefilter import SourceTriggers

DT_FLOAT, DT_DOUBLE, DT_INT32 = 1, 2, 3
# The concatenated indices a rebuilt average gives its updates (`_add_sparse_average`).
_EVERY_TOWERS_INDICES = re.compile(r"/sparse/indices(_\d+)?$")
# A gradient descent step on a sparse gradient, as TF's optimizer builds it: the scatter
# that subtracts `lr * values` at the indices (duplicates add), for each variable kind.
_SPARSE_DESCENT = {"ApplyGradientDescent": "ScatterSub",
                   "ResourceApplyGradientDescent": "ResourceScatterSub"}


def _averaging_loop(syntax) -> bool:
    """Whether the file has a loop over `zip(*towers)` (a name or an attribute:
    `self.tower_grads`), or over the first tower's list by index (`range(len(towers[0]))`,
    `enumerate(towers[0])`), that calls `reduce_mean` or `add_n` in its body, wherever it is
    written (a function of the recipe's, a method, a training script's top level): the
    shapes the codemod reads (`source._recipe`, `source._inline_recipes`), by last names
    (looser). A test file that zips and averages apart (tf-slim's layers_test.py: 4,254
    lines, ~10 s of libcst) is not sent to the codemod."""
    import ast  # (here: a run over graphs never parses source)

    from graphfix.source.syntax import tail_name

    for loop in ast.walk(syntax.tree):
        call = loop.iter if isinstance(loop, (ast.For, ast.AsyncFor)) else None
        if not (isinstance(call, ast.Call) and len(call.args) == 1):
            continue
        given = call.args[0]
        if tail_name(call.func) == "range" and isinstance(given, ast.Call) \
                and tail_name(given.func) == "len" and len(given.args) == 1:
            given = given.args[0]
        zipped = (tail_name(call.func) == "zip" and isinstance(given, ast.Starred)
                  and isinstance(given.value, (ast.Name, ast.Attribute)))
        by_index = (tail_name(call.func) in ("range", "enumerate")
                    and isinstance(given, ast.Subscript)
                    and isinstance(given.slice, ast.Constant) and given.slice.value == 0)
        if not (zipped or by_index):
            continue
        if any(isinstance(node, ast.Call) and tail_name(node.func) in ("reduce_mean", "add_n")
               for statement in loop.body for node in ast.walk(statement)):
            return True
    return False


class AverageGradients(Transform):
    name = "average-gradients"
    summary = "average tower gradients sparse and correct: skip None, keep IndexedSlices, one variable"
    # The source surface lives in source.py, loaded on first use (libcst is slow to
    # import and the graph path never needs it).
    codemod = ".source:AverageGradientsCodemod"
    # A loop over `zip(*tower_grads)` (or the first tower's list by index) that averages.
    source_triggers = SourceTriggers(words=("zip(*", "[0]"), all_of=(("reduce_mean", "add_n"),),
                                     where=_averaging_loop)

    def graph(self, graph: GraphIndex, ctx: Context) -> Iterator[Finding]:
        replicas = training.Replicas(graph)
        for average in gradients.tower_averages(graph):
            updates = gradients.updates_reading(graph, average.node)
            if not updates:
                continue  # not a gradient the optimizer applies
            variables = {gradients.gradient_variable(graph, g) for g in average.per_tower}
            variables.discard(None)
            if len(variables) > 1:
                if not replicas.replicated(variables):  # (replicas' all-reduce is meant)
                    yield self._mixed(average, sorted(variables), updates[0], graph, ctx)
                continue
            densified = [gradients.densified(graph, g) for g in average.per_tower]
            if all(densified):
                yield self._densified(average, densified, updates[0], graph, ctx)
                continue
            gathered = [gradients.gather_gradient(graph, g) for g in average.per_tower]
            if all(gathered):
                yield from self._one_tower_indices(average, gathered, updates, graph, ctx)

    def _mixed(self, average: TowerAverage, variables: list[str], update, graph: GraphIndex,
               ctx: Context) -> Finding:
        """An average of different variables' gradients: not fixable here (which pairs
        were meant is the program's)."""
        return Finding(
            ctx.path, self.name,
            f"average {average.node} mixes gradients of different variables "
            f"({', '.join(variables)}) and is applied to {_target(graph, update)}: each "
            "tuple of zip(*tower_grads) must name one variable (towers that share their "
            "variables, gradient lists in one order)", node=average.node)

    def _densified(self, average: TowerAverage, sparse: list[SparseGradient], update,
                   graph: GraphIndex, ctx: Context) -> Finding:
        """An average of densified sparse gradients: right, with a dense copy per tower."""
        message = (f"average {average.node} densifies {len(sparse)} towers' IndexedSlices "
                   f"gradients of {_target(graph, update)} (one dense copy of the variable "
                   "per tower, \"Converting sparse IndexedSlices to a dense Tensor\")")
        if not _divisible(graph, average):
            return Finding(ctx.path, self.name, message + " (not a float or double average: "
                           "not rebuilt)", severity="warning", node=average.node)
        return Finding(ctx.path, self.name,
                       message + "; rebuilt sparse: concat(values) / n at concat(indices)",
                       severity="warning", node=average.node,
                       edit=partial(self._average_sparse, average, sparse, ctx))

    def _one_tower_indices(self, average: TowerAverage, sparse: list[SparseGradient],
                           updates: list, graph: GraphIndex, ctx: Context) -> Iterator[Finding]:
        """A sparse update of the towers' averaged values at one tower's indices."""
        indices = {s.indices for s in sparse}
        for update in updates:
            if not update.op.startswith(gradients.SPARSE_UPDATE_PREFIXES):
                continue
            used = indices & graph.ancestors([update.name])
            if len(used) != 1:
                continue  # every tower's indices (the correct average), or none
            tower = next(k for k, s in enumerate(sparse) if s.indices in used)
            message = (f"sparse update {update.name} applies the average {average.node} of "
                       f"{len(sparse)} towers' values at tower {tower}'s indices only (the "
                       "other towers' rows land on the wrong ids)")
            if not _divisible(graph, average):
                yield Finding(ctx.path, self.name, message + " (not a float or double "
                              "average: not rebuilt)", node=update.name)
                continue
            yield Finding(ctx.path, self.name,
                          message + "; rebuilt: concat(values) / n at concat(indices)",
                          node=update.name, edit=partial(self._average_at_every_index,
                                                         average, sparse, update.name, ctx))

    def intended_change(self, original: GraphIndex, fixed: GraphIndex
                        ) -> IntendedChange | None:
        """The variables whose sparse updates read every tower's indices now, where they
        read one tower's (`_average_at_every_index`), and what runs after those updates
        (an optimizer's slots): the other towers' rows now train at their own ids. A
        densified average rebuilt sparse computes the same numbers: nothing."""
        readers = [node for node, _, now in training.rewired(original, fixed)
                   if _EVERY_TOWERS_INDICES.search(now) and now not in original]
        variables = training.variables_written_after(fixed, readers) if readers else set()
        if not variables:
            return None
        return IntendedChange(self.name, f"variable(s) {self.name} now trains at every "
                              "tower's indices", sorted(variables))

    # -- fixes -----------------------------------------------------------------------------

    def _average_sparse(self, average: TowerAverage, sparse: list[SparseGradient],
                        ctx: Context, graph: GraphIndex) -> list[Change]:
        """A densified average: every update that read it reads the sparse average."""
        added = _add_sparse_average(graph, average, sparse)
        values, indices = added[-1], added[1]
        rows = sparse[0].rows
        described, dense = [], None
        for reader, position, _ in graph.consumers(average.node):
            if position < 0:
                continue
            node = graph.node(reader)
            descent = _SPARSE_DESCENT.get(node.op)
            if descent is not None and position == 2:
                added += _scatter_descent(graph, node, descent, values, indices)
                described.append(f"{reader} is a {descent}")
                continue
            if dense is None:  # one dense form, for every dense update that reads it
                dense = _node(graph, f"{average.node}/sparse/dense", "UnsortedSegmentSum",
                              [values, indices, rows], graph.node(average.node).device)
                _copy_attr(dense, graph.node(average.node), "T")
                _copy_attr(dense, _producer(graph, sparse[0].indices), "T", "Tindices",
                           fallback=DT_INT32)
                _copy_attr(dense, _producer(graph, rows), "T", "Tnumsegments",
                           fallback=DT_INT32)
                graph.add_node(dense)
                added.append(dense.name)
            graph.replace_input(reader, average.node, dense.name)
            described.append(f"{reader} reads its one dense form")
        return [Change(
            ctx.path, self.name,
            f"average {average.node} rebuilt sparse over {len(sparse)} towers: "
            + "; ".join(described), node=average.node, details={"added_nodes": added})]

    def _average_at_every_index(self, average: TowerAverage, sparse: list[SparseGradient],
                                update: str, ctx: Context, graph: GraphIndex) -> list[Change]:
        """A one-tower-indices average: the values concatenated and divided, the indices
        concatenated, where the optimizer's sparse update read tower 0's."""
        one_tower = next(s.indices for s in sparse if s.indices in graph.ancestors([update]))
        computing_values = graph.ancestors([average.node]) | {average.node}
        on_the_way = graph.ancestors([update]) | {update}
        index_readers = [reader for reader, position, _ in graph.consumers(one_tower)
                         if position >= 0 and reader in on_the_way
                         and reader not in computing_values]
        value_readers = [reader for reader, position, _ in graph.consumers(average.node)
                         if position >= 0]
        added = _add_sparse_average(graph, average, sparse)
        values, indices = added[-1], added[1]
        for reader in dict.fromkeys(value_readers):
            graph.replace_input(reader, average.node, values)
        for reader in dict.fromkeys(index_readers):
            graph.replace_input(reader, one_tower, indices)
        return [Change(
            ctx.path, self.name,
            f"sparse update {update} now applies concat(values) / {len(sparse)} at every "
            f"tower's indices ({indices}), not at {one_tower}'s", node=update,
            details={"added_nodes": added})]


def _divisible(graph: GraphIndex, average: TowerAverage) -> bool:
    """Whether the rebuilt average can divide by the tower count: a float or double one
    (the Const it divides by is written for those two)."""
    attrs = graph.node(average.node).attr
    return "T" in attrs and attrs["T"].type in (DT_FLOAT, DT_DOUBLE)


def _target(graph: GraphIndex, update) -> str:
    """The variable an update writes (its first input, through Identity)."""
    return gradients.producer(graph, update.input[0]).name


def _producer(graph: GraphIndex, tensor: str):
    return graph.node(parse_input(tensor)[0])


def _node(graph: GraphIndex, name: str, op: str, inputs: list[str], device: str):
    node = type(graph.node_at(0))()
    node.name = graph.unique_name(name)
    node.op = op
    node.device = device
    node.input.extend(inputs)
    return node


def _copy_attr(target, source, name: str, as_name: str | None = None, fallback: int | None = None):
    if name in source.attr:
        target.attr[as_name or name].CopyFrom(source.attr[name])
    elif fallback is not None:
        target.attr[as_name or name].type = fallback


def _constant(graph: GraphIndex, name: str, dtype: int, value, device: str):
    node = _node(graph, name, "Const", [], device)
    node.attr["dtype"].type = dtype
    tensor = node.attr["value"].tensor
    tensor.dtype = dtype
    tensor.tensor_shape.SetInParent()
    if dtype == DT_INT32:
        tensor.int_val.append(value)
    elif dtype == DT_DOUBLE:
        tensor.double_val.append(value)
    else:
        tensor.float_val.append(value)
    graph.add_node(node)
    return node.name


def _concat(graph: GraphIndex, name: str, parts: list[str], like, axis: str, device: str):
    node = _node(graph, name, "ConcatV2", [*parts, axis], device)
    _copy_attr(node, like, "T", fallback=DT_INT32)
    node.attr["N"].i = len(parts)
    node.attr["Tidx"].type = DT_INT32
    graph.add_node(node)
    return node.name


def _add_sparse_average(graph: GraphIndex, average: TowerAverage,
                        sparse: list[SparseGradient]) -> list[str]:
    """concat(values) / n and concat(indices), beside the average: the names of the new
    nodes, the indices second and the averaged values last."""
    mean = graph.node(average.node)
    device, base = mean.device, f"{average.node}/sparse"
    axis = _constant(graph, f"{base}/axis", DT_INT32, 0, device)
    values = _concat(graph, f"{base}/values", [s.values for s in sparse], mean, axis, device)
    indices = _concat(graph, f"{base}/indices", [s.indices for s in sparse],
                      _producer(graph, sparse[0].indices), axis, device)
    dtype = mean.attr["T"].type
    towers = _constant(graph, f"{base}/towers", dtype, float(len(sparse)), device)
    divided = _node(graph, f"{base}/average", "RealDiv", [values, towers], device)
    _copy_attr(divided, mean, "T")
    graph.add_node(divided)
    return [axis, indices, values, towers, divided.name]


def _scatter_descent(graph: GraphIndex, apply, scatter: str, values: str, indices: str
                     ) -> list[str]:
    """Turn a dense gradient descent step into the scatter of `lr * values` at `indices`,
    under its name (the train op's control input still names it)."""
    variable, learning_rate = apply.input[0], apply.input[1]
    step = _node(graph, f"{apply.name}/sparse_step", "Mul", [values, learning_rate],
                 apply.device)
    _copy_attr(step, apply, "T")
    graph.add_node(step)
    replaced = type(apply)()
    replaced.CopyFrom(apply)
    replaced.op = scatter
    del replaced.input[:]
    replaced.input.extend([variable, indices, step.name,
                           *(i for i in apply.input if i.startswith("^"))])
    dtype = apply.attr["T"].type
    locking = apply.attr["use_locking"].b if "use_locking" in apply.attr else False
    replaced.attr.clear()
    for key, value in apply.attr.items():
        if key.startswith("_"):
            replaced.attr[key].CopyFrom(value)
    if scatter == "ScatterSub":
        replaced.attr["T"].type = dtype
        replaced.attr["use_locking"].b = locking
    else:
        replaced.attr["dtype"].type = dtype
    _copy_attr(replaced, _producer(graph, indices), "T", "Tindices", fallback=DT_INT32)
    graph.replace_node(replaced)
    return [step.name]
