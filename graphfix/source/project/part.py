"""One file's part of the project model, read by the stdlib's parser: its imports, its
units (each top-level function and class, each method of such a class, and the module
body) with the names each reads, and the facts of `graphfix.source.project.facts`."""

from __future__ import annotations

import ast
import hashlib
import json
import re
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

from graphfix.source.project.cluster import CLUSTER_WORDS, PS_SCOPE_WORDS, clusters, ps_scopes
from graphfix.source.project.dynamic_imports import dynamic_imports
from graphfix.source.project.facts import (
    UnitReader,
    _tf_bindings,
    batch_norms,
    is_abstract,
    unread_update_ops,
)
from graphfix.source.project.names import AstTfNames, argument, dotted
from graphfix.source.vocabulary import CREATES_VARIABLES, LIBRARY_WORDS, last_names

PART_FORMAT = 7  # bump when what a part holds changes (it is cached with the survey)
MODULE_BODY = "<module>"  # the unit of a file's top-level statements outside its defs



def _imports(names: AstTfNames, dynamic: list[list]) -> list[list]:
    """[bound name, module, imported name or None, level] for every import in the file
    (`*` as the bound name of a star import), and the `dynamic` ones (`importlib`'s, read as
    `graphfix.source.project.dynamic_imports` reads them)."""
    out = list(dynamic)
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
_BATCH_NORM_WORDS = ("batch_norm", "BatchNorm", "resnet", "inception", "mobilenet")
_UPDATE_OPS_WORDS = ("UPDATE_OPS", "update_ops")
_VARIABLE_WORDS = tuple(sorted(last_names(CREATES_VARIABLES) | {"metrics"}  # tf.metrics.*
                               | set(LIBRARY_WORDS)))


def _mentions(code: str | None, words: tuple[str, ...]) -> bool:
    return code is None or any(word in code for word in words)


