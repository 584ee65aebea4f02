"""Branches on a parameter that a call path fixes: which arm of `if use_multi_gpu:` runs
when every call reaching the function passes a literal (or passes on a parameter its own
caller fixed so). The project model follows names, not values; this reads the values given
along the calls from one call site, for a rule that must not report a variable made in an
arm the program never takes from there (binLearning/tensorflow_mnist: the towers build
`inference(..., useMultiGPU=True)`, whose helpers make a `tf.Variable` only when it is
False)."""

from __future__ import annotations

import ast
from collections import deque

from graphfix.source.project import _called, _called_functions, unit_at
from graphfix.source.project.names import dotted
from graphfix.source.project.part import parsed
from graphfix.source.vocabulary import REUSED_UNDER_REUSE

# A project model search that reads more states than this says nothing (no arm is skipped).
_MOST_STATES = 400


def _literal_truth(node: ast.expr | None) -> bool | None:
    """The truth of a literal constant (True, False, None, a number, a string); None for
    anything else."""
    if isinstance(node, ast.Constant):
        return bool(node.value)
    return None


def _tested_parameter(test: ast.expr, params: set[str]) -> tuple[str, bool] | None:
    """(parameter, the truth that takes the `if`'s body) for `if p:` and `if not p:` on a
    parameter of the function; None for any other test."""
    if isinstance(test, ast.Name) and test.id in params:
        return test.id, True
    if (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
            and isinstance(test.operand, ast.Name) and test.operand.id in params):
        return test.operand.id, False
    return None


def _params(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = function.args
    return [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]


def _rebound(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The names `function`'s code assigns (a parameter among them holds no longer what the
    call gave it)."""
    return {node.id for node in ast.walk(function)
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del))}


def arm_conditions(function: ast.FunctionDef | ast.AsyncFunctionDef, line: int
                   ) -> list[tuple[str, bool]]:
    """The (parameter, truth) every `if` of `function` around `line` asks of a parameter
    for `line` to run: `[("useMultiGPU", False)]` for a statement in the `else` of `if
    useMultiGPU:`, where the function never assigns the parameter. A nested function's
    body is not the function's own: none there."""
    params = set(_params(function)) - _rebound(function)
    found: list[tuple[str, bool]] = []

    def walk(statements: list[ast.stmt]) -> bool:
        for statement in statements:
            if not (statement.lineno <= line <= (statement.end_lineno or statement.lineno)):
                continue
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.clear()
                return False
            if isinstance(statement, ast.If):
                if line <= (statement.test.end_lineno or statement.lineno):
                    return True  # (the test itself runs whatever it finds)
                tested = _tested_parameter(statement.test, params)
                in_body = any(s.lineno <= line <= (s.end_lineno or s.lineno)
                              for s in statement.body)
                if tested is not None:
                    found.append((tested[0], tested[1] if in_body else not tested[1]))
                return walk(statement.body if in_body else statement.orelse)
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(statement, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.AST):
                    if field == "handlers":
                        inner = [s for handler in inner for s in handler.body]
                    if any(s.lineno <= line <= (s.end_lineno or s.lineno) for s in inner):
                        return walk(inner)
            return True
        return True

    walk(function.body)
    return found


def _skips(conditions: list[tuple[str, bool]], values: dict[str, bool]) -> bool:
    return any(name in values and values[name] != truth for name, truth in conditions)


class ArmsTaken:
    """The values calls give the parameters of the project's functions along every call
    path from one call site (a `FileView`'s project, the call of `callee` at `line` of its
    file), as far as literals and parameters passed on by name carry them."""

    def __init__(self, view, callee: str, line: int):
        self.project = view.project
        self._trees: dict[str, ast.Module | None] = {}
        self._entered: dict[tuple[str, str], list[dict[str, bool]]] = {}
        self._complete = self._search(view.label, callee, line)

    def _definition(self, target: tuple[str, str]
                    ) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        return _definition(self.project, self._trees, target)

    def _targets(self, label: str, unit: str, name: str) -> list[tuple[str, str]]:
        return sorted(_called(self.project, self.project.resolve_in(label, unit, name)))

    def _given(self, call: ast.Call, target: tuple[str, str], values: dict[str, bool]
               ) -> dict[str, bool]:
        """What `call` gives `target`'s parameters that is known: literals, the caller's
        known parameters passed on by name, and the literal defaults of the others."""
        function = self._definition(target)
        if function is None or any(dotted(d) not in ("classmethod", "property")
                                   for d in function.decorator_list):
            return {}  # (a decorator may give other arguments: slim's add_arg_scope)
        positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
        if self.project._kind(target) == "method":
            if not positional:
                return {}
            positional = positional[1:]  # (`self`, or a constructor's new object)
        if any(isinstance(a, ast.Starred) for a in call.args) or any(
                k.arg is None for k in call.keywords):
            return {}  # (*args, **kwargs: which parameter gets what is not read)

        def truth(node: ast.expr) -> bool | None:
            if isinstance(node, ast.Name) and node.id in values:
                return values[node.id]
            return _literal_truth(node)

        given: dict[str, ast.expr | None] = dict(zip(positional, call.args))
        given.update((k.arg, k.value) for k in call.keywords)
        defaults = dict(zip(positional[len(positional) - len(function.args.defaults):]
                            if function.args.defaults else [], function.args.defaults))
        defaults.update((a.arg, d) for a, d in zip(function.args.kwonlyargs,
                                                   function.args.kw_defaults) if d is not None)
        known: dict[str, bool] = {}
        for name in _params(function):
            if name in given:
                value = truth(given[name])
            elif name in defaults:
                value = _literal_truth(defaults[name])
            else:
                value = None
            if value is not None:
                known[name] = value
        return known

    def _search(self, label: str, callee: str, line: int) -> bool:
        tree = _tree(self.project, self._trees, label)
        part = self.project.parts.get(label)
        if tree is None or part is None:
            return False
        unit = unit_at(part, line)
        calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
                 and node.lineno == line and dotted(node.func) == callee]
        if len(calls) != 1:
            return False
        queue = deque((target, self._given(calls[0], target, {}))
                      for target in self._targets(label, unit, callee))
        seen: set[tuple] = set()
        while queue:
            target, values = queue.popleft()
            key = (target, tuple(sorted(values.items())))
            if key in seen:
                continue
            if len(seen) >= _MOST_STATES:
                return False
            seen.add(key)
            function = self._definition(target)
            if function is None:
                return False
            rebound = _rebound(function)
            values = {name: truth for name, truth in values.items() if name not in rebound}
            self._entered.setdefault(target, []).append(values)
            of_unit = self.project.parts[target[0]]["units"].get(target[1], {})
            callees: set[int] = set()
            for node in ast.walk(function):
                if not isinstance(node, ast.Call):
                    continue
                name = dotted(node.func)
                if name is None:
                    continue
                callees.add(id(node.func))
                if _skips(arm_conditions(function, node.lineno), values):
                    continue
                for inner in self._targets(*target, name):
                    queue.append((inner, self._given(node, inner, values)))
            refs = set(of_unit.get("refs", ()))
            for node in ast.walk(function):
                # (a function passed on or stored, not called here: with nothing known)
                if (isinstance(node, (ast.Name, ast.Attribute)) and id(node) not in callees
                        and isinstance(node.ctx, ast.Load) and dotted(node) in refs):
                    queue.extend((inner, {}) for inner in self._targets(*target, dotted(node)))
        return True

    def skipped(self, label: str, line: int) -> bool:
        """Whether the statement at `line` of `label` sits in an arm of an `if` on a
        parameter of its function that no call path from the call site takes: the function
        is reached, and every call reaching it gives that parameter the other truth."""
        if not self._complete:
            return False
        part = self.project.parts.get(label)
        if part is None:
            return False
        target = (label, unit_at(part, line))
        function = self._definition(target)
        entered = self._entered.get(target)
        if function is None or not entered:
            return False
        conditions = arm_conditions(function, line)
        return bool(conditions) and all(_skips(conditions, values) for values in entered)


