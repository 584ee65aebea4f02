"""graphfix runs on Python 3.9+ (`requires-python`): nothing newer slips into its code.

Python's own parser at feature version 3.9 reads every module (no `match`, no `except*`);
what a parser cannot see is read from the tree: a `X | Y` of types evaluated at run time (3.9
has no `type | type`), a name of the standard library that 3.9 does not have, `zip(strict=)`,
`dataclass(slots=, kw_only=)`. Where a Python 3.9 interpreter is on the machine, it compiles
every module too. That graphfix then checks and fixes graphs and sources on 3.9 is shown in
test_lean_install.py (the wheel installed into a 3.9 venv).
"""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest
from conftest import REPO, python_interpreter

from graphfix.source import syntax

SHIPPED = ("graphfix", "transforms", "tools")  # (tools/: in the sdist)


def _modules():
    for folder in SHIPPED:
        yield from sorted((REPO / folder).rglob("*.py"))


def _trees():
    for path in _modules():
        yield path, ast.parse(path.read_text(encoding="utf-8"), str(path))


def _where(path, node) -> str:
    return f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)[:70]}"


def test_every_module_parses_as_python_3_9():
    refused = []
    for path in _modules():
        try:
            ast.parse(path.read_text(encoding="utf-8"), str(path), feature_version=(3, 9))
        except SyntaxError as exc:
            refused.append(f"{path.relative_to(REPO)}:{exc.lineno}: {exc.msg}")
    assert not refused


# Names of the standard library newer than Python 3.9: module -> {name: the version}.
NEWER_NAMES = {
    "ast": {"match_case": "3.10", "Match": "3.10", "MatchValue": "3.10",
            "MatchSingleton": "3.10", "MatchSequence": "3.10", "MatchMapping": "3.10",
            "MatchClass": "3.10", "MatchStar": "3.10", "MatchAs": "3.10", "MatchOr": "3.10",
            "TryStar": "3.11", "TypeAlias": "3.12", "TypeVar": "3.12", "ParamSpec": "3.12",
            "TypeVarTuple": "3.12"},
    "typing": {"Self": "3.11", "TypeAlias": "3.10", "ParamSpec": "3.10",
               "Concatenate": "3.10", "TypeGuard": "3.10", "Never": "3.11",
               "LiteralString": "3.11", "assert_never": "3.11", "reveal_type": "3.11",
               "Required": "3.11", "NotRequired": "3.11", "dataclass_transform": "3.11",
               "override": "3.12", "TypeIs": "3.13"},
    "datetime": {"UTC": "3.11"},
    "enum": {"StrEnum": "3.11", "verify": "3.11", "ReprEnum": "3.11"},
    "itertools": {"pairwise": "3.10", "batched": "3.12"},
    "contextlib": {"chdir": "3.11", "aclosing": "3.10"},
    "inspect": {"get_annotations": "3.10"},
    "sys": {"orig_argv": "3.10", "stdlib_module_names": "3.10", "exception": "3.11"},
    "hashlib": {"file_digest": "3.11"},
    "asyncio": {"TaskGroup": "3.11", "timeout": "3.11"},
    "builtins": {"ExceptionGroup": "3.11", "BaseExceptionGroup": "3.11",
                 "aiter": "3.10", "anext": "3.10", "EncodingWarning": "3.10"},
}
NEWER_MODULES = {"tomllib": "3.11"}
NEWER_METHODS = {"bit_count": "3.10", "add_note": "3.11"}  # (int, BaseException)


