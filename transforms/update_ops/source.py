"""The source surface of `update-ops`: the libcst codemod (see the
package docstring for the bug and the fix)."""

from __future__ import annotations

import dataclasses
import re

import libcst as cst
from libcst.metadata import (
    PositionProvider,
    ScopeProvider,
)

from graphfix.source.codemod import (
    Example,
    SourceCodemod,
    TfNames,
    argument,
    qualified_name_lookup,
    scan_wrapper,
)
from graphfix.source.fixes import AddImport, WrapInWith
from graphfix.source.vocabulary import (
    ARG_SCOPE,
    BATCH_NORM_LAYER,
    BATCH_NORMS,
    SLIM_NET_NAME,
    TRAIN_METHODS,
)

# -- Source surface -------------------------------------------------------------------------
#
# Read off the syntax tree; nothing here imports TensorFlow. Names are TF symbols as
# `graphfix.source.vocabulary` spells them (`slim.batch_norm`, `layers.dense`).

# A tf-slim model function's qualified name (tf_slim.nets, or research/slim's `nets`).
_SLIM_NET = re.compile(rf"(^|\.)nets\.[\w.]*\.({SLIM_NET_NAME.pattern})$")
# The import a fix adds where it spells `tf.` in a file that has no compat.v1 `tf`.
_V1_IMPORT = AddImport("tensorflow.compat.v1", asname="tf")
# Calls that tie ops together: the train op and the update ops in one of them is correct.
_TIES = frozenset({"group", "tuple", "with_dependencies", "control_dependencies"})
# A name that says it holds the update ops where the code does not show it (a parameter, an
# attribute): update_ops, extra_update_ops, UPDATE_OPS, bn_updates, model.updates; not
# grad_updates (an optimizer's) or lr_update_op.
_UPDATE_WORD = re.compile(r"^(\w*_)?update_?ops$|^(bn|batch_?norm)\w*updates?$|^updates$",
                          re.IGNORECASE)
_UNKNOWN = cst.Name("_unknown_")  # an argument whose value is not visible here


