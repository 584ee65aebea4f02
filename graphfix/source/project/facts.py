"""The facts a file's part records, per unit where a rule asks per unit: the batch norms
that train and feed UPDATE_OPS, the lists of UPDATE_OPS collected and never read, the
variables created where the caller's device scope places them, what a unit binds names to
(the instances its method calls go to), the TF names the module binds for the modules
importing it; and, read when a rule asks, the batch-norm settings that make the moving
statistics trainable."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from graphfix.source.project.dynamic_imports import flag_default
from graphfix.source.project.names import AstTfNames, argument, dotted
from graphfix.source.syntax import strings_in
from graphfix.source.vocabulary import (
    ARG_SCOPE,
    BATCH_NORM_LAYER,
    BATCH_NORMS,
    COLLECTION_ADDERS,
    COLLECTION_GETTERS,
    CREATES_VARIABLES,
    DEVICE_CALLS,
    LIBRARY_BATCH_NORMS,
    LIBRARY_BUILD_METHOD,
    LIBRARY_VARIABLE_MODULES,
    METRIC_CALLS,
    OP_TIES,
    SLIM_NET_NAME,
    SLIM_NETS_NORMALIZED_BY_LAYERS,
    TF_COLLECTION_KEYS,
    UPDATE_OPS_ADDED,
    UPDATE_OPS_NAME,
    canonical_tf_name,
    library_name,
)

# -- library modules: made by a constructor, connected by a call -----------------------------


def library_module(names, func: object) -> str | None:
    """The library module class a callee names (`snt.Linear` for `snt.Linear` after `import
    sonnet as snt`, `snt.nets.MLP`), through the file's imports; None for any other callee.
    `names`: the file's names, of either syntax tree (their `qualified`)."""
    for qualified in sorted(names.qualified(func)):
        found = library_name(qualified)
        if found is not None:
            return found
    return None


class ModuleObjects:
    """The library module objects of one unit of code (stdlib `ast`), read in program
    order: a call connects a module when it calls its constructor's result
    (`snt.Linear(10)(x)`) or a name bound to one (`net = snt.Module(build)`, then
    `net(x)`). Only a module's first connection makes its variables; later calls of the
    same object reuse them (Sonnet's modules are templates)."""

    def __init__(self, names: AstTfNames):
        self.names = names
        self._bound: dict[str, str | None] = {}  # name -> the module class it holds
        self._made_by: dict[str, str | None] = {}  # name -> the callee it holds a call of
        self._connected: set[str] = set()

    def bind(self, target: str, callee: ast.expr | None) -> None:
        """`target = callee(...)` (`callee` None: bound to anything else)."""
        module = library_module(self.names, callee) if callee is not None else None
        if self._bound.get(target, module) != module:
            module = None  # bound to two things: not known
        self._bound[target] = module
        spelled = dotted(callee) if callee is not None else None
        self._made_by[target] = (spelled if self._made_by.get(target, spelled) == spelled
                                 else None)
        self._connected.discard(target)

    def builds(self, call: ast.Call) -> str | None:
        """The build method a call of an object runs, as `Class._build` spelled where the
        object is made (`ConvNet()(x)`, or `net(x)` after `net = ConvNet()`): a project's
        Sonnet module (an `snt.AbstractModule` subclass) runs its `_build` when called, and
        a name the project resolves to nothing is no call of the project's. None where the
        call is of no object made here, or of a library's own module."""
        if isinstance(call.func, ast.Call):
            made, module = dotted(call.func.func), library_module(self.names, call.func.func)
        elif isinstance(call.func, ast.Name):
            made, module = self._made_by.get(call.func.id), self._bound.get(call.func.id)
        else:
            return None
        return None if made is None or module is not None else f"{made}.{LIBRARY_BUILD_METHOD}"

    def connects(self, call: ast.Call) -> str | None:
        """The module class `call` connects for the first time; None for no module, or
        one connected before."""
        if isinstance(call.func, ast.Call):
            return library_module(self.names, call.func.func)
        if not isinstance(call.func, ast.Name):
            return None
        name = call.func.id
        if self._bound.get(name) is None or name in self._connected:
            return None
        self._connected.add(name)
        return self._bound[name]


# -- batch norms: the ones that train and feed UPDATE_OPS ------------------------------------

_UNKNOWN = ast.Name("_unknown_")  # an argument whose value is not visible here
# A tf-slim model function's qualified name (tf_slim.nets, or research/slim's `nets`).
_SLIM_NET = re.compile(rf"(^|\.)nets\.[\w.]*\.({SLIM_NET_NAME.pattern})$")


def _truth(expr: ast.expr | None, default: bool) -> bool:
    """Whether a training flag trains: only a literal False (or 0, or None) does not; a
    variable or a placeholder (`is_training=is_training`) may, so it counts."""
    if expr is None:
        return default
    if isinstance(expr, ast.Constant):
        if expr.value is None or expr.value is False:
            return False
        if type(expr.value) is int:
            return expr.value != 0
    return True


def _feeds_update_ops(expr: ast.expr | None) -> bool:
    """Whether `updates_collections=expr` puts the updates in UPDATE_OPS (None: they run
    in place; another collection: not ours to run)."""
    if expr is None:
        return True
    if isinstance(expr, ast.Constant):
        if expr.value is None:
            return False
        if isinstance(expr.value, (str, bytes)):
            return expr.value == "update_ops"
    if isinstance(expr, (ast.List, ast.Tuple)):
        return any(_feeds_update_ops(e) for e in expr.elts)
    return True


class _BatchNorms(ast.NodeVisitor):
    """Every batch norm of a module that trains and feeds UPDATE_OPS, as [name, line]:
    calls, slim's `normalizer_fn=`, `slim.arg_scope` defaults, tf.layers' layer objects,
    slim nets, and a batch norm written by hand that adds its updates to UPDATE_OPS
    (`_adds_to_update_ops`)."""

    def __init__(self, names: AstTfNames, dicts: dict[str, ast.expr],
                 returns: dict[str, ast.expr] | None = None):
        self.names, self.dicts, self.returns = names, dicts, returns or {}
        self.found: list[tuple[str, int]] = []
        self._defaults: list[dict[str, ast.expr]] = []  # arg_scope([batch_norm], ...)
        self._layers: list[ast.Call] = []  # tf.layers.BatchNormalization(...) constructors
        self._modules: list[ast.Call] = []  # a library's batch-norm modules' constructors
        self._bound: dict[ast.Call, str] = {}  # a constructor -> the name it is assigned to
        self._called: set[ast.Call] = set()  # constructors called right away: (...)(x)
        self._layer_calls: dict[str, list[ast.Call]] = {}  # calls of anything, by callee
        self._with_of: dict[ast.Call, ast.With] = {}  # a `with` item's call -> the with
        self.flags: dict[int, ast.expr | None] = {}  # a found batch norm's line -> its flag
        self._functions: list[ast.AST] = []  # the functions the walk is in, innermost last

    def _dict(self, expr: ast.expr | None, depth: int = 0) -> dict | None:
        """The keys and values of a dict the code spells out: `{"is_training": x}`,
        `dict(is_training=x)`, a name bound to one, or a call of the module's function that
        returns one (`batch_norm_params(is_training)`). None when not visible."""
        if depth > 5 or expr is None:
            return None
        if isinstance(expr, ast.Name) and expr.id in self.dicts:
            return self._dict(self.dicts[expr.id], depth + 1)
        if isinstance(expr, ast.Dict):
            out: dict[str, ast.expr] = {}
            for key, value in zip(expr.keys, expr.values):
                if key is None:  # **spread
                    inner = self._dict(value, depth + 1)
                    if inner is None:
                        return None
                    out.update(inner)
                elif isinstance(key, ast.Constant) and isinstance(key.value, (str, bytes)):
                    out[str(key.value)] = value
            return out
        if (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name)
                and expr.func.id in self.returns):  # batch_norm_params(is_training)
            return self._dict(self.returns[expr.func.id], depth + 1)
        if (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name)
                and expr.func.id == "dict"):
            out = {}
            for given in expr.args:
                inner = self._dict(given, depth + 1)
                if inner is None:
                    return None
                out.update(inner)
            for given in expr.keywords:
                if given.arg is not None:
                    out[given.arg] = given.value
                else:
                    inner = self._dict(given.value, depth + 1)
                    if inner is None:
                        return None
                    out.update(inner)
            return out
        return None

    def _kwargs(self, call: ast.Call) -> dict[str, ast.expr]:
        """Keyword arguments of a call, `**params` spelled out (key `**`: `_UNKNOWN`, a
        `**` that is not visible, so any key may be set)."""
        out: dict[str, ast.expr] = {}
        for given in call.keywords:
            if given.arg is None:
                inner = self._dict(given.value)
                out.update({"**": _UNKNOWN} if inner is None else inner)
            else:
                out[given.arg] = given.value
        return out

    def _scope_defaults(self) -> dict[str, ast.expr]:
        merged: dict[str, ast.expr] = {}
        for defaults in self._defaults:
            merged.update(defaults)
        return merged

    def _record(self, name: str, node: ast.expr, settings: dict, call: ast.Call | None = None):
        training, position, default, updates = BATCH_NORMS[name]
        positional = call is not None and not any(isinstance(a, ast.Starred) for a in call.args)
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
            self.found.append((name, node.lineno))
            self.flags[node.lineno] = trains

    def _over_batch_norm(self, call: ast.expr) -> bool:
        """Whether `call` is an `arg_scope` whose list names a batch norm."""
        if not (isinstance(call, ast.Call) and self.names.canonical(call.func) == ARG_SCOPE
                and call.args):
            return False
        listed = call.args[0]
        elements = listed.elts if isinstance(listed, (ast.List, ast.Tuple)) else []
        return any(self.names.canonical(e) in BATCH_NORMS for e in elements)

    def _visit_with(self, node) -> None:
        defaults: dict[str, ast.expr] = {}
        for item in node.items:
            call = item.context_expr
            if isinstance(call, ast.Call):
                self._with_of[call] = node
            if self._over_batch_norm(call):
                defaults.update(self._kwargs(call))
        self._defaults.append(defaults)
        self.generic_visit(node)
        self._defaults.pop()

    visit_With = visit_AsyncWith = _visit_with

    def _nested_defaults(self, call: ast.Call) -> dict[str, ast.expr]:
        """For an `arg_scope(..., normalizer_fn=<batch norm>)` opened by a `with`, the
        defaults of the arg scopes over a batch norm opened inside that `with` (outer
        first): the scope it gives back, where the layers call the batch norm, holds them
        too (`with arg_scope([conv2d], normalizer_fn=batch_norm): with arg_scope([batch_norm],
        **params) as sc: return sc`)."""
        node = self._with_of.get(call)
        merged: dict[str, ast.expr] = {}
        if node is None:
            return merged
        for inner in ast.walk(node):
            if inner is not node and isinstance(inner, (ast.With, ast.AsyncWith)):
                for item in inner.items:
                    if self._over_batch_norm(item.context_expr):
                        merged.update(self._kwargs(item.context_expr))
        return merged

    def _visit_function(self, node) -> None:
        self._functions.append(node)
        self.generic_visit(node)
        self._functions.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = _visit_function

    def _adds_to_update_ops(self, call: ast.Call) -> bool:
        """Whether `call` adds an op to UPDATE_OPS (`tf.add_to_collection(
        tf.GraphKeys.UPDATE_OPS, update_moving_mean)`, the batch norm written by hand) that
        nothing else in its function reads: an op also read there (a control dependency, a
        return) runs that way."""
        called = _last(self.names, call.func)
        if called not in COLLECTION_ADDERS:
            return False
        given = argument(call, "names" if called == "add_to_collections" else "name", 0)
        keys = (given.elts if called == "add_to_collections"
                and isinstance(given, (ast.List, ast.Tuple)) else [given])
        # (a bare name may be a constant of the project's own collection: `UPDATE_OPS =
        # 'resnet_update_ops'`; that one is `collection_facts`')
        if not any(_names_update_ops(key) and not isinstance(key, ast.Name) for key in keys):
            return False
        value = argument(call, "value", 1)
        if isinstance(value, ast.Name) and self._functions:
            reads = [n for n in ast.walk(self._functions[-1]) if isinstance(n, ast.Name)
                     and n.id == value.id and isinstance(n.ctx, ast.Load)]
            return len(reads) == 1
        return value is not None

    def visit_Assign(self, node: ast.Assign) -> None:
        target = dotted(node.targets[0]) if len(node.targets) == 1 else None
        if isinstance(node.value, ast.Call) and target is not None:
            self._bound[node.value] = target
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = self.names.canonical(node.func)
        if name in BATCH_NORMS:
            self._record(name, node, {**self._scope_defaults(), **self._kwargs(node)}, node)
        normalizer = argument(node, "normalizer_fn", None)
        if normalizer is not None and self.names.canonical(normalizer) in BATCH_NORMS:
            params_arg = argument(node, "normalizer_params", None)
            params = self._dict(params_arg) if params_arg is not None else {}
            if params is None:
                params = {"**": _UNKNOWN}
            nested = self._nested_defaults(node) if name == ARG_SCOPE else {}
            self._record(self.names.canonical(normalizer), node,
                         {**self._scope_defaults(), **nested, **params})
        if name == BATCH_NORM_LAYER:
            self._layers.append(node)
        if library_module(self.names, node.func) in LIBRARY_BATCH_NORMS:
            self._modules.append(node)
        if (isinstance(node.func, ast.Call)
                and library_module(self.names, node.func.func) in LIBRARY_BATCH_NORMS):
            self._called.add(node.func)
            self._module_connected(node.func, [node])
        if (isinstance(node.func, ast.Call)
                and self.names.canonical(node.func.func) == BATCH_NORM_LAYER):
            self._called.add(node.func)
            if _truth(argument(node, "training", 1), False):  # BatchNormalization()(x, True)
                self.found.append((BATCH_NORM_LAYER, node.lineno))
        if self._adds_to_update_ops(node):
            self.found.append((UPDATE_OPS_ADDED, node.lineno))
        callee = dotted(node.func)
        if callee is not None:
            self._layer_calls.setdefault(callee, []).append(node)
        if any(_SLIM_NET.search(q) for q in self.names.qualified(node.func)):
            if _truth(argument(node, "is_training", None), True):
                self.found.append((dotted(node.func) or "slim net", node.lineno))
        self.generic_visit(node)

    def _module_connected(self, constructor: ast.Call, calls: list[ast.Call]) -> None:
        """Record a library batch-norm module (`snt.BatchNorm(...)`) that feeds UPDATE_OPS
        (its constructor's collection) and trains in one of its `calls` (its call's
        `is_training`; with no call visible here, it may)."""
        name = library_module(self.names, constructor.func)
        training, at, collection, default = LIBRARY_BATCH_NORMS[name]
        given = self._kwargs(constructor)
        updates = given.get(collection, given.get("**"))
        if (_feeds_update_ops(updates) if updates is not None else default == "update_ops") and (
                not calls or any(_truth(argument(c, training, at), True) for c in calls)):
            self.found.append((name, constructor.lineno))

    def finish(self) -> list[tuple[str, int]]:
        for module in self._modules:
            if module not in self._called:
                self._module_connected(module,
                                       self._layer_calls.get(self._bound.get(module, ""), []))
        for layer in self._layers:
            if layer in self._called:
                continue
            calls = self._layer_calls.get(self._bound.get(layer, ""), [])
            # A layer object whose calls are not visible here may train: it counts.
            if not calls or any(_truth(argument(c, "training", 1), False) for c in calls):
                self.found.append((BATCH_NORM_LAYER, layer.lineno))
        self.found.sort(key=lambda found: found[1])
        return self.found


