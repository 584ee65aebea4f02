"""shared-variables: towers that each hold their own weights (seed 003).

The bug: reuse (`variable_scope(..., reuse=True)`, `reuse=tf.AUTO_REUSE`, after
`tf.get_variable_scope().reuse_variables()`) applies to `tf.get_variable` and the layers
built on it only. A `tf.Variable(...)` made in every tower of the multi-GPU recipe is a new
variable each time: every tower holds its own copy, initialized on its own::

    with tf.variable_scope(tf.get_variable_scope()):
        for i in range(num_gpus):
            with tf.device('/gpu:%d' % i), tf.name_scope('tower_%d' % i):
                w = tf.Variable(tf.truncated_normal([784, 10]), name='w')  # one per tower
                ...
                tf.get_variable_scope().reuse_variables()
                tower_grads.append(opt.compute_gradients(loss, [w, b]))
    train_op = opt.apply_gradients(average_gradients(tower_grads))

`zip(*tower_grads)` then pairs gradients of *different* variables: the average applies to
tower 0's copy only, the other towers' copies never train, and each tower computes with
other weights. Nothing raises.

Found (graph): towers (`graphfix.graph.towers`: parallel sibling scopes, replicas by name
or device, that build the same sub-graph); a variable of a tower after the first whose
counterpart (the same name relative to its tower's scope) is a variable of the first tower,
of the same op, dtype and shape, and which the tower's ops read, is a copy. The finding says
which copies, and whether an averaged update mixes them (the update of the first tower's
variable runs after the copy: it is fed by the copy's tower's gradients) or each copy trains
alone. Optimizer slots (`w/Momentum`) are the optimizer's, not copies. Nor are replicas
(`graphfix.graph.training.Replicas`): in replicated training each tower keeps its own copy
on purpose, and every copy's update applies the same all-reduced sum of all the copies'
gradients (tf.distribute's mirrored variables, tf_cnn_benchmarks'
`--variable_update=replicated`), so copies that start equal stay equal. Sibling scopes that
are neither named nor placed as replicas (the seed's `my_0`, `my_1` on one device) are a
model's own parts in a graph, which says nothing of the reuse meant: the source surface,
which sees the reusing scope, finds those.

Fixed (graph): every tower reads the first tower's variable. Each reader of a copy (a ref
variable's `read` identity's readers, a resource handle's `ReadVariableOp`s) reads the first
tower's instead. The copies, their initializers, `read` ops and saver entries are left in
the graph, unused: the initializer still runs (so `global_variables_initializer` and a
checkpoint keep working) but nothing computes with a copy. Ops colocated with a copy (its
own optimizer update, when each tower trained its copy alone) stay with it. The fix changes
values on purpose: the towers after the first compute with other weights, so their outputs
and the variables their gradients train differ from the original's; `verify FIXED
--compare ORIGINAL` sets those aside and names them.

In source (`SharedVariablesCodemod`): a `tf.Variable(init, ...)` made inside a reusing scope,
in code that runs once per tower (a tower loop, a tower function given its GPU, and what
they call: without towers a `tf.Variable` beside reuse is new on purpose, a tied-weights
decoder's own bias), becomes `tf.compat.v1.get_variable(name, initializer=init, ...)`, named from `name=` or the
variable it is assigned to, keeping dtype, trainable and collections. A variable meant to
be each tower's own (not trainable, and in `LOCAL_VARIABLES` or named per tower: a tower's
recurrent state) is left alone, and so is a `tf.Variable` the towers' calls never run (a
maker chosen by a flag they set the other way, the code of a script's module body).
A library module (Sonnet's `snt.Module(build)`, `snt.Linear(10)`) constructed and connected
in the tower loop, or in a function the tower loop calls, is a new module per tower, each in
a variable scope of its own: reported where it is constructed, not fixed (build it once,
before the towers, and call it in each). One built once and called in each tower, and those
a module's build constructs (`_build`, a function given to `snt.Module`), are shared.
"""

from __future__ import annotations

import re
from functools import partial
from typing import TYPE_CHECKING, Iterator

from graphfix.findings import Change, Finding, IntendedChange
from graphfix.graph import training
from graphfix.graph.index import GraphIndex
from graphfix.graph.towers import Tower, TowerSet, find_towers
from graphfix.registry import Context, Transform
from graphfix.source.prefilter import SourceTriggers
from graphfix.source.vocabulary import LIBRARY_VARIABLE_MODULES, LIBRARY_WORDS

if TYPE_CHECKING:
    from graphfix.source.project import FileView

# The variable ops a tower can hold a copy of (hash tables are not weights).
_VARIABLES = frozenset({"Variable", "VariableV2", "VarHandleOp"})
# A copy's own ops whose readers compute with it: a ref variable's `read`, a resource
# variable's `Read/ReadVariableOp`.
_READS = frozenset({"Identity", "ReadVariableOp"})
# Ops that only save or restore: a copy's saver entries stay the copy's.
_SAVER = re.compile(r"(^|/)save(_\d+)?/")