def _dotted(node: cst.CSTNode) -> str | None:
    """`a.b.c` for a chain of names, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    if isinstance(node, cst.Subscript):  # train_ops[i] = ...: the list
        return _dotted(node.value)
    return None


def _assigned(small: cst.CSTNode) -> list[str]:
    """The names an assignment binds (`a, self.b = ...` -> a, self.b); none for others."""
    if isinstance(small, cst.Assign):
        targets = [t.target for t in small.targets]
    elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
        targets = [small.target]
    else:
        return []
    names = []
    for target in targets:
        elements = ([e.value for e in target.elements]
                    if isinstance(target, (cst.Tuple, cst.List)) else [target])
        names.extend(d for d in map(_dotted, elements) if d is not None)
    return names


def _truth(expr: cst.BaseExpression | None, default: bool) -> bool:
    """Whether a training flag trains: only a literal False (or 0) does not; a variable or a
    placeholder (`is_training=is_training`) may, so it counts."""
    if expr is None:
        return default
    if isinstance(expr, cst.Name) and expr.value in ("False", "None"):
        return False
    if isinstance(expr, cst.Integer):
        return int(expr.value, 0) != 0
    return True


def _feeds_update_ops(expr: cst.BaseExpression | None) -> bool:
    """Whether `updates_collections=expr` puts the updates in UPDATE_OPS (None: they run
    in place; another collection: not ours to run)."""
    if expr is None:
        return True
    if isinstance(expr, cst.Name) and expr.value == "None":
        return False
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value == "update_ops"
    if isinstance(expr, (cst.List, cst.Tuple)):
        return any(_feeds_update_ops(e.value) for e in expr.elements)
    return True


class _Words(cst.CSTVisitor):
    """The names (dotted where they chain) and strings an expression mentions; keyword
    names of arguments are not mentions."""

    def __init__(self):
        super().__init__()
        self.names: set[str] = set()
        self.strings: set[str] = set()

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        dotted = _dotted(node)
        if dotted is not None:
            self.names.add(dotted)
        node.value.visit(self)  # `tf.train_op` mentions tf, not a `train_op`
        return False

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = node.evaluated_value
        if isinstance(value, str):
            self.strings.add(value)


def _words(node: cst.CSTNode) -> _Words:
    words = _Words()
    node.visit(words)
    return words


def _mentions_update_ops(node: cst.CSTNode, names: set[str], but: set[str] = frozenset()) -> bool:
    """Whether an expression refers to the update ops: `GraphKeys.UPDATE_OPS`, the string
    key, a name that says so (`update_ops`, `bn_updates`) or one assigned from them; names
    in `but` (the train op's own) do not count."""
    words = _words(node)
    found = words.names - but
    return ("update_ops" in words.strings or bool(found & names)
            or any(_UPDATE_WORD.search(n.rsplit(".", 1)[-1]) for n in found))


@dataclasses.dataclass(frozen=True)
class _BatchNorm:
    """A batch norm that trains and puts its moving-average updates in UPDATE_OPS."""

    name: str  # slim.batch_norm, layers.batch_normalization, ...
    line: int


class _BatchNormFinder(cst.CSTVisitor):
    """Every batch norm of a module that trains and feeds UPDATE_OPS: calls, slim's
    `normalizer_fn=`, `slim.arg_scope` defaults, tf.layers' layer objects, slim nets."""

    def __init__(self, names: TfNames, line_of, dicts: dict[str, cst.BaseExpression]):
        super().__init__()
        self.names, self.line_of, self.dicts = names, line_of, dicts
        self.found: list[_BatchNorm] = []
        self._defaults: list[dict[str, cst.BaseExpression]] = []  # arg_scope([batch_norm], ...)
        self._layers: list[cst.Call] = []  # tf.layers.BatchNormalization(...) constructors
        self._bound: dict[cst.Call, str] = {}  # a constructor -> the name it is assigned to
        self._called: set[cst.Call] = set()  # constructors called right away: (...)(x)
        self._layer_calls: dict[str, list[cst.Call]] = {}  # calls of anything, by callee text

    # -- arguments ----------------------------------------------------------------------------

    def _dict(self, expr: cst.BaseExpression | None, depth: int = 0) -> dict | None:
        """The keys and values of a dict the code spells out: `{"is_training": x}`,
        `dict(is_training=x)`, or a name bound to one. None when not visible."""
        if depth > 5 or expr is None:
            return None
        if isinstance(expr, cst.Name) and expr.value in self.dicts:
            return self._dict(self.dicts[expr.value], depth + 1)
        if isinstance(expr, cst.Dict):
            out: dict[str, cst.BaseExpression] = {}
            for element in expr.elements:
                if isinstance(element, cst.StarredDictElement):
                    inner = self._dict(element.value, depth + 1)
                    if inner is None:
                        return None
                    out.update(inner)
                elif isinstance(element.key, cst.SimpleString):
                    out[str(element.key.evaluated_value)] = element.value
            return out
        if (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name)
                and expr.func.value == "dict"):
            out = {}
            for arg in expr.args:
                if arg.keyword is not None:
                    out[arg.keyword.value] = arg.value
                else:
                    inner = self._dict(arg.value, depth + 1)
                    if inner is None:
                        return None
                    out.update(inner)
            return out
        return None

    def _kwargs(self, call: cst.Call) -> dict[str, cst.BaseExpression]:
        """Keyword arguments of a call, `**params` spelled out (key `**`: `_UNKNOWN`, a
        `**` that is not visible, so any key may be set)."""
        out: dict[str, cst.BaseExpression] = {}
        for arg in call.args:
            if arg.star == "**":
                inner = self._dict(arg.value)
                out.update({"**": _UNKNOWN} if inner is None else inner)
            elif arg.keyword is not None:
                out[arg.keyword.value] = arg.value
        return out

    def _scope_defaults(self) -> dict[str, cst.BaseExpression]:
        merged: dict[str, cst.BaseExpression] = {}
        for defaults in self._defaults:
            merged.update(defaults)
        return merged

    def _record(self, name: str, node: cst.CSTNode, settings: dict, call: cst.Call | None = None):
        training, position, default, updates = BATCH_NORMS[name]
        positional = call is not None and not any(a.star == "*" for a in call.args)
        trains = settings.get(training)
        if trains is None and positional:
            trains = argument(call, training, position)
        trains = settings.get("**") if trains is None else trains
        collections_arg = None
        if updates is not None:
            collections_arg = settings.get(updates[0])
            if collections_arg is None and positional:
                collections_arg = argument(call, *updates)
            collections_arg = settings.get("**") if collections_arg is None else collections_arg
        if _truth(trains, default) and _feeds_update_ops(collections_arg):
            self.found.append(_BatchNorm(name, self.line_of(node)))

    # -- visiting -----------------------------------------------------------------------------

    def visit_With(self, node: cst.With) -> None:
        defaults: dict[str, cst.BaseExpression] = {}
        for item in node.items:
            call = item.item
            if not (isinstance(call, cst.Call) and self.names.canonical(call.func) == ARG_SCOPE
                    and call.args):
                continue
            listed = call.args[0].value
            elements = listed.elements if isinstance(listed, (cst.List, cst.Tuple)) else []
            if any(self.names.canonical(e.value) in BATCH_NORMS for e in elements):
                defaults.update(self._kwargs(call))
        self._defaults.append(defaults)

    def leave_With(self, original_node: cst.With) -> None:
        self._defaults.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        target = _dotted(node.targets[0].target) if len(node.targets) == 1 else None
        if isinstance(node.value, cst.Call) and target is not None:
            self._bound[node.value] = target

    def visit_Call(self, node: cst.Call) -> None:
        name = self.names.canonical(node.func)
        if name in BATCH_NORMS:
            settings = {**self._scope_defaults(), **self._kwargs(node)}
            self._record(name, node, settings, node)
        normalizer = argument(node, "normalizer_fn", None)
        if normalizer is not None and self.names.canonical(normalizer) in BATCH_NORMS:
            params_arg = argument(node, "normalizer_params", None)
            params = self._dict(params_arg) if params_arg is not None else {}
            if params is None:
                params = {"**": _UNKNOWN}
            settings = {**self._scope_defaults(), **params}
            self._record(self.names.canonical(normalizer), node, settings)
        if name == BATCH_NORM_LAYER:
            self._layers.append(node)
        if isinstance(node.func, cst.Call) and self.names.canonical(node.func.func) == BATCH_NORM_LAYER:
            self._called.add(node.func)
            if _truth(argument(node, "training", 1), False):  # BatchNormalization()(x, True)
                self.found.append(_BatchNorm(BATCH_NORM_LAYER, self.line_of(node)))
        callee = _dotted(node.func)
        if callee is not None:
            self._layer_calls.setdefault(callee, []).append(node)
        if any(_SLIM_NET.search(q) for q in self.names.qualified(node.func)):
            if _truth(argument(node, "is_training", None), True):
                self.found.append(_BatchNorm(_dotted(node.func) or "slim net", self.line_of(node)))

    def leave_Module(self, original_node: cst.Module) -> None:
        for layer in self._layers:
            if layer in self._called:
                continue
            calls = self._layer_calls.get(self._bound.get(layer, ""), [])
            # A layer object whose calls are not visible here may train: it counts.
            if not calls or any(_truth(argument(c, "training", 1), False) for c in calls):
                self.found.append(_BatchNorm(BATCH_NORM_LAYER, self.line_of(layer)))
        self.found.sort(key=lambda b: b.line)


