"""What a file says about the names a feed key may hold: the facts feed-to-assign reads of
the files connected to a feed's (`FileView.feed_facts`).

`attributes`: an attribute (or module-level) name -> the kinds of what the file assigns to
it ("variable": a variable an optimizer may update; "frozen": one no optimizer updates,
`trainable=False`, a bool or int; "global_step"; "other": not a variable); a namedtuple's
fields count as its attributes. `updated`: the last names of what the file writes in place
(`tf.assign(v, ...)`, `v.assign_add(...)`, `global_step=v`). `monitored`: names assigned a
MonitoredSession. `names`: the `name=` of the trainable variables it creates. `fetched`: an
attribute (or module-level) name -> {"writes": whether a value the file assigns it may
write a variable when fetched (a train op), "reads": the attribute names those values read,
whose own values say the rest}. `trains`: [line, the last names of the variables it may
update, or None for any trainable one] of each optimizer update (`minimize`,
`compute_gradients`, `apply_gradients`, a train op maker): what a variable must be in for a
run of that update to write it (an assign, `global_step=v`: [line, [its last name]]).

What a file reads (`name_reads`), asked of any file, whatever words it holds: `steering`, the
last names read in an optimizer's arguments (`GradientDescentOptimizer(lr)`: a learning
rate, which the loss has no gradient to); `graph_reads`, the last names read anywhere else
that may put them on a loss's path (not in a run's fetches or feeds, a feed dict built
earlier, a summary, a print, an assign, or as the variable a method is called on).
"""

from __future__ import annotations

import ast

from graphfix.source.project.names import AstTfNames, argument, dotted
from graphfix.source.vocabulary import (
    COLLECTION_GETTERS,
    GET_VARIABLE_CALLS,
    GLOBAL_STEP_GETTERS,
    GLOBAL_STEP_MAKERS,
    INITIALIZER_CALLS,
    MONITORED_SESSIONS,
    OPTIMIZER_CLASS,
    TRAIN_METHODS,
    TRAIN_OP_MAKERS,
    UNIQUE_VARIABLE_GETTER,
    VARIABLE_COLLECTION_KEYS,
    VARIABLE_CONSTRUCTORS,
    VARIABLE_LISTS,
    VARIABLE_UPDATES,
)

# What `updated` holds for a global step something updates, whatever its name.
GLOBAL_STEP_UPDATED = "<global_step>"
# dtypes no optimizer updates: a variable of one is never written by `minimize`.
NOT_TRAINED_DTYPES = frozenset(
    {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "string"}
)
# An optimizer's methods that update (or take the gradients an update applies) of the
# variables in their `var_list` (`compute_gradients(loss, var_list)`, TF1's
# `minimize(loss, global_step, var_list)`), or of every trainable one when it is not given.
_UPDATE_METHODS = frozenset({"minimize", "compute_gradients", "apply_gradients"})
_VAR_LIST_AT = {"compute_gradients": 1, "minimize": 2}
VARIABLE_KINDS = frozenset({"variable", "frozen", "global_step"})
_SCOPES = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef,
           ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def combine(kinds) -> str | None:
    """One kind for a name bound (or an attribute assigned) in several places."""
    kinds = {k for k in kinds if k is not None}
    if not kinds:
        return None
    if kinds <= VARIABLE_KINDS:
        for kind in ("variable", "global_step", "frozen"):
            if kind in kinds:
                return kind
    return "other" if kinds == {"other"} else None


