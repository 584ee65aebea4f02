"""Where a node of a libcst tree sits, as the source rules ask it: the statement and the
function holding it, the `with` blocks around it, the value a name is bound to.

Each takes `parent`, the tree's node -> parent map as a callable (`SourceCodemod.parent`),
so the rules of one file share the one walk `ParentProvider` made.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import libcst as cst
from libcst.metadata import Assignment, Scope

Parent = Callable[[cst.CSTNode], "cst.CSTNode | None"]


def enclosing(node: cst.CSTNode, parent: Parent, *kinds: type,
              within_function: bool = False) -> cst.CSTNode | None:
    """The innermost node of `kinds` holding `node`; None if there is none (or, with
    `within_function`, none before the body of the function or lambda holding `node`)."""
    child, current = node, parent(node)
    while current is not None:
        if isinstance(current, kinds):
            return current
        if within_function and isinstance(current, (cst.FunctionDef, cst.Lambda)) \
                and child is current.body:
            return None
        child, current = current, parent(current)
    return None


def enclosing_function(node: cst.CSTNode, parent: Parent) -> cst.FunctionDef | None:
    """The function whose body holds `node` (not one whose decorator or default it is in);
    None at module level."""
    child, current = node, parent(node)
    while current is not None:
        if isinstance(current, cst.FunctionDef) and child is current.body:
            return current
        child, current = current, parent(current)
    return None


def inside(node: cst.CSTNode, outer: cst.CSTNode, parent: Parent) -> bool:
    """Whether `outer` holds `node` (a node is not inside itself)."""
    current = parent(node)
    while current is not None and current is not outer:
        current = parent(current)
    return current is outer


def in_one_turn_branch(node: cst.CSTNode, loop: cst.CSTNode | None, parent: Parent) -> bool:
    """Whether `node` is in the body of an `if` whose test says `loop`, a `for _ in
    range(n)`, turns once (`n == 1`, `1 == n`, `n < 2`, `n <= 1`): code a program runs
    only where its tower loop builds one tower."""
    turns = loop.iter if isinstance(loop, cst.For) else None
    if not (isinstance(turns, cst.Call) and isinstance(turns.func, cst.Name)
            and turns.func.value in ("range", "xrange") and len(turns.args) == 1):
        return False
    count = turns.args[0].value
    child, current = node, parent(node)
    while current is not None:
        if (isinstance(current, cst.If) and child is current.body
                and _says_one_turn(current.test, count)):
            return True
        child, current = current, parent(current)
    return False


def _says_one_turn(test: cst.BaseExpression, count: cst.BaseExpression) -> bool:
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return False
    left, op = test.left, test.comparisons[0].operator
    right = test.comparisons[0].comparator

    def number(expr: cst.BaseExpression) -> str | None:
        return expr.value if isinstance(expr, cst.Integer) else None

    if isinstance(op, cst.Equal):
        return (left.deep_equals(count) and number(right) == "1"
                or number(left) == "1" and right.deep_equals(count))
    return left.deep_equals(count) and (isinstance(op, cst.LessThan) and number(right) == "2"
                                        or isinstance(op, cst.LessThanEqual)
                                        and number(right) == "1")


def with_items_around(node: cst.CSTNode, parent: Parent
                      ) -> Iterator[cst.WithItem | cst.FunctionDef | cst.Lambda | cst.ClassDef]:
    """What may decide where the ops made at `node` go, innermost first: the items of each
    `with` holding it (those before it, where it is in an item), and where the code's
    own scopes end, the function or lambda whose body holds it and any class holding it
    (the caller's scopes apply there). The walk goes on past those for a rule that reads
    further out; a rule judges the items (a device, a job, an `arg_scope`) itself."""
    child, current = node, parent(node)
    while current is not None:
        if isinstance(current, cst.With):
            items = list(current.items)
            if child is not current.body:
                items = items[: next(i for i, item in enumerate(items) if item is child)]
            yield from reversed(items)
        elif isinstance(current, (cst.FunctionDef, cst.Lambda)) and child is current.body:
            yield current
        elif isinstance(current, cst.ClassDef):
            yield current
        child, current = current, parent(current)


def bound_name(value: cst.CSTNode, parent: Parent) -> cst.Name | None:
    """`x` for the value of `x = value` (one target, a name); else None."""
    statement = parent(value)
    if (isinstance(statement, cst.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0].target, cst.Name)):
        return statement.targets[0].target
    return None


def single_value(name: cst.Name, scope: Scope | None, parent: Parent
                 ) -> cst.BaseExpression | None:
    """The value `name` is bound to when one plain assignment in its scope binds it
    (`cluster = {...}` once); None for any other binding (several, an import, a loop,
    a parameter, part of a tuple). `scope`: the name's scope (libcst's ScopeProvider)."""
    if scope is None:
        return None
    assignments = [a for a in scope[name.value] if isinstance(a, Assignment)]
    if len(assignments) != 1:
        return None
    target = assignments[0].node
    statement = parent(parent(target) or target)
    if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
        return statement.value
    return None


_GROWS_A_LIST = frozenset({"append", "extend", "insert"})


def bound_values(body: cst.CSTNode) -> dict[str, list[cst.CSTNode]]:
    """Each name bound in `body` -> what it is bound to, in source order: the value of each
    assignment to it (augmented and annotated too; a name in a tuple target is bound to
    the whole value) and each call that grows it as a list (`name.append(...)`, `extend`,
    `insert`). Where the code runs is not read: a rule asks that of each value."""
    out: dict[str, list[cst.CSTNode]] = {}
    for node in descendants(body, cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Call):
        if isinstance(node, cst.Call):
            func = node.func
            if (isinstance(func, cst.Attribute) and func.attr.value in _GROWS_A_LIST
                    and isinstance(func.value, cst.Name)):
                out.setdefault(func.value.value, []).append(node)
        elif node.value is not None:
            targets = ([t.target for t in node.targets] if isinstance(node, cst.Assign)
                       else [node.target])
            for name in (n for target in targets if isinstance(target, (cst.Name, cst.Tuple,
                                                                       cst.List))
                         for n in descendants(target, cst.Name)):
                out.setdefault(name.value, []).append(node.value)
    return out


class _Collect(cst.CSTVisitor):
    def __init__(self, kinds: tuple[type, ...], skip_lambdas: bool):
        super().__init__()
        self.kinds, self.skip_lambdas = kinds, skip_lambdas
        self.found: list = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, self.kinds):
            self.found.append(node)
        return not (self.skip_lambdas and isinstance(node, cst.Lambda))


def descendants(root: cst.CSTNode, *kinds: type, skip_lambdas: bool = False) -> list:
    """Every node of `kinds` in `root` (itself included), in source order; with
    `skip_lambdas`, not those in a lambda's body (code that runs when it is called)."""
    collect = _Collect(kinds, skip_lambdas)
    root.visit(collect)
    return collect.found


