"""The project model: a run's Python sources as one program, built once per run.

Each file gives a *part*, read by the stdlib's parser (no libcst) and cached with the file's
survey (by its content and graphfix's code): what it imports, the units it defines (each
top-level function and class, and the module body), the names each unit refers to, and the
facts the rules ask about (the batch norms it builds). `Project` joins the parts: it
resolves imports inside the run (packages and `__init__`, relative imports, `from a import
b`, `import a.b as c`, re-exports, a script importing a sibling of its folder, as a
`sys.path.append` next to it does) and references to the units they name (same file,
imported modules, a class's methods through the class), and answers the rules' queries
(`FileView`). A fact about file B reaches file A only along those edges: what A's code
refers to (transitively), and what refers to the unit a finding is in (its callers, up to
a fixed point); never because both files are in one run.

Plain Python: the survey builds parts in the workers without loading libcst.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
from collections import deque
from collections.abc import Iterable
from typing import Any

from graphfix.source.vocabulary import (
    ARG_SCOPE,
    BATCH_NORM_LAYER,
    BATCH_NORMS,
    CREATES_VARIABLES,
    DEVICE_CALLS,
    SLIM_NET_NAME,
    canonical_tf_name,
)

PART_FORMAT = 1  # bump when what a part holds changes (it is cached with the survey)
MODULE_BODY = "<module>"  # the unit of a file's top-level statements outside its defs

# -- names, as the stdlib's tree spells them ---------------------------------------------------


def dotted(node: ast.AST) -> str | None:
    """`a.b.c` for a chain of names (a subscript's value: `towers[i]` -> `towers`)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    if isinstance(node, ast.Subscript):
        return dotted(node.value)
    return None


class AstTfNames:
    """The TF symbols one file's expressions name, through its imports and module-level
    aliases (`slim = tf.contrib.slim`): `graphfix.source.codemod.TfNames` for the stdlib
    tree. Imports anywhere in the file count (a function's own `import tensorflow as tf`)."""

    def __init__(self, tree: ast.Module):
        self.imports: dict[str, set[str]] = {}  # bound name -> qualified names it may hold
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.imports.setdefault(alias.asname, set()).add(alias.name)
                    else:
                        top = alias.name.split(".")[0]
                        self.imports.setdefault(top, set()).add(top)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    if alias.name != "*":
                        self.imports.setdefault(alias.asname or alias.name, set()).add(
                            f"{node.module}.{alias.name}")
        self.aliases: dict[str, str] = {}
        for statement in tree.body:
            if (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                    and isinstance(statement.targets[0], ast.Name)
                    and isinstance(statement.value, (ast.Name, ast.Attribute))):
                qualified = self.tf_qualified(statement.value)
                if qualified is not None:
                    self.aliases[statement.targets[0].id] = qualified

    def qualified(self, node: ast.AST) -> set[str]:
        """Every qualified name `node` may refer to, through imports and module aliases."""
        text = dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if text is None:
            return set()
        head, _, rest = text.partition(".")
        tail = f".{rest}" if rest else ""
        found = {q + tail for q in self.imports.get(head, ())}
        if head in self.aliases and head not in self.imports:
            found.add(self.aliases[head] + tail)
        return found

    def tf_qualified(self, node: ast.AST) -> str | None:
        """The TF qualified name `node` refers to (`tensorflow.compat.v1.train.Saver`)."""
        found = sorted(self.qualified(node))
        for qualified in found:
            if canonical_tf_name(qualified) is not None:
                return qualified
        return None

    def canonical(self, node: ast.AST) -> str | None:
        """The TF symbol `node` names, as the vocabulary spells it (`slim.batch_norm`)."""
        qualified = self.tf_qualified(node)
        return canonical_tf_name(qualified) if qualified else None


def argument(call: ast.Call, keyword: str, position: int | None) -> ast.expr | None:
    """The argument `call` passes as `keyword=`, or at `position` (None: keyword only)."""
    for given in call.keywords:
        if given.arg == keyword:
            return given.value
    positional = [a for a in call.args if not isinstance(a, ast.Starred)]
    if position is not None and position < len(positional):
        return positional[position]
    return None


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
    slim nets."""

    def __init__(self, names: AstTfNames, dicts: dict[str, ast.expr]):
        self.names, self.dicts = names, dicts
        self.found: list[tuple[str, int]] = []
        self._defaults: list[dict[str, ast.expr]] = []  # arg_scope([batch_norm], ...)
        self._layers: list[ast.Call] = []  # tf.layers.BatchNormalization(...) constructors
        self._bound: dict[ast.Call, str] = {}  # a constructor -> the name it is assigned to
        self._called: set[ast.Call] = set()  # constructors called right away: (...)(x)
        self._layer_calls: dict[str, list[ast.Call]] = {}  # calls of anything, by callee

    def _dict(self, expr: ast.expr | None, depth: int = 0) -> dict | None:
        """The keys and values of a dict the code spells out: `{"is_training": x}`,
        `dict(is_training=x)`, or a name bound to one. None when not visible."""
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

    def _visit_with(self, node) -> None:
        defaults: dict[str, ast.expr] = {}
        for item in node.items:
            call = item.context_expr
            if not (isinstance(call, ast.Call) and self.names.canonical(call.func) == ARG_SCOPE
                    and call.args):
                continue
            listed = call.args[0]
            elements = listed.elts if isinstance(listed, (ast.List, ast.Tuple)) else []
            if any(self.names.canonical(e) in BATCH_NORMS for e in elements):
                defaults.update(self._kwargs(call))
        self._defaults.append(defaults)
        self.generic_visit(node)
        self._defaults.pop()

    visit_With = visit_AsyncWith = _visit_with

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
            self._record(self.names.canonical(normalizer), node,
                         {**self._scope_defaults(), **params})
        if name == BATCH_NORM_LAYER:
            self._layers.append(node)
        if (isinstance(node.func, ast.Call)
                and self.names.canonical(node.func.func) == BATCH_NORM_LAYER):
            self._called.add(node.func)
            if _truth(argument(node, "training", 1), False):  # BatchNormalization()(x, True)
                self.found.append((BATCH_NORM_LAYER, node.lineno))
        callee = dotted(node.func)
        if callee is not None:
            self._layer_calls.setdefault(callee, []).append(node)
        if any(_SLIM_NET.search(q) for q in self.names.qualified(node.func)):
            if _truth(argument(node, "is_training", None), True):
                self.found.append((dotted(node.func) or "slim net", node.lineno))
        self.generic_visit(node)

    def finish(self) -> list[tuple[str, int]]:
        for layer in self._layers:
            if layer in self._called:
                continue
            calls = self._layer_calls.get(self._bound.get(layer, ""), [])
            # A layer object whose calls are not visible here may train: it counts.
            if not calls or any(_truth(argument(c, "training", 1), False) for c in calls):
                self.found.append((BATCH_NORM_LAYER, layer.lineno))
        self.found.sort(key=lambda found: found[1])
        return self.found


def batch_norms(tree: ast.Module, names: AstTfNames | None = None) -> list[tuple[str, int]]:
    """The batch norms of a module that train and put their updates in UPDATE_OPS, as
    (name as the vocabulary spells it, line), in line order."""
    dicts: dict[str, ast.Assign] = {}  # a name -> its last assignment in the file
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, (ast.Dict, ast.Call, ast.Name))):
            name = node.targets[0].id
            if name not in dicts or (dicts[name].lineno, dicts[name].col_offset) < (
                    node.lineno, node.col_offset):
                dicts[name] = node
    finder = _BatchNorms(names or AstTfNames(tree), {n: a.value for n, a in dicts.items()})
    finder.visit(tree)
    return finder.finish()


# -- variables a unit creates where its caller's device scope places them -------------------


class _Placement(ast.NodeVisitor):
    """What a unit creates and calls where no device scope of its own places it (so the
    caller's scope does): the variable-creating calls, as [name, line, dtype or None], and
    the names it reads there. A `with ...device(...)` or slim `arg_scope(..., device=)`
    places everything below it."""

    def __init__(self, names: AstTfNames):
        self.names = names
        self.variables: list[list] = []
        self.free: set[str] = set()  # names read outside any device scope of the unit
        self._placed = 0

    def _places(self, item: ast.withitem) -> bool:
        call = item.context_expr
        if not isinstance(call, ast.Call):
            return False
        name = self.names.canonical(call.func)
        return name in DEVICE_CALLS or (name == ARG_SCOPE
                                        and argument(call, "device", None) is not None)

    def _visit_with(self, node) -> None:
        placed = any(self._places(item) for item in node.items)
        for item in node.items:
            self.visit(item)
        self._placed += placed
        for statement in node.body:
            self.visit(statement)
        self._placed -= placed

    visit_With = visit_AsyncWith = _visit_with

    def visit_Call(self, node: ast.Call) -> None:
        name = self.names.canonical(node.func)
        if not self._placed and name in CREATES_VARIABLES and not (
                name.startswith(("slim.", "contrib.layers."))
                and argument(node, "device", None) is not None):
            self.variables.append([name, node.lineno, _explicit_dtype(node)])
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        text = dotted(node)
        if text is not None and isinstance(node.ctx, ast.Load):
            if not self._placed:
                self.free.add(text)
            return
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and not self._placed:
            self.free.add(node.id)


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


# -- one file's part ---------------------------------------------------------------------------


class _References(ast.NodeVisitor):
    """The names (dotted where they chain: `model.inference`) a unit reads."""

    def __init__(self):
        self.found: set[str] = set()

    def visit_Attribute(self, node: ast.Attribute) -> None:
        text = dotted(node)
        if text is not None and isinstance(node.ctx, ast.Load):
            self.found.add(text)
            return
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.found.add(node.id)


def _references(nodes: Iterable[ast.AST]) -> list[str]:
    walker = _References()
    for node in nodes:
        walker.visit(node)
    return sorted(walker.found)


def _imports(tree: ast.Module) -> list[list]:
    """[bound name, module, imported name or None, level] for every import in the file
    (`*` as the bound name of a star import)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    out.append([alias.asname, alias.name, None, 0])
                else:
                    top = alias.name.split(".")[0]
                    out.append([top, top, None, 0])
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                bound = "*" if alias.name == "*" else alias.asname or alias.name
                out.append([bound, node.module or "", alias.name, node.level])
    out.sort(key=lambda entry: (entry[0], entry[1], entry[2] or "", entry[3]))
    return out


def file_part(tree: ast.Module) -> dict[str, Any]:
    """One file's part of the project model, as JSON data (cached with the file's survey):
    `imports` (see `_imports`), `units` ({name: {"refs": [...], "spans": [[first, last]]}};
    one per top-level function and class, and `MODULE_BODY`), `globals` (the other names
    bound at module level: they are the module body's), `batch_norms` ([[name, line]])."""
    names = AstTfNames(tree)
    units: dict[str, dict] = {}
    body: list[ast.AST] = []
    bound: set[str] = set()
    aliases: dict[str, str] = {}
    for statement in tree.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            unit = units.setdefault(statement.name, {
                "kind": "class" if isinstance(statement, ast.ClassDef) else "function",
                "refs": set(), "spans": [], "variables": [], "free": set()})
            unit["refs"].update(_references([statement]))
            first = min([statement.lineno, *(d.lineno for d in statement.decorator_list)])
            unit["spans"].append([first, statement.end_lineno or statement.lineno])
            if isinstance(statement, ast.ClassDef):
                continue
            placement = _Placement(names)
            for inner in statement.body:
                placement.visit(inner)
            unit["variables"].extend(placement.variables)
            unit["free"].update(placement.free)
        else:
            made = _made_from(statement, names)
            if made is not None:
                aliases[made[0]] = made[1]
            body.append(statement)
            for node in ast.walk(statement):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    bound.add(node.id)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    bound.add(node.name)
    units[MODULE_BODY] = {"kind": "module", "refs": set(_references(body)), "spans": [],
                          "variables": [], "free": set()}
    for unit in units.values():
        unit["refs"] = sorted(unit["refs"])
        unit["free"] = sorted(unit["free"])
    return {"format": PART_FORMAT, "imports": _imports(tree), "units": units,
            "globals": sorted(bound - set(units) - set(aliases)), "aliases": aliases,
            "tf": _tf_bindings(names, tree),
            "batch_norms": [list(found) for found in batch_norms(tree, names)]}


def _made_from(statement: ast.stmt, names: AstTfNames) -> tuple[str, str] | None:
    """(name, function) for a module-level `name = tf.make_template("n", function)` or
    `name = functools.partial(function, ...)`: calling the name calls the function."""
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
            and isinstance(statement.value, ast.Call)):
        return None
    call = statement.value
    if names.canonical(call.func) == "make_template":
        function = argument(call, "func_", 1)
    elif (dotted(call.func) or "").endswith("partial") and call.args:
        function = call.args[0]
    else:
        return None
    text = dotted(function) if function is not None else None
    return None if text is None else (statement.targets[0].id, text)


def part_of_code(code: str) -> dict[str, Any] | None:
    """The part of a file's code; None if Python cannot parse it."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return file_part(ast.parse(code))
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            return None


# -- the project -------------------------------------------------------------------------------


def _unit_at(part: dict, line: int) -> str:
    for name, unit in part["units"].items():
        if any(first <= line <= last for first, last in unit["spans"]):
            return name
    return MODULE_BODY


class Project:
    """The sources of one run, joined: `parts` by label (the path as the run names it).
    Queries go through `view(label)`; every answer follows imports and references."""

    def __init__(self, parts: dict[str, dict | None]):
        self.parts = {label: part for label, part in parts.items() if part is not None}
        self._by_path: dict[str, str] = {}  # a file's real path -> its label
        for label in self.parts:
            self._by_path.setdefault(os.path.realpath(label), label)
        self._resolved: dict[tuple[str, str], frozenset[tuple[str, str]]] = {}
        self._edges: dict[tuple[str, str], frozenset[tuple[str, str]]] = {}
        self._callers: dict[tuple[str, str], set[tuple[str, str]]] | None = None
        self._modules: dict[tuple[str, str, int], str | None] = {}
        self._components: dict[str, int] | None = None
        self._digests: dict[int, str] = {}  # by component

    @classmethod
    def of_code(cls, label: str, code: str) -> Project:
        """The project of one file alone (the Python API's `check_source`)."""
        return cls({label: part_of_code(code)})

    def view(self, label: str) -> FileView:
        """The model as the rules of file `label` ask it."""
        return FileView(self, label)

    def with_code(self, label: str, code: str) -> FileView:
        """The view of `label` in a copy of the project where its part is read from
        `code` (the file as an earlier rule's fix left it)."""
        return Project({**self.parts, label: part_of_code(code)}).view(label)

    # -- modules ---------------------------------------------------------------------------

    def _file(self, path: str) -> str | None:
        return self._by_path.get(path)

    def _module_file(self, folder: str, parts: list[str]) -> str | None:
        """The project file of module `parts` under `folder` (`a/b.py`, `a/b/__init__.py`)."""
        base = os.path.join(folder, *parts)
        return self._file(base + ".py") or self._file(os.path.join(base, "__init__.py"))

    def module(self, label: str, module: str, level: int = 0) -> str | None:
        """The project file that `import module` (`from .module`, at `level`) in `label`
        names; None if it is not in the run. Absolute imports are looked for beside the
        file, then in each folder above it (a package's root, a script's `sys.path`)."""
        key = (label, module, level)
        if key not in self._modules:
            self._modules[key] = self._find_module(label, module, level)
        return self._modules[key]

    def _find_module(self, label: str, module: str, level: int) -> str | None:
        folder = os.path.dirname(os.path.realpath(label))
        parts = [p for p in module.split(".") if p]
        if level:
            for _ in range(level - 1):
                folder = os.path.dirname(folder)
            if not parts:
                return self._file(os.path.join(folder, "__init__.py"))
            return self._module_file(folder, parts)
        if not parts:
            return None
        while True:
            found = self._module_file(folder, parts)
            if found is not None:
                return found
            parent = os.path.dirname(folder)
            if parent == folder:
                return None
            folder = parent

    # -- references ------------------------------------------------------------------------

    def resolve(self, label: str, name: str, seen: frozenset = frozenset()
                ) -> frozenset[tuple[str, str]]:
        """The units (label, unit name) a dotted `name` read in `label` may refer to: a
        function or class of the file, the module body for its other globals, through
        imports what the imported module defines (a module named whole: all its units)."""
        key = (label, name)
        if key in self._resolved:
            return self._resolved[key]
        if key in seen:
            return frozenset()
        seen = seen | {key}
        part = self.parts.get(label)
        found: set[tuple[str, str]] = set()
        if part is not None:
            head, _, rest = name.partition(".")
            if head in part["aliases"]:
                found |= self.resolve(label, part["aliases"][head], seen)
            elif head in part["units"] and head != MODULE_BODY:
                found.add((label, head))
            elif head in part["globals"]:
                found.add((label, MODULE_BODY))
            else:
                entries = [e for e in part["imports"] if e[0] == head]
                for _, module, imported, level in entries:
                    found |= self._through_import(label, module, imported, level, rest, seen)
                if not entries:
                    for _, module, _, level in (e for e in part["imports"] if e[0] == "*"):
                        target = self.module(label, module, level)
                        if target is not None:
                            found |= self.resolve(target, name, seen)
        result = frozenset(found)
        self._resolved[key] = result
        return result

    def _through_import(self, label, module, imported, level, rest, seen):
        if imported is None:  # `import a.b.c [as x]`: x.rest, or a.rest for `import a`
            chain = [*module.split("."), *[p for p in rest.split(".") if p]]
            return self._in_module_chain(label, chain, len(module.split(".")), level, seen)
        chain = [*[p for p in module.split(".") if p], imported,
                 *[p for p in rest.split(".") if p]]
        return self._in_module_chain(label, chain, len([p for p in module.split(".") if p]),
                                     level, seen)

    def _in_module_chain(self, label, chain, known, level, seen):
        """What `chain` (module parts, then names) names: the longest module prefix (at
        least `known` parts) in the project, then the name after it in that module."""
        for cut in range(len(chain), known - 1, -1):
            if cut == 0 and not level:
                continue
            target = self.module(label, ".".join(chain[:cut]), level)
            if target is None:
                continue
            rest = chain[cut:]
            if not rest:
                return frozenset((target, unit) for unit in self.parts[target]["units"])
            return self.resolve(target, ".".join(rest), seen)
        return frozenset()

    def references(self, label: str, unit: str) -> frozenset[tuple[str, str]]:
        """The units one unit refers to (its edges in the reference graph)."""
        key = (label, unit)
        if key not in self._edges:
            part = self.parts.get(label)
            found: set[tuple[str, str]] = set()
            if part is not None and unit in part["units"]:
                for name in part["units"][unit]["refs"]:
                    found |= self.resolve(label, name)
            found.discard(key)
            self._edges[key] = frozenset(found)
        return self._edges[key]

    def units(self, label: str) -> list[tuple[str, str]]:
        part = self.parts.get(label)
        return [] if part is None else [(label, unit) for unit in part["units"]]

    def reached(self, starts: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
        """Every unit that `starts` refer to, transitively (recursion-safe), and `starts`."""
        seen = set(starts)
        queue = deque(sorted(seen))
        while queue:
            for target in sorted(self.references(*queue.popleft())):
                if target not in seen:
                    seen.add(target)
                    queue.append(target)
        return seen

    def callers(self, unit: tuple[str, str]) -> set[tuple[str, str]]:
        """Every unit that refers to `unit`, transitively, and `unit`."""
        if self._callers is None:
            self._callers = {}
            for label in sorted(self.parts):
                for source in self.units(label):
                    for target in self.references(*source):
                        self._callers.setdefault(target, set()).add(source)
        seen = {unit}
        queue = deque([unit])
        while queue:
            for source in sorted(self._callers.get(queue.popleft(), ())):
                if source not in seen:
                    seen.add(source)
                    queue.append(source)
        return seen

    # -- what a file's result depends on ---------------------------------------------------

    def _component_of(self, label: str) -> int:
        """The files connected to `label` by imports, either way (an id shared by them)."""
        if self._components is None:
            parent = {label: label for label in self.parts}

            def root(x):
                while parent[x] != x:
                    parent[x] = parent[parent[x]]
                    x = parent[x]
                return x

            for label_ in sorted(self.parts):
                for _, module, imported, level in self.parts[label_]["imports"]:
                    targets = {self.module(label_, module, level)}
                    if imported not in (None, "*"):
                        targets.add(self.module(label_, f"{module}.{imported}".strip("."),
                                                level))
                    for target in targets - {None}:
                        parent[root(target)] = root(label_)
            roots = sorted({root(x) for x in parent})
            numbers = {r: i for i, r in enumerate(roots)}
            self._components = {x: numbers[root(x)] for x in parent}
        return self._components.get(label, -1)

    def connected(self, label: str) -> set[str]:
        """The files connected to `label` by imports, either way, transitively, and it."""
        component = self._component_of(label)
        if component < 0:
            return {label}
        return {x for x in self.parts if self._components[x] == component}

    def context_digest(self, label: str) -> str:
        """A digest of every part a query about `label` may read: the files connected to
        it by imports (what its cached result depends on besides its own content)."""
        component = self._component_of(label)
        if component not in self._digests:
            digest = hashlib.sha256()
            for member in sorted(self.connected(label)):
                digest.update(member.encode("utf-8", "surrogateescape"))
                digest.update(json.dumps(self.parts.get(member), sort_keys=True).encode())
            self._digests[component] = digest.hexdigest()
        return self._digests[component]


def _free_functions(project: Project, starts: Iterable[tuple[str, str]]
                    ) -> set[tuple[str, str]]:
    """The functions `starts` call where no device scope of theirs places them, and the ones
    those call so, transitively (classes and module bodies are not followed: a class builds
    its variables when its methods are called, and a module's globals are not called)."""
    seen: set[tuple[str, str]] = set()
    queue = deque(sorted(starts))
    while queue:
        label, unit = queue.popleft()
        if (label, unit) in seen:
            continue
        seen.add((label, unit))
        for name in project.parts[label]["units"][unit]["free"]:
            for target in sorted(project.resolve(label, name)):
                kind = project.parts[target[0]]["units"][target[1]]["kind"]
                if kind == "function" and target not in seen:
                    queue.append(target)
    return seen


class FileView:
    """The project model as one file's rules ask it."""

    def __init__(self, project: Project, label: str, stale: bool = False):
        self.project, self.label = project, label
        self.stale = stale  # the file changed since its part was read (see `stale_copy`)

    def stale_copy(self) -> FileView:
        """This view, marked as read before the file changed: the rule that asks it reads
        the file's part anew (`SourceCodemod.project`)."""
        return FileView(self.project, self.label, stale=True)

    @property
    def part(self) -> dict | None:
        return self.project.parts.get(self.label)

    def variables_created_by(self, callee: str) -> tuple[str, str, int, str | None] | None:
        """The first variable a call of `callee` (a dotted name as this file spells it)
        creates in the project's functions, where no device scope of theirs places it (so
        the caller's does): (path, name, line, dtype named or None); None if none does."""
        starts = {u for u in self.project.resolve(self.label, callee)
                  if self.project.parts[u[0]]["units"][u[1]]["kind"] == "function"}
        found = []
        for label, unit in _free_functions(self.project, starts):
            for name, line, dtype in self.project.parts[label]["units"][unit]["variables"]:
                found.append((label != self.label, label, line, name, dtype))
        if not found:
            return None
        _, label, line, name, dtype = min(found, key=lambda f: f[:3])
        return label, name, line, dtype

    def tf_name_of_import(self, qualified: str) -> str | None:
        """The TF qualified name that a qualified name through a project module stands for
        (`helpers.tf1.Variable` -> `tensorflow.compat.v1.Variable`, where helpers.py does
        `import tensorflow.compat.v1 as tf1`); None if it stands for none."""
        return self._tf_through(self.label, qualified, 0)

    def _tf_through(self, label: str, qualified: str, depth: int) -> str | None:
        if depth > 5:
            return None
        level = len(qualified) - len(qualified.lstrip("."))
        parts = qualified[level:].split(".")
        for cut in range(len(parts) - 1, 0, -1):
            target = self.project.module(label, ".".join(parts[:cut]), level)
            if target is None:
                continue
            name, rest = parts[cut], parts[cut + 1:]
            part = self.project.parts[target]
            if name in part["tf"]:
                return ".".join([part["tf"][name], *rest])
            for bound, module, imported, from_level in part["imports"]:
                if bound == name and imported not in (None, "*"):
                    prefix = "." * from_level + (f"{module}." if module else "")
                    return self._tf_through(target, f"{prefix}{imported}"
                                            + "".join(f".{r}" for r in rest), depth + 1)
            return None
        return None

    def batch_norms(self) -> list[tuple[str, int]]:
        """The file's own batch norms that train and feed UPDATE_OPS: (name, line)."""
        part = self.part
        return [] if part is None else [tuple(b) for b in part["batch_norms"]]

    def batch_norms_reaching(self, line: int | None = None) -> list[tuple[str, str, int]]:
        """The batch norms of other files that code at `line` of this file (None: anywhere
        in it) may run with: those the file refers to (through its imports, transitively),
        and those of the code that refers to the unit `line` is in (its callers, which may
        build the model before they call it). (path, name, line), in path and line order."""
        part = self.part
        if part is None:
            return []
        project = self.project
        starts = set(project.units(self.label))
        for here in ([(self.label, _unit_at(part, line))] if line is not None else
                     list(starts)):
            starts |= project.callers(here)
        found = set()
        for label, unit in project.reached(starts):
            if label == self.label:
                continue
            unit_of = project.parts[label]
            for name, at in unit_of["batch_norms"]:
                if _unit_at(unit_of, at) == unit:
                    found.add((label, name, at))
        return sorted(found, key=lambda b: (b[0], b[2], b[1]))
