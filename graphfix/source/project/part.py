"""One file's part of the project model, read by the stdlib's parser: its imports, its
units (each top-level function and class, and the module body) with the names each reads,
and the facts of `graphfix.source.project.facts`."""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterable
from typing import Any

from graphfix.source.project.facts import _Placement, _tf_bindings, batch_norms
from graphfix.source.project.names import AstTfNames, argument, dotted
from graphfix.source.vocabulary import CREATES_VARIABLES, last_names

PART_FORMAT = 1  # bump when what a part holds changes (it is cached with the survey)
MODULE_BODY = "<module>"  # the unit of a file's top-level statements outside its defs



def _references(nodes: Iterable[ast.AST]) -> list[str]:
    """The names (dotted where they chain: `model.inference`) that `nodes` read. (A loop
    over the tree, not an `ast.NodeVisitor`: every file's part walks all its code.)"""
    found: set[str] = set()
    todo = list(nodes)
    while todo:
        node = todo.pop()
        kind = type(node)
        if kind is ast.Name:
            if type(node.ctx) is ast.Load:
                found.add(node.id)
            continue
        if kind is ast.Attribute and type(node.ctx) is ast.Load:
            text = dotted(node)
            if text is not None:
                found.add(text)
                continue
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, ast.AST):
                todo.append(value)
            elif type(value) is list:
                todo.extend(v for v in value if isinstance(v, ast.AST))
    return sorted(found)


def _imports(names: AstTfNames) -> list[list]:
    """[bound name, module, imported name or None, level] for every import in the file
    (`*` as the bound name of a star import)."""
    out = []
    for node in names.import_nodes:
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


# The words without which a file's text holds none of a fact (conservative, as the
# pre-filter): the facts' readers walk the whole tree, most files need none of them.
_BATCH_NORM_WORDS = ("batch_norm", "BatchNormalization", "resnet", "inception", "mobilenet")
_VARIABLE_WORDS = tuple(sorted(last_names(CREATES_VARIABLES)))


def _mentions(code: str | None, words: tuple[str, ...]) -> bool:
    return code is None or any(word in code for word in words)


def file_part(tree: ast.Module, code: str | None = None) -> dict[str, Any]:
    """One file's part of the project model, as JSON data (cached with the file's survey):
    `imports` (see `_imports`), `units` ({name: {"refs": [...], "spans": [[first, last]]}};
    one per top-level function and class, and `MODULE_BODY`), `globals` (the other names
    bound at module level: they are the module body's), `aliases` (module-level names bound
    to a function through `tf.make_template` or `functools.partial`), `tf` (the TF names it
    binds at module level), `batch_norms` ([[name, line]]), `digest` (of the code: the
    facts read only when asked, `Project.feeds`, depend on it); each unit also lists the variables it creates where
    its caller's device scope places them and the names it reads there. `code`, the text the
    tree was parsed from, lets facts whose words it lacks go unread."""
    names = AstTfNames(tree)
    variables = _mentions(code, _VARIABLE_WORDS)
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
            if not variables and "device" not in (code or ""):
                unit["free"].update(unit["refs"])  # no device scope to place a call
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
    return {"format": PART_FORMAT, "imports": _imports(names), "units": units,
            "globals": sorted(bound - set(units) - set(aliases)), "aliases": aliases,
            "tf": _tf_bindings(names, tree),
            "batch_norms": ([list(found) for found in batch_norms(tree, names)]
                            if _mentions(code, _BATCH_NORM_WORDS) else []),
            # (what the file's facts that are read when asked depend on: `Project.feeds`)
            "digest": None if code is None else hashlib.sha256(
                code.encode("utf-8", "surrogateescape")).hexdigest()}


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


def parsed(code: str) -> ast.Module | None:
    """The stdlib's tree of `code`; None if Python cannot parse it."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # `"\d"` and the like: SyntaxWarning, not ours
        try:
            return ast.parse(code)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            return None


def part_of_code(code: str) -> dict[str, Any] | None:
    """The part of a file's code; None if Python cannot parse it."""
    tree = parsed(code)
    return None if tree is None else file_part(tree, code)