def trace_values(expr: cst.BaseExpression, parent: Parent, module: cst.Module,
                 step: Callable[[cst.CSTNode, object], object | None], start: object) -> None:
    """Follow what `expr` is computed from back through the code of `module`: a name
    through the values bound to it in the function (or module) reading it
    (`bound_values`), `self.<attribute>` through the values its class's methods assign to
    it, a call of one of the module's functions (or of `self.<method>`) through the values
    it returns. `step(value, state)` is called once for each value and state a path reaches
    it with (`start` for `expr`'s own paths), and returns the state to follow the value's
    names with, or None to follow it no further: states come from a small set (a flag),
    so that a value bound from itself (`parts.append(...)`) ends the walk. The path taken
    is not read (a branch, a loop): a rule judges each value itself."""
    functions: dict[str, list[cst.FunctionDef]] = {}
    for function in descendants(module, cst.FunctionDef):
        functions.setdefault(function.name.value, []).append(function)
    bindings: dict[int, dict[str, list[cst.CSTNode]]] = {}

    def body_of(node: cst.CSTNode) -> cst.CSTNode:
        return enclosing_function(node, parent) or module

    def values_named(node: cst.CSTNode, body: cst.CSTNode) -> list[cst.CSTNode]:
        cls = enclosing(body, parent, cst.ClassDef)
        if isinstance(node, cst.Name):
            if bindings.get(id(body)) is None:
                bindings[id(body)] = bound_values(body)
            return bindings[id(body)].get(node.value, [])
        if isinstance(node, cst.Attribute):
            return [a.value for a in descendants(cls, cst.Assign, cst.AugAssign)
                    if any(_is_self(t) and t.attr.value == node.attr.value
                           for t in _targets(a))] if cls and _is_self(node) else []
        if isinstance(node.func, cst.Name) or _is_self(node.func):
            return [r.value for f in functions.get(_called_name(node.func), ())
                    if enclosing(f, parent, cst.ClassDef) is (cls if _is_self(node.func) else None)
                    for r in descendants(f.body, cst.Return)
                    if r.value is not None and enclosing_function(r, parent) is f]
        return []

    pending, seen = [(expr, start)], set()
    while pending:
        value, state = pending.pop()
        body = body_of(value)
        for node in descendants(value, cst.Name, cst.Attribute, cst.Call):
            for reached in () if _names_nothing(node, parent) else values_named(node, body):
                if (id(reached), state) not in seen:
                    seen.add((id(reached), state))
                    following = step(reached, state)
                    if following is not None:
                        pending.append((reached, following))


def _is_self(node: cst.CSTNode) -> bool:
    return (isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name)
            and node.value.value == "self")


def _called_name(func: cst.BaseExpression) -> str:
    return func.value if isinstance(func, cst.Name) else func.attr.value


def _targets(assign: cst.Assign | cst.AugAssign) -> list[cst.BaseExpression]:
    return [t.target for t in assign.targets] if isinstance(assign, cst.Assign) else [
        assign.target]


def _names_nothing(node: cst.CSTNode, parent: Parent) -> bool:
    """Whether a name is no variable read (an attribute's name, an argument's keyword)."""
    holder = parent(node)
    return (isinstance(holder, cst.Attribute) and holder.attr is node
            or isinstance(holder, cst.Arg) and holder.keyword is node)
