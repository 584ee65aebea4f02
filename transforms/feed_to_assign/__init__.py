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
op to the graph however often it runs. Feeds of placeholders and tensors stay; variables
known only at run time (keys taken from a collection, fed by name) and runs a load cannot
safely precede are reported, not fixed. See `FeedToAssignCodemod`.
"""

from __future__ import annotations

import ast

from graphfix.findings import Change, Finding
from graphfix.graph import (
    COLOCATION_ATTR,
    VARIABLE_OPS,
    GraphIndex,
    is_handle_type,
    parse_input,
)
from graphfix.registry import Context, Param, Transform
from graphfix.sourcecode import Syntax, call_arguments, strings_in, tail_name

_FLOAT_REF_ERROR = ("feeding it while an optimizer updates it fails: \"Input 0 of node "
                    "... was passed float from _arg_...:0 incompatible with expected float_ref\"")
_RESOURCE_READS = frozenset({"ReadVariableOp", "ResourceGather", "ResourceGatherNd"})
_SAVE_OPS = frozenset({"SaveV2", "Save", "SaveSlices"})


def _variable_behind(graph: GraphIndex, tensor: str) -> str | None:
    """The variable a tensor name stands for: its output, its `read`, or a read of it."""
    name = parse_input(tensor)[0]
    if name not in graph:
        return None
    node = graph.node(name)
    if node.op in VARIABLE_OPS:
        return name
    if node.op in ("Identity", "ReadVariableOp") and node.input:
        source = parse_input(node.input[0])[0]
        if source in graph and graph.node(source).op in VARIABLE_OPS:
            return source
    return None


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


# -- the source pre-check: the runs the codemod reads, by the stdlib's parser ----------------

# The last names of what creates variables and global steps (see source.py's vocabulary).
_VARIABLE_MAKERS = frozenset({"Variable", "VariableV1", "get_variable", "get_local_variable",
                              "variable", "model_variable", "local_variable", "global_variable",
                              "get_unique_variable"})
_GLOBAL_STEP_MAKERS = frozenset({"get_or_create_global_step", "create_global_step",
                                 "get_global_step"})
_COLLECTION_MAKERS = frozenset({
    "trainable_variables", "global_variables", "all_variables", "model_variables",
    "local_variables", "moving_average_variables", "get_variables", "get_model_variables",
    "get_trainable_variables", "get_variables_to_restore", "get_variables_by_name",
    "get_variables_by_suffix", "get_local_variables", "get_collection", "get_collection_ref"})
# What writes a variable in place, as a function taking it first or as its method.
_UPDATE_CALLS = frozenset({
    "assign", "assign_add", "assign_sub", "scatter_update", "scatter_add", "scatter_sub",
    "scatter_mul", "scatter_div", "scatter_max", "scatter_min", "scatter_nd_update",
    "scatter_nd_add", "scatter_nd_sub", "batch_scatter_update"})
_GLOBAL_STEP = "<global_step>"  # the scan's fact "a global step is updated"


def _runs(syntax: Syntax):
    """(feed, session expression) of each `X.run(...)` / `X.eval(...)` given a feed dict."""
    for call in syntax.calls:
        func = call.func
        if not isinstance(func, ast.Attribute) or func.attr not in ("run", "eval"):
            continue
        if any(isinstance(a, ast.Starred) for a in call.args) or any(
                k.arg is None for k in call.keywords):
            continue
        feed = next((k.value for k in call.keywords if k.arg == "feed_dict"), None)
        if feed is None and func.attr == "run" and len(call.args) >= 2:
            feed = call.args[1]
        if feed is None and func.attr == "eval" and call.args and isinstance(
                call.args[0], (ast.Dict, ast.DictComp)):
            feed = call.args[0]
        if feed is None:
            continue
        session = next((k.value for k in call.keywords if k.arg == "session"), None)
        if session is None and func.attr == "eval" and len(call.args) >= 2:
            session = call.args[1]
        yield feed, (session if session is not None else func.value)


def _feed_keys(feed: ast.expr, syntax: Syntax) -> tuple[list[ast.expr], list[ast.expr]]:
    """(the keys a feed may hold, as far as the file shows them; the dicts among its values
    whose keys are known only at run time: `{v: x for v in ...}`, `dict(zip(...))`)."""
    if isinstance(feed, ast.Dict):
        return [k for k in feed.keys if k is not None], []
    if isinstance(feed, ast.DictComp) or (isinstance(feed, ast.Call)
                                          and tail_name(feed.func) == "dict"):
        return [], [feed]
    if not isinstance(feed, ast.Name):
        return [], []
    keys, runtime = [], []
    for value in syntax.assigned.get(feed.id, ()):  # fd = {...}
        more, later = _feed_keys(value, syntax) if not isinstance(value, ast.Name) else ([], [])
        keys.extend(more)
        runtime.extend(later)
    for node in syntax.assigns:  # fd[k] = v
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
            if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                    and target.value.id == feed.id):
                keys.append(target.slice)
    for call in syntax.calls:  # fd.update({k: v}), fd.setdefault(k, v)
        func = call.func
        if (isinstance(func, ast.Attribute) and func.attr in ("update", "setdefault")
                and isinstance(func.value, ast.Name) and func.value.id == feed.id and call.args):
            first = call.args[0]
            keys.extend([k for k in first.keys if k is not None] if isinstance(first, ast.Dict)
                        else [first])
    return keys, runtime


def _may_name_variable(key: ast.expr, syntax: Syntax, depth: int = 0) -> bool:
    """Whether a key may name a variable's op (`"emb:0"`, `get_tensor_by_name(...)`)."""
    if isinstance(key, ast.Constant):
        return isinstance(key.value, str)
    if isinstance(key, ast.Call):
        return tail_name(key.func) in ("get_tensor_by_name", "as_graph_element")
    if isinstance(key, ast.Name) and depth < 3:
        return any(_may_name_variable(v, syntax, depth + 1)
                   for v in syntax.assigned.get(key.id, ()))
    return False