def first_variable_taken(view, callee: str, line: int
                         ) -> tuple[str, str, int, str | None] | None:
    """`FileView.variables_created_by(callee, line=line)`, leaving out the variables made
    in an arm of an `if` on a parameter that no call path from this call takes
    (`ArmsTaken.skipped`); the search runs only where the first found sits in such an `if`."""
    found = view.variables_created_by(callee, line=line)
    if found is None or not _in_an_arm(view, found[0], found[2]):
        return found
    arms = ArmsTaken(view, callee, line)
    if not arms.skipped(found[0], found[2]):
        return found
    project = view.project
    part = view.part
    reusing = view.reuses_at(line)
    starts = _called(project, project.resolve_in(view.label, unit_at(part, line), callee))
    left = []
    for label, unit in _called_functions(project, starts, False):
        for name, at, dtype, placed in project.parts[label]["units"][unit]["variables"]:
            if placed or (reusing and name in REUSED_UNDER_REUSE) or arms.skipped(label, at):
                continue
            left.append((label != view.label, label, at, name, dtype))
    if not left:
        return None
    _, label, at, name, dtype = min(left, key=lambda f: f[:3])
    return label, name, at, dtype


def taken_from(view, callee: str, line: int, found: tuple[str, str, int, str | None] | None
               ) -> bool:
    """Whether a variable a call of `callee` at `line` reaches, as (path, name, line,
    dtype), is made on some call path from it: not in an arm of an `if` on a parameter
    that every path skips (`ArmsTaken.skipped`)."""
    return found is not None and not (_in_an_arm(view, found[0], found[2]) and ArmsTaken(
        view, callee, line).skipped(found[0], found[2]))


def _in_an_arm(view, label: str, line: int) -> bool:
    """Whether `line` of `label` sits in an arm of an `if` on a parameter of its function."""
    part = view.project.parts.get(label)
    if part is None:
        return False
    function = _definition(view.project, {}, (label, unit_at(part, line)))
    return function is not None and bool(arm_conditions(function, line))


def _tree(project, trees: dict, label: str) -> ast.Module | None:
    if label not in trees:
        code = project._code_of(label)
        trees[label] = None if code is None else parsed(code)
    return trees[label]


def _definition(project, trees: dict, target: tuple[str, str]
                ) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The def of a project unit (`f`, `Class.method`), the last of its name where there
    are several; None for a class or the module body."""
    tree = _tree(project, trees, target[0])
    if tree is None:
        return None
    body: list[ast.stmt] = tree.body
    *owner, name = target[1].split(".")
    for part in owner:
        classes = [s for s in body if isinstance(s, ast.ClassDef) and s.name == part]
        if len(classes) != 1:
            return None
        body = classes[0].body
    found = [s for s in body
             if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == name]
    return found[-1] if found else None