def _guarded(tree) -> set[int]:
    """The nodes inside `if sys.version_info >= (3, N):` (and its else): chosen by version."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "version_info" in ast.unparse(node.test):
            for child in [*node.body, *node.orelse]:
                inside.update(id(n) for n in ast.walk(child))
    return inside


def test_no_standard_library_name_newer_than_3_9():
    found = []
    for path, tree in _trees():
        guarded = _guarded(tree)
        for node in ast.walk(tree):
            if id(node) in guarded:
                continue
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.attr in NEWER_NAMES.get(node.value.id, {})):
                found.append(_where(path, node))
            elif isinstance(node, ast.ImportFrom) and any(
                    alias.name in NEWER_NAMES.get(node.module or "", {}) for alias in node.names):
                found.append(_where(path, node))
            elif isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                    (getattr(node, "module", None) or alias.name).partition(".")[0]
                    in NEWER_MODULES for alias in node.names):
                found.append(_where(path, node))
            elif isinstance(node, ast.Name) and node.id in NEWER_NAMES["builtins"]:
                found.append(_where(path, node))
            elif isinstance(node, ast.Attribute) and node.attr in NEWER_METHODS:
                found.append(_where(path, node))
            elif isinstance(node, ast.Call) and _new_keyword(node):
                found.append(_where(path, node))
    assert not found


def _new_keyword(call: ast.Call) -> bool:
    """`zip(..., strict=)` (3.10), `dataclass(slots=)` / `dataclass(kw_only=)` (3.10)."""
    name = ast.unparse(call.func)
    keywords = {k.arg for k in call.keywords}
    return ((name == "zip" and "strict" in keywords)
            or (name.endswith("dataclass") and bool({"slots", "kw_only"} & keywords)))


def _names_a_type(node) -> bool:
    """Whether an operand of `|` reads as a type: None, a builtin type, a CapWords name or
    attribute (`cst.CSTNode`), a subscript of one (`list[str]`). Constants in capitals
    (`VARIABLE_CALLS | LAYER_CALLS`, sets) do not."""
    if isinstance(node, ast.Constant):
        return node.value is None
    if isinstance(node, ast.Name):
        return node.id in {"str", "int", "float", "bool", "bytes", "list", "dict", "tuple",
                           "set", "frozenset", "type", "object"} or _cap_words(node.id)
    if isinstance(node, ast.Attribute):
        return _cap_words(node.attr)
    if isinstance(node, ast.Subscript):
        return _names_a_type(node.value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _names_a_type(node.left) or _names_a_type(node.right)
    return False


def _cap_words(name: str) -> bool:
    return name[:1].isupper() and not name.isupper()


def _annotations(tree) -> set[int]:
    """The nodes of the module's annotations: with `from __future__ import annotations`,
    strings that nothing evaluates at run time (typer's commands are evaluated on purpose,
    by graphfix.cli.typer_versions, which the CLI tests run on 3.9 in test_lean_install)."""
    postponed = any(isinstance(n, ast.ImportFrom) and n.module == "__future__"
                    and any(a.name == "annotations" for a in n.names) for n in tree.body)
    inside = set()
    if not postponed:
        return inside
    for node in ast.walk(tree):
        given = []
        if isinstance(node, ast.arg) and node.annotation is not None:
            given.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns:
            given.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            given.append(node.annotation)
        for annotation in given:
            inside.update(id(n) for n in ast.walk(annotation))
    return inside


def test_no_union_of_types_is_evaluated_at_run_time():
    """`Alias = A | None`, `isinstance(x, A | B)`, `Base[A | None]` fail on 3.9 with
    "unsupported operand type(s) for |" (a class's bases and an alias are evaluated)."""
    found = []
    for path, tree in _trees():
        annotations = _annotations(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr)
                    and id(node) not in annotations and _names_a_type(node)):
                found.append(_where(path, node))
    assert not found


def test_the_checks_see_what_they_look_for():
    """Each check above finds its kind of code (so their silence on graphfix means
    something)."""
    code = ("import tomllib\nfrom typing import Self\nX = int | None\n"
            "isinstance(1, (Alpha | Beta))\nzip(a, b, strict=True)\nast.match_case\n"
            "def f(a: int | None) -> str | None: ...\n")
    tree = ast.parse("from __future__ import annotations\n" + code)
    unions = [n for n in ast.walk(tree) if isinstance(n, ast.BinOp)
              and id(n) not in _annotations(tree) and _names_a_type(n)]
    assert [ast.unparse(n) for n in unions] == ["int | None", "Alpha | Beta"]
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _new_keyword(n)]
    assert len(calls) == 1
    with pytest.raises(SyntaxError):
        ast.parse("match x:\n    case 1: pass\n", feature_version=(3, 9))


@pytest.mark.skipif(sys.version_info < (3, 10), reason="the positions compared are 3.10's own")
def test_import_aliases_are_placed_as_python_3_10_places_them():
    """Python 3.9 gives an `import` name no position, which `place_import_aliases` finds in
    the text: here, beside 3.10+'s own, for every import of the repository and a few of
    every shape (dotted, `as`, parenthesised, continued, after a `;`, non-ASCII)."""
    codes = [path.read_text(encoding="utf-8") for folder in ("graphfix", "transforms", "tests")
             for path in sorted((REPO / folder).rglob("*.py"))]
    codes.append("x = 1; from a.b import (c as d,\n   e, f as  g)  ;import os.path as p, sys\n"
                 "from . import *\nfrom .. x import \\\n  y as é\nif 1:\n"
                 "    import é.ü as ä, q  # é\n")
    compared = 0
    for code in codes:
        tree = ast.parse(code)
        lines = syntax.code_lines(code)
        for statement in ast.walk(tree):
            if not isinstance(statement, (ast.Import, ast.ImportFrom)):
                continue
            native = [(a.lineno, a.col_offset, a.end_lineno, a.end_col_offset)
                      for a in statement.names]
            for alias in statement.names:
                del alias.lineno, alias.col_offset, alias.end_lineno, alias.end_col_offset
            syntax._place_aliases(statement, lines)
            placed = [(a.lineno, a.col_offset, a.end_lineno, a.end_col_offset)
                      for a in statement.names]
            assert placed == native, ast.unparse(statement)
            compared += 1
    assert compared > 1000


PYTHON39 = python_interpreter("3.9")


@pytest.mark.skipif(PYTHON39 is None, reason="no Python 3.9 interpreter on this machine "
                    "(python3.9 on PATH or under ~/.pyenv/versions/3.9.*)")
def test_python_3_9_compiles_every_module(tmp_path):
    """3.9's own compiler, on every module: what `feature_version` misses (parenthesised
    context managers) it refuses."""
    script = ("import py_compile, sys\n"
              "for i, path in enumerate(sys.argv[2:]):\n"
              "    py_compile.compile(path, cfile=f'{sys.argv[1]}/{i}.pyc', doraise=True)\n")
    done = subprocess.run([PYTHON39, "-c", script, str(tmp_path), *map(str, _modules())],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