class _Bindings(ast.NodeVisitor):
    """Every scope's bindings: name -> what binds it, ("value", expr), ("loop", iterable),
    ("import", name), ("part", expr) (one name of a tuple assigned `expr`) or ("unknown",)
    (a parameter, part of a loop's tuple, `with ... as`)."""

    def __init__(self):
        self.of: dict[ast.AST, dict[str, list[tuple]]] = {}
        self.parent: dict[ast.AST, ast.AST | None] = {}  # a scope -> the scope it is in
        self.scope_of: dict[ast.AST, ast.AST] = {}  # a Name, Assign or Call -> its scope
        self.globals: dict[ast.AST, set[str]] = {}
        self._stack: list[ast.AST] = []

    def _bind(self, name: str, how: tuple) -> None:
        scope = self._stack[-1]
        if name in self.globals.get(scope, ()):
            scope = self._stack[0]
        self.of.setdefault(scope, {}).setdefault(name, []).append(how)

    def _targets(self, target: ast.expr, how: tuple) -> None:
        if isinstance(target, ast.Name):
            self._bind(target.id, how)
        elif isinstance(target, (ast.Tuple, ast.List)):
            part = ("part", how[1]) if how[0] == "value" else ("unknown",)
            for element in target.elts:
                self._targets(element.value if isinstance(element, ast.Starred) else element,
                              part)

    def visit(self, node: ast.AST):
        if isinstance(node, _SCOPES):
            self.parent[node] = self._stack[-1] if self._stack else None
            self._stack.append(node)
            self.of.setdefault(node, {})
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                arguments = node.args
                for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                            *filter(None, [arguments.vararg, arguments.kwarg])]:
                    self._bind(arg.arg, ("unknown",))
            super().visit(node)
            self._stack.pop()
            return
        if isinstance(node, (ast.Name, ast.Assign, ast.AnnAssign, ast.Call)):
            self.scope_of[node] = self._stack[-1]
        super().visit(node)

    def visit_FunctionDef(self, node) -> None:
        # (its name is bound in the scope around it; decorators and defaults read there)
        self._stack.pop()
        self._bind(node.name, ("unknown",))
        for outer in [*node.decorator_list, *node.args.defaults,
                      *filter(None, node.args.kw_defaults)]:
            self.visit(outer)
        self._stack.append(node)
        for statement in node.body:
            self.visit(statement)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._stack.pop()
        self._bind(node.name, ("unknown",))
        for outer in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(outer)
        self._stack.append(node)
        for statement in node.body:
            self.visit(statement)

    def visit_Global(self, node: ast.Global) -> None:
        self.globals.setdefault(self._stack[-1], set()).update(node.names)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self._targets(target, ("value", node.value))
            self.visit(target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        if isinstance(node.target, ast.Name) and node.value is not None:
            self._bind(node.target.id, ("value", node.value))
        self.visit(node.target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._targets(node.target, ("unknown",))
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._bind(node.target.id, ("value", node.value))
        self.generic_visit(node)

    def _loop(self, node) -> None:
        self._targets(node.target, ("loop", node.iter))
        self.generic_visit(node)

    visit_For = visit_AsyncFor = visit_comprehension = _loop

    def visit_withitem(self, node: ast.withitem) -> None:
        if node.optional_vars is not None:
            self._targets(node.optional_vars, ("unknown",))
        self.generic_visit(node)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self._bind(node.name, ("unknown",))
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            bound = alias.asname or alias.name.split(".")[0]
            self._bind(bound, ("import", alias.name.rsplit(".", 1)[-1]))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name != "*":
                self._bind(alias.asname or alias.name, ("import", alias.name))

    def lookup(self, name: str, scope: ast.AST) -> list[tuple] | None:
        """What `name` read in `scope` may be bound to, as Python resolves it (class
        bodies are skipped by the functions within them); None if nothing binds it."""
        current: ast.AST | None = scope
        first = True
        while current is not None:
            if not isinstance(current, ast.ClassDef) or first:
                bound = self.of.get(current, {}).get(name)
                if bound:
                    return bound
            first = False
            current = self.parent.get(current)
        return None


class FeedFacts:
    """Reads one module's facts (see the module docstring), or, given what the files
    connected to it say (`known`: `FileView.feed_facts`), what its feed keys hold."""

    def __init__(self, tree: ast.Module, names: AstTfNames, known: dict | None = None):
        self.tree, self.names = tree, names
        self.known = known  # None: the module alone (its attributes are others' question)
        self.bindings = _Bindings()
        self.bindings.visit(tree)
        self._dependent: set[ast.expr] | None = None  # see `_under_dependencies`
        self._deferred: set[str] | None = None  # see `_attribute_quiet`

    # -- kinds -------------------------------------------------------------------------------

    def _builtin(self, node: ast.expr, name: str) -> bool:
        return (isinstance(node, ast.Name) and node.id == name
                and not any(how[0] == "value" for how in self._bound(node) or ()))

    def _bound(self, node: ast.Name) -> list[tuple] | None:
        scope = self.bindings.scope_of.get(node, self.tree)
        return self.bindings.lookup(node.id, scope)

    def kind(self, expr: ast.expr | None, depth: int = 0) -> str | None:
        """The kind of what `expr` evaluates to (see the module docstring), None where the
        file alone does not show it. Given what the connected files say (`known`), a
        trainable variable that only optimizers' arguments read is "frozen": no optimizer
        updates it, since the loss has no gradient to it (a learning rate)."""
        found = self._kind(expr, depth)
        if found == "variable" and depth == 0 and self.known and "steering_only" in self.known:
            name = (expr.id if isinstance(expr, ast.Name)
                    else expr.attr if isinstance(expr, ast.Attribute) else None)
            if name is not None and self.known["steering_only"](name):
                return "frozen"
        return found

    def _kind(self, expr: ast.expr | None, depth: int = 0) -> str | None:
        if expr is None or depth > 5:
            return None
        if isinstance(expr, ast.Name):
            bound = self._bound(expr)
            if not bound:
                return None
            return combine(self._bound_kind(how, depth) for how in bound)
        if isinstance(expr, ast.Constant) and expr.value is None:
            return None
        if isinstance(expr, ast.Attribute):
            if self.names.canonical(expr) is not None:
                return "other"
            return combine(self.known["attributes"].get(expr.attr, ())) if self.known else None
        if isinstance(expr, ast.Call):
            name = self.names.canonical(expr.func)
            if name in VARIABLE_CONSTRUCTORS:
                return self.created(expr, name)
            if name in GLOBAL_STEP_MAKERS or name in GLOBAL_STEP_GETTERS:
                return "global_step"
            if name == UNIQUE_VARIABLE_GETTER:
                return "variable"
            if self._builtin(expr.func, "next") and expr.args:
                return self._comprehension(expr.args[0], depth) or "other"
            return "other"
        if isinstance(expr, ast.Subscript):
            if not isinstance(expr.slice, (ast.Slice, ast.Tuple)):
                found = (self.collection(expr.value, depth + 1)
                         or self._comprehension(expr.value, depth))
                if found:
                    return found
            return "other"
        return "other"

    def _bound_kind(self, how: tuple, depth: int) -> str | None:
        if how[0] == "value":
            return self._kind(how[1], depth + 1)
        if how[0] == "loop":
            return self.collection(how[1], depth + 1)
        if how[0] == "import" and self.known:
            return combine(self.known["attributes"].get(how[1], ()))
        return None  # an import: what it holds is what the imported file assigns

    def created(self, call: ast.Call, name: str) -> str:
        """"frozen" for a variable no optimizer updates, else "variable"."""
        trainable_default, trainable_at, dtype_at, value_at = VARIABLE_CONSTRUCTORS[name]
        trainable = argument(call, "trainable", trainable_at)
        if trainable is None:
            if not trainable_default:
                return "frozen"
        elif isinstance(trainable, ast.Constant) and trainable.value is False:
            return "frozen"
        dtype = argument(call, "dtype", dtype_at)
        if dtype is not None and self._dtype_name(dtype) in NOT_TRAINED_DTYPES:
            return "frozen"
        value = argument(call, "initial_value", value_at) if value_at is not None else None
        if _not_float(value):
            return "frozen"
        return "variable"

    def _dtype_name(self, expr: ast.expr) -> str | None:
        if isinstance(expr, ast.Constant):
            return expr.value if isinstance(expr.value, str) else None
        if isinstance(expr, ast.Attribute):
            return expr.attr
        if isinstance(expr, ast.Name):
            return (self.names.canonical(expr) or expr.id).rsplit(".", 1)[-1]
        return None

    def collection(self, expr: ast.expr | None, depth: int = 0) -> str | None:
        """"variable"/"frozen" when `expr` is a list of variables from a collection."""
        if expr is None or depth > 5:
            return None
        if isinstance(expr, ast.Name):
            kinds = {self.collection(how[1], depth + 1) if how[0] == "value" else None
                     for how in self._bound(expr) or []}
            return kinds.pop() if len(kinds) == 1 else None
        if not isinstance(expr, ast.Call):
            return None
        name = self.names.canonical(expr.func)
        if name in VARIABLE_LISTS:
            return VARIABLE_LISTS[name]
        getter = name in COLLECTION_GETTERS or (
            name is None and isinstance(expr.func, ast.Attribute)
            and expr.func.attr in COLLECTION_GETTERS)
        if getter:
            key = argument(expr, "key", 0)
            if isinstance(key, ast.Attribute):
                return VARIABLE_COLLECTION_KEYS.get(key.attr)
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                return VARIABLE_COLLECTION_KEYS.get(key.value)
            return None
        if any(self._builtin(expr.func, f) for f in ("list", "sorted", "tuple")) and expr.args:
            return self.collection(expr.args[0], depth + 1)
        return None

    def _comprehension(self, expr: ast.expr, depth: int) -> str | None:
        if not isinstance(expr, (ast.ListComp, ast.GeneratorExp)):
            return None
        loop = expr.generators[0]
        if (isinstance(expr.elt, ast.Name) and isinstance(loop.target, ast.Name)
                and expr.elt.id == loop.target.id):
            return self.collection(loop.iter, depth + 1)
        return None

    # -- what a run's fetches do ---------------------------------------------------------------

    def updates_nothing(self, fetch: ast.expr | None, depth: int = 0) -> bool:
        """Whether fetching `fetch` runs no op that writes a variable a feed may hold: it
        is a variable (fetching reads it), a constant, or a TF op of another kind made
        outside any `control_dependencies` from such inputs (a placeholder, a decay schedule
        of the step, a loss, a metric's value or update, which writes only the metric's own
        local variables), or a list, tuple or dict of those. False where it may write one (a
        train op, an assign, an initializer, a collection other than of variables:
        UPDATE_OPS) or where the file does not show what it is (a parameter, what a method or
        a project function returns)."""
        if fetch is None or depth > 8:
            return False
        if isinstance(fetch, ast.Constant):
            return True
        if isinstance(fetch, (ast.List, ast.Tuple, ast.Set)):
            return all(self.updates_nothing(e, depth + 1) for e in fetch.elts)
        if isinstance(fetch, ast.Dict):
            return all(self.updates_nothing(v, depth + 1) for v in fetch.values)
        if isinstance(fetch, ast.BinOp):
            return (self.updates_nothing(fetch.left, depth + 1)
                    and self.updates_nothing(fetch.right, depth + 1))
        if isinstance(fetch, ast.UnaryOp):
            return self.updates_nothing(fetch.operand, depth + 1)
        if isinstance(fetch, ast.Subscript):
            return self.updates_nothing(fetch.value, depth + 1)
        if isinstance(fetch, (ast.Name, ast.Attribute)) and self._kind(fetch) in VARIABLE_KINDS:
            return True
        if isinstance(fetch, ast.Attribute):  # (`tf.float32` is no op's)
            return self.names.canonical(fetch) is not None or self._attribute_quiet(fetch.attr)
        if isinstance(fetch, ast.Name):
            bound = self._bound(fetch)
            return bool(bound) and all(self._quiet_binding(how, depth) for how in bound)
        if isinstance(fetch, ast.Call):
            name = self.names.canonical(fetch.func)
            if name is None:
                return False
            last = name.rsplit(".", 1)[-1]
            if (last in VARIABLE_UPDATES or last in INITIALIZER_CALLS
                    or name in TRAIN_OP_MAKERS or name.startswith("raw_ops.")):
                return False
            if name in COLLECTION_GETTERS:  # (UPDATE_OPS, TRAIN_OP: ops that may write)
                return self.collection(fetch) is not None
            # (`tf.group(train_op)` runs what it is given: every input must write nothing)
            return all(self.updates_nothing(given, depth + 1)
                       for given in [*fetch.args, *(k.value for k in fetch.keywords)])
        return False

    def _quiet_binding(self, how: tuple, depth: int) -> bool:
        if how[0] == "import":
            return self._attribute_quiet(how[1])
        return (how[0] in ("value", "part")  # (`value, update = tf.metrics.mean(loss)`)
                and how[1] not in self._under_dependencies()
                and self.updates_nothing(how[1], depth + 1))

    def _attribute_quiet(self, name: str) -> bool:
        """Whether what an attribute (or imported) name holds writes no variable when
        fetched: as the connected files' `fetched` facts say. Reading the module's own facts,
        the name is noted (`_deferred`) for those facts to say."""
        if self._deferred is not None:
            self._deferred.add(name)
            return True
        return bool(self.known) and "quiet" in self.known and self.known["quiet"](name)

    def _under_dependencies(self) -> set[ast.expr]:
        """The values assigned inside a `with ...control_dependencies(...)` block: ops that
        run what the block depends on."""
        if self._dependent is None:
            self._dependent = set()
            for node in ast.walk(self.tree):
                if isinstance(node, (ast.With, ast.AsyncWith)) and any(
                        isinstance(item.context_expr, ast.Call)
                        and (dotted(item.context_expr.func) or "").endswith(
                            "control_dependencies") for item in node.items):
                    self._dependent.update(
                        inner.value for statement in node.body for inner in ast.walk(statement)
                        if isinstance(inner, (ast.Assign, ast.AnnAssign, ast.NamedExpr))
                        and inner.value is not None)
        return self._dependent

    # -- the facts ---------------------------------------------------------------------------

    def facts(self) -> dict:
        """The module's facts, as JSON data (sorted lists)."""
        attributes: dict[str, set[str]] = {}
        updated: set[str] = set()
        monitored: set[str] = set()
        labels: set[str] = set()
        nodes = sorted((n for n in ast.walk(self.tree)
                        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.Call))),
                       key=lambda n: (n.lineno, n.col_offset))
        records = _namedtuple_fields(nodes)
        fetched: dict[str, dict] = {}
        trains: list[list] = []
        for node in nodes:
            if isinstance(node, ast.Call):
                written: set[str] = set()
                self._call_facts(node, written, labels)
                updated |= written
                trains.extend([node.lineno, [name]] for name in sorted(written))
                self._train_facts(node, trains)
                self._field_facts(node, records, attributes)
                continue
            if node.value is None:
                continue
            self._fetch_facts(node, fetched)
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                if isinstance(target, ast.Attribute):
                    name = target.attr
                elif (isinstance(target, ast.Name)
                      and isinstance(self.bindings.scope_of.get(node), ast.Module)):
                    name = target.id
                else:
                    continue
                kind = self.kind(node.value)
                if kind is not None:
                    attributes.setdefault(name, set()).add(kind)
                if (isinstance(node.value, ast.Call)
                        and self.names.canonical(node.value.func) in MONITORED_SESSIONS):
                    monitored.add(name)
        return {"attributes": {k: sorted(v) for k, v in sorted(attributes.items())},
                "updated": sorted(updated), "monitored": sorted(monitored),
                "names": sorted(labels), "trains": trains,
                "fetched": {k: {"writes": v["writes"], "reads": sorted(v["reads"])}
                            for k, v in sorted(fetched.items())}}

    def _fetch_facts(self, node: ast.Assign | ast.AnnAssign, fetched: dict) -> None:
        """What fetching the attribute (or module-level name) an assignment binds would
        write: `self.loss = ...`, `self.value, self.update = tf.metrics.mean(...)`."""
        names = []
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
            for one in (target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]):
                if isinstance(one, ast.Attribute):
                    names.append(one.attr)
                elif (isinstance(one, ast.Name)
                      and isinstance(self.bindings.scope_of.get(node), ast.Module)):
                    names.append(one.id)
        if not names:
            return
        self._deferred = set()
        try:
            quiet = (node.value not in self._under_dependencies()
                     and self.updates_nothing(node.value))
            reads = self._deferred
        finally:
            self._deferred = None
        for name in names:
            entry = fetched.setdefault(name, {"writes": False, "reads": set()})
            entry["writes"] |= not quiet
            entry["reads"] |= reads - {name}

    def _field_facts(self, call: ast.Call, records: dict[str, list[str]], attributes) -> None:
        """A namedtuple built with a variable in a field (`Model(is_training=v)`): the
        field, as an attribute (`model.is_training`), may hold a variable."""
        if not (isinstance(call.func, ast.Name) and call.func.id in records):
            return
        fields = records[call.func.id]
        positional = [a for a in call.args if not isinstance(a, ast.Starred)]
        given = [(fields[i], a) for i, a in enumerate(positional) if i < len(fields)]
        given += [(k.arg, k.value) for k in call.keywords if k.arg is not None]
        for field, value in given:
            kind = self.kind(value)
            if kind is not None:
                attributes.setdefault(field, set()).add(kind)

    def _call_facts(self, call: ast.Call, updated: set[str], labels: set[str]) -> None:
        name = self.names.canonical(call.func)
        if name in VARIABLE_UPDATES:
            self._note_update(argument(call, "ref", 0), updated)
        elif (name is None and isinstance(call.func, ast.Attribute)
              and call.func.attr in VARIABLE_UPDATES):
            self._note_update(call.func.value, updated)
        for given in call.keywords:
            if given.arg == "global_step":
                self._note_update(given.value, updated)
        if (isinstance(call.func, ast.Attribute) and name is None
                and call.func.attr in TRAIN_METHODS):
            positional = [a for a in call.args if not isinstance(a, ast.Starred)]
            if len(positional) > 1:
                self._note_update(positional[1], updated)
        if name in VARIABLE_CONSTRUCTORS and self.created(call, name) == "variable":
            label = argument(call, "name", 0 if name in GET_VARIABLE_CALLS else None)
            if isinstance(label, ast.Constant) and isinstance(label.value, str):
                labels.add(label.value.rsplit("/", 1)[-1])

    def _train_facts(self, call: ast.Call, trains: list[list]) -> None:
        """An optimizer update (`opt.minimize(loss, var_list=[w])`, `compute_gradients`,
        `apply_gradients`, `optimize_loss`): [line, the last names of a literal `var_list`],
        or [line, None] where it may update any trainable variable (no `var_list`, or one
        the syntax does not list: `apply_gradients` takes its pairs from elsewhere)."""
        name = self.names.canonical(call.func)
        func = call.func
        method = func.attr if isinstance(func, ast.Attribute) and name is None else None
        if method not in _UPDATE_METHODS and name not in TRAIN_OP_MAKERS - {"count_up_to"}:
            return
        given = argument(call, "var_list", _VAR_LIST_AT.get(method))
        keras = argument(call, "var_list", 1)
        if method == "minimize" and isinstance(keras, (ast.List, ast.Tuple)):
            given = keras  # Keras' `minimize(loss, var_list)`: a list is no TF 1 global step
        listed = None
        if isinstance(given, (ast.List, ast.Tuple)) and all(
                isinstance(e, (ast.Name, ast.Attribute)) for e in given.elts):
            listed = sorted({e.id if isinstance(e, ast.Name) else e.attr for e in given.elts})
        trains.append([call.lineno, listed])

    def _note_update(self, expr: ast.expr | None, updated: set[str]) -> None:
        if isinstance(expr, ast.Name):
            updated.add(expr.id)
        elif isinstance(expr, ast.Attribute):
            updated.add(expr.attr)
        if self.kind(expr) == "global_step":
            updated.add(GLOBAL_STEP_UPDATED)