def _dict_bindings(tree: ast.Module) -> dict[str, ast.expr]:
    """What each name may hold a dict from: its last `name = {...}`, `dict(...)`, call or
    name assignment in the file."""
    dicts: dict[str, ast.Assign] = {}  # a name -> its last assignment in the file
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, (ast.Dict, ast.Call, ast.Name))):
            name = node.targets[0].id
            if name not in dicts or (dicts[name].lineno, dicts[name].col_offset) < (
                    node.lineno, node.col_offset):
                dicts[name] = node
    return {n: a.value for n, a in dicts.items()}


def _dict_returns(tree: ast.Module) -> dict[str, ast.expr]:
    """What each function of a module named once there returns, where it has one `return`
    of a value: `def batch_norm_params(t): return {"updates_collections": None, ...}`."""
    functions: dict[str, list] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.setdefault(node.name, []).append(node)
    returns = {}
    for name, defs in functions.items():
        if len(defs) != 1:
            continue
        values = [n.value for n in own_nodes(defs[0]) if isinstance(n, ast.Return)]
        if len(values) == 1 and values[0] is not None:
            returns[name] = values[0]
    return returns


def batch_norms(tree: ast.Module, names: AstTfNames | None = None) -> list[tuple[str, int]]:
    """The batch norms of a module that train and put their updates in UPDATE_OPS, as
    (name as the vocabulary spells it, line), in line order."""
    finder = _BatchNorms(names or AstTfNames(tree), _dict_bindings(tree), _dict_returns(tree))
    finder.visit(tree)
    frozen = slim_nets_frozen_by_normalizer_params(tree, finder)
    return [found for found in finder.finish() if found not in frozen]


# -- batch norms frozen by a scope entered inside, or by their layers' normalizer_params -----


def _pins_training_off(settings: dict[str, ast.expr] | None, norms: list[str | None]) -> bool:
    """Whether `settings` (keywords, dicts spelled out) set the training flag of every one
    of the batch norms `norms` to a literal False."""
    keys = {BATCH_NORMS[n].training for n in norms if n in BATCH_NORMS}
    return bool(settings is not None and keys) and all(
        key in settings and not _truth(settings[key], True) for key in keys)


def _freezing_scope(finder: _BatchNorms, call: ast.expr) -> bool:
    """Whether `call` is an arg_scope over batch norms that sets each one's training flag to
    a literal False (`arg_scope([slim.batch_norm], is_training=False)`)."""
    if not finder._over_batch_norm(call):
        return False
    listed = [finder.names.canonical(e) for e in call.args[0].elts]
    return _pins_training_off(finder._kwargs(call), listed)


def _frozen_inside(finder: _BatchNorms, node: ast.With | ast.AsyncWith, item: int) -> bool:
    """Whether all the code under item `item` of a `with` is under an arg_scope, entered
    after it, that freezes batch norm (`_freezing_scope`): a later item of the same `with`,
    or one of the `with` blocks each the only statement of the one before (the innermost
    arg_scope wins). A layer's `normalizer_params` set on the way stops the chain: a
    keyword at the layer's call of its batch norm beats every arg_scope default."""
    items = [i.context_expr for i in node.items[item + 1:]]
    body = node.body
    while True:
        for call in items:
            if _freezing_scope(finder, call):
                return True
            if isinstance(call, ast.Call) and any(
                    k.arg in ("normalizer_params", None) for k in call.keywords):
                return False
        if len(body) != 1 or not isinstance(body[0], (ast.With, ast.AsyncWith)):
            return False
        items, body = [i.context_expr for i in body[0].items], body[0].body


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def scope_function_batch_norms(tree: ast.Module, names: AstTfNames) -> list[list]:
    """The batch norms of a module (`batch_norms`) that a module-level function's arg_scope
    gives the layers (`arg_scope([slim.conv2d], normalizer_fn=slim.batch_norm)`), their
    training flag left to the arg_scopes over batch norm, not set by the layers'
    `normalizer_params`: the scope the function gives back (mobilenet's `training_scope`)
    trains only where no arg_scope entered inside it freezes batch norm. As [line,
    function name]."""
    finder = _BatchNorms(names, _dict_bindings(tree), _dict_returns(tree))
    finder.visit(tree)
    lines = {line for _, line in finder.finish()}
    found = []
    for function in tree.body:
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in own_nodes(function):
            if not (isinstance(node, ast.Call) and node.lineno in lines
                    and names.canonical(node.func) == ARG_SCOPE):
                continue
            normalizer = names.canonical(argument(node, "normalizer_fn", None) or _UNKNOWN)
            if normalizer not in BATCH_NORMS:
                continue
            given = argument(node, "normalizer_params", None)
            settings = {} if given is None else finder._dict(given)
            if (settings is not None and "**" not in settings
                    and BATCH_NORMS[normalizer].training not in settings):
                found.append([node.lineno, function.name])
    return sorted(found)


