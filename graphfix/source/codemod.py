"""The source surface's libcst shape: codemods over Python files that build TF1-style graphs.

A transform's `codemod` may be a `SourceCodemod`, a rule as Fixit shapes one: its visit
methods read the tree and `report(node, message, fix=...)`, the fix being edits of the tree it
read (`graphfix.source.fixes`), which the base class makes once, in one traversal, in fix mode.
TF-aware helpers: `tf_canonical` resolves any import or module alias, `suppressed` honours
`# graphfix: ignore[name]`. (A rule whose fix is text replaced, a rename, is better an
`graphfix.source.astrule.AstRule`, which needs no libcst.) `run_source`
(`graphfix.source.run`, re-exported here) applies a list of rules of either shape and never
raises on bad input: it returns the result, or the reason the file was skipped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
import string
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any, ClassVar, Optional

import libcst as cst
from libcst.codemod import CodemodContext, VisitorBasedCodemodCommand
from libcst.codemod.visitors import AddImportsVisitor
from libcst.helpers import get_full_name_for_node
from libcst.metadata import (
    CodePosition,
    CodeRange,
    MetadataWrapper,
    PositionProvider,
    QualifiedName,
    QualifiedNameSource,
    Scope,
    ScopeProvider,
    VisitorMetadataProvider,
)

from graphfix.findings import Finding
from graphfix.graph.devices import DeviceSpec
from graphfix.registry import Transform
from graphfix.source import fixes
from graphfix.source.examples import Example  # noqa: F401  (part of this module's API)
from graphfix.source.project import FileView
from graphfix.source.project.names import AsksTfNames, TfNameRules
from graphfix.source.syntax import code_lines, comment_ignores
from graphfix.source.syntax import (  # noqa: F401  (part of this module's API)
    SourceDecodeError,
    SourceResult,
    _python2_hint,
    beyond_parser_limits,
    decode_source,
    python_syntax_error,
)
from graphfix.source.run import run_source  # noqa: F401  (part of this module's API)
from graphfix.source.scopes import descendants, enclosing, single_value, with_items_around
from graphfix.source.vocabulary import (
    DEVICE_CALLS,
    GLOBAL_COLLECTION_KEYS,
    LOCAL_VARIABLE_MAKERS,
    TF2_DROPPED,
    VARIABLE_COLLECTIONS_AT,
    VARIABLE_CONSTRUCTORS,
    V1_MODULES,
)

HOLE = "\0"  # the runtime part of a device string built with %, +, str.format or an f-string
_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[diouxXeEfFgGcrsa]")
_BRACES = re.compile(r"\{[^{}]*\}")


def argument(call: cst.Call, keyword: str, position: int | None) -> cst.BaseExpression | None:
    """The argument `call` passes as `keyword=`, or at `position` (None: keyword only)."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if position is not None and position < len(positional):
        return positional[position].value
    return None


def outside_global_variables(call: cst.Call, name: str) -> bool:
    """Whether a variable constructor's call (`name`, canonical: `Variable`, `get_variable`)
    keeps its variable out of GLOBAL_VARIABLES: a local variable maker, or `collections=`
    a literal list of keys none of which is global (`[tf.GraphKeys.LOCAL_VARIABLES]`, a
    private collection): state of the graph's own process or tower that no saver, global
    initializer or other replica shares. A list built elsewhere may hold a global key: no."""
    if name in LOCAL_VARIABLE_MAKERS:
        return True
    if name not in VARIABLE_COLLECTIONS_AT:
        return False
    given = argument(call, "collections", VARIABLE_COLLECTIONS_AT[name])
    if not isinstance(given, (cst.List, cst.Tuple, cst.Set)):
        return False
    for element in given.elements:
        value = element.value
        if isinstance(element, cst.StarredElement):
            return False
        if isinstance(value, cst.Attribute):
            key = value.attr.value
        elif isinstance(value, cst.SimpleString):
            key = value.evaluated_value
        else:
            return False
        if key in GLOBAL_COLLECTION_KEYS:
            return False
    return True


def trained(call: cst.Call, name: str) -> bool | None:
    """Whether a variable constructor's call makes a trainable variable (its default, or a
    literal `trainable=`); None where the code gives another expression."""
    args = VARIABLE_CONSTRUCTORS.get(name)
    if args is None:
        return None
    given = argument(call, "trainable", args.trainable_at)
    if given is None:
        return args.trainable
    if isinstance(given, cst.Name) and given.value in ("True", "False"):
        return given.value == "True"
    return None


def device_argument(call: cst.Call) -> cst.BaseExpression | None:
    """What a `device(...)` call is given (v1 and v2 name the parameter differently)."""
    return argument(call, "device_name_or_function", 0) or argument(call, "device_name", None)


def device_asked(call: cst.Call, scope_of: Callable[[cst.CSTNode], Scope | None],
                 parent: Callable[[cst.CSTNode], cst.CSTNode | None]
                 ) -> cst.BaseExpression | None:
    """What a `device(...)` call asks for: its argument, or where that is a name one plain
    assignment of its scope binds, the value bound (`gpu_name = "/gpu:" + str(i)` in a
    tower loop's body, then `tf.device(gpu_name)`). A name bound otherwise (by a `for`, as a
    parameter, more than once) stays the name. `scope_of`: libcst's ScopeProvider's answer
    for a node."""
    given = device_argument(call)
    if isinstance(given, cst.Name):
        bound = single_value(given, scope_of(given), parent)
        if bound is not None:
            return bound
    return given


def device_template(expr: cst.BaseExpression) -> str | None:
    """A device string expression's text, with `HOLE` for each runtime part (of
    `'/job:worker/task:%d' % i`, `"/job:worker/task:" + HOLE`); None if `expr` is not a string
    expression (a device function, a name, None)."""
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    if isinstance(expr, cst.ConcatenatedString):
        left, right = device_template(expr.left), device_template(expr.right)
        return None if left is None or right is None else left + right
    if isinstance(expr, cst.FormattedString):
        return "".join(
            part.value.replace("{{", "{").replace("}}", "}")
            if isinstance(part, cst.FormattedStringText) else HOLE
            for part in expr.parts
        )
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, cst.Modulo):
            left = device_template(expr.left)
            return None if left is None else _percent_filled(left)
        if isinstance(expr.operator, cst.Add):
            left, right = device_template(expr.left), device_template(expr.right)
            if left is None and right is None:
                return None
            return (HOLE if left is None else left) + (HOLE if right is None else right)
    if isinstance(expr, cst.Call):
        spec = _device_spec_template(expr)
        if spec is not None:
            return spec
    if (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value == "format"):
        base = device_template(expr.func.value)
        return None if base is None else _braces_filled(base)
    return None