def _shape_and_dtype(node) -> tuple:
    """What makes two variables interchangeable: dtype and shape as declared."""
    attrs = node.attr
    shape = tuple(d.size for d in attrs["shape"].shape.dim) if "shape" in attrs else None
    return attrs["dtype"].type if "dtype" in attrs else None, shape


class _Copy:
    """One tower's own copy of a variable of the first tower, and the rewiring that makes
    the tower read the first tower's instead: (reader, source now, source after)."""

    def __init__(self, name: str, original: str, rewires: list[tuple[str, str, str]]):
        self.name = name
        self.original = original
        self.rewires = rewires


def _rewires(graph: GraphIndex, copy: str, original: str) -> list[tuple[str, str, str]]:
    """(reader, source, replacement) for every reader that computes with the copy: a
    reader of one of the copy's own reads (`copy/read`) moves to the original's same read
    where it has one; a direct reader of the copy moves to the original. Left alone: the
    copy's own ops (its initializer, reads, is-initialized check), the saver's, and ops
    colocated with the copy (its own optimizer update)."""
    own = copy + "/"
    out = []
    for reader in graph.successors(copy):
        if reader.startswith(own):
            if graph.ops[graph.position(reader)] not in _READS:
                continue
            twin = original + "/" + reader[len(own):]
            if twin not in graph or graph.node(twin).op != graph.node(reader).op:
                twin = None
            for outer in graph.successors(reader):
                if outer.startswith(own) or _SAVER.search(outer):
                    continue
                if twin is not None:
                    out.append((outer, reader, twin))
            continue
        if _SAVER.search(reader) or copy in graph.colocated_with(reader):
            continue
        out.append((reader, copy, original))
    return out


def _copies(graph: GraphIndex, towers: TowerSet, tower: Tower,
            replicas: training.Replicas) -> list[_Copy]:
    """The copies `tower` holds of the first tower's variables, that the tower reads and
    that are not replicas of them (`training.Replicas`: kept equal by an all-reduce)."""
    first = towers.first
    found = []
    for position in graph.positions_of(_VARIABLES):
        name = graph.names[position]
        if towers.tower_holding(name) is not tower:
            continue
        if name.rpartition("/")[0] in graph and graph.ops[graph.position(
                name.rpartition("/")[0])] in _VARIABLES:
            continue  # an optimizer slot (`w/Momentum`): the optimizer's, not a copy
        original = towers.counterpart(name, first)
        if original not in graph:
            continue
        node, twin = graph.node_at(position), graph.node(original)
        if twin.op != node.op or _shape_and_dtype(twin) != _shape_and_dtype(node):
            continue
        if replicas.replicated((name, original)):
            continue  # replicated training: the tower's own copy is meant
        rewires = _rewires(graph, name, original)
        if rewires:  # a copy nothing computes with is one a fix already left unused
            found.append(_Copy(name, original, rewires))
    return found


def _updates_of(graph: GraphIndex, variables: set[str]) -> dict[str, list[str]]:
    """variable -> the optimizer steps that write it."""
    out: dict[str, list[str]] = {}
    for apply in training.apply_ops(graph):
        variable = training.variable_of(graph, apply)
        if variable in variables:
            out.setdefault(variable, []).append(apply)
    return out


def _variable_in_reuse(view: FileView) -> bool:
    """Whether a call spelled `Variable(...)` (or `VariableV1`) starts on a line of the
    file that runs under a variable scope that reuses
    (`FileView.reusing_regions_through_objects`) and once per tower
    (`FileView.tower_code_through_objects`): the sites the codemod reads, by last name (looser than its `tf_canonical`). A file whose
    reuse and whose Variables lie apart (tf-slim's layers_test.py: 4,254 lines, ~10 s of
    libcst) is not sent to the codemod."""
    import ast  # (here: a run over graphs never parses source)

    from graphfix.source.project.part import parsed
    from graphfix.source.syntax import tail_name

    regions = view.reusing_regions_through_objects()
    towers = view.tower_code_through_objects() if regions else []
    if not towers:
        return False
    code = view.project._code_of(view.label)
    tree = parsed(code) if code is not None else None
    if tree is None:
        return True  # (the codemod, libcst, says why it cannot read it)
    return any(isinstance(node, ast.Call) and tail_name(node.func) in ("Variable", "VariableV1")
               and any(first <= node.lineno <= last for first, last, *_ in regions)
               and any(first <= node.lineno <= last for first, last in towers)
               for node in ast.walk(tree))