class _Index(cst.CSTVisitor):
    """One walk over a module (libcst walks are the cost here): the nodes the codemod
    reads, in source order, each with its function (or lambda, or the module) and the
    `with` blocks whose body holds it."""

    KINDS = (cst.Call, cst.With, cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Import,
             cst.ImportFrom)

    def __init__(self):
        super().__init__()
        self.nodes: dict[type, list[cst.CSTNode]] = {kind: [] for kind in self.KINDS}
        self.order: dict[cst.CSTNode, int] = {}
        self.scope: dict[cst.CSTNode, cst.CSTNode] = {}
        self.withs: dict[cst.CSTNode, tuple[cst.With, ...]] = {}
        self.names: set[str] = set()  # every Name's value
        self.dotted_v1: set[str] = set()  # `x.compat.v1` spelled somewhere: x.compat.v1
        self._scopes: list[cst.CSTNode] = []
        self._withs: list[cst.With] = []
        self._bodies: dict[cst.CSTNode, cst.With] = {}  # a with's body -> the with

    def of(self, *kinds, scope: cst.CSTNode | None = None) -> list:
        found = [n for kind in kinds for n in self.nodes[kind]]
        if len(kinds) > 1:
            found.sort(key=lambda n: self.order[n])
        return found if scope is None else [n for n in found if self.scope[n] is scope]

    def on_visit(self, node: cst.CSTNode) -> bool:
        if not self._scopes:
            self._scopes.append(node)  # the module
        if type(node) in self.nodes:
            self.nodes[type(node)].append(node)
            self.order[node] = len(self.order)
            self.scope[node] = self._scopes[-1]
            self.withs[node] = tuple(self._withs)
        if isinstance(node, cst.Name):
            self.names.add(node.value)
        elif isinstance(node, cst.Attribute) and node.attr.value == "v1":
            self.dotted_v1.add(_dotted(node) or "")
        if isinstance(node, (cst.FunctionDef, cst.Lambda)):
            self._scopes.append(node)
        if isinstance(node, cst.With):
            self._bodies[node.body] = node
        elif node in self._bodies:
            self._withs.append(self._bodies[node])
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if isinstance(original_node, (cst.FunctionDef, cst.Lambda)):
            self._scopes.pop()
        if original_node in self._bodies:
            self._withs.pop()