def _percent_filled(text: str) -> str:
    """A `%` format string with `HOLE` for each of its fields (`'/gpu:%d'` -> `/gpu:` HOLE)."""
    return _PERCENT.sub(HOLE, text).replace("%%", "%")


def _braces_filled(text: str) -> str:
    """A `str.format` string with `HOLE` for each of its fields (`'/gpu:{0}'` -> `/gpu:`
    HOLE)."""
    text = _BRACES.sub(HOLE, text.replace("{{", "\1").replace("}}", "\2"))
    return text.replace("\1", "{").replace("\2", "}")


# What a field built at run time (a HOLE) is read as by the device string parser: digits,
# so that an index or a task filled in at run time parses, told apart afterwards by them.
RUNTIME_DIGITS = "90210909"


def template_spec(template: str | None) -> DeviceSpec | None:
    """A device template (`device_template`) parsed as TF reads a device string
    (`graphfix.graph.devices.DeviceSpec`), each runtime part read as `RUNTIME_DIGITS`;
    None where there is none or it does not parse."""
    if template is None:
        return None
    try:
        return DeviceSpec.parse(template.replace(HOLE, RUNTIME_DIGITS))
    except ValueError:
        return None


def scope_template(item: cst.WithItem) -> str | None:
    """`device_template` of what a `with tf.device(...)` item asks for ("" for nothing);
    None where that is no string (a device function, a name)."""
    return device_template(device_argument(item.item) or cst.SimpleString('""'))


def on_ps_job(item: cst.WithItem) -> bool:
    """Whether a `with tf.device(...)` item's device names the ps job."""
    spec = template_spec(scope_template(item))
    return spec is not None and spec.job == "ps"


def device_template_filled(expr: cst.BaseExpression,
                           value_of: Callable[[cst.BaseExpression], str | None]) -> str | None:
    """`device_template` of a device string built with `str.format` or `%`, each field
    filled with the value `value_of` knows for its argument (a flag's default:
    `"/{}:{}".format(config.device_type, i)`, `device_type` defaulting to "gpu", is
    `/gpu:` + HOLE); a field it does not know stays a HOLE. None where `expr` is no
    `format` or `%` of a string literal, or its fields cannot be matched to arguments."""
    if (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value == "format" and isinstance(expr.func.value, cst.SimpleString)
            and not any(a.star for a in expr.args)):
        base = expr.func.value.evaluated_value
        if not isinstance(base, str):
            return None
        positional = [a.value for a in expr.args if a.keyword is None]
        named = {a.keyword.value: a.value for a in expr.args if a.keyword is not None}
        out, turn = [], 0
        try:
            fields = list(string.Formatter().parse(base))
        except ValueError:
            return None
        for literal, field, _, _ in fields:
            out.append(literal)
            if field is None:
                continue
            head = re.split(r"[.\[]", field, maxsplit=1)[0]
            if head == "":
                given, turn = (positional[turn] if turn < len(positional) else None), turn + 1
            elif head.isdigit():
                given = positional[int(head)] if int(head) < len(positional) else None
            else:
                given = named.get(head)
            if given is None:
                return None
            value = value_of(given) if head == field else None
            out.append(HOLE if value is None else value)
        return "".join(out)
    if (isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo)
            and isinstance(expr.left, cst.SimpleString)):
        base = expr.left.evaluated_value
        if not isinstance(base, str):
            return None
        right = expr.right
        given = ([e.value for e in right.elements] if isinstance(right, cst.Tuple)
                 else [right])
        pieces = _PERCENT.split(base.replace("%%", "\1"))
        if len(pieces) - 1 != len(given):
            return None
        out = [pieces[0]]
        for value_expr, piece in zip(given, pieces[1:]):
            value = value_of(value_expr)
            out += [HOLE if value is None else value, piece]
        return "".join(out).replace("\1", "%")
    return None


_DEVICE_SPEC_FIELDS = ("job", "replica", "task", "device_type", "device_index")


