"""The source surface of `update-ops`: the libcst codemod (see the
package docstring for the bug and the fix)."""

from __future__ import annotations

import ast
import dataclasses
import textwrap

import libcst as cst

from graphfix.source.codemod import Example, SourceCodemod
from graphfix.source.project import MODULE_BODY, unit_at
from graphfix.source.project.dynamic_imports import flag_truth_default
from graphfix.source.fixes import AddImport, WrapInWith
from graphfix.source.vocabulary import OP_TIES, OPTIMIZE_LOSS, TRAIN_METHODS, UPDATE_OPS_NAME

from . import imported_classes_batch_norms

# -- Source surface -------------------------------------------------------------------------
#
# Read off the syntax tree; nothing here imports TensorFlow. Names are TF symbols as
# `graphfix.source.vocabulary` spells them (`slim.batch_norm`, `layers.dense`). Which batch
# norms train and feed UPDATE_OPS, here and in the files this one's code reaches, is the
# project model's to say (`graphfix.source.project`).

# The import a fix adds where it spells `tf.` in a file that has no compat.v1 `tf`.
_V1_IMPORT = AddImport("tensorflow.compat.v1", asname="tf")
# TF's functional loops, each with the argument that is the loop's body: ops its body
# builds live in the loop's frame.
_LOOPS = {"map_fn": ("fn", 0), "scan": ("fn", 0), "foldl": ("fn", 0), "foldr": ("fn", 0),
          "while_loop": ("body", 1)}


def _bindings(code: str) -> dict[str, int]:
    """How many times each name is bound in `code` (assigned, a parameter, imported, a def
    or class), in any scope."""
    counts: dict[str, int] = {}
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return counts
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names = [node.id]
        elif isinstance(node, ast.arg):
            names = [node.arg]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.alias):
            names = [(node.asname or node.name).split(".")[0]]
        else:
            continue
        for name in names:
            counts[name] = counts.get(name, 0) + 1
    return counts


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
            or any(UPDATE_OPS_NAME.search(n.rsplit(".", 1)[-1]) for n in found))


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