def scope_uses(tree: ast.Module, names: AstTfNames, function: str) -> tuple[list[int], list[str]]:
    """How code of a module uses the scope `function` gives back: the lines where it is
    used other than entered with batch norm frozen inside (`with arg_scope(
    training_scope()): with arg_scope([slim.batch_norm], is_training=False) as sc: return
    sc`, `_frozen_inside`), a reference that is not a call (a callback; a string but an
    `__all__` entry) counting; and the module-level functions that only return its call
    (`def training_scope(**kwargs): return lib.training_scope(**kwargs)`), whose own uses
    say. TF's own functions of that name are not it."""
    parents = _parents(tree)
    finder = _BatchNorms(names, _dict_bindings(tree), _dict_returns(tree))
    unfrozen, wrappers = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value == function:
            holder = parents.get(parents.get(node))
            if not (isinstance(holder, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__all__" for t in holder.targets)):
                unfrozen.append(node.lineno)
            continue
        spelled = (node.id if isinstance(node, ast.Name) else
                   node.attr if isinstance(node, ast.Attribute) else None)
        if (spelled != function or not isinstance(node.ctx, ast.Load)
                or names.canonical(node) is not None):
            continue
        call = parents.get(node)
        if not (isinstance(call, ast.Call) and call.func is node):
            unfrozen.append(node.lineno)
            continue
        outer = parents.get(call)
        item = parents.get(outer)
        if (isinstance(outer, ast.Call) and names.canonical(outer.func) == ARG_SCOPE
                and call in outer.args and isinstance(item, ast.withitem)
                and _frozen_inside(finder, parents[item], parents[item].items.index(item))):
            continue
        owner = parents.get(outer)
        if (isinstance(outer, ast.Return) and isinstance(owner, ast.FunctionDef)
                and parents.get(owner) is tree):
            wrappers.append(owner.name)
            continue
        unfrozen.append(node.lineno)
    return unfrozen, wrappers


def _normalizer_pinned(finder: _BatchNorms, call: ast.Call) -> bool | None:
    """What an arg_scope that gives layers a `normalizer_fn` says of their batch norms:
    True where it is a batch norm whose `normalizer_params` set its training flag to a
    literal False, False where it is another (or trains), None where it gives none."""
    normalizer = argument(call, "normalizer_fn", None)
    if normalizer is None:
        return None
    name = finder.names.canonical(normalizer)
    if name not in BATCH_NORMS:
        return False
    return _pins_training_off(finder._dict(argument(call, "normalizer_params", None)), [name])


def slim_nets_frozen_by_normalizer_params(tree: ast.Module,
                                          finder: _BatchNorms) -> set[tuple[str, int]]:
    """The slim nets found in a module (`_BatchNorms`) whose only batch norms are their
    layers' `normalizer_fn` (`SLIM_NETS_NORMALIZED_BY_LAYERS`: resnet_v1) built under an
    arg_scope whose `normalizer_params` set the training flag to a literal False: a
    keyword of the layer's call of its batch norm, it beats the net's own
    `arg_scope([batch_norm], is_training=is_training)`. The arg_scope is given in a `with`
    around the call, or is the one a function of the module entered there gives back
    (`with arg_scope(resnet_arg_scope()):`, `self.resnet_arg_scope()`); the innermost
    one that gives a `normalizer_fn` decides, and a scope from elsewhere stops the search
    (it may give one)."""
    if not any(SLIM_NETS_NORMALIZED_BY_LAYERS.fullmatch(name.rsplit(".", 1)[-1])
               for name, _ in finder.found):
        return set()  # (the walks below only where such a net was found)
    functions: dict[str, list] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.setdefault(node.name, []).append(node)
    parents = _parents(tree)
    frozen = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and any(
                _SLIM_NET.search(q) and SLIM_NETS_NORMALIZED_BY_LAYERS.fullmatch(
                    q.rsplit(".", 1)[-1]) for q in finder.names.qualified(node.func))):
            continue
        around, pinned = parents.get(node), None
        while around is not None and pinned is None:
            if isinstance(around, (ast.With, ast.AsyncWith)):
                for item in reversed(around.items):
                    call = item.context_expr
                    if not (isinstance(call, ast.Call) and pinned is None
                            and finder.names.canonical(call.func) == ARG_SCOPE and call.args):
                        continue
                    given = call.args[0]
                    if isinstance(given, (ast.List, ast.Tuple)):
                        pinned = _normalizer_pinned(finder, call)
                        continue
                    named = dotted(given.func) if isinstance(given, ast.Call) else None
                    short = named.rsplit(".", 1)[-1] if named else None
                    if (named not in (short, f"self.{short}")
                            or len(functions.get(short, ())) != 1):
                        pinned = False
                        continue
                    said = [_normalizer_pinned(finder, c) for c in own_nodes(functions[short][0])
                            if isinstance(c, ast.Call)
                            and finder.names.canonical(c.func) == ARG_SCOPE]
                    said = [s for s in said if s is not None]
                    pinned = all(said) if said else None
            around = parents.get(around)
        if pinned:
            frozen.add((dotted(node.func) or "slim net", node.lineno))
    return frozen


def _landing(function: ast.FunctionDef | ast.AsyncFunctionDef,
             parameter: str) -> tuple[int | None, list[int]]:
    """A parameter's position among a function's positional parameters (None for a
    keyword-only one), and the positions a call's positional argument for it may take: its
    own, one less for a method called through its instance, any before it for a decorated
    function (a decorator may take leading parameters)."""
    at = [a.arg for a in [*function.args.posonlyargs, *function.args.args]]
    if parameter not in at:
        return None, []
    position = at.index(parameter)
    if function.decorator_list:
        return position, list(range(position + 1))
    if at[0] in ("self", "cls"):
        return position, [position - 1, position]
    return position, [position]


def training_switches(tree: ast.Module, names: AstTfNames) -> list[list]:
    """The batch norms of a module (`batch_norms`) that train only where their function is
    told to: the training flag is a parameter of the function the batch norm is built in,
    its default a literal False (or 0, or None), or no default (every call gives it: a
    helper `block(inputs, is_training)`), never rebound there (ctpn's
    `def batch_normalization(self, input, name, relu=True, is_training=False)`). As
    [line, function name, parameter, its position among the function's positional
    parameters or None for a keyword-only one, the positions a call's positional argument
    for it may take]: its own, one less for a method called through its instance, and any
    before it for a decorated function (a decorator may take leading parameters)."""
    finder = _BatchNorms(names, _dict_bindings(tree), _dict_returns(tree))
    finder.visit(tree)
    finder.finish()
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        positional = [*function.args.posonlyargs, *function.args.args]
        defaults = dict(zip([a.arg for a in positional][-len(function.args.defaults):]
                            if function.args.defaults else [], function.args.defaults))
        defaults.update((a.arg, d) for a, d in zip(function.args.kwonlyargs,
                                                   function.args.kw_defaults) if d is not None)
        parameters = {a.arg for a in [*positional, *function.args.kwonlyargs]}
        rebound = {n.id for n in own_nodes(function)
                   if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        inner = {n.lineno for n in own_nodes(function) if isinstance(n, ast.Call)}
        at = [a.arg for a in positional]
        for line, flag in finder.flags.items():
            if not (line in inner and isinstance(flag, ast.Name) and flag.id in parameters
                    and flag.id not in rebound):
                continue
            if flag.id in defaults and _truth(defaults[flag.id], True):
                continue
            position, landing = _landing(function, flag.id)
            found.append([line, function.name, flag.id, position, landing])
    return sorted(found)


def _names_taking(test: ast.expr, name: str) -> tuple[str, list[str]] | None:
    """How a test on the string `name` holds, where it spells its strings out: ("prefix",
    [...]) for `name.startswith("bn")` (a tuple of prefixes too), ("equal", [...]) for
    `name == "bn"` or `name in ("bn", "norm")`, ("part", [...]) for `"bn" in name`; None
    for any other test."""
    def strings(node):
        elements = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
        if all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in elements):
            return [e.value for e in elements]
        return None

    if (isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute)
            and test.func.attr == "startswith" and isinstance(test.func.value, ast.Name)
            and test.func.value.id == name and len(test.args) == 1 and not test.keywords):
        given = strings(test.args[0])
        return None if given is None else ("prefix", given)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, right = test.left, test.comparators[0]
        if isinstance(test.ops[0], (ast.Eq, ast.In)) and isinstance(left, ast.Name) \
                and left.id == name:
            given = strings(right)
            return None if given is None else ("equal", given)
        if isinstance(test.ops[0], ast.Eq) and isinstance(right, ast.Name) and right.id == name:
            given = strings(left)
            return None if given is None else ("equal", given)
        if isinstance(test.ops[0], ast.In) and isinstance(right, ast.Name) and right.id == name:
            given = strings(left)
            return None if given is None else ("part", given)
    return None


def name_switches(tree: ast.Module, names: AstTfNames) -> list[list]:
    """The batch norms of a module (`batch_norms`) built only in a branch on the name a loop
    over one of its function's parameters takes (`for layer in layer_lists: if
    layer.startswith("batch_norm"):`, xtudbxk/DSRG-tensorflow's build_fc, its layers named
    by the lists its callers spell out). As [line, function name, parameter, its position
    among the function's positional parameters or None for a keyword-only one, how the
    test holds, its strings] (`_names_taking`); a method's `self` or `cls` is not counted
    among them: its callers do not pass it."""
    finder = _BatchNorms(names, _dict_bindings(tree), _dict_returns(tree))
    finder.visit(tree)
    lines = {line for _, line in finder.finish()}
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
        parameters = {*positional, *(a.arg for a in function.args.kwonlyargs)}
        if positional[:1] in (["self"], ["cls"]):
            positional = positional[1:]
        rebound = [n.id for n in own_nodes(function)
                   if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)]
        for loop in own_nodes(function):
            if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name)
                    and isinstance(loop.iter, ast.Name) and loop.iter.id in parameters
                    and loop.iter.id not in rebound and rebound.count(loop.target.id) == 1):
                continue
            for branch in (n for n in ast.walk(loop) if isinstance(n, ast.If)):
                taking = _names_taking(branch.test, loop.target.id)
                if taking is None:
                    continue
                first, last = branch.body[0].lineno, branch.body[-1].end_lineno
                for line in sorted(lines):
                    if first <= line <= last:
                        found.append([line, function.name, loop.iter.id,
                                      positional.index(loop.iter.id)
                                      if loop.iter.id in positional else None, *taking])
    return sorted(found)


def _takes(how: str, strings: list[str], value: str) -> bool:
    if how == "prefix":
        return any(value.startswith(s) for s in strings)
    if how == "equal":
        return value in strings
    return any(s in value for s in strings)


def may_pass_taking(tree: ast.Module, names: AstTfNames, function: str, parameter: str,
                    position: int | None, how: str, strings: list[str]) -> bool:
    """Whether code of a module may call `function` (as `name_switches` gives it) with a
    `parameter` that holds a name its branch takes: anything but a list (or tuple) of
    strings none of which the test takes, given by keyword or at its position, or not
    given (its default); through `*args` or `**kwargs`; or the function named other than as
    a call's callee (a callback: its caller's arguments are not seen). TF's own functions
    of that name are not it."""
    callees = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    for node in ast.walk(tree):
        spelled = (node.id if isinstance(node, ast.Name) else
                   node.attr if isinstance(node, ast.Attribute) else None)
        if (spelled == function and isinstance(node.ctx, ast.Load) and id(node) not in callees
                and names.canonical(node) is None):
            return True
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        func = call.func
        spelled = (func.id if isinstance(func, ast.Name)
                   else func.attr if isinstance(func, ast.Attribute) else None)
        if spelled != function or names.canonical(func) is not None:
            continue
        if any(isinstance(a, ast.Starred) for a in call.args) or any(
                k.arg is None for k in call.keywords):
            return True
        given = [k.value for k in call.keywords if k.arg == parameter]
        if not given and position is not None:
            given = call.args[position:position + 1]
        if not given:
            return True
        for value in given:
            elements = value.elts if isinstance(value, (ast.List, ast.Tuple)) else None
            if elements is None or not all(
                    isinstance(e, ast.Constant) and isinstance(e.value, str)
                    for e in elements):
                return True
            if any(_takes(how, strings, e.value) for e in elements):
                return True
    return False