def _device_spec_template(call: cst.Call) -> str | None:
    """The device string of a `DeviceSpec(job=..., device_type="GPU", device_index=i)`, of
    `DeviceSpec.from_string(s)`, or of either's `.to_string()`, with `HOLE` for a field given
    at run time (the index of a tower loop); None if `call` is none of them. Read by the
    constructor's name alone (`tf.DeviceSpec`, `tf.compat.v1.DeviceSpec`, an alias's)."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "to_string" and not call.args:
        inner = func.value
        return _device_spec_template(inner) if isinstance(inner, cst.Call) else None
    if (isinstance(func, cst.Attribute) and func.attr.value == "from_string"
            and _names_device_spec(func.value)):
        given = argument(call, "spec", 0)
        return None if given is None else device_template(given)
    if not _names_device_spec(func):
        return None
    parts = []
    for position, field in enumerate(_DEVICE_SPEC_FIELDS):
        given = argument(call, field, position)
        if given is None or (isinstance(given, cst.Name) and given.value == "None"):
            continue
        value = device_template(given)
        if value is None:
            value = given.value if isinstance(given, cst.Integer) else HOLE
        if field == "device_type":
            parts.append(f"device:{value}")
        elif field == "device_index":
            if not parts or not parts[-1].startswith("device:"):
                return HOLE  # an index without a type: nothing a placer reads
            parts[-1] += f":{value}"
        else:
            parts.append(f"{field}:{value}")
    return "".join(f"/{part}" for part in parts)


def _names_device_spec(func: cst.BaseExpression) -> bool:
    last = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
    return last in ("DeviceSpec", "DeviceSpecV1", "DeviceSpecV2")


# The device types `device_lib.list_local_devices()` lists (`XLA_GPU` too in TF 1.x), for
# a list of their names a filter on `device_type` does not narrow.
_LOCAL_DEVICE_TYPES = ("CPU", "GPU")
_MAX_DEPTH = 8  # names read through names, functions through functions: enough, and no cycle


class DeviceValues:
    """The device strings an expression of one module may hold at run time, as device
    templates (`device_template`: HOLE for a part built at run time), read through the
    names it is bound to: what a tower's `tf.device(...)` is given where the code shows it
    only as a name or an item of a list.

    A name is read as every plain assignment its scope (or, for a global, the module and
    each function declaring it `global`) makes, a `None` placeholder left out, and as the
    items of what a `for` binding it loops over; `devices[i]` as any item of `devices`. A
    template a name holds may be filled in where it is used (`device_string % i` after
    `device_string = '/gpu:%d'`, `template.format(i)`). A device list is a literal list,
    a comprehension (`['/gpu:%d' % i for i in range(n)]`, `[worker + g for g in
    gpus()]`), what a function of the module (or, through `function_elsewhere`, of another
    module of the project) returns, or the names of the local devices (`[d.name for d in
    device_lib.list_local_devices() if d.device_type == 'GPU']`: `/device:GPU:` + HOLE,
    the `device_type` test one of an `and` too). A value it cannot read (a parameter, a
    device function, a flag's text split at run time) gives nothing: `templates` answers
    with the values it can read, None where it reads none.
    """

    def __init__(self, scope_of: Callable[[cst.CSTNode], Scope | None],
                 parent: Callable[[cst.CSTNode], cst.CSTNode | None],
                 functions: Callable[[str], list[cst.FunctionDef]],
                 function_elsewhere: Callable[[str], tuple[DeviceValues, cst.FunctionDef] | None]
                 | None = None):
        # `functions`: name -> the module's functions of that name; `function_elsewhere`:
        # a dotted name -> the function of another module it names, with that module's reader
        self.scope_of, self.parent = scope_of, parent
        self.functions, self.function_elsewhere = functions, function_elsewhere
        self._wrapper: MetadataWrapper | None = None  # (a module read `of_module`)

    @classmethod
    def of_module(cls, module: cst.Module, function_elsewhere=None) -> DeviceValues:
        """A reader over a module of its own (another file's): its scopes resolved anew."""
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        scopes = wrapper.resolve(ScopeProvider)
        parents = wrapper.resolve(ParentProvider)
        defs: dict[str, list[cst.FunctionDef]] = {}
        for node in parents:
            if isinstance(node, cst.FunctionDef):
                defs.setdefault(node.name.value, []).append(node)
        reader = cls(scopes.get, parents.get, lambda name: defs.get(name, []),
                     function_elsewhere)
        reader._wrapper = wrapper
        return reader

    def calls_at(self, line: int) -> list[cst.Call]:
        """The calls starting at `line` of a module read `of_module` (none of another)."""
        if self._wrapper is None:
            return []
        if "_lines" not in self.__dict__:
            self._lines: dict[int, list[cst.Call]] = {}
            for node, where in self._wrapper.resolve(PositionProvider).items():
                if isinstance(node, cst.Call):
                    self._lines.setdefault(where.start.line, []).append(node)
        return self._lines.get(line, [])

    def templates(self, expr: cst.BaseExpression) -> list[str] | None:
        """The device templates `expr` may be; None where the code shows none."""
        return self._templates(expr, {}, 0)

    def items(self, expr: cst.BaseExpression) -> list[str] | None:
        """The device templates of the items of the list `expr` may be; None where the code
        shows none."""
        return self._items(expr, {}, 0)

    def _templates(self, expr, env: dict, depth: int) -> list[str] | None:
        if depth > _MAX_DEPTH:
            return None
        depth += 1
        if isinstance(expr, cst.Name):
            if expr.value in env:
                found = env[expr.value]
                return found if isinstance(found, list) else None
            values = self._bound(expr)
            return None if values is None else _union(
                self._items(value, env, depth) if looped else self._templates(value, env, depth)
                for looped, value in values)
        if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(
                expr.slice[0].slice, cst.Index):
            return self._items(expr.value, env, depth)
        if isinstance(expr, cst.IfExp):
            return _union([self._templates(expr.body, env, depth),
                           self._templates(expr.orelse, env, depth)])
        if (isinstance(expr, cst.Attribute) and expr.attr.value == "name"
                and isinstance(expr.value, cst.Name)
                and isinstance(env.get(expr.value.value), tuple)):
            return [f"/device:{kind}:{HOLE}" for kind in env[expr.value.value]]
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
            left = self._templates(expr.left, env, depth)
            right = self._templates(expr.right, env, depth)
            if left is None and right is None:
                return None
            return [a + b for a in left or [HOLE] for b in right or [HOLE]]
        template = device_template(expr)
        if template is not None:
            return [template]
        # A template held in a name, filled in at run time: `device_string % i` after
        # `device_string = '/gpu:%d'`, `template.format(gpu_id)`.
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo):
            held = self._templates(expr.left, env, depth)
            return None if held is None else [_percent_filled(t) for t in held]
        if (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
                and expr.func.attr.value == "format"):
            held = self._templates(expr.func.value, env, depth)
            return None if held is None else [_braces_filled(t) for t in held]
        return None

    def _items(self, expr, env: dict, depth: int) -> list[str] | None:
        if depth > _MAX_DEPTH:
            return None
        depth += 1
        if isinstance(expr, (cst.List, cst.Tuple)):
            found: list[str] = []
            for element in expr.elements:
                given = (self._items(element.value, env, depth)
                         if isinstance(element, cst.StarredElement)
                         else self._templates(element.value, env, depth))
                if given is None:
                    return None
                found += given
            return found or None
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
            loop = expr.for_in
            if loop.inner_for_in is not None or not isinstance(loop.target, cst.Name):
                return None
            kinds = self._local_device_types(loop)
            if kinds is not None:
                bound = kinds
            else:
                bound = self._items(loop.iter, env, depth) or [HOLE]
            return self._templates(expr.elt, {**env, loop.target.value: bound}, depth)
        if isinstance(expr, cst.Name):
            values = self._bound(expr)
            return None if values is None else _union(
                None if looped else self._items(value, env, depth) for looped, value in values)
        if isinstance(expr, cst.Call):
            return _union(self._returned(expr, depth))
        return None

    def _returned(self, call: cst.Call, depth: int) -> Iterator[list[str] | None]:
        """The device lists a call of a function of the project returns."""
        name = get_full_name_for_node(call.func)
        if name is None:
            return
        functions = self.functions(name) if "." not in name else []
        reader: DeviceValues = self
        if not functions and self.function_elsewhere is not None:
            found = self.function_elsewhere(name)
            if found is not None:
                reader, function = found
                functions = [function]
        if len(functions) != 1:
            return
        for returned in descendants(functions[0], cst.Return):
            if returned.value is not None:
                yield reader._items(returned.value, {}, depth)

    def returned(self, function: cst.FunctionDef) -> list[str] | None:
        """The device templates `function` (of this reader's module) returns, each `return`
        read; None where one gives nothing readable (a bare `return`, a parameter)."""
        found: list[str] = []
        for returned in descendants(function, cst.Return):
            templates = None if returned.value is None else self.templates(returned.value)
            if not templates:
                return None
            found += templates
        return found or None

    def _local_device_types(self, loop: cst.CompFor) -> tuple[str, ...] | None:
        """The device types a comprehension over `device_lib.list_local_devices()` (or a
        name bound to it) keeps, as its `if`s filter on `device_type`; None for a loop
        over anything else."""
        listed = loop.iter
        if isinstance(listed, cst.Name):
            values = self._bound(listed) or []
            listed = values[0][1] if len(values) == 1 and not values[0][0] else None
        if not (isinstance(listed, cst.Call)
                and (get_full_name_for_node(listed.func) or "").endswith("list_local_devices")):
            return None
        for comparison in _conjuncts(test.test for test in loop.ifs):
            if not (isinstance(comparison, cst.Comparison) and len(comparison.comparisons) == 1
                    and isinstance(comparison.comparisons[0].operator, cst.Equal)):
                continue
            sides = (comparison.left, comparison.comparisons[0].comparator)
            if any(isinstance(side, cst.Attribute) and side.attr.value == "device_type"
                   for side in sides):
                kinds = [side.evaluated_value for side in sides
                         if isinstance(side, cst.SimpleString)]
                if len(kinds) == 1 and isinstance(kinds[0], str):
                    return (kinds[0].upper(),)
        return _LOCAL_DEVICE_TYPES

    def _bound(self, name: cst.Name) -> list[tuple[bool, cst.BaseExpression]] | None:
        """What `name` is bound to, each (looped, value): the value of a plain assignment
        (looped False; a `None` placeholder left out), or what a `for` binding it loops over
        (looped True); None where it is bound otherwise too (a parameter, an import, part of
        a tuple) or not at all."""
        scope = self.scope_of(name)
        if scope is None:
            return None
        bindings = list(scope[name.value])
        if not bindings:
            return None
        found: list[tuple[bool, cst.BaseExpression]] = []
        for binding in bindings:
            node = getattr(binding, "node", None)
            holder = self.parent(node) if isinstance(node, cst.Name) else None
            statement = self.parent(holder) if isinstance(holder, cst.AssignTarget) else None
            if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
                if not (isinstance(statement.value, cst.Name)
                        and statement.value.value == "None"):
                    found.append((False, statement.value))
            elif isinstance(holder, cst.For) and holder.target is node:
                found.append((True, holder.iter))
            else:
                return None
        return found


def keeps_counter(function: cst.FunctionDef) -> bool:
    """Whether `function` changes state that outlives a call and reads it, so that a call
    may answer otherwise than the last: an attribute of its first parameter, or a name it
    declares `global`, augmented (`self.i += 1`) or assigned and read elsewhere in it
    (`dev = '/gpu:%d' % self._cur_gpu; self._cur_gpu = (self._cur_gpu + 1) % n`)."""
    params = function.params.params
    owner = params[0].name.value if params else None
    kept = {item.name.value for statement in descendants(function, cst.Global)
            for item in statement.names}

    def state(target: cst.BaseExpression) -> bool:
        if isinstance(target, cst.Name):
            return target.value in kept
        return (owner is not None and isinstance(target, cst.Attribute)
                and isinstance(target.value, cst.Name) and target.value.value == owner)

    if any(state(s.target) for s in descendants(function, cst.AugAssign)):
        return True
    for target in [t.target for s in descendants(function, cst.Assign) for t in s.targets]:
        if state(target):
            name = get_full_name_for_node(target)
            named = sum(get_full_name_for_node(node) == name
                        for node in descendants(function, type(target)))
            if named > (2 if isinstance(target, cst.Name) else 1):  # (`global` names it too)
                return True
    return False


def _conjuncts(tests: Iterable[cst.BaseExpression]) -> Iterator[cst.BaseExpression]:
    """The tests that must all hold where each of `tests` holds, `and` taken apart
    (`x.device_type == 'GPU' and x.memory_limit > limit`: both)."""
    for test in tests:
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            yield from _conjuncts([test.left, test.right])
        else:
            yield test


def _union(found: Iterable[list[str] | None]) -> list[str] | None:
    """The templates of each readable answer, in order, each once; None if none is."""
    out: list[str] | None = None
    for templates in found:
        if templates is not None:
            out = out or []
            out += [t for t in templates if t not in out]
    return out


class ParentProvider(VisitorMetadataProvider[Optional[cst.CSTNode]]):  # (3.9: no `|`)
    """Each node's parent (None for the module): libcst's ParentNodeProvider in one walk
    (that one asks every node for its children, another walk's worth).

    Set in source order, so its mapping also lists every node of the tree in source order
    (`nodes_of`): codemods read the calls or assignments they want from it instead of
    walking the tree again, each on its own.
    """

    def __init__(self, cache: object = None):
        super().__init__(cache)
        self._path: list[cst.CSTNode] = []  # from the module down to the node visited

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.set_metadata(node, self._path[-1] if self._path else None)
        self._path.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self._path.pop()


def nodes_of(parents: Mapping[cst.CSTNode, cst.CSTNode | None], *kinds: type) -> list:
    """The nodes of `kinds` in a tree, in source order, from its `ParentProvider` mapping."""
    return [node for node in parents if isinstance(node, kinds)]


def qualified_name_lookup(scope_of: Callable[[cst.CSTNode], Scope | None]
                          ) -> Callable[[cst.CSTNode], Collection[QualifiedName]]:
    """`node -> the qualified names it may refer to`, as libcst's QualifiedNameProvider gives
    them, from the scope analysis (`scope_of`: node -> its scope, None if it has none).

    Asked only of the nodes a codemod reads: the provider walks the whole tree to set up
    every node's.
    """
    found: dict[cst.CSTNode, Collection[QualifiedName]] = {}

    def lookup(node: cst.CSTNode) -> Collection[QualifiedName]:
        if node not in found:
            scope = scope_of(node)
            found[node] = set() if scope is None else scope.get_qualified_names_for(node)
        return found[node]

    return lookup


def v1_spelling(module: cst.Module, symbol: str) -> str | None:
    """How compat.v1's `symbol` (`device`, `train.replica_device_setter`) is reached through
    the module's own top-level imports, if it can be: `tf.device` after `import
    tensorflow.compat.v1 as tf`, `tf.compat.v1.device` after `import tensorflow as tf`."""
    found: dict[str, str] = {}  # what an import binds (qualified) -> the name it binds
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    if alias.asname is not None:
                        bound = cst.ensure_type(alias.asname.name, cst.Name).value
                        found.setdefault(alias.evaluated_name, bound)
                    else:
                        top = alias.evaluated_name.split(".")[0]
                        found.setdefault(top, top)
            elif (isinstance(small, cst.ImportFrom) and small.module is not None
                  and not small.relative and not isinstance(small.names, cst.ImportStar)):
                base = get_full_name_for_node(small.module)
                for alias in small.names:
                    bound = (cst.ensure_type(alias.asname.name, cst.Name).value
                             if alias.asname else alias.evaluated_name)
                    found.setdefault(f"{base}.{alias.evaluated_name}", bound)
    parts = f"tensorflow.compat.v1.{symbol}".split(".")
    for cut in range(len(parts), 0, -1):  # the longest import first
        qualified = ".".join(parts[:cut])
        if qualified in found:
            return ".".join([found[qualified], *parts[cut:]])
    return None


@functools.cache
def _v1_names(symbol: str) -> frozenset[str]:
    """The qualified names of compat.v1's `symbol` (and of the framework's `ops.device`)."""
    names = {f"{module}.{symbol}" for module in V1_MODULES}
    if symbol == "device":
        names.add("tensorflow.python.framework.ops.device")
    return frozenset(names)


class TfNames(TfNameRules):
    """`TfNameRules` over libcst's scope analysis (its qualified names): the TF symbols one
    file's expressions name, through its imports, its module-level aliases (`slim =
    tf.contrib.slim`, `v1 = tf.compat.v1`), the project's re-exports and star imports. The
    resolver every libcst rule reads (`SourceCodemod.tf_names`); the names it gives are
    those of `graphfix.source.vocabulary`."""

    def __init__(self, module: cst.Module,
                 lookup: Callable[[cst.CSTNode], Collection[QualifiedName]],
                 reexports: Callable[[str], str | None] | None = None,
                 star: Callable[[str], str | None] | None = None):
        super().__init__(reexports, star)
        self._lookup = lookup  # node -> libcst QualifiedNames (`qualified_name_lookup`)
        self._add_aliases(
            (small.targets[0].target.value, small.value)
            for statement in module.body if isinstance(statement, cst.SimpleStatementLine)
            for small in statement.body
            if isinstance(small, cst.Assign) and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)
            and isinstance(small.value, (cst.Name, cst.Attribute)))

    def imported(self, node: cst.CSTNode) -> set[QualifiedName]:
        """The qualified names `node` may refer to through imports and bindings alone, with
        their source (import, builtin, local): what libcst's QualifiedNameProvider gives."""
        try:
            return set(self._lookup(node))
        except KeyError:
            return set()

    def imported_names(self, node: cst.CSTNode) -> set[tuple[str, bool]]:
        return {(q.name, q.source == QualifiedNameSource.IMPORT) for q in self.imported(node)}

    def attribute_chain(self, node: cst.CSTNode) -> tuple[cst.Name | None, str | None, list[str]]:
        chain = []
        while isinstance(node, cst.Attribute):
            chain.append(node.attr.value)
            node = node.value
        if isinstance(node, cst.Name):
            return node, node.value, chain[::-1]
        return None, None, chain[::-1]