class _Reads(ast.NodeVisitor):
    """The last names (`lr`, `self.lr` -> `lr`) a module reads in an optimizer's arguments
    (`steering`), and those it reads elsewhere where they may reach a loss (`graph_reads`):
    not in a run's or an eval's arguments, a dict keyed by tensors (a feed dict built
    earlier), a summary, a print, a variable update, or as what a method is called on
    (`lr.assign(..)`, `lr.load(..)`). A dict keyed by names the module binds only to
    literals (`{PENALTY: scale * norm}`, `PENALTY = "penalty"`), or by TF's own constants,
    is no feed dict: its values are read."""

    _QUIET_METHODS = VARIABLE_UPDATES | {"run", "eval", "load", "initializer", "read_value",
                                         "initialized_value", "op", "name"}

    def __init__(self, names: AstTfNames, literals: frozenset[str] = frozenset()):
        self.names = names
        self.literals = literals  # the last names the module binds to literals only
        self.steering: set[str] = set()
        self.graph_reads: set[str] = set()
        self._in_optimizer = 0

    def _note(self, name: str) -> None:
        (self.steering if self._in_optimizer else self.graph_reads).add(name)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self._note(node.id)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, ast.Load) and node.attr not in self._QUIET_METHODS:
            self._note(node.attr)
        if node.attr in self._QUIET_METHODS and isinstance(node.value, (ast.Name,
                                                                         ast.Attribute)):
            if isinstance(node.value, ast.Attribute):
                self.visit(node.value.value)  # `self` of `self.lr.assign`: not `lr`
            return
        self.visit(node.value)

    def visit_Dict(self, node: ast.Dict) -> None:
        if any(self._may_be_tensor(key) for key in node.keys):
            return  # keyed by tensors: a feed dict, its values fed from Python
        for value in node.values:
            self.visit(value)

    def _may_be_tensor(self, key: ast.expr | None) -> bool:
        if isinstance(key, ast.Name):
            return key.id not in self.literals
        if isinstance(key, ast.Attribute):
            return self.names.canonical(key) is None and key.attr not in self.literals
        return isinstance(key, ast.Subscript)

    def visit_Call(self, node: ast.Call) -> None:
        name = self.names.canonical(node.func) or ""
        func = node.func
        method = func.attr if isinstance(func, ast.Attribute) else None
        if (method in ("run", "eval") or name.startswith("summary.")
                or name.rsplit(".", 1)[-1] in VARIABLE_UPDATES
                or (isinstance(func, ast.Name) and func.id == "print")):
            self.visit(func)
            return  # what a run fetches and feeds, a summary, an assign: no loss's path
        steering = OPTIMIZER_CLASS.fullmatch(name) is not None
        self.visit(func)
        self._in_optimizer += steering
        for given in [*node.args, *(k.value for k in node.keywords)]:
            self.visit(given)
        self._in_optimizer -= steering