class _Returns(cst.CSTVisitor):
    """The values a function returns (not its nested functions')."""

    def __init__(self, function: cst.CSTNode):
        super().__init__()
        self.function = function
        self.values: list[cst.BaseExpression] = []

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is not None:
            self.values.append(node.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return node is self.function

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


class _LoopTargets(cst.CSTVisitor):
    """The names each `for` statement of a function (not of its nested functions) binds,
    with the names its iterable mentions."""

    def __init__(self, function: cst.CSTNode):
        super().__init__()
        self.function = function
        self.found: list[tuple[set[str], set[str]]] = []

    def visit_For(self, node: cst.For) -> None:
        target = node.target
        elements = ([e.value for e in target.elements]
                    if isinstance(target, (cst.Tuple, cst.List)) else [target])
        bound = {d for d in map(_dotted, elements) if d is not None}
        if bound:
            self.found.append((bound, _words(node.iter).names))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return node is self.function

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


def _loop_targets(function: cst.CSTNode) -> list[tuple[set[str], set[str]]]:
    loops = _LoopTargets(function)
    function.visit(loops)
    return loops.found


def _index(module: cst.Module) -> _Index:
    index = _Index()
    module.visit(index)
    return index


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
    file or another one given with it that the project model connects to the train op,
    through imports, calls, and an `importlib.import_module` of a name the file spells out
    from literals and its flags' defaults), or where the train op's function collects
    UPDATE_OPS into a list that nothing reads (its author's word that a batch norm feeds
    them, as when the model comes in as an argument), or where that function's parameter
    reads as an instance of the one class its file imports from the project that binds every
    attribute the function reads of it, a class whose code builds a batch norm that trains
    (hanna-xu/FusionDN's `train_task(model, ...)`): `slim.batch_norm`,
    `tf.contrib.layers.batch_norm`, `tf.layers.batch_normalization` and its compat.v1
    spellings, slim's `normalizer_fn=slim.batch_norm` (with `normalizer_params` and
    `slim.arg_scope([slim.batch_norm], ...)` defaults read where the code spells them out),
    `tf.layers.BatchNormalization` objects, slim nets built on batch norm
    (`resnet_v2_50(..., is_training=True)`), and a batch norm written by hand that adds its
    updates to UPDATE_OPS (`tf.add_to_collection(tf.GraphKeys.UPDATE_OPS,
    update_moving_mean)`, JZDSS/multi-gpus' layers.batch_norm) and reads them nowhere else
    in its function (a control dependency there runs them in place). A batch norm counts
    only where some run builds it: not in a function nothing calls, nor under a training
    flag parameter defaulting to False, or with no default, that every call sets to a
    literal False (through a caller's own parameter, as its callers set it: `build_graph(
    istrain=False)` -> `batch_norm_relu(net, istrain)`; a model's `__call__` through the
    calls of its instances, sugyan/tf-dcgan's `self.g = Generator(); self.g(z,
    training=True)`, an instance handed on counting as called with it set), nor in a
    branch on the name a loop over its
    function's parameter takes (`if layer.startswith("batch_norm"):`) where every call
    passes a list of names the branch does not take (xtudbxk/DSRG-tensorflow's build_fc),
    nor in a script's function that only branches its flag defaults do not take call
    (jiankaiwang/distributed_training's `elif FLAGS.cnn_model == "inception_v3":`, the
    default "mlp"): a run is judged with its flag defaults, as an `importlib` import of a
    name built from them is. A batch norm with `updates_collections=None`
    (updates run in place, also in the dict a helper function returns as its params),
    another collection, or a literal `is_training=False` /
    `training=False` (tf.layers' default) does not count; a flag given as a variable or a
    placeholder does. A block over a name of the update ops that the script's flag
    defaults bind to None (`if args.update_mean_var == False: update_ops = None`, a
    store_true flag; hellochick/PSPNet-tensorflow) waits on nothing: the train op in it is
    found. Nor does one the innermost arg_scope freezes: the layers'
    `normalizer_fn=slim.batch_norm` a module function's arg_scope sets up (mobilenet's
    `training_scope`) where every use of that function enters its scope with an
    `arg_scope([slim.batch_norm], is_training=False)` inside it (the DetectionTeamUCAS
    detectors' `mobilenetv2_scope`), also through a function that only returns its call;
    and slim's resnet_v1, whose only batch norms are its convolutions', under an arg_scope
    (in the `with`, or given back by a function of the file entered there) whose
    `normalizer_params` say `is_training: False`: a keyword of the layer's call of its
    batch norm, it beats resnet_v1's own `arg_scope([batch_norm], is_training=is_training)`
    (alexchung16/Faster-RCNN). tf.keras layers keep their updates on the model, not in UPDATE_OPS,
    and are left alone, and so is a file whose TF loop (`tf.map_fn`, `scan`, `foldl`,
    `foldr`, `tf.while_loop`) builds a batch norm in its body: the updates are the loop's,
    and a control dependency on them outside it is TF's "has inputs from different frames"
    error (cbfinn/maml#33).

    Found too, for a batch norm written by hand (ry/tensorflow-resnet's, widely copied):
    moving-average updates (`assign_moving_average(...)`, an `ExponentialMovingAverage`'s
    `apply(...)`) added with `add_to_collection` to a collection of the code's own (its key
    a string, or a module constant of one) that no code connected to the train op's file
    by imports reads with `get_collection`: nothing runs them. The train ops of their
    program (the file that fills the collection, or one whose calls reach that code or are
    reached by it) are found; any `get_collection` whose key the code does not spell out
    (a parameter, an attribute), an update op the code also reads elsewhere (a control
    dependency, a return), or a key not spelled as a constant means no finding. The fix
    builds the train op under `tf.control_dependencies(tf.get_collection(KEY))`, `KEY`
    spelled as the file reaches it (the string; the constant's name in its own module, or
    through this file's import of that module, `model.UPDATE_OPS_COLLECTION`); reported,
    not fixed, where the file reaches no name of it, or the train op's function fills the
    collection after building it.

    Every `X.minimize(...)` / `X.apply_gradients(...)` that does not run the update ops is
    an error: not inside a `with ...control_dependencies(E):` whose `E` refers to them (a
    `get_collection(GraphKeys.UPDATE_OPS)`, a name bound to one, a name that says so:
    `update_ops`, `bn_updates`), not in a function called inside such a block (in another
    file, a helper this file does not call: every call there inside one), and its
    result not tied to them afterwards in the same function (`tf.group(train_op,
    *update_ops)`, also through `tower_ops.append(train_op)`, or added to the list of the
    update ops that is then grouped, model_deploy's `update_ops.append(grad_updates)`, or
    its own list extended with them and grouped, cifar10_estimator's `train_op =
    [opt.apply_gradients(..)]; train_op.extend(update_ops)`; built inline in such a tie,
    `tf.group(opt.minimize(loss), *update_ops)`; appended, or an op built under a
    control dependency on it, to a list its function is given that every call of it, in
    the file and in the files its imports connect it to, passes from a caller that ties the
    list to them, early tf_cnn_benchmarks' `append_apply_gradients_ops(opt, grads,
    training_ops)` (variable_mgr.py) grouped with them in tf_cnn_benchmarks.py, also
    returned by a callback the function hands with that list to one that calls the
    callback and fills the list (`append_gradients_with_loss_scale(training_ops,
    get_apply_gradients_ops_func, ...)`); or
    rebuilt inside such a block:
    `train_op = tf.group(train_op)`; or an op built under blocks over both the update ops
    and the train op, in either order, tensorflow-yolov3's `with
    control_dependencies(update_ops): with control_dependencies([opt]): train_op =
    tf.no_op()`), and not built from a loss rebuilt to wait on them (`with
    control_dependencies([barrier]): loss = tf.identity(loss)`) that the code also keeps
    for the step to fetch with the train op: added to a collection, a summary, returned, an
    attribute (youtube-8m's towers); also a train op built in a function nested in the
    one that keeps that loss (OpenSeq2Seq's accumulated apply handed to `tf.cond`). A
    class's own `minimize` / `apply_gradients` method (an optimizer wrapper's
    `self._optimizer.apply_gradients(...)`, a subclass's `super().apply_gradients(...)`)
    is library code, no train op: its caller's call is judged. A waiting loss used for its gradients alone runs
    nothing: TF's gradients do not read a loss whose shape is known. A project with a
    session hook that fetches the collection beside every step (a class reading
    `GraphKeys.UPDATE_OPS` whose own or same-file base's `before_run` / `_before_run`
    adds fetches, made somewhere: tensorpack's `RunUpdateOps` among its default
    callbacks) runs them; its train ops are left alone. `create_train_op` and
    `optimize_loss` run them themselves and are never touched, but for an `optimize_loss` (contrib's, tf-slim's)
    given `update_ops=` as a literal list or tuple holding none of them (`update_ops=[]`,
    ikostrikov/TensorFlow-VAE-GAN-DRAW): it runs that list instead; reported, not fixed
    (drop the argument or pass them). A block over the update ops opened *after* the train
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

    # -- the module ---------------------------------------------------------------------------

    def visit_Module(self, node: cst.Module) -> None:
        self._scopes: dict[cst.CSTNode, _Scope] = {}
        self._unset_names: dict[cst.CSTNode, set[str]] = {}
        self._ast_tree: ast.Module | None = None
        self._index = _index(node)
        calls = [c for c in self._index.of(cst.Call)
                 if isinstance(c.func, cst.Attribute) and c.func.attr.value in TRAIN_METHODS
                 and not self.tf_names.is_foreign_import(c.func)
                 and not self._in_an_optimizer_method(c)]
        self._discarding = {c for c in self._index.of(cst.Call) if self._discards_updates(c)}
        calls += sorted(self._discarding, key=lambda c: self.position(c))
        if not calls:
            return
        if self._batch_norm_in_a_loop_body():
            return
        prepared = False
        for call in calls:
            own = self.project.batch_norms_built(self.position(call)[0])
            here = f"{own[0][0]} (line {own[0][1]})" if own else None
            batch_norm = (here or self._batch_norm_reaching(call) or self._unread_list(call)
                          or self._batch_norm_of_a_model_given(call))
            unrun = self.project.unrun_collections(self.position(call)[0])
            if batch_norm is None and not unrun:
                continue
            if not prepared:
                self._module_scope = self._scope(node)
                self._called_under_updates = self._functions_called_under_updates(node)
                # (a session hook of the project runs UPDATE_OPS beside every step)
                self._hooked = self.project.update_ops_hook() is not None
                tf_module, needs_import, problem = self._spelling(node)
                prepared = True
            self._judge(self._place(call), batch_norm, unrun, tf_module, needs_import, problem)
        self.findings.sort(key=lambda f: (f.line or 0, f.col or 0))

    def _discards_updates(self, call: cst.Call) -> bool:
        """Whether `call` is contrib's `optimize_loss` given `update_ops=` as a literal list
        or tuple that holds none of the update ops (`update_ops=[]`): it then runs that list
        instead of the UPDATE_OPS collection it runs by default (`update_ops=None`)."""
        if self.tf_names.canonical(call.func) not in OPTIMIZE_LOSS:
            return False
        given = [a.value for a in call.args if a.keyword and a.keyword.value == "update_ops"]
        return bool(given) and isinstance(given[0], (cst.List, cst.Tuple)) and not any(
            _mentions_update_ops(e.value, set()) for e in given[0].elements)

    def _batch_norm_in_a_loop_body(self) -> bool:
        """Whether a batch norm is built by the body of one of the file's TF loops
        (`tf.map_fn(fn, ...)`, `scan`, `foldl`, `foldr`, `tf.while_loop(cond, body, ...)`),
        in the body's own code or in the project's code it calls. Its update ops are the
        loop's and UPDATE_OPS holds them: a control dependency on the collection outside
        the loop is TF's "has inputs from different frames" error (cbfinn/maml#33), so the
        fix cannot be made and no train op can run those updates; the file is left alone.
        A call through `self.` that the model does not resolve (an attribute bound to a
        method) is taken to reach the class's methods."""
        part = self.project.part
        if part is None:
            return False
        bodies = []
        for call in self._index.of(cst.Call):
            canonical = self.tf_names.canonical(call.func)
            loop = _LOOPS.get((canonical or "").rsplit(".", 1)[-1]) if canonical else None
            if loop is None:
                continue
            keyword, index = loop
            given = [a.value for a in call.args if a.keyword and a.keyword.value == keyword]
            positional = [a.value for a in call.args if a.keyword is None]
            body = given[0] if given else (positional[index] if len(positional) > index
                                           else None)
            if body is not None:
                bodies.append((call, body))
        if not bodies:
            return False
        defs = {d.name.value: d for d in self._all_defs()}
        project, label = self.project.project, self.project.label
        for call, body in bodies:
            line = self.position(call)[0]
            unit = unit_at(part, line)
            code = body.body if isinstance(body, cst.Lambda) else body
            named = _dotted(body)
            if named is not None and named in defs:  # a def of this file: read its body
                code = defs[named]
            first, last = (self.code_range(code).start.line, self.code_range(code).end.line)
            if any(first <= at <= last for _, at in part["batch_norms"]):
                return True
            starts: set[tuple[str, str]] = set()
            of_class = part["units"].get(unit, {}).get("class")
            for name in _words(code).names:
                resolved = project.resolve_in(label, unit, name)
                if not resolved and name.startswith("self.") and of_class:
                    resolved = frozenset({(label, of_class)})
                starts |= resolved
            for reached_label, reached_unit in project.reached(starts):
                reached_part = project.parts.get(reached_label)
                if reached_part is None or reached_unit == MODULE_BODY:
                    continue
                if any(unit_at(reached_part, at) == reached_unit
                       for _, at in reached_part["batch_norms"]):
                    return True
        return False

    def _in_an_optimizer_method(self, call: cst.Call) -> bool:
        """Whether `call` is in the body of a class's own `minimize` / `apply_gradients`
        method (an optimizer wrapper's `self._optimizer.apply_gradients(...)`, a subclass's
        `super().apply_gradients(...)`, OpenSeq2Seq's mp_wrapper and NovoGrad): that is
        library code, no model's train op; its caller's `X.apply_gradients(...)` is the
        train op, judged where it is built."""
        child, parent = call, self.parent(call)
        while parent is not None:
            if (isinstance(parent, cst.FunctionDef) and child is parent.body
                    and parent.name.value in TRAIN_METHODS
                    and isinstance(self.parent(self.parent(parent)), cst.ClassDef)):
                return True
            child, parent = parent, self.parent(parent)
        return False

    def _all_defs(self) -> list[cst.FunctionDef]:
        found = []

        class _Defs(cst.CSTVisitor):
            def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
                found.append(node)

        self._tree.visit(_Defs())
        return found

    def _batch_norm_reaching(self, call: cst.Call) -> str | None:
        """The first batch norm of another file that this train op may be built with, in
        words; None if none reaches it (the project model follows imports and calls)."""
        reaching = self.project.batch_norms_reaching(self.position(call)[0])
        if not reaching:
            return None
        path, name, line = reaching[0]
        return f"{name} ({path}:{line})"

    def _batch_norm_of_a_model_given(self, call: cst.Call) -> str | None:
        """The first batch norm of a model the train op's function is given (a parameter),
        in words: the parameter read as an instance of the one class this file imports from
        another file of the project that binds every attribute the function reads of it
        (hanna-xu/FusionDN's `train_task(model, ...)` minimizing `model.content_loss`,
        `from model import Model`, the model built by a script no file imports). The
        class's code and what it calls count as run; None where no class, or more than one,
        fits."""
        part = self.project.part
        function = self._place(call).scope
        if part is None or not isinstance(function, cst.FunctionDef):
            return None
        params = {p.name.value for p in function.params.params} - {"self", "cls"}
        given = {n.split(".")[0] for a in call.args for n in _words(a.value).names
                 if "." in n} & params
        if len(given) != 1:
            return None
        (model,) = given
        try:
            tree = ast.parse(textwrap.dedent(self.code(function)))
        except (SyntaxError, ValueError):
            return None
        of_model = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                    and isinstance(n.value, ast.Name) and n.value.id == model]
        # (what the function binds on the model itself, `model.train_op = ...`, is its own)
        read = ({n.attr for n in of_model}
                - {n.attr for n in of_model if isinstance(n.ctx, ast.Store)})
        project, label = self.project.project, self.project.label
        fitting = {target for bound, *_ in part.get("imports", ())
                   for target in project.resolve(label, bound)
                   if target[0] != label and project._kind(target) == "class"
                   and read and read <= self._members(*target)}
        norms = imported_classes_batch_norms(self.project)
        if len(fitting) != 1 or next(iter(fitting)) not in norms:
            return None
        path, name, at = norms[next(iter(fitting))]
        return f"{name} ({path}:{at}), built by the {fitting.pop()[1]} it is given"

    def _members(self, label: str, cls: str) -> set[str]:
        """The attributes a project class binds: its methods, and what its methods assign
        to their own object (`self.loss = ...`)."""
        code = self.project.project._code_of(label)
        try:
            tree = ast.parse(code or "")
        except (SyntaxError, ValueError):
            return set()
        members: set[str] = set()
        for node in tree.body:
            if not (isinstance(node, ast.ClassDef) and node.name == cls):
                continue
            for method in node.body:
                if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                members.add(method.name)
                own = (method.args.posonlyargs or method.args.args)[:1]
                for inner in ast.walk(method):
                    if (own and isinstance(inner, ast.Attribute)
                            and isinstance(inner.ctx, ast.Store)
                            and isinstance(inner.value, ast.Name)
                            and inner.value.id == own[0].arg):
                        members.add(inner.attr)
        return members

    def _unread_list(self, call: cst.Call) -> str | None:
        """The list of the UPDATE_OPS collection that the train op's function (or the
        module, for one at module level) binds and never reads, in words; None if none."""
        unread = self.project.unread_update_ops(self.position(call)[0])
        if not unread:
            return None
        name, line = unread[0]
        return f"the list {name} collects at line {line} and nothing reads"

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
        smalls = [small for small in self._index.of(cst.Assign, cst.AnnAssign, cst.AugAssign,
                                                    scope=node)
                  if small.value is not None]
        assigns = [(_assigned(small), small.value) for small in smalls]
        update_names = set(self._module_scope.update_names) if node is not self._tree else set()
        withs = self._index.of(cst.With, scope=node)
        grew = True
        while grew:
            grew = False
            # What is built under a block over them runs after them too: slim's barrier,
            # `with control_dependencies(update_ops): barrier = tf.no_op()`, which the loss
            # then depends on (`with_dependencies([barrier], loss)`).
            blocks = {w for w in withs if self._over_update_ops(w, update_names)}
            for (targets, value), small in zip(assigns, smalls):
                if set(targets) - update_names and (
                        _mentions_update_ops(value, update_names)
                        or blocks.intersection(self._index.withs[small])):
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
        unset = self._none_by_default(self._index.scope[block])
        return any(self._is(item.item, frozenset({"control_dependencies"}))
                   and any(_mentions_update_ops(a.value, update_names)
                           and not (isinstance(a.value, cst.Name) and a.value.value in unset)
                           for a in item.item.args)
                   for item in block.items)

    def _none_by_default(self, scope: cst.CSTNode) -> set[str]:
        """Names of the update ops that a run with the script's flag defaults binds to None
        (hellochick/PSPNet-tensorflow's `if args.update_mean_var == False: update_ops =
        None` / `else: update_ops = tf.get_collection(...)`, the flag off unless given):
        `control_dependencies(None)` waits on nothing. Only a name bound in that `if` alone,
        to None in the branch the defaults take and to the update ops in the other."""
        if scope in self._unset_names:
            return self._unset_names[scope]
        self._unset_names[scope] = found = set()
        if "None" not in self.code(scope):
            return found
        tree = self._ast_tree
        if tree is None:
            try:
                tree = ast.parse(self._tree.code)
            except (SyntaxError, ValueError):
                return found
            self._ast_tree = tree
        bound: dict[str, int] = {}
        for small in self._index.of(cst.Assign, cst.AnnAssign, cst.AugAssign, scope=scope):
            for name in _assigned(small):
                bound[name] = bound.get(name, 0) + 1
        for branch in self._ifs(scope):
            try:
                test = ast.parse(self.code(branch.test).strip(), mode="eval").body
            except SyntaxError:
                continue
            truth = flag_truth_default(tree, test)
            if truth is None or not isinstance(branch.orelse, cst.Else):
                continue
            taken, other = ((branch.body, branch.orelse.body) if truth
                            else (branch.orelse.body, branch.body))
            nones = {name for small in self._smalls(taken) if isinstance(small, cst.Assign)
                     and isinstance(small.value, cst.Name) and small.value.value == "None"
                     for name in _assigned(small)}
            updates = {name for small in self._smalls(other) if isinstance(small, cst.Assign)
                       and _mentions_update_ops(small.value, set())
                       for name in _assigned(small)}
            found |= {name for name in nones & updates if bound.get(name) == 2}
        return found

    def _unset_blocks(self, site: _TrainCall) -> list[tuple[cst.With, str]]:
        """The blocks around the train op over a name of the update ops that the script's
        flag defaults bind to None (`_none_by_default`), each with that name."""
        found = []
        for block in reversed(site.withs):
            unset = self._none_by_default(self._index.scope[block])
            for item in block.items:
                if self._is(item.item, frozenset({"control_dependencies"})):
                    found += [(block, a.value.value) for a in item.item.args
                              if isinstance(a.value, cst.Name) and a.value.value in unset]
        return found

    def _ifs(self, scope: cst.CSTNode) -> list[cst.If]:
        """The `if` statements of a function's own body (or the module's), not of its
        nested functions."""
        found = []

        class _Ifs(cst.CSTVisitor):
            def visit_If(self, node: cst.If) -> None:
                found.append(node)

            def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
                return node is scope

            def visit_ClassDef(self, node: cst.ClassDef) -> bool:
                return False

        scope.visit(_Ifs())
        return found

    @staticmethod
    def _smalls(block: cst.BaseSuite) -> list[cst.BaseSmallStatement]:
        """The simple statements directly in a block's body."""
        lines = block.body if isinstance(block, cst.IndentedBlock) else [block]
        return [small for line in lines
                if isinstance(line, (cst.SimpleStatementLine, cst.SimpleStatementSuite))
                for small in line.body]

    def _over(self, block: cst.With, names: set[str]) -> bool:
        """Whether a `with` opens control_dependencies over one of `names`."""
        return any(self._is(item.item, frozenset({"control_dependencies"}))
                   and any(_words(a.value).names & names for a in item.item.args)
                   for item in block.items)

    def _called_only_under_updates_elsewhere(self, site: _TrainCall) -> bool:
        """Whether the train op's function is a helper this file never calls, and every
        call of it in the files connected to this one is made inside a block over the
        update ops (yyht/deepspeech's optimizer_utils.create_optimizer, called under
        `with tf.control_dependencies(update_ops):` by each training script): what it
        builds runs them, as for a function this file calls in such a block."""
        function = site.scope
        if not isinstance(function, cst.FunctionDef):
            return False
        name = function.name.value
        if any((_dotted(c.func) or "").rsplit(".", 1)[-1] == name
               for c in self._index.of(cst.Call)):
            return False
        calls, under = self.project.called_under_update_ops_elsewhere(name)
        return calls > 0 and under

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
        if self._tied_inline(site, scope):
            return True, []
        if (isinstance(site.scope, cst.FunctionDef)
                and site.scope.name.value in self._called_under_updates):
            return True, []
        if self._called_only_under_updates_elsewhere(site) or self._hooked:
            return True, []
        # What holds the train op: the statement's targets, and what they flow into.
        held = {name for small in (site.statement.body if site.statement else ())
                for name in _assigned(small)}
        # Lists of the update ops the train op was added to (`update_ops.append(train_op)`,
        # model_deploy's form): a group of one runs both.
        joined: set[str] = set()
        grew = bool(held)
        while grew:
            grew = False
            for targets, value in scope.assigns:
                if set(targets) - held and _words(value).names & held:
                    held |= set(targets)
                    grew = True
            # What is built under a block over the train op runs it (tf_cnn_benchmarks'
            # replicated manager: `with control_dependencies([barrier]): value =
            # v.read_value()`, the barrier waiting on the apply op).
            for small in self._index.of(cst.Assign, cst.AnnAssign, scope=site.scope):
                targets = set(_assigned(small)) - held
                if targets and any(self._over(block, held)
                                   for block in self._index.withs[small]):
                    held |= targets
                    grew = True
            for call in scope.calls:
                if (isinstance(call.func, cst.Attribute)
                        and call.func.attr.value in ("append", "extend", "add", "insert")
                        and any(_words(a.value).names & held for a in call.args)):
                    owner = _dotted(call.func.value)
                    if owner is not None and owner not in held:
                        if owner in scope.update_names:
                            joined.add(owner)
                        held.add(owner)
                        grew = True
            # The train op's list extended with the update ops (cifar10_estimator's
            # `train_op = [opt.apply_gradients(..)]; train_op.extend(update_ops)`): a group
            # of it runs both.
            for call in scope.calls:
                if (isinstance(call.func, cst.Attribute)
                        and call.func.attr.value in ("append", "extend", "add", "insert")
                        and _dotted(call.func.value) in held - joined
                        and any(_mentions_update_ops(a.value, scope.update_names, held)
                                for a in call.args)):
                    joined.add(_dotted(call.func.value))
                    grew = True
        if self._tied_by_callers(site, held) or self._tied_through_a_callback(site, held):
            return True, []
        if held:
            for call in scope.calls:  # tf.group(train_op, *update_ops)
                if self._is(call, OP_TIES) and call is not site.call:
                    args = [a.value for a in call.args]
                    if any(_words(a).names & joined for a in args) or (
                            any(_words(a).names & held for a in args) and any(
                                _mentions_update_ops(a, scope.update_names, held)
                                for a in args)):
                        return True, []
            # with control_dependencies([train_op]): result = tf.identity(loss), the loss
            # depending on the update ops (slim's create_train_op, its barrier on the loss);
            # or an op built under blocks over both, in either order (tensorflow-yolov3's
            # `with control_dependencies(update_ops): with control_dependencies([opt]):
            # train_op = tf.no_op()`)
            for block in self._index.of(cst.With, scope=site.scope):
                if not self._over(block, held):
                    continue
                for small in self._index.of(cst.Assign, cst.AnnAssign):
                    if block not in self._index.withs[small] or small.value is None:
                        continue
                    if _mentions_update_ops(small.value, scope.update_names, held) or any(
                            self._over_update_ops(w, scope.update_names - held)
                            for w in self._index.withs[small]):
                        return True, []
        if self._waiting_loss_kept(site, scope) or self._waiting_loss_kept_by_enclosing(site):
            return True, []
        end = self.code_range(site.statement or site.call).end.line
        late = []
        # (a block over names that hold the train op itself is no block over the update ops)
        for block in [w for w in scope.blocks
                      if self._over_update_ops(w, scope.update_names - held)]:
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

    def _tied_by_callers(self, site: _TrainCall, held: set[str]) -> bool:
        """Whether the train op goes into a list its function is given (`training_ops.
        append(apply_op)`, early tf_cnn_benchmarks' variable manager) and every call of that
        function, in this file and in the files connected to it
        (`FileView.lists_tied_elsewhere`), passes a list its caller then ties to the update
        ops (`tf.group(*(training_ops + update_ops))`)."""
        function = site.scope
        if not isinstance(function, cst.FunctionDef) or not held:
            return False
        params = [p.name.value for p in function.params.params]
        given = {_dotted(c.func.value) for c in self._scope(function).calls
                 if isinstance(c.func, cst.Attribute)
                 and c.func.attr.value in ("append", "extend", "insert")
                 and any(_words(a.value).names & held for a in c.args)}
        lists = [p for p in params if p in given and p not in ("self", "cls")]
        return bool(lists) and self._callers_tie(function, lists)

    def _callers_tie(self, function: cst.FunctionDef, lists: list[str]) -> bool:
        """Whether every call of `function`, in this file and in the files connected to it
        (`FileView.lists_tied_elsewhere`), passes as each of its parameters `lists` a list
        its caller ties to the update ops; False where nothing calls it."""
        params = [p.name.value for p in function.params.params]
        name = function.name.value
        calls = [c for c in self._index.of(cst.Call)
                 if (_dotted(c.func) or "").rsplit(".", 1)[-1] == name]
        method = bool(params) and params[0] in ("self", "cls")
        elsewhere = [self.project.lists_tied_elsewhere(name, p, params.index(p), method)
                     for p in lists]
        if not calls and not any(seen for seen, _ in elsewhere):
            return False
        if not all(tied for _, tied in elsewhere):
            return False
        for call in calls:
            caller = self._scope(self._index.scope[call])
            positional = [a.value for a in call.args if a.keyword is None and not a.star]
            keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
            if any(a.star for a in call.args):
                return False
            shift = 1 if params and params[0] in ("self", "cls") and isinstance(
                call.func, cst.Attribute) else 0
            for parameter in lists:
                at = params.index(parameter) - shift
                value = keywords.get(parameter, positional[at] if 0 <= at < len(positional)
                                     else None)
                passed = _dotted(value) if value is not None else None
                if passed is None or not any(
                        self._is(tie, OP_TIES) and tie is not call and any(
                            passed in _words(a.value).names for a in tie.args) and any(
                            _mentions_update_ops(a.value, caller.update_names, {passed})
                            for a in tie.args)
                        for tie in caller.calls):
                    return False
        return True

    def _tied_through_a_callback(self, site: _TrainCall, held: set[str]) -> bool:
        """Whether the train op is returned by a function nested in another (a callback)
        that the enclosing function hands, with a list it is given, to a function that
        calls the callback and adds to that list, and every call of the enclosing function
        passes a list its caller ties to the update ops (tf_cnn_benchmarks'
        `def get_apply_gradients_ops_func(): return [opt.apply_gradients(grads)]`, handed
        to `variable_mgr_util.append_gradients_with_loss_scale(training_ops,
        get_apply_gradients_ops_func, ...)`, the caller's `tf.group(*(training_ops +
        update_ops))`)."""
        callback = site.scope
        if not isinstance(callback, cst.FunctionDef):
            return False
        returned = site.statement is not None and any(
            isinstance(small, cst.Return) for small in site.statement.body)
        if not returned:
            returns = _Returns(callback)
            callback.visit(returns)
            returned = bool(held) and any(_words(v).names & held for v in returns.values)
        enclosing = self.parent(callback)
        while enclosing is not None and not isinstance(
                enclosing, (cst.FunctionDef, cst.Lambda, cst.ClassDef, cst.Module)):
            enclosing = self.parent(enclosing)
        if not returned or not isinstance(enclosing, cst.FunctionDef):
            return False
        params = [p.name.value for p in enclosing.params.params]
        name = callback.name.value
        for call in self._scope(enclosing).calls:
            given: dict[str | int, str] = {}
            for at, arg in enumerate(a for a in call.args if a.keyword is None):
                if not arg.star and isinstance(arg.value, cst.Name):
                    given[at] = arg.value.value
            for arg in call.args:
                if arg.keyword is not None and isinstance(arg.value, cst.Name):
                    given[arg.keyword.value] = arg.value.value
            if name not in given.values():
                continue
            lists = [p for p in given.values() if p in params and p not in ("self", "cls")]
            callee = _dotted(call.func)
            if callee is None:
                continue
            for into in lists:
                if self.project.fills_list_from_callback(
                        callee, self.position(call)[0], given, into, name) and (
                        self._callers_tie(enclosing, [into])):
                    return True
        return False

    def _tied_inline(self, site: _TrainCall, scope: _Scope) -> bool:
        """Whether the train op is built as an argument of a call that ties it to the
        update ops (`tf.group(opt.minimize(loss), *update_ops)`)."""
        child, parent = site.call, self.parent(site.call)
        while parent is not None and not isinstance(
                parent, (cst.BaseStatement, cst.Lambda, cst.FunctionDef)):
            if self._is(parent, OP_TIES) and any(
                    a is not child and _mentions_update_ops(a.value, scope.update_names)
                    for a in parent.args):
                return True
            child, parent = parent, self.parent(parent)
        return False

    def _waiting_loss_kept(self, site: _TrainCall, scope: _Scope) -> bool:
        """Whether the train op's gradients come from a loss rebuilt to wait on the update
        ops (`with control_dependencies([barrier]): loss = tf.identity(loss)`, or
        `with_dependencies(update_ops, loss)`) that the code also keeps for the step to
        fetch (a collection, a summary, a return, an attribute): fetching that loss with the
        train op runs the updates (youtube-8m's train.py). TF's gradients do not read a
        loss whose shape is known, so a waiting loss used for its gradients alone does not
        run them (barrier_on_the_loss_gradients_only)."""
        own = set(site.statement.body) if site.statement else set()
        smalls = [small for small in self._index.of(cst.Assign, cst.AnnAssign, cst.AugAssign,
                                                    scope=site.scope)
                  if small.value is not None and small not in own]
        built = self.code_range(site.call).start.line
        barriers = frozenset({"no_op", "group", "get_collection"})
        waiting: set[str] = set()
        for small in smalls:
            value = small.value
            # (a loss made to wait after the train op was built is not the one it took)
            if self._is(value, barriers) or self.code_range(small).start.line > built:
                continue
            if (set(scope.blocks).intersection(self._index.withs[small])
                    or (self._is(value, frozenset({"with_dependencies", "identity"}))
                        and _mentions_update_ops(value, scope.update_names))):
                waiting |= set(_assigned(small))
        if not waiting:
            return False
        gradients_of = frozenset({"gradients", "compute_gradients"})
        loss, grads = set(waiting), set()
        grew = True
        while grew:
            grew = False
            for small in smalls:
                targets = set(_assigned(small)) - loss - grads
                if not targets:
                    continue
                names = _words(small.value).names
                if self._is(small.value, gradients_of):
                    into = grads if names & loss else None
                else:
                    into = loss if names & loss else grads if names & grads else None
                if into is not None:
                    into |= targets
                    grew = True
            for targets, names in _loop_targets(site.scope):  # for grad, var in grads:
                into = loss if names & loss else grads if names & grads else None
                if into is not None and targets - into:
                    into |= targets
                    grew = True
            for call in scope.calls:  # tower_losses.append(loss)
                if (isinstance(call.func, cst.Attribute)
                        and call.func.attr.value in ("append", "extend", "add", "insert")):
                    owner = _dotted(call.func.value)
                    names = {n for a in call.args for n in _words(a.value).names}
                    for into in (loss, grads):
                        if owner is not None and owner not in loss | grads and names & into:
                            into.add(owner)
                            grew = True
                            break
        built_from = {n for a in site.call.args for n in _words(a.value).names}
        if not built_from & (loss | grads):
            return False
        for call in scope.calls:
            if call is not site.call and self._is(
                    call, frozenset({"add_to_collection", "add_to_collections", "scalar"})) and any(
                        _words(a.value).names & loss for a in call.args):
                return True
        for small in smalls:  # self.loss = loss
            if (any("." in t for t in _assigned(small)) and _words(small.value).names & loss
                    and not self._is(small.value, gradients_of)):
                return True
        returns = _Returns(site.scope)
        if isinstance(site.scope, cst.FunctionDef):
            site.scope.visit(returns)
        return any(_words(value).names & loss for value in returns.values)

    def _waiting_loss_kept_by_enclosing(self, site: _TrainCall) -> bool:
        """Whether a function enclosing the train op's own (a nested function handed to
        `tf.cond`, OpenSeq2Seq's accumulated apply in `optimize_loss`) rebuilds the loss to
        wait on the update ops and keeps it for the step to fetch, the train op built from
        that loss's gradients, which the nested function reads from the enclosing one."""
        child, parent = site.scope, self.parent(site.scope)
        while parent is not None:
            if isinstance(parent, cst.FunctionDef) and child is parent.body:
                outer = dataclasses.replace(site, statement=None, withs=[], scope=parent)
                if self._waiting_loss_kept(outer, self._scope(parent)):
                    return True
            child, parent = parent, self.parent(parent)
        return False

    # -- findings and fixes -------------------------------------------------------------------

    def _spelling(self, module: cst.Module) -> tuple[str | None, bool, str | None]:
        """The module the fix spells TF1's API with (`tf`, `tf.compat.v1`, `ops`), in this
        file's spelling, and whether that needs `import tensorflow.compat.v1 as tf`; or None
        and why it cannot be spelled."""
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
        return m, needs_import, None

    def _key_spelling(self, key: str, path: str, constant: str | None) -> str | None:
        """How this file names a collection's key: the string where the code that adds to
        it spells one; else its module constant, by its name in that module, or through
        this file's import of it (`import model` -> `model.KEY`, `from model import KEY`,
        `from model import *`); None where this file reaches no name of it."""
        if constant is None:
            return repr(key)
        project, label = self.project.project, self.project.label
        bindings = _bindings(self._tree.code)
        if path == label:
            return constant if bindings.get(constant) == 1 else None
        part = project.parts.get(label)
        for bound, module, imported, level in (part or {}).get("imports", ()):
            if bound == "*":
                # (what a star import binds: the module's public names, where no __all__
                # says otherwise)
                if (project.module(label, module, level) == path and not bindings.get(constant)
                        and not constant.startswith("_")
                        and "__all__" not in project.parts[path]["globals"]):
                    return constant
                continue
            if bindings.get(bound) != 1:  # (rebound: `model = model.Model()`)
                continue
            if imported == constant and project.module(label, module, level) == path:
                return bound
            if imported is None and "." not in module and project.module(
                    label, module, level) == path:
                return f"{bound}.{constant}"
            if imported is not None and project.module(
                    label, f"{module}.{imported}".strip("."), level) == path:
                return f"{bound}.{constant}"
        return None

    def _judge(self, site: _TrainCall, batch_norm: str | None,
               unrun: list[tuple[str, str, int, str | None]], tf_module: str | None,
               needs_import: bool, problem: str | None) -> None:
        if self.suppressed(site.call):
            return
        covered, late = self._covered(site) if batch_norm is not None else (True, [])
        if covered:
            batch_norm, late = None, []
            if not unrun:
                return
        what = self.code(site.call.func)
        collections, said = [], []
        if batch_norm is not None:
            said.append(f"train op built without UPDATE_OPS: batch-norm moving averages "
                        f"never update (seed 003): {what}(...) does not run the update ops "
                        f"of {batch_norm}")
            collections.append(f"{tf_module}.get_collection({tf_module}.GraphKeys.UPDATE_OPS)")
        if late:
            lines = ", ".join(str(self.position(b)[0]) for b in late)
            where = "line" if len(late) == 1 else "lines"
            said[-1] += (f"; control_dependencies over them opened after the train op was "
                         f"built ({where} {lines}) does nothing for it")
        unset = self._unset_blocks(site) if batch_norm is not None else []
        if unset:
            said[-1] += "; " + "; ".join(
                f"control_dependencies({name}) (line {self.position(block)[0]}) waits on "
                f"nothing: {name} is None with the script's flag defaults"
                for block, name in unset)
        here = self.project.label
        by_key: dict[str, list[tuple[str, int, str | None]]] = {}
        for key, path, line, constant in unrun:
            by_key.setdefault(key, []).append((path, line, constant))
        for key, sites in by_key.items():
            path, line, constant = sites[0]
            lines: dict[str, list[str]] = {}
            for where, at, _ in sites:
                lines.setdefault(where, []).append(str(at))
            at = "; ".join(f"{'line' if len(ats) == 1 else 'lines'} {', '.join(ats)}"
                           if where == here else f"{where}:{', '.join(ats)}"
                           for where, ats in lines.items())
            said.append(f"train op built without its collected moving averages: they never "
                        f"update: {what}(...) does not run the moving-average updates added "
                        f"to collection {key!r} ({at}), which no code reads with "
                        f"get_collection")
            spelled = self._key_spelling(key, path, constant)
            built = self.position(site.call)[0]
            if any(where == here and at > built and unit_at(self.project.part, at)
                   == unit_at(self.project.part, built) for where, at, _ in sites):
                problem = problem or (f"its function adds to collection {key!r} after it "
                                      f"builds the train op; build the train op after them, "
                                      f"under control_dependencies(get_collection(...))")
            if spelled is None:
                problem = problem or (f"this file names no constant of collection {key!r} "
                                      f"({constant} in {path}); build the train op under "
                                      f"control_dependencies(get_collection(...)) by hand")
            collections.append(f"{tf_module}.get_collection({spelled})")
        message = "; ".join(said)
        spelling = f"{tf_module}.control_dependencies({' + '.join(collections)})"
        if site.call in self._discarding:
            # A block over the collection would run the updates, but the call's own
            # argument says which updates its train op runs: the argument is what to change.
            problem = ("its update_ops= argument names none of them; drop it (optimize_loss "
                       "then runs the UPDATE_OPS collection) or pass them")
        elif site.in_lambda:
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