def _index(module: cst.Module) -> _Index:
    index = _Index()
    module.visit(index)
    return index


def _batch_norms(module: cst.Module, index: _Index, names: TfNames, line_of) -> list[_BatchNorm]:
    dicts = {}
    for node in index.of(cst.Assign):
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            if isinstance(node.value, (cst.Dict, cst.Call, cst.Name)):
                dicts[node.targets[0].target.value] = node.value
    finder = _BatchNormFinder(names, line_of, dicts)
    module.visit(finder)
    return finder.found


@dataclasses.dataclass
class _Scope:
    """What one function body (or the module) does with the update ops."""

    node: cst.CSTNode
    update_names: set[str]  # names bound to the update ops (update_ops = tf.get_collection(..))
    blocks: list[cst.With]  # `with control_dependencies(<the update ops>):` blocks
    assigns: list[tuple[list[str], cst.BaseExpression]]  # (targets, value)
    calls: list[cst.Call]


@dataclasses.dataclass
class _TrainCall:
    """One `minimize` / `apply_gradients` call, where it sits."""

    call: cst.Call
    statement: cst.CSTNode | None  # the simple statement to wrap (None: a compound header)
    in_lambda: bool
    withs: list[cst.With]  # enclosing `with` blocks, innermost first, within its function
    scope: cst.CSTNode  # FunctionDef or Module