class StatementPositions:
    """`node -> CodeRange`, what libcst's PositionProvider gives for a module's nodes, computed
    one top-level statement at a time, for the statements holding the nodes asked about. The
    provider computes every node's position at once, a walk of the whole tree costlier than
    its code, where a rule asks a few nodes' only (its findings' and their ancestors'); a
    statement's position in the file is the lines of the code before it."""

    def __init__(self, module: cst.Module, parent: Callable[[cst.CSTNode], cst.CSTNode | None],
                 code: Callable[[], str]):
        self._module, self._parent = module, parent
        self._code = code  # the module's code, as the codemod generated it once
        self._known: dict[cst.CSTNode, CodeRange] = {}
        self._first_lines: dict[cst.CSTNode, int] | None = None  # statement -> lines before it

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        if node in self._known:
            return self._known[node]
        module = self._module
        if node is module:
            return self._module_range()
        statement = node
        while (above := self._parent(statement)) is not module:
            if above is None:
                raise KeyError(node)  # (not a node of this tree)
            statement = above
        if self._first_lines is None:
            self._first_lines = self._lines_before_statements()
        if statement not in self._first_lines:  # the module's header or footer lines
            self._known.update(MetadataWrapper(module, unsafe_skip_copy=True).resolve(
                PositionProvider))
            return self._known[node]
        alone = module.with_changes(body=[statement], header=[], footer=[])
        offset = self._first_lines[statement]
        for inner, where in MetadataWrapper(alone, unsafe_skip_copy=True).resolve(
                PositionProvider).items():
            if inner is not alone:
                self._known[inner] = CodeRange(
                    CodePosition(where.start.line + offset, where.start.column),
                    CodePosition(where.end.line + offset, where.end.column))
        return self._known[node]

    def _lines_before_statements(self) -> dict[cst.CSTNode, int]:
        module = self._module
        lines = sum(module.code_for_node(line).count("\n") for line in module.header)
        found = {}
        for statement in module.body:
            found[statement] = lines
            lines += module.code_for_node(statement).count("\n")
        return found

    def _module_range(self) -> CodeRange:
        code = self._code()
        last = code.rsplit("\n", 1)[-1]
        return CodeRange(CodePosition(1, 0), CodePosition(code.count("\n") + 1, len(last)))


