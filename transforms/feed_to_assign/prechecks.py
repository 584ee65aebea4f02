"""feed-to-assign's source pre-checks, by the stdlib's parser (no libcst): the predicate of
its trigger vocabulary (which runs the codemod reads), and the facts its cross-file scan
offers and wants. Loaded on first use: a run over graphs never needs it.
"""

from __future__ import annotations

import ast

from graphfix.source.syntax import Syntax, call_arguments, strings_in, tail_name
from graphfix.source.vocabulary import (
    COLLECTION_GETTERS,
    GLOBAL_STEP_GETTERS,
    GLOBAL_STEP_MAKERS,
    UNIQUE_VARIABLE_GETTER,
    VARIABLE_CONSTRUCTORS,
    VARIABLE_LISTS,
    VARIABLE_UPDATES,
    last_names,
)

# The last names of what creates (or finds) variables and global steps and of what lists
# them: the pre-check sees spellings, not what they resolve to.
_VARIABLE_MAKERS = last_names({*VARIABLE_CONSTRUCTORS, UNIQUE_VARIABLE_GETTER})
_GLOBAL_STEP_MAKERS = last_names(GLOBAL_STEP_MAKERS | GLOBAL_STEP_GETTERS)
_COLLECTION_MAKERS = last_names(VARIABLE_LISTS) | COLLECTION_GETTERS
GLOBAL_STEP_UPDATED = "<global_step>"  # the scan's fact "a global step is updated"


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
        if name in VARIABLE_UPDATES:
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


def may_feed_a_variable(syntax: Syntax) -> bool:
    """Whether a run is given a feed that may hold a variable: a key that may be one (not a
    placeholder, not a parameter) or name one, or keys taken from a collection (the
    predicate of `FeedToAssign.source_triggers`)."""
    for feed, _ in _runs(syntax):
        keys, runtime = _feed_keys(feed, syntax)
        if any(_may_be_variable(k, syntax, through_attributes=True)
               or _may_name_variable(k, syntax) for k in keys):
            return True
        if any(_may_be_collection(node, syntax) for root in runtime
               for node in ast.walk(root) if isinstance(node, (ast.Call, ast.Name))):
            return True
    return False


def facts_offered(syntax: Syntax) -> frozenset[str]:
    """`FeedToAssign.facts_offered` (its docstring says what counts)."""
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
        elif tail_name(call.func) == "namedtuple":  # its fields may hold variables
            names.update(word for arg in call_arguments(call) for text in strings_in(arg)
                         for word in text.replace(",", " ").split())
    return frozenset(names)


def facts_wanted(syntax: Syntax) -> frozenset[str]:
    """`FeedToAssign.facts_wanted` (its docstring says what counts)."""
    words: set[str] = set()
    for feed, session in _runs(syntax):
        for key in _feed_keys(feed, syntax)[0]:
            _key_words(key, syntax, words, 0)
        if isinstance(session, ast.Attribute):
            words.add(session.attr)
    return frozenset(words)