def _may_be_variable(value: ast.expr, syntax: Syntax, through_attributes: bool,
                     depth: int = 0) -> bool:
    """Whether `value` may be a variable: a call that makes one (`tf.Variable`, a global
    step, `next(...)` over a collection), an item of a collection, or a name that may hold
    one; an attribute only `through_attributes` (the run's facts say what `.emb` holds; a
    file's own scan does not know)."""
    if isinstance(value, ast.Call):
        return tail_name(value.func) in (_VARIABLE_MAKERS | _GLOBAL_STEP_MAKERS | {"next"})
    if isinstance(value, ast.Subscript):
        return _may_be_collection(value.value, syntax, depth)
    if isinstance(value, ast.Attribute):
        return through_attributes
    if isinstance(value, ast.Name):
        if depth > 5 or value.id in syntax.loop_names or value.id in syntax.imports:
            return True
        return any(_may_be_variable(v, syntax, through_attributes, depth + 1)
                   for v in syntax.assigned.get(value.id, ()))
    return False


def _may_be_collection(value: ast.expr, syntax: Syntax, depth: int = 0) -> bool:
    """Whether `value` may be a list of variables (`tf.trainable_variables()`, a comprehension
    over one, a name bound to one)."""
    if depth > 5:
        return True
    if isinstance(value, ast.Call):
        name = tail_name(value.func)
        if name in ("list", "sorted", "tuple") and value.args:
            return _may_be_collection(value.args[0], syntax, depth + 1)
        return name in _COLLECTION_MAKERS
    if isinstance(value, (ast.ListComp, ast.GeneratorExp)):
        return _may_be_collection(value.generators[0].iter, syntax, depth + 1)
    if isinstance(value, ast.Name):
        return (value.id in syntax.loop_names or value.id in syntax.imports
                or any(_may_be_collection(v, syntax, depth + 1)
                       for v in syntax.assigned.get(value.id, ())))
    return False