class SourceCodemod(AsksTfNames, VisitorBasedCodemodCommand):
    """Base class of a transform's source surface (a rule): its visit methods find what is
    wrong and `report` it, each finding with its fix (edits of the tree as read, see
    `graphfix.source.fixes`), and in fix mode the base class makes every reported edit in one
    traversal. `self.options` holds the transform's parameters; the transform it belongs to
    (its name on every finding) is the registry's, the one whose `codemod` names this class.

    A rule whose only visit method is `visit_Module` (all built-in ones: it reads the nodes
    it wants from `nodes` and reports every finding there) is not traversed further unless
    it edits: the rest of the traversal, every node visited and rebuilt (the bulk of a rule's
    time on a big file), runs only in fix mode after a finding with a fix, and only down to
    the nodes its edits are made at. Others are
    traversed as libcst does; their edits must be reported by the time the traversal leaves
    the node an edit is made at (the reported node, or the block or brackets holding it).
    """

    # Positions are not among them: `code_range` resolves them when first asked, since most
    # files give no finding and libcst computes them for the whole file at once.
    METADATA_DEPENDENCIES = (ScopeProvider, ParentProvider)
    # Its examples, the user's view of what it does (each becomes a test):
    VALID: ClassVar[tuple[str, ...]] = ()  # code it reports nothing on
    INVALID: ClassVar[tuple[Example, ...]] = ()  # code it reports on, and what the fix makes

    @classmethod
    def transform(cls) -> type[Transform]:
        """The transform whose source surface this is (the registry's)."""
        from graphfix.registry import transform_of_codemod

        return transform_of_codemod(cls)

    @classmethod
    @functools.cache
    def _reports_in_visit_module(cls) -> bool:
        """Whether every finding is reported in `visit_Module`: no other visit method."""
        for klass in cls.__mro__:
            if klass is SourceCodemod:
                return True
            if any(name.startswith("visit_") and name != "visit_Module" or name == "on_visit"
                   for name in vars(klass)):
                return False
        return False

    def __init__(self, context: CodemodContext, options: dict[str, Any] | None = None, *,
                 fix: bool = True, project: FileView | None = None):
        super().__init__(context)
        self.options = options or {}
        self.fix = fix  # False: check mode, findings only
        self._project = project
        self.findings: list[Finding] = []
        # The edits of the findings' fixes, by the node at whose leave each is made:
        self._planned: dict[cst.CSTNode, list[fixes.Edit]] = {}
        self._imports: list[fixes.AddImport] = []
        self._known_edits: set[fixes.Edit] = set()
        self._name = self.transform().name
        self._lines: list[str] | None = None
        self._tf_names: TfNames | None = None
        self._positions: StatementPositions | None = None
        self._code: str | None = None

    @property
    def _edits(self) -> bool:
        """Whether this rule edits the file: in fix mode, once it reported a finding with a
        fix."""
        return self.fix and bool(self._known_edits)

    def on_visit(self, node: cst.CSTNode) -> bool:
        visit_children = super().on_visit(node)
        if self._reports_in_visit_module():
            if node is self._tree:  # the rest only edits
                return visit_children and self._edits
            # (and goes only where they are made: the other nodes stay as they are)
            return visit_children and node in self._toward_edits()
        return visit_children

    def _toward_edits(self) -> set[cst.CSTNode]:
        """The nodes the edits are made at and every node holding one (all the edits'
        traversal visits, in a rule that reports all it finds in `visit_Module`)."""
        if self._toward is None:
            self._toward = set()
            for node in self._planned:
                while node is not None and node not in self._toward:
                    self._toward.add(node)
                    node = self.parent(node)
        return self._toward

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):
        if not self._edits:
            if original_node is self._tree and self._reports_in_visit_module():
                return updated_node
            return super().on_leave(original_node, updated_node)
        updated = super().on_leave(original_node, updated_node)
        edits = self._planned.pop(original_node, None)
        if edits:
            updated = fixes.make(original_node, updated, edits, self._tree.config_for_parsing,
                                 self._produced)
            if isinstance(updated, cst.FlattenSentinel):
                self._produced[original_node] = tuple(updated.nodes)
            elif isinstance(updated, cst.RemovalSentinel):
                self._produced[original_node] = ()
        if original_node is self._tree:
            for edit in self._imports:
                AddImportsVisitor.add_needed_import(self.context, edit.module, asname=edit.asname)
            if self._planned:
                raise RuntimeError(
                    f"{self._name}: a fix edits a node the traversal had already left "
                    f"(report it before leaving {type(next(iter(self._planned))).__name__})")
        return updated

    # -- helpers for subclasses --------------------------------------------------------------

    def qualified(self, node: cst.CSTNode) -> Collection[QualifiedName]:
        """The qualified names `node` may refer to, with their source (import, builtin,
        local): what libcst's QualifiedNameProvider gives."""
        return self._qualified(node)

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The node `node` is a child of; None for the module (and nodes not in the tree)."""
        return self.get_metadata(ParentProvider, node, None)

    def nodes(self, *kinds: type) -> list:
        """Every node of `kinds` (`cst.Call`, ...) in the tree, in source order (a new list
        each time: read once a traversal, the tree being the one its metadata describes)."""
        if kinds not in self._nodes_of_kinds:
            self._nodes_of_kinds[kinds] = nodes_of(self.metadata[ParentProvider], *kinds)
        return list(self._nodes_of_kinds[kinds])

    @property
    def project(self) -> FileView:
        """The project model as this file sees it (`graphfix.source.project`): what the
        file and the code its imports and calls reach build. Given by the run; a file
        checked alone (`graphfix.check_source`) is a project of its own."""
        if self._project is None or self._project.stale:
            from graphfix.source.project import Project

            label = self.context.filename or "<string>"
            # (stale: an earlier rule's fix changed the file: its own part is read anew, the
            # other files' parts and code kept, so that facts read from them stay known)
            whole = self._project.project if self._project is not None else Project({})
            self._project = whole.with_code(label, self._tree.code)
        return self._project

    @property
    def tf_names(self) -> TfNames:
        """The file's TF names (imports and module aliases), resolved when first asked."""
        if self._tf_names is None:
            self._tf_names = TfNames(self._tree, self._qualified, *self._project_resolvers())
        return self._tf_names

    def v1_qualified(self, node: cst.CSTNode) -> str | None:
        """`tf_qualified`, a name of plain `tensorflow` read as compat.v1's where the file
        runs on TF 1.x (`runs_on_tf1`): `tf.gradients` is v1's there, not TF 2's."""
        qualified = self.tf_qualified(node)
        if (qualified is not None and qualified.startswith("tensorflow.")
                and not qualified.startswith("tensorflow.compat.") and self.runs_on_tf1()):
            return "tensorflow.compat.v1." + qualified.removeprefix("tensorflow.")
        return qualified

    def runs_on_tf1(self) -> bool:
        """Whether the file reaches, through plain `tensorflow`, a name TF 2 dropped from its
        top level (`TF2_DROPPED`: `tf.placeholder`, `tf.Session`, `tf.contrib....`): a
        program written for TF 1.x, whose top-level names are compat.v1's."""
        if "_runs_on_tf1" not in self.__dict__:
            self._runs_on_tf1 = False
            for node in self.nodes(cst.Attribute):
                name = (self.tf_qualified(node) or "").removeprefix("tensorflow.")
                if any(name == d or name.startswith(d + ".") for d in TF2_DROPPED):
                    self._runs_on_tf1 = True
                    break
        return self._runs_on_tf1

    def v1_spelling_at(self, func: cst.BaseExpression | None, symbol: str) -> str | None:
        """compat.v1's `symbol` (`device`, `train.replica_device_setter`) spelled as the
        call `func` the fix stands beside reaches TF (`tf.device` under `import
        tensorflow.compat.v1 as tf`: `tf.device`; under `import tensorflow as tf`:
        `tf.compat.v1.device`), else through the module's own imports (`v1_spelling`);
        None if the file reaches it neither way. For `device`, the framework's
        `ops.device` (which takes device functions too) is spelled as called."""
        if func is not None:
            qualified = self.tf_qualified(func)
            if qualified in _v1_names(symbol):
                return self.code(func)
            if isinstance(func, cst.Attribute):
                base = self.tf_qualified(func.value)
                if base in V1_MODULES:
                    return f"{self.code(func.value)}.{symbol}"
                if base == "tensorflow" or (
                        qualified == f"tensorflow.{symbol}"
                        and "tensorflow" in {q.name for q in self.tf_names.imported(func.value)}):
                    return f"{self.code(func.value)}.compat.v1.{symbol}"
        if symbol not in self._v1_imported:
            self._v1_imported[symbol] = v1_spelling(self._tree, symbol)
        return self._v1_imported[symbol]

    def module_of(self, path: str, code: str) -> cst.Module | None:
        """Another file's libcst tree (`code`, what the project read at `path`), parsed once
        per file checked; None if it does not parse."""
        modules = self.__dict__.setdefault("_other_modules", {})
        if path not in modules:
            try:
                modules[path] = cst.parse_module(code)
            except (cst.ParserSyntaxError, RecursionError, ValueError):
                modules[path] = None
        return modules[path]

    def device_values_of(self, path: str, code: str) -> DeviceValues | None:
        """A device string reader (`DeviceValues`) over another file, made once per file
        checked; None if it does not parse."""
        readers = self.__dict__.setdefault("_other_device_values", {})
        if path not in readers:
            module = self.module_of(path, code)
            readers[path] = None if module is None else DeviceValues.of_module(module)
        return readers[path]

    @property
    def device_values(self) -> DeviceValues:
        """The reader of this file's device strings through its names and its functions
        (`DeviceValues`), made when first asked."""
        if "_device_values" not in self.__dict__:
            functions: dict[str, list[cst.FunctionDef]] = {}
            for function in self.nodes(cst.FunctionDef):
                functions.setdefault(function.name.value, []).append(function)
            self._device_values = DeviceValues(
                lambda node: self.get_metadata(ScopeProvider, node, None), self.parent,
                lambda name: functions.get(name, []))
        return self._device_values

    def device_function(self, item: cst.WithItem) -> cst.FunctionDef | None:
        """The function (or method) of the module a `with tf.device(f())` item calls, with no
        arguments, for its device; None for any other device."""
        given = device_argument(item.item) if isinstance(item.item, cst.Call) else None
        if not isinstance(given, cst.Call) or given.args:
            return None
        name = (get_full_name_for_node(given.func) or "").removeprefix("self.")
        functions = [f for f in self.nodes(cst.FunctionDef) if f.name.value == name]
        return functions[0] if len(functions) == 1 else None

    def round_robin_device(self, item: cst.WithItem) -> bool:
        """Whether a `with tf.device(next_device())` item asks for what a function of the
        module (`device_function`) returns from a counter it keeps and turns
        (`keeps_counter`: `dev = '/gpu:%d' % self._cur_gpu; self._cur_gpu = (self._cur_gpu +
        1) % n; return dev`), a device built at run time, and two or more calls ask for it:
        each block of a model split over the devices on the next one."""
        function = self.device_function(item)
        if function is None or not keeps_counter(function):
            return False
        func = self.code(device_argument(item.item).func)  # type: ignore[union-attr]
        asked = [c for c in self.nodes(cst.Call) if self.code(c.func) == func]
        return len(asked) > 1 and any(HOLE in t for t in self.device_values.returned(
            function) or [])

    def device_changes(self, item: cst.WithItem) -> bool:
        """Whether two entries of a `with tf.device(...)` item (the turns of a loop around it)
        may ask for different devices: a device built at run time (`'/gpu:%d' % i`), one the
        code does not show (a name, a device function), what a function of the module keeping
        a counter returns (`round_robin_device`); not a fixed string, nor what a function of
        the module called without arguments returns where it keeps no counter and each of its
        returns is read (`'/gpu:%d' % self._gpu`: at every call the same device)."""
        template = scope_template(item)
        if template is not None:
            return HOLE in template
        function = self.device_function(item)
        return (function is None or keeps_counter(function)
                or self.device_values.returned(function) is None)

    def tower_loop(self, item: cst.WithItem) -> cst.For | cst.While | None:
        """The loop that enters a `with tf.device(...)` item once per turn, with a device
        that changes (`device_changes`): the loop of several towers; None if there is none."""
        return enclosing(item, self.parent, cst.For, cst.While, within_function=True) if (
            self.device_changes(item)) else None

    def device_items_around(self, node: cst.CSTNode) -> Iterator[cst.WithItem]:
        """The `with` items around `node` that call TF's `device`, innermost first, within
        the function holding `node` (the walk stops at a function's edge)."""
        for around in with_items_around(node, self.parent):
            if not isinstance(around, cst.WithItem):
                return
            if (isinstance(around.item, cst.Call)
                    and self.tf_canonical(around.item.func) in DEVICE_CALLS):
                yield around

    def calls_in_scope(self, item: cst.WithItem) -> list[cst.Call]:
        """The calls in the body of the `with` statement that opens `item` (none if `item`
        is not one of a `with` statement's items)."""
        scope = self.parent(item)
        return list(descendants(scope.body, cst.Call)) if isinstance(scope, cst.With) else []

    def code(self, node: cst.CSTNode) -> str:
        """`node`'s source text, as the file spells it."""
        return self._tree.code_for_node(node)

    def code_range(self, node: cst.CSTNode) -> CodeRange:
        """Where `node` is in the file, as libcst's PositionProvider says (KeyError for a
        node not in the tree), computed for the top-level statement holding it alone."""
        if self._positions is None:
            self._positions = StatementPositions(self._tree, self.parent, self._tree_code)
        return self._positions[node]

    def position(self, node: cst.CSTNode) -> tuple[int, int]:
        """(line, column), both from 1, where `node` starts."""
        pos = self.code_range(node).start
        return pos.line, pos.column + 1

    def report(self, node: cst.CSTNode, message: str, *,
               fix: fixes.Edit | tuple[fixes.Edit, ...] | None = None,
               severity: str = "error") -> None:
        """Record a finding at `node`'s position, with its fix (None: reported, not fixed);
        nothing if the user suppressed it there. Edits several findings share are made once."""
        if self.suppressed(node):
            return
        edits = fixes.edits_of(fix)
        for edit in edits:
            if edit in self._known_edits:
                continue
            self._known_edits.add(edit)
            at = fixes.where_made(edit, self.parent)
            if at is None:
                self._imports.append(edit)
            else:
                self._planned.setdefault(at, []).append(edit)
        line, col = self.position(node)
        self.findings.append(
            Finding(
                path=self.context.filename or "<string>",
                transform=self._name,
                message=message,
                line=line,
                col=col,
                severity=severity,  # type: ignore[arg-type]
                edit=edits or None,  # (made by this base class: `run_source` drops it)
            )
        )

    def suppressed(self, node: cst.CSTNode) -> bool:
        """Whether `# graphfix: ignore[...]` covers `node`: on its line, or on the first line
        (or the comment line just above) of any enclosing statement or `with` block."""
        lines = self._source_lines()
        current: cst.CSTNode | None = node
        while current is not None:
            try:
                # (a block's body is no statement: it "starts" at its first statement,
                # whose comment covers that statement only)
                start = (None if isinstance(current, (cst.BaseSuite, cst.Module))
                         else self.code_range(current).start.line)
            except KeyError:
                start = None
            if start is not None:
                for number in (start, start - 1):
                    if 1 <= number <= len(lines) and self._ignores(lines[number - 1], number == start):
                        return True
            current = self.parent(current)
        return False

    def _ignores(self, line: str, same_line: bool) -> bool:
        return comment_ignores(line, same_line, self._name)

    def _source_lines(self) -> list[str]:
        if self._lines is None:
            self._lines = code_lines(self._tree_code())
        return self._lines

    def _tree_code(self) -> str:
        """The tree's code, generated once (a walk of the whole tree)."""
        if self._code is None:
            self._code = self._tree.code
        return self._code

    # Set by `run_source`: the file's parsed tree with the metadata resolved so far, shared
    # by the codemods of one file (one parse, one scope analysis) where libcst would
    # deep-copy the tree and resolve everything again for each of them.
    shared_wrapper: MetadataWrapper | None = None

    @contextlib.contextmanager
    def _handle_metadata_reference(self, module: cst.Module):
        wrapper = self.shared_wrapper
        if wrapper is None or wrapper.module is not module:
            with super()._handle_metadata_reference(module) as tree:
                yield tree
            return
        with self.resolve(wrapper):
            previous = self.context.wrapper
            self.context = dataclasses.replace(self.context, wrapper=wrapper)
            try:
                yield wrapper.module
            finally:
                self.context = dataclasses.replace(self.context, wrapper=previous)

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        self._tree = tree
        self._produced: dict[cst.CSTNode, tuple[cst.CSTNode, ...]] = {}
        self._lines = None
        self._tf_names = None
        self._positions = None
        self._code = None
        self._toward: set[cst.CSTNode] | None = None
        self._nodes_of_kinds: dict[tuple[type, ...], list] = {}  # (see `nodes`)
        self._v1_imported: dict[str, str | None] = {}  # symbol -> `v1_spelling` of the tree
        self._qualified = qualified_name_lookup(
            lambda node: self.get_metadata(ScopeProvider, node, None))
        return super().transform_module_impl(tree)