def _untaken_by_defaults(tree: ast.Module) -> list[tuple[int, int]]:
    """The spans (first, last line) of the branches a run with the file's flag defaults
    does not take: under `if FLAGS.model == "resnet":` (or `"resnet" == FLAGS.model`,
    `FLAGS.model in ("resnet", ...)`) the body where the flag's default is another string,
    the `else` (and every `elif`) where it is that one."""
    spans = []
    for branch in ast.walk(tree):
        if not (isinstance(branch, ast.If) and isinstance(branch.test, ast.Compare)
                and len(branch.test.ops) == 1):
            continue
        left, op, right = branch.test.left, branch.test.ops[0], branch.test.comparators[0]
        if isinstance(op, ast.Eq) and isinstance(left, ast.Constant):
            left, right = right, left
        if not isinstance(op, (ast.Eq, ast.In)):
            continue
        default = flag_default(tree, left)
        elements = right.elts if isinstance(op, ast.In) and isinstance(
            right, (ast.Tuple, ast.List, ast.Set)) else [right]
        if default is None or not all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                                      for e in elements):
            continue
        untaken = branch.orelse if default in [e.value for e in elements] else branch.body
        if untaken:
            spans.append((untaken[0].lineno, untaken[-1].end_lineno))
    return spans


def default_untaken_functions(tree: ast.Module, names: AstTfNames) -> list[str]:
    """The module-level functions of a script that only branches a run with its flag
    defaults does not take name (`_untaken_by_defaults`: `elif FLAGS.cnn_model ==
    "inception_v3": y = _inception_v3(x)` where the flag defaults to "mlp",
    jiankaiwang/distributed_training's cifar10_replica.py): what the script runs when
    started with its defaults, as the project model reads an `importlib` import of a name
    built from them. A function named nowhere, or outside such a branch, is not one."""
    spans = _untaken_by_defaults(tree)
    if not spans:
        return []
    found = []
    for function in tree.body:
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        named = [node.lineno for node in ast.walk(tree)
                 if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load)
                 and (node.id if isinstance(node, ast.Name) else node.attr) == function.name]
        named += [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Constant)
                  and node.value == function.name]
        if named and all(any(first <= line <= last for first, last in spans)
                         for line in named):
            found.append(function.name)
    return found


