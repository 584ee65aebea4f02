"""feed-to-assign's source pre-checks, by the stdlib's parser (no libcst): the predicate of
its trigger vocabulary (which runs the codemod reads). Loaded on first use: a run over
graphs never needs it.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from graphfix.source.project.feeds import VARIABLE_KINDS
from graphfix.source.syntax import Syntax, tail_name
from graphfix.source.vocabulary import (
    COLLECTION_GETTERS,
    GLOBAL_STEP_GETTERS,
    GLOBAL_STEP_MAKERS,
    UNIQUE_VARIABLE_GETTER,
    VARIABLE_CONSTRUCTORS,
    VARIABLE_LISTS,
    last_names,
)

if TYPE_CHECKING:
    from graphfix.source.project import FileView

# The last names of what creates (or finds) variables and global steps and of what lists
# them: the pre-check sees spellings, not what they resolve to.
_VARIABLE_MAKERS = last_names({*VARIABLE_CONSTRUCTORS, UNIQUE_VARIABLE_GETTER})
_GLOBAL_STEP_MAKERS = last_names(GLOBAL_STEP_MAKERS | GLOBAL_STEP_GETTERS)
_COLLECTION_MAKERS = last_names(VARIABLE_LISTS) | COLLECTION_GETTERS


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


def model_may_feed_a_variable(view: FileView) -> bool:
    """The project model's reading of the feed keys (the `in_project` predicate of
    `FeedToAssign.source_triggers`): a key it reads as a variable (or as one no optimizer
    updates, which something may update in place), a key that may name a variable's op, or
    keys from a collection. A key it reads as no variable, or as unknown (a parameter), is
    left alone by the codemod too."""
    reader = view.feed_reader()
    if reader is None:
        return True
    syntax = Syntax(reader.tree)
    for feed, _ in _runs(syntax):
        keys, runtime = _feed_keys(feed, syntax)
        if runtime:
            return True
        for key in keys:
            if reader.kind(key) in VARIABLE_KINDS or _may_name_variable(key, syntax):
                return True
    return False


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