def parse_error(exc: Exception, code: str) -> str:
    """A one-line reason for a file libcst cannot parse (with a hint for Python 2 code)."""
    if isinstance(exc, cst.ParserSyntaxError):
        # Python's own parser places the error better, and says what is wrong.
        reason = python_syntax_error(code)
        if reason is not None:
            return reason
        return (f"syntax error at line {exc.raw_line}, column {exc.raw_column + 1}"
                f"{_python2_hint(code)}")
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"cannot parse: {text}"


class CodemodRun:
    """The libcst rules of one file, one after another over one parse (`graphfix.source.run`
    runs them in the run's order among the stdlib-tree rules): the tree they read and its
    scope analysis are shared until a fix changes the tree, where libcst would deep-copy
    the tree and resolve everything again for each of them."""

    def __init__(self, module: cst.Module, wrapper: MetadataWrapper | None = None):
        self.original = self.module = module
        # Straight from the parser, the tree has no shared nodes: no copy needed.
        self._wrapper = wrapper or MetadataWrapper(module, unsafe_skip_copy=True)
        self._first_wrapper = self._wrapper  # (with the metadata resolved over `original`)

    def again(self) -> CodemodRun:
        """A run over the tree as first parsed, with the metadata resolved over it so far
        (a second run over the same code: `run_source(read=...)`), however this one's
        fixes changed its tree."""
        return CodemodRun(self.original, self._first_wrapper)

    @classmethod
    def parse(cls, source: str | bytes, code: str) -> tuple[CodemodRun | None, str | None]:
        """(the run over libcst's tree of `source`, the file's bytes or text, None), or
        (None, why libcst cannot read it); `code` is its text."""
        try:
            return cls(cst.parse_module(source)), None
        except Exception as exc:  # libcst raises ParserSyntaxError and a few others
            return None, parse_error(exc, code)

    @property
    def code(self) -> str:
        """The code of the tree as the rules so far left it."""
        return self.module.code

    def apply(self, codemod_class: type[SourceCodemod], options: dict, path: str, *,
              fix: bool, project: FileView | None) -> tuple[list[Finding], bool]:
        """(the findings of one codemod over the current tree, whether its fix changed it)."""
        if self.module is not self._wrapper.module:  # an earlier fix changed the tree
            self._wrapper = MetadataWrapper(self.module)
        codemod = codemod_class(CodemodContext(filename=path), options, fix=fix,
                                project=project)
        codemod.shared_wrapper = self._wrapper
        result = codemod.transform_module(self._wrapper.module)
        if codemod._edits:  # else it returns the tree it was given: keep the analysis
            self.module = result
        return codemod.findings, codemod._edits


__all__ = [
    "DeviceValues", "HOLE", "Example", "ParentProvider", "SourceCodemod", "SourceResult", "TfNames", "argument",
    "decode_source", "device_argument", "device_template", "keeps_counter", "nodes_of", "on_ps_job",
    "qualified_name_lookup", "run_source", "scope_template", "template_spec", "v1_spelling",
]