def names_function(tree: ast.Module, names: AstTfNames, function: str) -> bool:
    """Whether code of a module names `function` (a function's or a method's name): a name
    or an attribute read (`self.net.bn(...)`, a layer chained on a parameter, a callback),
    or a string that is it (`getattr(self, "bn")`). TF's own functions of that name are not
    it; comments and docstrings say nothing."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value == function:
            return True
        spelled = (node.id if isinstance(node, ast.Name) else
                   node.attr if isinstance(node, ast.Attribute) else None)
        if (spelled == function and isinstance(node.ctx, ast.Load)
                and names.canonical(node) is None):
            return True
    return False


def _named_not_called(tree: ast.Module, names: AstTfNames, function: str) -> bool:
    """Whether code of a module names `function` other than as a call's callee (a
    callback: its caller's arguments are not seen); TF's own functions aside."""
    callees = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            callees.add(id(node.func))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            spelled = node.id
        elif isinstance(node, ast.Attribute):
            spelled = node.attr
        else:
            continue
        if spelled != function or not isinstance(node.ctx, ast.Load):
            continue
        if names.canonical(node) is None and id(node) not in callees:
            return True
    return False


def truth_passed(tree: ast.Module, names: AstTfNames, function: str, parameter: str,
                 position: int | None, landing: list[int], default_trains: bool
                 ) -> tuple[bool, int, list[list]]:
    """What code of a module passes `function` (a function's or a method's name, as
    `training_switches` gives it) for its training flag `parameter`: whether it may pass
    anything but a literal False (given by keyword, through `*args` or `**kwargs`,
    positionally where `landing` says it may land, left out where its default trains
    (`default_trains`), or the function named other than as a call's callee: a callback,
    its caller's arguments not seen); how many calls of it there are; and the parameters
    of the calls' own functions that they pass on as the flag (`build_graph(self,
    istrain=True)` calling `batch_norm_relu(net, istrain)`), as [function name,
    parameter, position, landing, whether its default trains], for their own callers to
    decide. TF's own functions of that name are not it."""
    if _named_not_called(tree, names, function):
        return True, 0, []
    return _truth_of_calls(_calls_of(tree, names, function), parameter, landing,
                           default_trains)


def _truth_of_calls(found, parameter: str, landing: list[int], default_trains: bool
                    ) -> tuple[bool, int, list[list]]:
    """`truth_passed`'s answer over calls already found, each (call, the function whose
    own code holds it or None)."""
    forwards: list[list] = []
    calls = 0
    for call, enclosing in found:
        calls += 1
        if any(isinstance(a, ast.Starred) for a in call.args) or any(
                k.arg is None for k in call.keywords):
            return True, calls, []
        given = [k.value for k in call.keywords if k.arg == parameter]
        given += [call.args[at] for at in landing if 0 <= at < len(call.args)]
        if not given and default_trains:
            return True, calls, []
        for value in given:
            if not _truth(value, True):
                continue
            if not (isinstance(value, ast.Name) and enclosing is not None):
                return True, calls, []
            rebound = {n.id for n in own_nodes(enclosing)
                       if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
            arguments = enclosing.args
            defaults = dict(zip([a.arg for a in [*arguments.posonlyargs, *arguments.args]]
                                [-len(arguments.defaults):] if arguments.defaults else [],
                                arguments.defaults))
            defaults.update((a.arg, d) for a, d in zip(arguments.kwonlyargs,
                                                       arguments.kw_defaults) if d is not None)
            parameters = {a.arg for a in [*arguments.posonlyargs, *arguments.args,
                                          *arguments.kwonlyargs]}
            if value.id not in parameters or value.id in rebound:
                return True, calls, []
            at, lands = _landing(enclosing, value.id)
            forwards.append([enclosing.name, value.id, at, lands,
                             value.id in defaults and _truth(defaults[value.id], True)])
    return False, calls, forwards


def truth_passed_to_instances(tree: ast.Module, names: AstTfNames, classes: frozenset[str],
                              parameter: str, position: int | None, default_trains: bool
                              ) -> tuple[bool, int, list[list]]:
    """`truth_passed` for a `__call__` method's training flag: what code of a module passes
    it in the calls of the instances of `classes` (the class and its subclasses), those it
    binds (`self.g = Generator(); self.g(z, training=True)`, sugyan/tf-dcgan's models) or
    calls where it makes them (`Generator()(z, training=True)`). An instance the code
    hands on (an argument, a return, an element: its calls are not seen) may be called
    with it set. A name binds an instance in its function (everywhere for one the module
    binds); an attribute (`self.g`) everywhere in the module."""
    calls, escapes = _instance_calls(tree, names, classes)
    if escapes:
        return True, 0, []
    landing = [] if position is None else [position - 1]  # (self is not passed)
    return _truth_of_calls(calls, parameter, landing, default_trains)


def _instance_calls(tree: ast.Module, names: AstTfNames, classes: frozenset[str]
                    ) -> tuple[list, bool]:
    """The calls of a module on instances of `classes` (`truth_passed_to_instances`),
    each with the function whose own code holds it (None at module level), and whether an
    instance is handed on."""
    found: list[tuple[ast.AST, ast.AST | None, ast.AST | None]] = []  # node, parent, enclosing

    def walk(scope, enclosing):
        stack = [(child, scope) for child in ast.iter_child_nodes(scope)]
        while stack:
            node, parent = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                walk(node, node)
                continue
            found.append((node, parent, enclosing))
            stack.extend((child, node) for child in ast.iter_child_nodes(node))

    walk(tree, None)

    def spelled(node):
        return (node.id if isinstance(node, ast.Name)
                else node.attr if isinstance(node, ast.Attribute) else None)

    handed = (ast.Call, ast.Return, ast.keyword, ast.List, ast.Tuple, ast.Set, ast.Starred,
              ast.Yield)
    locals_, attributes, calls = set(), set(), []
    for node, parent, enclosing in found:
        if not (isinstance(node, ast.Call) and spelled(node.func) in classes
                and names.canonical(node.func) is None):
            continue
        if isinstance(parent, ast.Call) and parent.func is node:  # Generator()(z, ...)
            calls.append((parent, enclosing))
        elif isinstance(parent, (ast.Assign, ast.AnnAssign)) and parent.value is node:
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    locals_.add((target.id, enclosing))
                elif isinstance(target, ast.Attribute):
                    attributes.add(target.attr)
                else:
                    return calls, True
        elif isinstance(parent, handed):
            return calls, True
    for node, parent, enclosing in found:
        if not isinstance(getattr(node, "ctx", None), ast.Load):
            continue
        if isinstance(node, ast.Name):
            if (node.id, enclosing) not in locals_ and (node.id, None) not in locals_:
                continue
        elif not (isinstance(node, ast.Attribute) and node.attr in attributes
                  and names.canonical(node) is None):
            continue
        if isinstance(parent, ast.Call) and parent.func is node:
            calls.append((parent, enclosing))
        elif isinstance(parent, handed):
            return calls, True
    return calls, False


def _calls_of(tree: ast.Module, names: AstTfNames, function: str):
    """The calls of a module spelling `function` as their callee (TF's own aside), each
    with the function or method whose own code holds it (None at module level)."""
    def walk(scope, enclosing):
        for node in own_nodes(scope):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield from walk(node, node)
            elif isinstance(node, ast.Lambda):
                yield from walk(node, enclosing)
            elif isinstance(node, ast.Call):
                func = node.func
                spelled = (func.id if isinstance(func, ast.Name)
                           else func.attr if isinstance(func, ast.Attribute) else None)
                if spelled == function and names.canonical(func) is None:
                    yield node, enclosing
    yield from walk(tree, None)


# Where a batch norm's moving statistics go: each of its variables' collections, or a dict
# of them by variable.
_STATISTICS = frozenset({"moving_mean", "moving_variance"})
_TRAINABLE_KEYS = frozenset({"TRAINABLE_VARIABLES", "trainable_variables"})


def _lists_trainable(expr: ast.expr | None) -> bool:
    """Whether `variables_collections=expr` of a batch norm puts its moving statistics in
    TRAINABLE_VARIABLES (a list of collections for every variable, or a dict by
    variable)."""
    if isinstance(expr, ast.Dict):
        return any(isinstance(key, ast.Constant) and key.value in _STATISTICS
                   and _lists_trainable(value) for key, value in zip(expr.keys, expr.values))
    if expr is None:
        return False
    return any((isinstance(node, ast.Constant) and node.value in _TRAINABLE_KEYS)
               or (isinstance(node, ast.Attribute) and node.attr in _TRAINABLE_KEYS)
               for node in ast.walk(expr))


def trainable_statistics(tree: ast.Module, names: AstTfNames) -> list[int]:
    """The lines of a module's batch-norm settings that put its moving statistics in
    TRAINABLE_VARIABLES (`variables_collections=[tf.GraphKeys.TRAINABLE_VARIABLES]`, as
    facenet's models do): of a batch norm's call, of an `arg_scope` over one, or of the
    `normalizer_params` given with `normalizer_fn=` one (the dicts spelled out where the
    file binds them). No loss reaches those variables: their gradients are None."""
    reader = _BatchNorms(names, _dict_bindings(tree), _dict_returns(tree))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = names.canonical(node.func)
        listed = node.args[0] if name == ARG_SCOPE and node.args else None
        normalizer = argument(node, "normalizer_fn", None)
        settings = None
        if name in BATCH_NORMS or (isinstance(listed, (ast.List, ast.Tuple)) and any(
                names.canonical(e) in BATCH_NORMS for e in listed.elts)):
            settings = reader._kwargs(node)
        elif normalizer is not None and names.canonical(normalizer) in BATCH_NORMS:
            settings = reader._dict(argument(node, "normalizer_params", None))
        if settings and _lists_trainable(settings.get("variables_collections")):
            found.append(node.lineno)
    return sorted(found)


# -- the update ops collected and never read -------------------------------------------------


def _names_update_ops(expr: ast.expr | None) -> bool:
    """Whether a collection key is UPDATE_OPS: `tf.GraphKeys.UPDATE_OPS`, its string."""
    if isinstance(expr, ast.Constant):
        return expr.value == "update_ops"
    spelled = dotted(expr) if expr is not None else None
    return spelled is not None and spelled.rsplit(".", 1)[-1] == "UPDATE_OPS"


def _words_of(nodes) -> tuple[set[str], set[str]]:
    """The names (dotted where they chain, and each chain's bases) and the strings some
    expressions mention."""
    found, strings = set(), set()
    for expr in nodes:
        for node in ast.walk(expr):
            spelled = dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
            if spelled is not None:
                found.add(spelled)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                strings.add(node.value)
    return found, strings


def lists_tied_to_update_ops(tree: ast.Module, names: AstTfNames, function: str,
                             parameter: str, position: int | None, method: bool
                             ) -> tuple[int, bool]:
    """How many calls of `function` (a function's or a method's name; `method`: its first
    parameter is self or cls) a module has, and whether each passes as `parameter` (by
    keyword, or at `position` among the parameters) a list its calling function then ties
    to the update ops (early tf_cnn_benchmarks: `self.variable_mgr.
    append_apply_gradients_ops(gradient_state, opt, grads, training_ops)`, then
    `tf.group(*(training_ops + update_ops))`): a `group`, `tuple`, `with_dependencies` or
    `control_dependencies` whose arguments mention the list and the update ops
    (`GraphKeys.UPDATE_OPS`, its string, a name that says so, a name the function binds to
    them). A call through `*args` or `**kwargs`, or passing anything but a name, ties
    nothing."""
    calls, tied = 0, True
    for call, enclosing in _calls_of(tree, names, function):
        calls += 1
        if any(isinstance(a, ast.Starred) for a in call.args) or any(
                k.arg is None for k in call.keywords):
            return calls, False
        given = [k.value for k in call.keywords if k.arg == parameter]
        at = None if position is None else position - (
            1 if method and isinstance(call.func, ast.Attribute) else 0)
        if not given and at is not None and 0 <= at < len(call.args):
            given = [call.args[at]]
        passed = dotted(given[0]) if given else None
        if passed is None:
            return calls, False
        body = list(own_nodes(enclosing if enclosing is not None else tree))
        update_names = _names_bound_to_update_ops(body)
        if not any(isinstance(node, ast.Call) and node is not call
                   and (names.canonical(node.func) or dotted(node.func) or "").rsplit(
                       ".", 1)[-1] in OP_TIES
                   and passed in _words_of(node.args)[0]
                   and _mentions_update_ops(node.args, update_names, but=passed)
                   for node in body):
            tied = False
    return calls, tied


def _names_bound_to_update_ops(body: list[ast.AST]) -> set[str]:
    """The names a function's own code (`body`) binds to the update ops, directly
    (`update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)`) or from such a name."""
    update_names: set[str] = set()
    grew = True
    while grew:
        grew = False
        for node in body:
            if not isinstance(node, ast.Assign):
                continue
            targets = {dotted(t) for t in node.targets} - {None} - update_names
            if targets and _mentions_update_ops([node.value], update_names):
                update_names |= targets
                grew = True
    return update_names


def calls_under_update_ops(tree: ast.Module, names: AstTfNames, function: str
                           ) -> tuple[int, bool]:
    """How many calls of `function` a module has, and whether each is made inside a
    `with control_dependencies(E):` whose `E` refers to the update ops (the helper then
    builds its train op after them: yyht/deepspeech's `with tf.control_dependencies(
    update_ops): train_op, lr = create_optimizer(...)`). A call through a name its calling
    function binds to `function` (`optimizer_fn = create_optimizer`, a helper chosen by a
    flag, then `optimizer_fn(...)`) is a call of it."""
    calls, under = 0, True
    scopes = [tree, *(n for n in ast.walk(tree)
                      if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]
    for scope in scopes:
        body = list(own_nodes(scope))
        spellings = {function} | {
            node.targets[0].id for node in body
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and (dotted(node.value) or "").rsplit(".", 1)[-1] == function}
        own_calls = [node for node in body if isinstance(node, ast.Call)
                     and names.canonical(node.func) is None
                     and (dotted(node.func) or "").rsplit(".", 1)[-1] in spellings]
        if not own_calls:
            continue
        update_names = _names_bound_to_update_ops(body)
        covered: set[int] = set()
        for node in body:
            if isinstance(node, (ast.With, ast.AsyncWith)) and any(
                    isinstance(item.context_expr, ast.Call)
                    and (names.canonical(item.context_expr.func)
                         or dotted(item.context_expr.func) or "").rsplit(".", 1)[-1]
                    == "control_dependencies"
                    and _mentions_update_ops(item.context_expr.args, update_names)
                    for item in node.items):
                covered |= {id(inner) for statement in node.body
                            for inner in ast.walk(statement)}
        calls += len(own_calls)
        under = under and all(id(call) in covered for call in own_calls)
    return calls, under


def fills_list_from_callback(tree: ast.Module, function: str, line: int | None,
                             given: dict[str | int, str], into: str, callback: str) -> bool:
    """Whether `function` of a module (the def at `line`, or the only def of that name),
    given argument `into` (a list) and argument `callback` (a function), both among
    `given` (parameter position or keyword -> the name its caller passes), calls the
    callback and adds to the list (`append`, `extend`, `insert`) in its code:
    tf_cnn_benchmarks' `append_gradients_with_loss_scale(training_ops,
    get_apply_gradients_ops_func, ...)`, which puts the ops the callback returns (or a
    `tf.cond` over them) into `training_ops`."""
    defs = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
            and node.name == function]
    defs = [node for node in defs if node.lineno == line] or defs
    if len(defs) != 1:
        return False
    params = [a.arg for a in defs[0].args.posonlyargs + defs[0].args.args]
    bound = {}
    for at, passed in given.items():
        parameter = params[at] if isinstance(at, int) and at < len(params) else at
        if isinstance(parameter, str) and parameter in params:
            bound[passed] = parameter
    if into not in bound or callback not in bound:
        return False
    calls = [node for node in ast.walk(defs[0]) if isinstance(node, ast.Call)]
    return any(isinstance(c.func, ast.Name) and c.func.id == bound[callback]
               for c in calls) and any(
        isinstance(c.func, ast.Attribute) and c.func.attr in ("append", "extend", "insert")
        and dotted(c.func.value) == bound[into] for c in calls)


# The methods of a session hook that add fetches to every step: TF's `SessionRunHook.
# before_run`, tensorpack's `Callback._before_run`.
_HOOK_METHODS = frozenset({"before_run", "_before_run"})


def update_ops_hooks(tree: ast.Module) -> list[tuple[str, int]]:
    """The classes of a module that read the UPDATE_OPS collection (`GraphKeys.UPDATE_OPS`
    or its string anywhere in the class) and add fetches to every step of a session (a
    `before_run` / `_before_run` method of their own or of a base class of the same
    module): a hook that runs the update ops beside each step (tensorpack's
    `RunUpdateOps(RunOp)`), as (name, line)."""
    classes = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}

    def hooks_steps(node: ast.ClassDef, seen: set[str]) -> bool:
        if any(isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
               and item.name in _HOOK_METHODS for item in node.body):
            return True
        bases = {(dotted(b) or "").rsplit(".", 1)[-1] for b in node.bases} - seen
        return any(hooks_steps(classes[b], seen | bases) for b in bases if b in classes)

    return sorted(((name, node.lineno) for name, node in classes.items()
                   if any(_names_update_ops(n) for n in ast.walk(node)
                          if isinstance(n, (ast.Attribute, ast.Constant)))
                   and hooks_steps(node, {name})), key=lambda c: c[1])


def _mentions_update_ops(exprs, update_names: set[str], but: str | None = None) -> bool:
    """Whether expressions refer to the update ops: `GraphKeys.UPDATE_OPS`, its string,
    a name that says so (`update_ops`, `bn_updates`) or one of `update_names`; `but` (the
    train op's list) does not count."""
    found, strings = _words_of(exprs)
    found.discard(but)
    return ("update_ops" in strings or bool(found & update_names)
            or any(UPDATE_OPS_NAME.search(n.rsplit(".", 1)[-1]) for n in found))


