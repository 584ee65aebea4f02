"""Modules a script imports by a name it builds at run time, where the name is a fact of
the file: `model = importlib.import_module(args.data + "." + args.model)`, the parts read
from the defaults of its command-line flags (argparse's `add_argument("--model",
default="dcgan")`, absl's and tf.app.flags' `DEFINE_string("model", "dcgan", ...)`) or from
names the file binds once, to a string. The project model reads such a call as `import
mnist.dcgan as model`: what the script runs when started with its defaults. A name the file
does not spell out (no default, a computed value) is no import."""

from __future__ import annotations

import ast
import re

from graphfix.source.project.names import AstTfNames, argument

_IMPORT_MODULE = "importlib.import_module"
_MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
# absl's and tf.app.flags' definers of a flag whose value may name a module.
_FLAG_DEFINERS = frozenset({"DEFINE_string", "DEFINE_enum"})
_WORDS = ("import_module",)


def dynamic_imports(tree: ast.Module, names: AstTfNames, code: str | None = None
                    ) -> list[list]:
    """[bound name, module, None, 0] (the project part's form of `import module as bound`)
    for each `bound = importlib.import_module(<name>)` whose name the file spells out
    (see the module docstring); relative names are left out."""
    if code is not None and not any(word in code for word in _WORDS):
        return []
    calls = [node for node in ast.walk(tree)
             if isinstance(node, ast.Assign) and len(node.targets) == 1
             and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call)
             and _IMPORT_MODULE in names.qualified(node.value.func)]
    if not calls:
        return []
    known = _Strings(tree)
    found = []
    for assign in calls:
        given = argument(assign.value, "name", 0)
        module = known.value(given) if given is not None else None
        if module is not None and _MODULE_NAME.fullmatch(module):
            found.append([assign.targets[0].id, module, None, 0])
    return found


class _Strings:
    """The strings an expression of one file evaluates to where the file says them: string
    literals, `+`, f-strings, `%` and `str.format` of such, names the file binds once, to a
    string, and `<namespace>.<flag>` for a flag the file defines with a string default
    (one default for that flag name: two different ones say nothing)."""

    def __init__(self, tree: ast.Module):
        self.flags: dict[str, str | None] = {}
        self.constants: dict[str, str] = {}
        stores: dict[str, int] = {}  # how many places bind each name
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                self._read_flag(node)
            elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                stores[node.id] = stores.get(node.id, 0) + 1
            elif (isinstance(node, ast.Assign) and len(node.targets) == 1
                  and isinstance(node.targets[0], ast.Name)
                  and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
                self.constants[node.targets[0].id] = node.value.value
        # (a name bound anywhere else too, by a loop, a tuple, a function's own: unknown)
        self.constants = {name: value for name, value in self.constants.items()
                          if stores.get(name) == 1}

    @staticmethod
    def _keep(table: dict[str, str | None], name: str, value: str | None) -> None:
        table[name] = value if table.get(name, value) == value else None

    def _read_flag(self, call: ast.Call) -> None:
        func = call.func
        callee = (func.attr if isinstance(func, ast.Attribute)
                  else func.id if isinstance(func, ast.Name) else None)
        if callee == "add_argument":
            options = [a.value for a in call.args
                       if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            dest = argument(call, "dest", None)
            if isinstance(dest, ast.Constant) and isinstance(dest.value, str):
                name = dest.value
            else:  # argparse's dest: the first long option, else the positional's name
                long = [o for o in options if o.startswith("--")]
                plain = [o for o in options if not o.startswith("-")]
                name = (long[0][2:] if long else plain[0] if plain else "").replace("-", "_")
            default = argument(call, "default", None)
        elif callee in _FLAG_DEFINERS:
            given = argument(call, "name", 0)
            name = given.value if (isinstance(given, ast.Constant)
                                   and isinstance(given.value, str)) else ""
            default = argument(call, "default", 1)
        else:
            return
        if name:
            value = (default.value if isinstance(default, ast.Constant)
                     and isinstance(default.value, str) else None)
            self._keep(self.flags, name, value)

    def value(self, expr: ast.expr, depth: int = 0) -> str | None:
        """The string `expr` evaluates to, or None where the file does not say it."""
        if depth > 10:
            return None
        if isinstance(expr, ast.Constant):
            return expr.value if isinstance(expr.value, str) else None
        if isinstance(expr, ast.Name):
            return self.constants.get(expr.id)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            return self.flags.get(expr.attr)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            left, right = self.value(expr.left, depth + 1), self.value(expr.right, depth + 1)
            return None if left is None or right is None else left + right
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mod):
            return self._formatted(expr.left, (expr.right.elts if isinstance(
                expr.right, ast.Tuple) else [expr.right]), "%", depth)
        if isinstance(expr, ast.JoinedStr):
            pieces = []
            for piece in expr.values:
                if isinstance(piece, ast.FormattedValue):
                    if piece.conversion not in (-1, ord("s")) or piece.format_spec:
                        return None
                    piece = piece.value
                pieces.append(self.value(piece, depth + 1))
            return None if None in pieces else "".join(pieces)
        if (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)
                and expr.func.attr == "format" and not expr.keywords):
            return self._formatted(expr.func.value, expr.args, "{}", depth)
        return None

    def _formatted(self, template: ast.expr, args: list[ast.expr], style: str, depth: int
                   ) -> str | None:
        """`template % args` or `template.format(*args)`, each placeholder a plain `%s`
        or `{}`."""
        text = self.value(template, depth + 1)
        values = [self.value(a, depth + 1) for a in args]
        if text is None or None in values or any(isinstance(a, ast.Starred) for a in args):
            return None
        pieces = text.split("%s" if style == "%" else "{}")
        if len(pieces) != len(values) + 1 or any(
                mark in piece for piece in pieces for mark in ("%", "{", "}")):
            return None
        out = pieces[0]
        for value, piece in zip(values, pieces[1:]):
            out += value + piece
        return out