def _module_level_assignments(tree: ast.Module) -> set[int]:
    """The ids of the assignments that bind module-level names (outside any function or
    class, `if` and `try` blocks included)."""
    found, todo = set(), [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            found.add(id(node))
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                   ast.Lambda, ast.expr)):
            todo.extend(ast.iter_child_nodes(node))
    return found


def _updated_names(syntax: Syntax) -> set[str]:
    """The last names of what a file may write in place: `tf.assign(step, ...)`,
    `step.assign_add(...)`, `global_step=step`, `opt.minimize(loss, step)`."""
    names = set()
    for call in syntax.calls:
        func = call.func
        name = tail_name(func)
        if name in _UPDATE_CALLS:
            names.add(tail_name(call.args[0]) if call.args else None)
            if isinstance(func, ast.Attribute):
                names.add(tail_name(func.value))
        if name in ("minimize", "apply_gradients") and len(call.args) > 1:
            names.add(tail_name(call.args[1]))
        names.update(tail_name(k.value) for k in call.keywords if k.arg == "global_step")
    names.discard(None)
    return names


def _key_words(key: ast.expr, syntax: Syntax, words: set, depth: int) -> None:
    """The names other files' facts may say something about, for one feed key."""
    if depth > 5:
        return
    if isinstance(key, ast.Attribute):  # self.emb: what any file assigns to `.emb`
        words.add(key.attr)
        words.update(_GLOBAL_STEP_MAKERS)  # it may be a global step another file updates
    elif isinstance(key, ast.Name):
        values = syntax.assigned.get(key.id, ())
        if key.id in syntax.imports:  # from model import emb
            words.add(syntax.imports[key.id].rsplit(".", 1)[-1])
        if _may_be_variable(key, syntax, through_attributes=True):
            words.add(key.id)  # another file may update it in place
            words.update(_GLOBAL_STEP_MAKERS)
        for value in values:
            _key_words(value, syntax, words, depth + 1)
    elif isinstance(key, ast.Constant) and isinstance(key.value, str):  # fed by name
        words.add(key.value.split(":")[0].rsplit("/", 1)[-1])
    elif isinstance(key, ast.Call) and tail_name(key.func) in (
            "get_tensor_by_name", "as_graph_element") and key.args:
        _key_words(key.args[0], syntax, words, depth + 1)