def file_part(tree: ast.Module, code: str | None = None) -> dict[str, Any]:
    """One file's part of the project model, as JSON data (cached with the file's survey):
    `imports` (see `_imports`), `units` ({name: {"kind", "refs": [...], "spans": [[first,
    last]], "instances": {name: callee}, and for a function or method "params" (its positional
    parameters' names), "kwonly" and "reuse_params" (those it passes on as `reuse=`)}}; one
    per top-level function and class, one per
    method of a top-level class (`Class.method`, kind "method", with its "class"; a class
    lists its "bases" as spelled), and `MODULE_BODY`; `instances`: what a unit binds a name
    to once, a call's callee, `self` to its class: see `UnitReader.instances`), `globals` (the other names
    bound at module level: they are the module body's), `aliases` (module-level names bound
    to a function through `tf.make_template` or `functools.partial`), `tf` (the TF names it
    binds at module level), `batch_norms` ([[name, line]]), `unread_update_ops` ([[name,
    line]]: `graphfix.source.project.facts.unread_update_ops`), `clusters` (with a ps job:
    [[line, ps tasks or None]], `graphfix.source.project.cluster`), `ps_scopes` (the lines
    of its device scopes on the ps job), `digest` (of the code: the
    facts read only when asked, `Project.feeds`, depend on it); each unit also lists the variables it creates where
    its caller's device scope places them and the names it reads there. `code`, the text the
    tree was parsed from, lets facts whose words it lacks go unread."""
    names = AstTfNames(tree)
    dynamic = dynamic_imports(tree, names, code)
    variables = _mentions(code, _VARIABLE_WORDS)
    units: dict[str, dict] = {}
    body: list[ast.AST] = []
    bound: set[str] = set()
    aliases: dict[str, str] = {}
    placements = variables or "device" in (code or "")

    def unit_of(name: str, statement: ast.stmt, kind: str) -> dict:
        unit = units.setdefault(name, {"kind": kind, "refs": set(), "spans": [],
                                       "variables": [], "free": set(), "instances": {}})
        first = min([statement.lineno, *(d.lineno for d in statement.decorator_list)])
        unit["spans"].append([first, statement.end_lineno or statement.lineno])
        return unit

    def read(name: str, statement: ast.FunctionDef | ast.AsyncFunctionDef, kind: str
             ) -> dict:
        unit = unit_of(name, statement, kind)
        reader = UnitReader(names, placements)
        reader.read_def(statement)
        unit["refs"].update(reader.refs)
        unit["instances"].update(reader.instances)
        unit["variables"].extend(reader.variables)
        # (no device scope to place a call: every name it reads is free)
        unit["free"].update(reader.free if placements else reader.refs)
        unit["params"] = [a.arg for a in (*statement.args.posonlyargs, *statement.args.args)]
        unit["kwonly"] = [a.arg for a in statement.args.kwonlyargs]
        unit["reuse_params"] = _reuse_params(statement, {*unit["params"], *unit["kwonly"]})
        unit["chained"] = (reader.chained, reader.chained_free if placements
                           else reader.chained)  # (a method's receiver's: kept by the caller)
        return unit

    for statement in tree.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            read(statement.name, statement, "function").pop("chained")
        elif isinstance(statement, ast.ClassDef):
            cls = unit_of(statement.name, statement, "class")
            cls["bases"] = [text for text in map(dotted, statement.bases) if text is not None]
            rest = UnitReader(names, placements=False)  # its body but the methods
            rest.read_outside([*statement.decorator_list, *statement.bases,
                               *statement.keywords])
            for inner in statement.body:
                if not isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    rest.visit(inner)
                    continue
                method = read(f"{statement.name}.{inner.name}", inner, "method")
                method["class"] = statement.name
                method["abstract"] = is_abstract(inner)
                chained, chained_free = method.pop("chained")
                if inner.args.posonlyargs or inner.args.args:
                    first = (inner.args.posonlyargs or inner.args.args)[0].arg
                    method["instances"][first] = statement.name  # `self`
                    # (a fluent builder: `self.feed(x).conv(...)` calls self's `conv`)
                    method["refs"].update(r for r in chained if r.split(".")[0] == first)
                    method["free"].update(r for r in chained_free
                                          if r.split(".")[0] == first)
                cls["refs"].update(method["refs"])
            cls["refs"].update(rest.refs)
        else:
            made = _made_from(statement, names)
            if made is not None:
                aliases[made[0]] = made[1]
            aliases.update(_unpacked_from_factory(statement, tree))
            body.append(statement)
            for node in ast.walk(statement):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    bound.add(node.id)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    bound.add(node.name)
    module = UnitReader(names, placements=False)
    for statement in body:
        module.visit(statement)
    units[MODULE_BODY] = {"kind": "module", "refs": module.refs, "spans": [],
                          "variables": [], "free": set(), "instances": module.instances}
    for unit in units.values():
        unit["refs"] = sorted(unit["refs"])
        unit["free"] = sorted(unit["free"])
    return {"format": PART_FORMAT, "imports": _imports(names, dynamic), "units": units,
            # (a name an `importlib` import binds is the module's, not a global's)
            "globals": sorted(bound - set(units) - set(aliases) - {d[0] for d in dynamic}),
            "aliases": aliases,
            "tf": _tf_bindings(names, tree),
            "batch_norms": ([list(found) for found in batch_norms(tree, names)]
                            if _mentions(code, _BATCH_NORM_WORDS + _UPDATE_OPS_WORDS) else []),
            "unread_update_ops": ([list(found) for found in unread_update_ops(tree, names)]
                                  if _mentions(code, _UPDATE_OPS_WORDS) else []),
            "clusters": clusters(tree, names) if _mentions(code, CLUSTER_WORDS) else [],
            "ps_scopes": ps_scopes(tree) if _mentions(code, PS_SCOPE_WORDS) else [],
            # (what the file's facts that are read when asked depend on: `Project.feeds`)
            "digest": None if code is None else hashlib.sha256(
                code.encode("utf-8", "surrogateescape")).hexdigest()}


def _reuse_params(function: ast.FunctionDef | ast.AsyncFunctionDef, params: set[str]
                  ) -> list[str]:
    """The parameters a function passes on as a call's `reuse=` (`compute_loss(x,
    reuse=is_initialized)`, `variable_scope(name, reuse=reuse)`): given True, the call
    reuses the variables an earlier call made."""
    return sorted({keyword.value.id for node in ast.walk(function)
                   if isinstance(node, ast.Call) for keyword in node.keywords
                   if keyword.arg == "reuse" and isinstance(keyword.value, ast.Name)
                   and keyword.value.id in params})


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