def flag_default(tree: ast.Module, expr: ast.expr) -> str | None:
    """The string a flag `<namespace>.<flag>` holds when the script runs with the defaults
    it defines (`args.model` for `add_argument("--model", default="mlp")`); None for any
    other expression, or a flag whose default the file does not spell out."""
    if not (isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name)):
        return None
    return _Strings(tree).flags.get(expr.attr)


# absl's and tf.app.flags' definers of a flag that is true or false.
_BOOL_FLAG_DEFINERS = frozenset({"DEFINE_bool", "DEFINE_boolean"})


def _bool_flag_defaults(tree: ast.Module) -> dict[str, bool | None]:
    """{flag: its default} for each true-or-false flag the file defines: argparse's
    `action="store_true"` (False unless a default says otherwise) and `"store_false"`, an
    `add_argument` whose default is True or False, absl's `DEFINE_bool("flag", False, ...)`;
    a flag defined twice with different defaults (or a default not spelled as a literal)
    maps to None."""
    found: dict[str, bool | None] = {}
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        func = call.func
        callee = (func.attr if isinstance(func, ast.Attribute)
                  else func.id if isinstance(func, ast.Name) else None)
        default = argument(call, "default", None)
        if callee == "add_argument":
            options = [a.value for a in call.args
                       if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            dest = argument(call, "dest", None)
            long = [o for o in options if o.startswith("--")]
            if isinstance(dest, ast.Constant) and isinstance(dest.value, str):
                name = dest.value
            elif long:
                name = long[0][2:].replace("-", "_")
            else:
                continue
            action = argument(call, "action", None)
            action = action.value if isinstance(action, ast.Constant) else None
            if default is None and action in ("store_true", "store_false"):
                value: bool | None = action == "store_false"
            elif default is not None:
                value = default.value if (isinstance(default, ast.Constant)
                                          and isinstance(default.value, bool)) else None
            else:
                continue
        elif callee in _BOOL_FLAG_DEFINERS:
            given = argument(call, "name", 0)
            if not (isinstance(given, ast.Constant) and isinstance(given.value, str)):
                continue
            name = given.value
            default = argument(call, "default", 1)
            value = default.value if (isinstance(default, ast.Constant)
                                      and isinstance(default.value, bool)) else None
        else:
            continue
        found[name] = value if found.get(name, value) == value else None
    return found


def flag_truth_default(tree: ast.Module, test: ast.expr) -> bool | None:
    """Whether a test on one true-or-false flag (`args.update_mean_var`, `not FLAGS.bn`,
    `args.flag == False`, `args.flag is True`) holds when the script runs with the defaults
    it defines (`_bool_flag_defaults`); None for any other test, or a flag whose default the
    file does not spell out."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = flag_truth_default(tree, test.operand)
        return None if inner is None else not inner
    if (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], (ast.Eq, ast.NotEq, ast.Is, ast.IsNot))
            and isinstance(test.comparators[0], ast.Constant)
            and isinstance(test.comparators[0].value, bool)):
        flag = flag_truth_default(tree, test.left)
        if flag is None:
            return None
        same = flag == test.comparators[0].value
        return same if isinstance(test.ops[0], (ast.Eq, ast.Is)) else not same
    if isinstance(test, ast.Attribute) and isinstance(test.value, ast.Name):
        return _bool_flag_defaults(tree).get(test.attr)
    return None