def unread_update_ops(tree: ast.Module, names: AstTfNames) -> list[tuple[str, int]]:
    """Each name a function (or the module body) binds to the UPDATE_OPS collection
    (`norm_update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)`) and never reads, as
    (name, line): the author's word that the model built there feeds UPDATE_OPS (its
    batch norm may be in code the run cannot connect, a model passed in as an argument),
    in a list nothing runs."""
    found = []
    scopes = [tree, *(n for n in ast.walk(tree)
                      if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]
    for scope in scopes:
        for node in own_nodes(scope):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)
                    and isinstance(node.value, ast.Call)
                    and (names.canonical(node.value.func) or "").rsplit(".", 1)[-1]
                    in COLLECTION_GETTERS
                    and _names_update_ops(argument(node.value, "key", 0))):
                continue
            name = node.targets[0].id
            # (a module's name may be read by any function of it; a function's by its own
            # code and the functions nested in it)
            if not any(isinstance(n, ast.Name) and n.id == name
                       and not isinstance(n.ctx, ast.Store) for n in ast.walk(scope)):
                found.append((name, node.lineno))
    return sorted(found, key=lambda f: f[1])


# -- moving averages collected into a collection of the project's own ------------------------

# The words without which a file neither adds a moving-average update to a collection nor
# reads one (the pre-filter of `collection_facts`).
COLLECTION_WORDS = ("collection",)
# The calls whose result is a moving-average update: ry/tensorflow-resnet's hand-written
# batch norm (`moving_averages.assign_moving_average`), an ExponentialMovingAverage's apply.
_MOVING_AVERAGE_UPDATES = frozenset({"assign_moving_average"})
_MOVING_AVERAGE = "ExponentialMovingAverage"


def _last(names: AstTfNames, func: ast.expr) -> str:
    return (names.canonical(func) or "").rsplit(".", 1)[-1]


def _module_strings(tree: ast.Module) -> dict[str, str]:
    """The module's names bound once, at its top level, to a string and never rebound
    (`UPDATE_OPS_COLLECTION = 'resnet_update_ops'`): the collection keys a name spells."""
    bound: dict[str, list] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.setdefault(node.id, []).append(node)
        elif isinstance(node, ast.Global):
            for name in node.names:
                bound.setdefault(name, []).extend([None, None])  # rebound somewhere
    found = {}
    for statement in tree.body:
        if (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)
                and isinstance(statement.value, ast.Constant)
                and isinstance(statement.value.value, str)
                and len(bound.get(statement.targets[0].id, ())) == 1):
            found[statement.targets[0].id] = statement.value.value
    return found


def _locals(scope: ast.AST) -> set[str]:
    """The names a function binds (its parameters, what it or a function nested in it
    assigns); none for the module."""
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return set()
    found = {a.arg for a in ast.walk(scope.args) if isinstance(a, ast.arg)}
    found.update(n.id for n in ast.walk(scope)
                 if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load))
    return found