def _literal_names(tree: ast.Module) -> frozenset[str]:
    """The last names (`PENALTY`, `self.key` -> `key`) a module binds, wherever it does, to
    a literal (`PENALTY = "penalty"`) and in no other way."""
    literal, other, targets = set(), set(), set()
    for node in ast.walk(tree):  # (an assignment before its targets)
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant):
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                if isinstance(target, (ast.Name, ast.Attribute)):
                    literal.add(target.id if isinstance(target, ast.Name) else target.attr)
                    targets.add(target)
        elif node in targets:
            continue
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            other.add(node.id)
        elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
            other.add(node.attr)
        elif isinstance(node, ast.arg):
            other.add(node.arg)
        elif isinstance(node, ast.alias):
            other.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            other.add(node.name)
    return frozenset(literal - other)


def _not_float(value: ast.expr | None) -> bool:
    """An initial value that makes an int or bool variable: `0`, `True`, `[1, 2]`."""
    if isinstance(value, ast.Constant):
        return type(value.value) in (int, bool)
    if isinstance(value, (ast.List, ast.Tuple)) and value.elts:
        return all(_not_float(e) for e in value.elts)
    return False


def _namedtuple_fields(nodes: list[ast.AST]) -> dict[str, list[str]]:
    """The namedtuple classes a file makes (`Model = collections.namedtuple("Model",
    ["is_training", ...])`), with their fields in order (none where not spelled out)."""
    found = {}
    for node in nodes:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call)
                and (dotted(node.value.func) or "").rsplit(".", 1)[-1] == "namedtuple"):
            continue
        spec = argument(node.value, "field_names", 1)
        fields: list[str] = []
        if isinstance(spec, ast.Constant) and isinstance(spec.value, str):
            fields = spec.value.replace(",", " ").split()
        elif isinstance(spec, (ast.List, ast.Tuple)):
            fields = [e.value for e in spec.elts
                      if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        found[node.targets[0].id] = fields
    return found


def feed_facts(tree: ast.Module, names: AstTfNames) -> dict:
    """One module's facts about feed keys (see the module docstring)."""
    return FeedFacts(tree, names).facts()


def name_reads(tree: ast.Module, names: AstTfNames) -> dict:
    """What one module reads: {"steering", "graph_reads"} (see the module docstring)."""
    reads = _Reads(names, _literal_names(tree))
    reads.visit(tree)
    return {"steering": sorted(reads.steering), "graph_reads": sorted(reads.graph_reads)}