class FeedToAssign(Transform):
    name = "feed-to-assign"
    summary = "feed variables through a placeholder and an assign, not in place of the variable"
    params = (
        Param("variables", None, "names of the variables that are fed", multiple=True),
    )
    # The source surface lives in source.py, loaded on first use (libcst is slow to
    # import and the graph path never needs it).
    codemod = ".source:FeedToAssignCodemod"
    source_triggers = ("run(", "eval(")
    source_scans = True
    # Files that can hold a fact the scan collects: TF code that creates variables
    # (`tf.Variable`, `get_variable`, slim's `variable`/`model_variable`), updates them
    # (`assign*`, `global_step=`, `minimize`/`apply_gradients`) or monitors a session.
    source_scan_triggers = (("tensorflow", "tf_slim"),
                            ("Variable", "variable(", "assign", "global_step", "minimize",
                             "apply_gradients", "Monitored"))

    @classmethod
    def has_source_work(cls, syntax: Syntax) -> bool:
        """A run given a feed that may hold a variable: a key that may be one (not a
        placeholder, not a parameter) or name one, or keys taken from a collection."""
        for feed, _ in _runs(syntax):
            keys, runtime = _feed_keys(feed, syntax)
            if any(_may_be_variable(k, syntax, through_attributes=True)
                   or _may_name_variable(k, syntax) for k in keys):
                return True
            if any(_may_be_collection(node, syntax) for root in runtime
                   for node in ast.walk(root) if isinstance(node, (ast.Call, ast.Name))):
                return True
        return False

    @classmethod
    def facts_offered(cls, syntax: Syntax) -> frozenset[str]:
        """The names this file's facts can make matter for a feed key: attributes (and
        module-level names) it assigns something that may be a variable or a
        MonitoredSession, the names of what it updates in place, and the `name=` of the
        variables it makes."""
        names = _updated_names(syntax)
        if names:  # it may update a global step: wanted by the name of what makes it
            names.update(_GLOBAL_STEP_MAKERS & {tail_name(c.func) for c in syntax.calls})
        module_level = _module_level_assignments(syntax.tree)
        for node in syntax.assigns:
            if node.value is None:
                continue
            monitored = isinstance(node.value, ast.Call) and "Monitored" in (
                tail_name(node.value.func) or "")
            if monitored or _may_be_variable(node.value, syntax, through_attributes=False):
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    # an attribute anywhere; a name at module level (what `from m import
                    # emb` reads)
                    if isinstance(target, ast.Attribute) or (
                            isinstance(target, ast.Name) and id(node) in module_level):
                        names.add(tail_name(target))
        for call in syntax.calls:
            if tail_name(call.func) in _VARIABLE_MAKERS:
                names.update(text.rsplit("/", 1)[-1] for arg in call_arguments(call)
                             for text in strings_in(arg))
        return frozenset(names)

    @classmethod
    def facts_wanted(cls, syntax: Syntax) -> frozenset[str]:
        """What the feeds' keys (and sessions) may need from other files: the attribute and
        imported names a key resolves to (variables made elsewhere, `self.emb`), the names
        of variables that something else may update in place, ops fed by name (`"emb:0"`),
        and attributes that may hold a MonitoredSession."""
        words: set[str] = set()
        for feed, session in _runs(syntax):
            for key in _feed_keys(feed, syntax)[0]:
                _key_words(key, syntax, words, 0)
            if isinstance(session, ast.Attribute):
                words.add(session.attr)
        return frozenset(words)

    @classmethod
    def facts_decisive(cls, name: str, facts: list[dict]) -> bool:
        """An attribute some file assigns a variable: what every file assigns to it counts
        (the other facts are unions, complete from the files that offer them)."""
        return any(kind in ("variable", "frozen", "global_step")
                   for one in facts for kind in one["attributes"].get(name, ()))

    def check_graph(self, graph: GraphIndex, ctx: Context) -> list[Finding]:
        findings = []
        for variable, why in _fed_variables(graph, ctx).items():
            if variable not in graph or graph.node(variable).op not in VARIABLE_OPS:
                findings.append(Finding(ctx.path, self.name, f"{variable!r} is not a variable",
                                        fixable=False, node=variable))
                continue
            if f"{variable}/feed_assign" in graph:
                continue  # already fixed
            findings.append(Finding(ctx.path, self.name,
                                    f"variable {variable} is fed ({why}); {_FLOAT_REF_ERROR}",
                                    node=variable))
        return findings

    def fix_graph(self, graph: GraphIndex, ctx: Context) -> list[Change]:
        changes = []
        fed = _fed_variables(graph, ctx)
        renames: dict[str, str] = {}
        for variable_name in fed:
            if variable_name not in graph or graph.node(variable_name).op not in VARIABLE_OPS:
                continue
            if f"{variable_name}/feed_assign" in graph:
                renames[f"{variable_name}:0"] = f"{variable_name}/feed:0"
                continue
            feed, assign, readers = self._add_feed(graph, graph.node(variable_name))
            renames[f"{variable_name}:0"] = f"{feed}:0"
            changes.append(Change(
                ctx.path, self.name,
                f"variable {variable_name}: feed {feed}:0 (assigned by {assign}) instead of "
                f"{variable_name}:0; {len(readers)} reader(s) run after the assign",
                node=variable_name,
                details={"feed": f"{feed}:0", "assign_op": assign,
                         "renames": {f"{variable_name}:0": f"{feed}:0"},
                         "added_nodes": [f"{variable_name}/feed/default", feed, assign]},
            ))
        changes.extend(self._rebind_signatures(graph, ctx, renames))
        return changes

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

    def _rebind_signatures(self, graph: GraphIndex, ctx: Context, renames: dict[str, str]):
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