def _unpacked_from_factory(statement: ast.stmt, tree: ast.Module) -> dict[str, str]:
    """{name: function} for a module-level `a, b = factory()` where `factory` is a function
    of the module whose every `return` gives a tuple of as many functions, the same ones
    (`return GoodGenerator, GoodDiscriminator`: igul222/improved_wgan_training's
    `Generator, Discriminator = GeneratorAndDiscriminator()`): calling `a` calls the
    function the factory returns first. {} for any other statement."""
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], (ast.Tuple, ast.List))
            and isinstance(statement.value, ast.Call) and not statement.value.args
            and not statement.value.keywords and isinstance(statement.value.func, ast.Name)):
        return {}
    targets = statement.targets[0].elts
    if not all(isinstance(t, ast.Name) for t in targets):
        return {}
    factories = [node for node in tree.body if isinstance(node, ast.FunctionDef)
                 and node.name == statement.value.func.id]
    if len(factories) != 1:
        return {}
    returned = set()
    for node in ast.walk(factories[0]):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and (
                node is not factories[0]):
            return {}  # (a closure's `return` is not the factory's: left alone)
        if isinstance(node, ast.Return):
            value = node.value
            if not (isinstance(value, ast.Tuple) and len(value.elts) == len(targets)):
                return {}
            texts = tuple(dotted(element) for element in value.elts)
            if None in texts:
                return {}
            returned.add(texts)
    if len(returned) != 1:
        return {}
    return {target.id: text for target, text in zip(targets, returned.pop())}


# A Python 2 print statement on one line (`print "loss", loss`, `print >>f, x`): Python 3
# reads none of them, though the rest of such a module often parses.
_PRINT_STATEMENT = re.compile(r"^([ \t]*)print[ \t]+[^\s(=].*$", re.MULTILINE)


def parsed(code: str) -> ast.Module | None:
    """The stdlib's tree of `code`; None if Python cannot parse it. A module that fails
    only for its Python 2 print statements is read with each of them as `pass` (lines
    kept): the project model then sees what the rest defines (igul222/improved_wgan_training's
    tflib, whose `param` makes the models' variables beside a `print_model_settings` of print
    statements). The rules themselves still skip such a file."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # `"\d"` and the like: SyntaxWarning, not ours
        try:
            return ast.parse(code)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            pass
        passed = _PRINT_STATEMENT.sub(r"\1pass", code)
        if passed == code:
            return None
        try:
            return ast.parse(passed)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            return None


def part_of_code(code: str) -> dict[str, Any] | None:
    """The part of a file's code; None if Python cannot parse it."""
    tree = parsed(code)
    return None if tree is None else file_part(tree, code)


def part_json(part: dict | None) -> bytes:
    """A part's JSON, keys sorted: what its digest is taken of (`Project.context_digest`)
    and what `pack_part` compresses."""
    return json.dumps(part, sort_keys=True).encode()


def pack_part(part: dict) -> bytes:
    """A part as a run holds it outside the process that queries it: its JSON, compressed
    (several times smaller than the objects it decodes to)."""
    return zlib.compress(part_json(part), 1)


def unpack_part(packed: bytes) -> dict:
    """The part `pack_part` packed (ValueError, zlib.error if `packed` is no packed part)."""
    return json.loads(zlib.decompress(packed))


class PackedParts(Mapping[str, dict]):
    """Files' parts by label, held packed (`pack_part`) and decoded each time one is read:
    the whole run's parts in the process that joins them (`Project.closure`,
    `context_digest`) and sends each worker the parts of its files' closure
    (`Project.subproject`), which reads each part once or twice. Holding them decoded made
    that process's memory grow with the size of the run. A process that queries parts
    decodes them once (`unpacked`)."""

    def __init__(self, packed: Mapping[str, bytes]):
        self.packed = dict(packed)

    def __getitem__(self, label: str) -> dict:
        return unpack_part(self.packed[label])

    def __iter__(self) -> Iterator[str]:
        return iter(self.packed)

    def __len__(self) -> int:
        return len(self.packed)

    def __contains__(self, label: object) -> bool:
        return label in self.packed

    def json(self, label: str) -> bytes:
        """The part's `part_json`, without decoding it."""
        return zlib.decompress(self.packed[label])

    def subset(self, labels) -> PackedParts:
        """The parts of `labels` (those held), still packed."""
        return PackedParts({label: self.packed[label] for label in labels
                            if label in self.packed})

    def unpacked(self) -> dict[str, dict]:
        """Every part decoded, by label: for a process that queries them."""
        return {label: unpack_part(packed) for label, packed in self.packed.items()}