def _module_in_towers(view: FileView) -> bool:
    """Whether the file uses a library of modules (Sonnet) and a call spelled as one of its
    variable-making modules (`Linear(...)`, `Module(...)`, by last name: looser than the
    codemod's reading through imports) starts on a line that runs once per tower
    (`FileView.tower_code_through_objects`): the sites where a module made per tower may
    be."""
    import ast  # (here: a run over graphs never parses source)

    from graphfix.source.project.part import parsed
    from graphfix.source.syntax import tail_name

    code = view.project._code_of(view.label)
    if code is None or not any(word in code for word in LIBRARY_WORDS):
        return False
    towers = view.tower_code_through_objects()
    tree = parsed(code) if towers else None
    if tree is None:
        return bool(towers)
    modules = {name.rsplit(".", 1)[-1] for name in LIBRARY_VARIABLE_MODULES}
    return any(isinstance(node, ast.Call) and tail_name(node.func) in modules
               and any(first <= node.lineno <= last for first, last in towers)
               for node in ast.walk(tree))


def _variables_or_modules_per_tower(view: FileView) -> bool:
    """The codemod's two sites: a `Variable(...)` under reuse in tower code
    (`_variable_in_reuse`), or a library module in tower code (`_module_in_towers`)."""
    return _variable_in_reuse(view) or _module_in_towers(view)


class SharedVariables(Transform):
    name = "shared-variables"
    summary = "make towers share one set of weights (tf.Variable does not reuse)"
    # The source surface lives in source.py, loaded on first use (libcst is slow to import
    # and the graph path never needs it).
    codemod = ".source:SharedVariablesCodemod"
    # A `Variable(...)` call made where the project model says the file's code runs under a
    # variable scope that reuses (its own, or a caller's in another file), once per tower.
    source_triggers = SourceTriggers(words=("Variable", *LIBRARY_WORDS),
                                     in_project=_variables_or_modules_per_tower)

    def graph(self, graph: GraphIndex, ctx: Context) -> Iterator[Finding]:
        variables = [graph.names[p] for p in graph.positions_of(_VARIABLES)]
        replicas = training.Replicas(graph)
        for towers in find_towers(graph, variables):
            for tower in towers.towers[1:]:
                copies = _copies(graph, towers, tower, replicas)
                if copies:
                    yield self._finding(graph, ctx, towers, tower, copies)

    def _finding(self, graph: GraphIndex, ctx: Context, towers: TowerSet, tower: Tower,
                 copies: list[_Copy]) -> Finding:
        first = towers.first.scope
        names = [c.name for c in copies]
        updates = _updates_of(graph, {c.original for c in copies} | set(names))
        mixed = [c for c in copies
                 if any(graph.run_before([c.name], apply) for apply in updates.get(c.original, ()))]
        untrained = [c.name for c in copies if c.name not in updates]
        if mixed:
            effect = (f"the averaged update applied to {first}'s variables mixes in {tower.scope}'s "
                      f"gradients for its copies ({len(mixed)} of {len(copies)})")
        else:
            effect = "no update mixes them"
        effect += (f"; {tower.scope}'s copies never train" if len(untrained) == len(copies)
                   else f"; {len(untrained)} of {tower.scope}'s copies never train"
                   if untrained else f"; each copy trains on {tower.scope}'s gradients alone")
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        return Finding(
            ctx.path, self.name,
            f"tower {tower.scope} holds its own copy of {len(copies)} variable(s) of {first} "
            f"(tf.Variable in a reusing scope does not share): {shown}; {effect}",
            node=names[0], severity="error" if mixed else "warning",
            edit=partial(self._share, tower, copies, ctx),
            details={"tower": tower.scope, "first_tower": first, "copies": names,
                     "originals": [c.original for c in copies],
                     "mixed_by_averaged_update": [c.name for c in mixed],
                     "never_trained": untrained},
        )

    def intended_change(self, original: GraphIndex, fixed: GraphIndex
                        ) -> IntendedChange | None:
        """What is computed from the readers that read the first tower's variable now, where
        they read a tower's own copy (`_share`): those towers compute with other weights, so
        their outputs, the gradients they give the averaged update and every variable that
        update trains change on purpose."""
        readers = [reader for reader, before, now in training.rewired(original, fixed)
                   if (was := training.variable_read_by(original, before)) is not None
                   and training.variable_read_by(fixed, now) not in (None, was)]
        if not readers:
            return None
        changed = (training.computed_from(fixed, readers)
                   | training.variables_written_after(fixed, readers))
        return IntendedChange(self.name, f"values {self.name} now computes from the first "
                              "tower's variables", sorted(changed))

    def _share(self, tower: Tower, copies: list[_Copy], ctx: Context, graph: GraphIndex
               ) -> list[Change]:
        """Every reader of a copy reads the first tower's variable; the copies stay, unused."""
        rewired = []
        for copy in copies:
            for reader, source, replacement in copy.rewires:
                if graph.replace_input(reader, source, replacement):
                    rewired.append(reader)
        return [Change(
            ctx.path, self.name,
            f"tower {tower.scope} now reads the first tower's {len(copies)} variable(s) "
            f"({len(rewired)} reader(s) rewired); its copies, their initializers and saver "
            "entries are left in the graph, unused",
            node=copies[0].name,
            details={"rewired": rewired, "left_unused": [c.name for c in copies]},
        )]