def _key(expr: ast.expr | None, strings: dict[str, str], local: set[str]) -> str | None:
    """The collection a key names: a string, a module constant of one, TF's
    `GraphKeys.X` (its string, x); None where the code does not say."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    if isinstance(expr, ast.Name) and expr.id not in local:
        return strings.get(expr.id)
    spelled = dotted(expr) if expr is not None else None
    if spelled is not None and spelled.rsplit(".", 2)[-2:-1] == ["GraphKeys"]:
        return spelled.rsplit(".", 1)[-1].lower()
    return None


def collection_facts(tree: ast.Module, names: AstTfNames) -> dict:
    """What a module does with collections of its own: `moving_averages`, [[key, line,
    constant or None]] for each moving-average update (`assign_moving_average(...)`, an
    `ExponentialMovingAverage`'s `apply(...)`) it adds to a collection whose key it spells
    as a string or a module constant of one (the name of that constant), none of TF's own
    (`vocabulary.TF_COLLECTION_KEYS`: UPDATE_OPS is the batch norms' fact); an update whose
    op the code also reads elsewhere (a control dependency, a return) runs that way and is
    left out. `read`: the keys its `get_collection` calls name; `reads_any`: whether one
    names a key the code does not spell out (a parameter, an expression), or it lists
    every collection (`get_all_collection_keys`)."""
    strings = _module_strings(tree)
    facts: dict = {"moving_averages": [], "read": set(), "reads_any": False}
    scopes = [tree, *(n for n in ast.walk(tree)
                      if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]
    averagers = {t.id for n in ast.walk(tree)
                 if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                 and _last(names, n.value.func) == _MOVING_AVERAGE
                 for t in n.targets if isinstance(t, ast.Name)}

    def update(expr: ast.expr) -> bool:
        if not isinstance(expr, ast.Call):
            return False
        if _last(names, expr.func) in _MOVING_AVERAGE_UPDATES:
            return True
        func = expr.func
        return (isinstance(func, ast.Attribute) and func.attr == "apply"
                and ((isinstance(func.value, ast.Name) and func.value.id in averagers)
                     or (isinstance(func.value, ast.Call)
                         and _last(names, func.value.func) == _MOVING_AVERAGE)))

    for scope in scopes:
        local = _locals(scope)
        held = {node.targets[0].id for node in own_nodes(scope)
                if isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and update(node.value)}
        for node in own_nodes(scope):
            if not isinstance(node, ast.Call):
                continue
            called = node.func.attr if isinstance(node.func, ast.Attribute) else (
                node.func.id if isinstance(node.func, ast.Name) else "")
            if called in COLLECTION_GETTERS:
                key = _key(argument(node, "key", 0), strings, local)
                if key is None:
                    facts["reads_any"] = True
                else:
                    facts["read"].add(key)
            elif called == "get_all_collection_keys":
                facts["reads_any"] = True
            if _last(names, node.func) not in COLLECTION_ADDERS:
                continue
            value = argument(node, "value", 1)
            if value is None:
                continue
            if isinstance(value, ast.Name) and value.id in held:
                # (the op read anywhere else in the function runs that way)
                uses = [n for n in ast.walk(scope) if isinstance(n, ast.Name)
                        and n.id == value.id and isinstance(n.ctx, ast.Load)]
                if len(uses) != 1:
                    continue
            elif not update(value):
                continue
            given = argument(node, "names" if called == "add_to_collections" else "name", 0)
            keys = (given.elts if called == "add_to_collections"
                    and isinstance(given, (ast.List, ast.Tuple)) else [given])
            for expr in keys:
                key = _key(expr, strings, local)
                if key is None or key in TF_COLLECTION_KEYS or isinstance(expr, ast.Attribute):
                    continue
                constant = expr.id if isinstance(expr, ast.Name) else None
                facts["moving_averages"].append([key, node.lineno, constant])
    facts["moving_averages"].sort(key=lambda m: (m[1], m[0]))
    facts["read"] = sorted(facts["read"])
    return facts


def own_nodes(scope: ast.AST):
    """The nodes of a module or function, not those of the functions (and lambdas) nested
    in it."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


# -- what a unit reads, binds and creates: one walk ----------------------------------------


class UnitReader(ast.NodeVisitor):
    """One walk of a unit's code (a function's, a method's, the module body's): the names
    it reads (`refs`, dotted where they chain: `model.inference`), what it binds a name to
    once (`instances`: see `instances`), and with `placements` the variable-creating calls,
    as [name, line, dtype or None, placed], placed where a device scope of its own places
    it (else the caller's scope does), and the names it reads where none does (`free`). A
    `with ...device(...)` or slim `arg_scope(..., device=)` places everything below it."""

    def __init__(self, names: AstTfNames, placements: bool = True):
        self.names, self.placements = names, placements
        self.refs: set[str] = set()
        self.variables: list[list] = []
        self.free: set[str] = set()  # names read outside any device scope of the unit
        # `root.method` for each method called on what a call chained on `root` returns
        # (`self.feed(x).conv(...)`: `self.conv`), and those of them outside any device
        # scope: a fluent builder's layers, when `root` is the method's own receiver.
        self.chained: set[str] = set()
        self.chained_free: set[str] = set()
        self._made: dict[str, str | None] = {}  # name -> the callee it is bound to once
        self._modules = ModuleObjects(names)  # the library modules it makes and connects
        self._placed = 0
        self._nested = 0  # inside a nested def, class or lambda: its bindings are its own
        self._running = True  # code the unit runs when called (not a def's decorators)

    @property
    def instances(self) -> dict[str, str]:
        """{name: the callee as spelled} for `name = Callee(...)`, the name bound nowhere
        else in the unit (`model = Model(cfg)` -> {"model": "Model"}): a method called on
        it (`model.build()`) is the class's, where the callee is one of the project's
        classes."""
        return {name: callee for name, callee in sorted(self._made.items())
                if callee is not None}

    def read_def(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """A function's unit: its decorators, defaults and annotations are read (they run
        where it is defined), its body is what a call runs."""
        self._running = False
        for decorator in node.decorator_list:
            self.visit(decorator)
        self.visit(node.args)
        if node.returns is not None:
            self.visit(node.returns)
        self._running = True
        for statement in node.body:
            self.visit(statement)

    def read_outside(self, nodes) -> None:
        """Code that is the unit's but not run by a call of it (a class's bases)."""
        self._running = False
        for node in nodes:
            self.visit(node)
        self._running = True

    def _places(self, item: ast.withitem) -> bool:
        call = item.context_expr
        if not isinstance(call, ast.Call):
            return False
        name = self.names.canonical(call.func)
        return name in DEVICE_CALLS or (name == ARG_SCOPE
                                        and argument(call, "device", None) is not None)

    def _visit_with(self, node) -> None:
        placed = self.placements and any(self._places(item) for item in node.items)
        for item in node.items:
            self.visit(item)
        self._placed += placed
        for statement in node.body:
            self.visit(statement)
        self._placed -= placed

    visit_With = visit_AsyncWith = _visit_with

    def _visit_scope(self, node) -> None:
        self._nested += 1
        self.generic_visit(node)
        self._nested -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = _visit_scope

    def visit_Assign(self, node: ast.Assign) -> None:
        if (not self._nested and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call)):
            name, callee = node.targets[0].id, dotted(node.value.func)
            self._made[name] = callee if self._made.get(name, callee) == callee else None
            self._modules.bind(name, node.value.func)
            self.visit(node.value)
            return
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if self.placements and self._running:
            name = self.names.canonical(node.func)
            if name in CREATES_VARIABLES or name in METRIC_CALLS:
                placed = bool(self._placed) or (name.startswith(("slim.", "contrib.layers."))
                                                and argument(node, "device", None) is not None)
                self.variables.append([name, node.lineno, _explicit_dtype(node), placed])
            module = self._modules.connects(node)
            if module in LIBRARY_VARIABLE_MODULES:
                self.variables.append([module, node.lineno, None, bool(self._placed)])
        built = self._modules.builds(node)
        if built is not None:
            self._read(built)
        self.generic_visit(node)

    def _read(self, text: str) -> None:
        self.refs.add(text)
        if self._running and not self._placed:
            self.free.add(text)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        text = dotted(node)
        if text is not None and isinstance(node.ctx, ast.Load):
            self._read(text)
            return
        root = _chain_root(node.value)
        if root is not None and isinstance(node.ctx, ast.Load):
            self.chained.add(f"{root}.{node.attr}")
            if self._running and not self._placed:
                self.chained_free.add(f"{root}.{node.attr}")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self._read(node.id)
        elif not self._nested:
            self._made[node.id] = None  # bound otherwise: a loop, a tuple, `with ... as`
            self._modules.bind(node.id, None)


def _chain_root(node: ast.AST) -> str | None:
    """`self` for a call chained on a name's methods (`self.feed(x)`, `self.a(1).b(2)`);
    None for anything else (a call of a plain function, a subscript)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    inner = node.func.value
    if isinstance(inner, ast.Name):
        return inner.id
    return _chain_root(inner)


def is_abstract(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether a method only says that subclasses define it: `@abstractmethod`, or a body
    of a docstring, `pass`, `...` or `raise NotImplementedError`."""
    if any((dotted(d) or "").endswith("abstractmethod") for d in function.decorator_list):
        return True
    for statement in function.body:
        if isinstance(statement, ast.Pass) or (
                isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)):
            continue
        if isinstance(statement, ast.Raise) and statement.exc is not None and (
                dotted(statement.exc.func if isinstance(statement.exc, ast.Call)
                       else statement.exc) or "").endswith("NotImplementedError"):
            continue
        return False
    return True


def _explicit_dtype(call: ast.Call) -> str | None:
    """The dtype a variable-creating call names with `dtype=` (`tf.int32`, "int32")."""
    given = argument(call, "dtype", None)
    if isinstance(given, ast.Attribute):
        return given.attr
    if isinstance(given, ast.Constant) and isinstance(given.value, str):
        return given.value
    return None


def _tf_bindings(names: AstTfNames, tree: ast.Module) -> dict[str, str]:
    """The module-level names a file binds to TF modules or symbols (`tf1` of `import
    tensorflow.compat.v1 as tf1`, `slim = tf.contrib.slim`): what a file importing them
    from it reaches."""
    out = {}
    module_level = set()
    for statement in tree.body:
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            module_level.update(a.asname or a.name.split(".")[0] for a in statement.names)
    for name in sorted(module_level):
        for qualified in sorted(names.imports.get(name, ())):
            if canonical_tf_name(qualified) is not None or qualified in (
                    "tensorflow", "tf_slim"):
                out[name] = qualified
                break
    out.update(names.aliases)
    return out


# -- variable scopes that reuse ---------------------------------------------------------------

# Words without which a file opens no scope that reuses (the pre-filter's kind of look):
# `reuse=` and `reuse_variables()` both say it (reuse as variable_scope's ninth positional
# argument is not read).
REUSE_WORDS = ("reuse",)


def _reuse_given(call: ast.Call, names: AstTfNames) -> str | None:
    """How a `variable_scope(...)` call reuses, in words (`reuse=True`, `reuse=AUTO_REUSE`,
    `reuse=i > 0`: an expression may be True, the tower loop's re-entered scope); None for
    no reuse given, or a literal False / None."""
    given = argument(call, "reuse", None)
    if given is None:
        return None
    if isinstance(given, ast.Constant):
        return "reuse=True" if given.value else None
    if names.canonical(given) == "AUTO_REUSE":
        return "reuse=AUTO_REUSE"
    return f"reuse={ast.unparse(given)}"


def _is_variable_scope(call: ast.AST, names: AstTfNames) -> bool:
    return (isinstance(call, ast.Call)
            and (names.canonical(call.func) or "").rsplit(".", 1)[-1] == "variable_scope")


class _ReuseReader(ast.NodeVisitor):
    """The regions of a module whose code runs under a variable scope that reuses: a
    `with variable_scope(..., reuse=...)` body, and what follows a `reuse_variables()` call
    to the end of the variable scope it is in (from the start of the loop it is in, inside
    that scope: the loop's next pass reuses what this one made)."""

    def __init__(self, names: AstTfNames, last_line: int):
        self.names = names
        self.regions: list[list] = []  # [first line, last line, why]
        self._scopes: list[ast.With] = []  # enclosing `with variable_scope(...)`, this def's
        self._loops: list[tuple[ast.stmt, int]] = []  # (loop, scopes open when it began)
        self._branches: list[ast.If] = []  # the enclosing `if`s, this def's
        self._end = [last_line]  # where the innermost function ends

    def _visit_with(self, node) -> None:
        opens = False
        for item in node.items:
            call = item.context_expr
            if _is_variable_scope(call, self.names):
                opens = True
                why = _reuse_given(call, self.names)
                if why is not None:
                    # reuse=True reuses from its first line on; AUTO_REUSE makes what is
                    # missing; an expression is taken to be False on the first pass.
                    strict = node.lineno if why == "reuse=True" else None
                    self.regions.append([node.lineno, node.end_lineno or node.lineno, why,
                                         strict])
        if opens:
            self._scopes.append(node)
        self.generic_visit(node)
        if opens:
            self._scopes.pop()

    visit_With = visit_AsyncWith = _visit_with

    def _visit_loop(self, node) -> None:
        self._loops.append((node, len(self._scopes)))
        self.generic_visit(node)
        self._loops.pop()

    visit_For = visit_AsyncFor = visit_While = _visit_loop

    def visit_If(self, node: ast.If) -> None:
        self._branches.append(node)
        self.generic_visit(node)
        self._branches.pop()

    def _visit_def(self, node) -> None:
        outer = self._scopes, self._loops, self._branches
        self._scopes, self._loops, self._branches = [], [], []
        self._end.append(node.end_lineno or node.lineno)
        self.generic_visit(node)
        self._end.pop()
        self._scopes, self._loops, self._branches = outer

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _visit_def

    def visit_Call(self, node: ast.Call) -> None:
        if (isinstance(node.func, ast.Attribute) and node.func.attr == "reuse_variables"
                and not node.args):
            depth = len(self._scopes)
            end = (self._scopes[-1].end_lineno if self._scopes else None) or self._end[-1]
            # The outermost loop begun inside the scope that reuses: its next pass reuses.
            loops = [loop for loop, open_scopes in self._loops if open_scopes >= depth]
            first = loops[0].lineno if loops else node.lineno
            # Under an `if` that holds only part of the region the call may not run (`if
            # i > 0: scope.reuse_variables()` in a tower's scope: the first tower creates);
            # reuse is not sure there.
            sure = all(branch.lineno <= first and (branch.end_lineno or end) >= end
                       for branch in self._branches)
            self.regions.append([first, end, f"after reuse_variables() at line {node.lineno}",
                                 node.lineno if sure else None])
        self.generic_visit(node)


def _flags_given(call: ast.Call) -> dict[str, bool]:
    """The keyword arguments a call gives as a literal True or False (`reuse_variables=
    True`): the flags the code it calls branches on (`flag_branches`)."""
    return {k.arg: k.value.value for k in call.keywords
            if k.arg is not None and isinstance(k.value, ast.Constant)
            and isinstance(k.value.value, bool)}


def reuse_facts(tree: ast.Module, names: AstTfNames) -> dict:
    """Where a module's code runs under a variable scope that reuses, and what it calls
    there: {"regions": [[first line, last line, why, strict]], "calls": [[line, callee as
    spelled, why, strict, flags]]}, in line order (`flags`: {keyword: bool} the call gives
    as a literal, `_flags_given`). `strict` is where reuse is on already on the
    first pass (a region's line from which on, None: nowhere; a call's: whether it is):
    code there finds only variables made before it (`reuse=True`; what follows
    `reuse_variables()` in its first pass), where `AUTO_REUSE` and a scope re-entered with
    `reuse=<expression>` make them the first time. `tf.get_variable` (and the layers on it) reuses there; a
    `tf.Variable` made there is new each time (seed 003). A callee's own code reuses too
    when called there: `FileView.reusing_regions` follows the calls."""
    last = max((getattr(n, "end_lineno", 0) or 0 for n in tree.body), default=0)
    reader = _ReuseReader(names, last)
    reader.visit(tree)
    regions = sorted(reader.regions, key=lambda r: (r[0], r[1], r[2], r[3] or 0))
    calls = []
    for node, callee in _project_calls(tree, names) if regions else ():
        region = next((r for r in regions if r[0] <= node.lineno <= r[1]), None)
        if region is not None:
            strict = region[3] is not None and node.lineno >= region[3]
            calls.append([node.lineno, callee, region[2], strict, _flags_given(node)])
    return {"regions": regions, "calls": sorted(calls, key=lambda c: c[:4])}


def _project_calls(tree: ast.AST, names: AstTfNames) -> Iterator[tuple[ast.Call, str]]:
    """Each call of the tree to a dotted name that is not TF's, with that name: the calls
    that may run the project's own code."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and names.canonical(node.func) is None:
            callee = dotted(node.func)
            if callee is not None:
                yield node, callee


def names_passed(tree: ast.Module, names: AstTfNames) -> list[list]:
    """The names the module's calls of the project's code (`_project_calls`) give as
    arguments: [[line, callee as spelled, [[position or keyword, name], ...]]], in line
    order, for each call given one or more (`tower_loss(scope, vgg)`: [[0, "scope"], [1,
    "vgg"]]). A position past a `*args` is unknown: not listed."""
    out = []
    for node, callee in _project_calls(tree, names):
        given: list[list] = []
        for position, arg in enumerate(node.args):
            if isinstance(arg, ast.Starred):
                break
            if isinstance(arg, ast.Name):
                given.append([position, arg.id])
        given.extend([k.arg, k.value.id] for k in node.keywords
                     if k.arg is not None and isinstance(k.value, ast.Name))
        if given:
            out.append([node.lineno, callee, given])
    return sorted(out, key=lambda c: (c[0], c[1]))


# -- tower code: what runs once per tower ----------------------------------------------------

# Words without which a file builds no towers of its own (a device scope, or a loop that
# re-enters a reusing variable scope).
TOWER_WORDS = ("device", "reuse")


def _device_given(item: ast.withitem, names: AstTfNames) -> ast.expr | None:
    """What a `with device(...)` item asks for (v1 and v2 name the parameter differently);
    None for any other item."""
    call = item.context_expr
    if not (isinstance(call, ast.Call) and names.canonical(call.func) in DEVICE_CALLS):
        return None
    given = argument(call, "device_name_or_function", 0) or argument(call, "device_name", None)
    return given if given is not None else ast.Constant(None)


def _fixed_gpu(given: ast.expr) -> str | None:
    """The device a device scope names as a literal on a GPU (`'/gpu:1'`), else None."""
    if isinstance(given, ast.Constant) and isinstance(given.value, str):
        return given.value if "gpu" in given.value.lower() else None
    return None


def _built_at_run_time(given: ast.expr) -> bool:
    """Whether a device string is made from values at run time: `'/gpu:%d' % i`, an
    f-string, `'/gpu:' + str(i)`, `'/gpu:{}'.format(i)`, or a device function given one
    (`assign_to_device('/gpu:%d' % i, ...)`)."""
    if isinstance(given, ast.JoinedStr):
        return True
    if isinstance(given, ast.BinOp) and isinstance(given.op, (ast.Mod, ast.Add)):
        return any(isinstance(side, (ast.Constant, ast.JoinedStr, ast.BinOp))
                   for side in (given.left, given.right))
    if isinstance(given, ast.Call):
        if isinstance(given.func, ast.Attribute) and given.func.attr == "format":
            return True
        return any(_built_at_run_time(a) for a in (*given.args,
                                                   *(k.value for k in given.keywords)))
    return False


def _names_a_worker(given: ast.expr) -> bool:
    """Whether a device (or a device function's arguments) names a job's task and no GPU:
    `replica_device_setter(worker_device="/job:worker/task:%d" % task)`, where each
    process of between-graph replication builds its one replica."""
    texts = [text.lower() for text in strings_in(given)]
    return any("job:" in t or "task:" in t for t in texts) and not any("gpu" in t for t in texts)


_CPU_FIELD = re.compile(r"/(?:device:)?cpu(?::|/|$)", re.IGNORECASE)


def _names_a_cpu(given: ast.expr) -> bool:
    """Whether a device built at run time names the CPU as its device type and no GPU:
    `local_job_device + '/cpu'` (deepmind/scalable_agent's experiment.py, whose graph is
    built under it) chooses a task, never a GPU, so it is no tower function's scope."""
    texts = list(strings_in(given))
    return (any(_CPU_FIELD.search(t) for t in texts)
            and not any("gpu" in t.lower() for t in texts))


class _TowerReader(ast.NodeVisitor):
    """A module's tower code (see `tower_facts`), one function (or the module body) at a
    time: its loops, device scopes and reuse origins, read in that function only."""

    def __init__(self, names: AstTfNames):
        self.names = names
        self.spans: list[list[int]] = []
        self._loops: list[ast.stmt] = []  # the loops of the function being read
        self._towers: set[int] = set()  # (ids of those loops that build towers)
        self._fixed: list[tuple[str, ast.stmt]] = []  # its device scopes on a fixed GPU
        self._params: set[str] = set()  # its parameters

    @staticmethod
    def _span(node: ast.AST) -> list[int]:
        return [node.lineno, getattr(node, "end_lineno", None) or node.lineno]

    def _tower_loop(self) -> None:
        """The outermost loop of the function: each of its passes builds a tower."""
        if self._loops:
            self._towers.add(id(self._loops[0]))

    def _visit_with(self, node) -> None:
        for item in node.items:
            given = _device_given(item, self.names)
            if given is not None:
                fixed = _fixed_gpu(given)
                if fixed is not None:
                    self._fixed.append((fixed, node))
                elif not isinstance(given, ast.Constant):
                    # chosen at run time: in a loop, each pass's; else a tower function's,
                    # given its device (a parameter, or a string made of one)
                    if self._loops:
                        self._tower_loop()
                    elif (_built_at_run_time(given) and not _names_a_worker(given)
                          and not _names_a_cpu(given)
                          or isinstance(given, ast.Name) and given.id in self._params):
                        self.spans.append(self._span(node))
            elif _is_variable_scope(item.context_expr, self.names):
                why = _reuse_given(item.context_expr, self.names)
                if why is not None and why != "reuse=True":  # re-entered, sharing later
                    self._tower_loop()
        self.generic_visit(node)

    visit_With = visit_AsyncWith = _visit_with

    def _visit_loop(self, node) -> None:
        self._loops.append(node)
        self.generic_visit(node)
        self._loops.pop()
        if not self._loops and id(node) in self._towers:
            self.spans.append(self._span(node))

    visit_For = visit_AsyncFor = visit_While = _visit_loop

    def visit_Call(self, node: ast.Call) -> None:
        if (isinstance(node.func, ast.Attribute) and node.func.attr == "reuse_variables"
                and not node.args):
            self._tower_loop()  # (the loop's next pass reuses what this one made)
        self.generic_visit(node)

    def read_function(self, body: list[ast.AST], params: set[str]) -> None:
        outer = self._loops, self._towers, self._fixed, self._params
        self._loops, self._towers, self._fixed, self._params = [], set(), [], params
        for statement in body:
            self.visit(statement)
        if len({device for device, _ in self._fixed}) > 1:
            self.spans.extend(self._span(node) for _, node in self._fixed)
        self._loops, self._towers, self._fixed, self._params = outer

    def _visit_def(self, node) -> None:
        arguments = node.args
        params = {a.arg for a in (*arguments.posonlyargs, *arguments.args,
                                  *arguments.kwonlyargs)}
        self.read_function(node.body if isinstance(node.body, list) else [node.body], params)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _visit_def


def tower_facts(tree: ast.Module, names: AstTfNames) -> dict:
    """A module's tower code, the code that runs once per tower, and what it calls there:
    {"spans": [[first line, last line]], "calls": [[line, callee as spelled, flags]]}, in
    line order. Towers are a function's (or the module body's) loop whose passes each
    enter a device scope chosen at run time (`'/gpu:%d' % i`, a name, a device function
    given one) or re-enter a variable scope that reuses (`reuse_variables()` in the pass,
    `reuse=i > 0`, `AUTO_REUSE`: seed 003's replicas in name scopes `my_0`, `my_1`), a
    device scope chosen at run time in no loop (a tower function given its GPU), and the
    device scopes of a function that names two or more GPUs as literals (towers written
    out). A `reuse=True` scope alone builds no towers: it reuses what other code made
    (a decoder's weights tied to its encoder's). `FileView.tower_code` follows the
    calls."""
    reader = _TowerReader(names)
    reader.read_function(tree.body, set())
    spans = sorted(reader.spans)
    calls = [[node.lineno, callee, _flags_given(node)]
             for node, callee in (_project_calls(tree, names) if spans else ())
             if any(first <= node.lineno <= last for first, last in spans)]
    return {"spans": spans, "calls": sorted(calls, key=lambda c: c[:2])}


# -- branches on a flag ----------------------------------------------------------------------


def _flag_of(test: ast.expr) -> tuple[str, bool] | None:
    """(flag, the value that takes the branch) of a test on one flag: `if reuse:`,
    `if self.reuse_variables:` (the attribute's name), `if not share:`; None for any other
    test."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _flag_of(test.operand)
        return None if inner is None else (inner[0], not inner[1])
    if isinstance(test, ast.Name):
        return test.id, True
    if isinstance(test, ast.Attribute) and isinstance(test.value, ast.Name):
        return test.attr, True
    return None


class _Skipping(UnitReader):
    """A unit's reader that leaves some nodes out (a branch, to see what the rest reads)."""

    def __init__(self, names: AstTfNames, skipped: list[ast.AST]):
        super().__init__(names, placements=False)
        self._skipped = {id(node) for node in skipped}

    def visit(self, node: ast.AST):
        if id(node) not in self._skipped:
            return super().visit(node)
        return None


def flag_branches(tree: ast.Module, names: AstTfNames) -> list[list]:
    """The branches of a module's functions taken by one value of a flag (`if
    self.reuse_variables: make = _get_variable` / `else: make = _create_variable`, an
    `a if flag else b`) of the file's units (`file_part`), as [line of the test, first
    line, last line, flag, value that takes it, names read there only], in line order: a
    caller that gives the flag the other value (`Model(reuse_variables=True)`,
    `_flags_given`) runs none of the branch's code and calls nothing only it names (names
    as `UnitReader.refs` spells them; the first and last lines of an `a if flag else b`
    are None: it shares its line with the code around it)."""
    defs = (ast.FunctionDef, ast.AsyncFunctionDef)
    units = [s for s in tree.body if isinstance(s, defs)] + [
        m for c in tree.body if isinstance(c, ast.ClassDef) for m in c.body
        if isinstance(m, defs)]  # (the units of `file_part`: what `rest` reads is theirs)
    found = []
    for function in units:
        for node in ast.walk(function):
            if not isinstance(node, (ast.If, ast.IfExp)):
                continue
            flag = _flag_of(node.test)
            if flag is None:
                continue
            for taken, branch in ((flag[1], node.body), (not flag[1], node.orelse)):
                statements = branch if isinstance(branch, list) else [branch]
                if not statements:
                    continue
                inside = _Skipping(names, [])
                for statement in statements:
                    inside.visit(statement)
                rest = _Skipping(names, statements)
                rest.read_def(function)
                only = sorted(inside.refs - rest.refs)
                lines = ([statements[0].lineno, statements[-1].end_lineno]
                         if isinstance(node, ast.If) else [None, None])
                found.append([node.lineno, *lines, flag[0], taken, only])
    return sorted(found, key=lambda b: (b[0], b[1] or 0, b[2] or 0, b[3], b[4]))


def attribute_instances(tree: ast.Module, names: AstTfNames) -> dict[str, dict[str, str]]:
    """{class: {attribute: the callee as spelled}} for each top-level class whose methods
    bind an attribute of their own object once, to a call's result (`self._model =
    lanenet.LaneNet(cfg)` in `__init__`): a method called on it (`self._model.compute_loss`)
    is that class's, where the callee is one of the project's classes. An attribute bound
    anywhere else in the class (a second assignment, `+=`, a tuple target) is left out."""
    found: dict[str, dict[str, str]] = {}
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef):
            continue
        bound: dict[str, list[str | None]] = {}
        for method in cls.body:
            if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            params = [*method.args.posonlyargs, *method.args.args]
            if not params:
                continue
            owner = params[0].arg
            for node in ast.walk(method):
                targets = (node.targets if isinstance(node, ast.Assign)
                           else [node.target] if isinstance(node, (ast.AugAssign,
                                                                   ast.AnnAssign))
                           else [])
                for target in targets:
                    for part in ast.walk(target):
                        if (isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name)
                                and part.value.id == owner):
                            single = (isinstance(node, ast.Assign) and part is target
                                      and len(node.targets) == 1
                                      and isinstance(node.value, ast.Call))
                            bound.setdefault(part.attr, []).append(
                                dotted(node.value.func) if single else None)
        made = {attribute: callees[0] for attribute, callees in bound.items()
                if len(callees) == 1 and callees[0] is not None}
        if made:
            found[cls.name] = made
    return found