# Words without which a file cannot hold a batch norm that feeds UPDATE_OPS (its own layer,
# an alias of one, or a slim net built on one): `scan` parses only files that have one.
class UpdateOpsCodemod(SourceCodemod):
    """Build the train op under `tf.control_dependencies(tf.get_collection(UPDATE_OPS))`.

    Found, only where a batch norm that trains feeds UPDATE_OPS somewhere in the run (this
    file or another one given with it, found by `scan`): `slim.batch_norm`,
    `tf.contrib.layers.batch_norm`, `tf.layers.batch_normalization` and its compat.v1
    spellings, slim's `normalizer_fn=slim.batch_norm` (with `normalizer_params` and
    `slim.arg_scope([slim.batch_norm], ...)` defaults read where the code spells them out),
    `tf.layers.BatchNormalization` objects, and slim nets built on batch norm
    (`resnet_v2_50(..., is_training=True)`). A batch norm with `updates_collections=None`
    (updates run in place), another collection, or a literal `is_training=False` /
    `training=False` (tf.layers' default) does not count; a flag given as a variable or a
    placeholder does. tf.keras layers keep their updates on the model, not in UPDATE_OPS,
    and are left alone.

    Every `X.minimize(...)` / `X.apply_gradients(...)` that does not run the update ops is
    an error: not inside a `with ...control_dependencies(E):` whose `E` refers to them (a
    `get_collection(GraphKeys.UPDATE_OPS)`, a name bound to one, a name that says so:
    `update_ops`, `bn_updates`), not in a function called inside such a block, and its
    result not tied to them afterwards in the same function (`tf.group(train_op,
    *update_ops)`, also through `tower_ops.append(train_op)`, or rebuilt inside such a block:
    `train_op = tf.group(train_op)`). `create_train_op` and `optimize_loss` run them
    themselves and are never touched. A block over the update ops opened *after* the train
    op was built does nothing for it; the finding says so.

    Fixed: the statement holding the call (a simple statement: an assignment, a `return`,
    the call nested in an expression) moves into the block, with the file's own spelling of
    TF1's API (`tf` from `import tensorflow.compat.v1 as tf`, `tf.compat.v1` where the file
    reaches compat.v1 that way, `ops` from `tensorflow.python.framework`; a file with no TF
    import gets `import tensorflow.compat.v1 as tf`)::

        grads = average_gradients(tower_grads)
        with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
            train_op = opt.apply_gradients(grads, global_step=global_step)

    In a tower loop each `minimize` is wrapped where it is (the per-tower train ops of the
    asynchronous variant); gradients averaged outside the loop get the `apply_gradients`
    after the loop wrapped, when every tower's update ops are in the collection. A late
    block is left where it is (harmless; moving the train op into it could reorder code
    that uses it). Reported, not fixed: a call inside a lambda or a compound statement's
    header. Findings and fixes honour `# graphfix: ignore[update-ops]`.

    The `towers` parameter is the graph surface's: in source, `get_collection` where the
    train op is built returns the update ops of every tower built so far, as slim's
    `create_train_op` does. Not followed: a train op returned to a caller that ties it to
    the update ops there; names bound in one function and read in another; a model built
    in the train op's own statement (`opt.minimize(model(x))`: its update ops are made
    after the block reads the collection; build the loss first).
    """

    DESCRIPTION = "Make minimize/apply_gradients run the batch-norm update ops (UPDATE_OPS)."
    VALID = (
        """\
        import tensorflow.compat.v1 as tf
        import tf_slim as slim


        def train_op(images, labels):
            net = slim.batch_norm(slim.conv2d(images, 32, 3), is_training=True)
            loss = tf.losses.softmax_cross_entropy(labels, slim.fully_connected(net, 10))
            with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
                return tf.train.AdamOptimizer().minimize(loss)
        """,
        """\
        import tensorflow.compat.v1 as tf
        import tf_slim as slim


        def train_op(images, labels):
            net = slim.batch_norm(slim.conv2d(images, 32, 3), is_training=False)
            loss = tf.losses.softmax_cross_entropy(labels, slim.fully_connected(net, 10))
            return tf.train.AdamOptimizer().minimize(loss)
        """,
    )
    INVALID = (
        Example(
            """\
            import tensorflow.compat.v1 as tf
            import tf_slim as slim


            def train_op(images, labels):
                net = slim.batch_norm(slim.conv2d(images, 32, 3), is_training=True)
                loss = tf.losses.softmax_cross_entropy(labels, slim.fully_connected(net, 10))
                return tf.train.AdamOptimizer().minimize(loss)
            """,
            fixed="""\
            import tensorflow.compat.v1 as tf
            import tf_slim as slim


            def train_op(images, labels):
                net = slim.batch_norm(slim.conv2d(images, 32, 3), is_training=True)
                loss = tf.losses.softmax_cross_entropy(labels, slim.fully_connected(net, 10))
                with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
                    return tf.train.AdamOptimizer().minimize(loss)
            """,
            says='does not run the update ops of slim.batch_norm'),
    )

    @classmethod
    def scan(cls, path: str, code: str) -> list[tuple[str, int]] | None:
        """The batch norms of one file that train and feed UPDATE_OPS: [(name, line)]."""
        wrapper = scan_wrapper(code)
        names = TfNames(wrapper.module,
                        qualified_name_lookup(wrapper.resolve(ScopeProvider).get))
        # Positions (of the whole file) are resolved only once a batch norm is found.
        found = _batch_norms(wrapper.module, _index(wrapper.module), names,
                             lambda n: wrapper.resolve(PositionProvider)[n].start.line)
        return [(b.name, b.line) for b in found] or None

    # -- the module ---------------------------------------------------------------------------

    def visit_Module(self, node: cst.Module) -> None:
        self._scopes: dict[cst.CSTNode, _Scope] = {}
        self._index = _index(node)
        batch_norm = self._batch_norm_here(node)
        if batch_norm is None:
            return
        calls = [c for c in self._index.of(cst.Call)
                 if isinstance(c.func, cst.Attribute) and c.func.attr.value in TRAIN_METHODS
                 and not self.tf_names.is_foreign_import(c.func)]
        if not calls:
            return
        self._module_scope = self._scope(node)
        self._called_under_updates = self._functions_called_under_updates(node)
        spelling, needs_import, problem = self._spelling(node)
        for call in calls:
            self._judge(self._place(call), batch_norm, spelling, needs_import, problem)
        self.findings.sort(key=lambda f: (f.line or 0, f.col or 0))

    def _batch_norm_here(self, module: cst.Module) -> str | None:
        """Where a batch norm that trains is, in words: this file's first, else another's."""
        here = _batch_norms(module, self._index, self.tf_names, lambda n: self.position(n)[0])
        if here:
            return f"{here[0].name} (line {here[0].line})"
        own = self.context.filename
        for path in sorted(self.run_facts):
            if path != own and self.run_facts[path]:
                name, line = self.run_facts[path][0]
                return f"{name} ({path}:{line})"
        return None

    # -- where a call sits, and what its function does ----------------------------------------

    def _place(self, call: cst.Call) -> _TrainCall:
        statement, in_lambda, withs = None, False, []
        child, parent = call, self.parent(call)
        scope: cst.CSTNode | None = None
        while parent is not None:
            if statement is None:
                if isinstance(parent, cst.Lambda):
                    in_lambda = True
                elif isinstance(parent, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
                    statement = parent
                elif isinstance(parent, cst.BaseCompoundStatement):
                    statement = False  # in a header: `for x in [opt.minimize(l)]:`
            if isinstance(parent, cst.With) and child is parent.body:
                withs.append(parent)
            if isinstance(parent, cst.FunctionDef) and child is parent.body:
                scope = parent
                break
            child, parent = parent, self.parent(parent)
        return _TrainCall(call, statement or None, in_lambda, withs, scope or self._tree)

    def _scope(self, node: cst.CSTNode) -> _Scope:
        if node in self._scopes:
            return self._scopes[node]
        assigns = [(_assigned(small), small.value)
                   for small in self._index.of(cst.Assign, cst.AnnAssign, cst.AugAssign, scope=node)
                   if small.value is not None]
        update_names = set(self._module_scope.update_names) if node is not self._tree else set()
        grew = True
        while grew:
            grew = False
            for targets, value in assigns:
                if set(targets) - update_names and _mentions_update_ops(value, update_names):
                    update_names |= set(targets)
                    grew = True
        scope = _Scope(node, update_names, [], assigns, self._index.of(cst.Call, scope=node))
        scope.blocks = [w for w in self._index.of(cst.With, scope=node)
                        if self._over_update_ops(w, update_names)]
        self._scopes[node] = scope
        return scope

    def _is(self, call: cst.CSTNode, names: frozenset[str]) -> bool:
        """Whether `call` calls one of TF's `names` (group, control_dependencies, ...)."""
        if not isinstance(call, cst.Call):
            return False
        canonical = self.tf_names.canonical(call.func)
        if canonical is not None:
            return canonical.rsplit(".", 1)[-1] in names
        return isinstance(call.func, cst.Attribute) and call.func.attr.value in names

    def _over_update_ops(self, block: cst.With, update_names: set[str]) -> bool:
        return any(self._is(item.item, frozenset({"control_dependencies"}))
                   and any(_mentions_update_ops(a.value, update_names) for a in item.item.args)
                   for item in block.items)

    def _functions_called_under_updates(self, module: cst.Module) -> set[str]:
        """Names of functions called inside a block over the update ops: what they build
        (`train_op = build_train_op(loss)`) runs them."""
        blocks = {block for block in self._index.of(cst.With) if self._over_update_ops(
            block, self._scope(self._index.scope[block]).update_names)}
        called = set()
        for call in self._index.of(cst.Call):
            callee = _dotted(call.func)
            if callee is not None and blocks.intersection(self._index.withs[call]):
                called.add(callee.rsplit(".", 1)[-1])
        return called

    def _covered(self, site: _TrainCall) -> tuple[bool, list[cst.With]]:
        """Whether the train op runs the update ops; else the blocks over them opened
        after it was built, in its function."""
        scope = self._scope(site.scope)
        if any(w in scope.blocks for w in site.withs):
            return True, []
        if (isinstance(site.scope, cst.FunctionDef)
                and site.scope.name.value in self._called_under_updates):
            return True, []
        # What holds the train op: the statement's targets, and what they flow into.
        held = {name for small in (site.statement.body if site.statement else ())
                for name in _assigned(small)}
        grew = bool(held)
        while grew:
            grew = False
            for targets, value in scope.assigns:
                if set(targets) - held and _words(value).names & held:
                    held |= set(targets)
                    grew = True
            for call in scope.calls:
                if (isinstance(call.func, cst.Attribute)
                        and call.func.attr.value in ("append", "extend", "add", "insert")
                        and any(_words(a.value).names & held for a in call.args)):
                    owner = _dotted(call.func.value)
                    if owner is not None and owner not in held:
                        held.add(owner)
                        grew = True
        if held:
            for call in scope.calls:  # tf.group(train_op, *update_ops)
                if self._is(call, _TIES) and call is not site.call:
                    args = [a.value for a in call.args]
                    if (any(_words(a).names & held for a in args) and any(
                            _mentions_update_ops(a, scope.update_names, held) for a in args)):
                        return True, []
        end = self.code_range(site.statement or site.call).end.line
        late = []
        for block in scope.blocks:
            if self.code_range(block).start.line <= end:
                continue
            assigns = [a for a in self._index.of(cst.Assign, cst.AugAssign, cst.AnnAssign)
                       if block in self._index.withs[a]]
            rebuilt = any(small.value is not None and _words(small.value).names & held
                          for small in assigns)
            if rebuilt:  # with control_dependencies(update_ops): train_op = tf.group(train_op)
                return True, []
            late.append(block)
        return False, late

    # -- findings and fixes -------------------------------------------------------------------

    def _spelling(self, module: cst.Module) -> tuple[str | None, bool, str | None]:
        """What follows `with` in the fix, in this file's spelling of TF1's API, and whether
        that needs `import tensorflow.compat.v1 as tf`; or None and why it cannot be
        spelled."""
        v1, tf, ops = [], [], []
        for node in self._index.of(cst.Import, cst.ImportFrom):
            if isinstance(node, cst.Import):
                for alias in node.names:
                    full = _dotted(alias.name)
                    bound = alias.asname.name.value if alias.asname else full
                    if full == "tensorflow.compat.v1":
                        v1.append(bound)
                    elif full == "tensorflow":
                        tf.append(bound)
                    elif full == "tensorflow.python.framework.ops" and alias.asname:
                        ops.append(bound)
            elif (not isinstance(node.names, cst.ImportStar) and node.module is not None
                  and not node.relative):
                base = _dotted(node.module)
                for alias in node.names:
                    full = f"{base}.{alias.name.value}"
                    bound = alias.asname.name.value if alias.asname else alias.name.value
                    if full == "tensorflow.compat.v1":
                        v1.append(bound)
                    elif full == "tensorflow.python.framework.ops":
                        ops.append(bound)
        v1 += [n for n, q in self.tf_names.aliases.items() if q == "tensorflow.compat.v1"]
        needs_import = False
        if v1:
            m = v1[0]
        elif tf:
            m = f"{tf[0]}.compat.v1" if f"{tf[0]}.compat.v1" in self._index.dotted_v1 else tf[0]
        elif ops:
            m = ops[0]
        elif "tf" not in self._index.names:
            m, needs_import = "tf", True
        else:
            return None, False, "no TensorFlow import to spell tf.control_dependencies with"
        text = f"{m}.control_dependencies({m}.get_collection({m}.GraphKeys.UPDATE_OPS))"
        return text, needs_import, None

    def _judge(self, site: _TrainCall, batch_norm: str, spelling: str | None,
               needs_import: bool, problem: str | None) -> None:
        if self.suppressed(site.call):
            return
        covered, late = self._covered(site)
        if covered:
            return
        what = self.code(site.call.func)
        message = (f"train op built without UPDATE_OPS: batch-norm moving averages never "
                   f"update (seed 003): {what}(...) does not run the update ops of "
                   f"{batch_norm}")
        if late:
            lines = ", ".join(str(self.position(b)[0]) for b in late)
            where = "line" if len(late) == 1 else "lines"
            message += (f"; control_dependencies over them opened after the train op was "
                        f"built ({where} {lines}) does nothing for it")
        if site.in_lambda:
            problem = "it is built inside a lambda; wrap the lambda's body by hand"
        elif site.statement is None:
            problem = ("it is built in a compound statement's header; build it under the "
                       "block by hand")
        if problem is not None:
            self.report(site.call, f"{message}; not fixed: {problem}")
            return
        wrap = WrapInWith((site.statement,), spelling)
        self.report(site.call, f"{message}; fix: build it under {spelling}",
                    fix=(wrap, _V1_IMPORT) if needs_import else wrap)


