"""The second shape of a source rule: the stdlib's `ast` tree read, text edits for its fix.

A rule whose finding and fix are local (a reference renamed) needs no concrete syntax tree:
it reads the tree CPython's own parser gives and says its fix as `TextEdit`s of the file's
code, as pyupgrade and ruff do. `AstRule` is `graphfix.source.codemod.SourceCodemod`'s
sibling with the same contract: `VALID`/`INVALID` examples, `self.options`, `self.fix`,
`self.project`, `report(node, message, fix=..., severity=...)`, `suppressed(node)`, one TF
name resolver (`tf_canonical`) that reads scopes as libcst's does; positions are libcst's
too (line, and column in characters from 1). `graphfix.source.run.run_source` runs both
shapes in a run's order; a file whose rules are all of this shape is never given to libcst.

No libcst here: a run whose files need only these rules never imports it.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from graphfix.findings import Finding
from graphfix.source.examples import Example
from graphfix.source.project.names import AsksTfNames, Scopes, ScopedAstTfNames
from graphfix.source.syntax import (LINE_BREAK, code_lines, comment_ignores, node_kinds,
                                    place_import_aliases)

if TYPE_CHECKING:
    from graphfix.registry import Transform
    from graphfix.source.project import FileView


@dataclasses.dataclass(frozen=True)
class TextEdit:
    """The code from character `start` to `end` becomes `text`."""

    start: int
    end: int
    text: str


def apply_edits(code: str, edits: Sequence[TextEdit], rule: str) -> str:
    """`code` with `edits` made (each once); RuntimeError naming `rule` for two that
    overlap, which is a bug of the rule's, never the user's."""
    ordered = sorted(set(edits), key=lambda e: (e.start, e.end))
    for before, after in zip(ordered, ordered[1:]):
        # (two insertions at one place overlap too: which goes first is not said)
        if after.start < before.end or before.start == before.end == after.start == after.end:
            raise RuntimeError(f"{rule}: two edits of its fix overlap at characters "
                               f"{before.start}-{before.end} and {after.start}-{after.end}")
    pieces, at = [], 0
    for edit in ordered:
        pieces += [code[at:edit.start], edit.text]
        at = edit.end
    pieces.append(code[at:])
    return "".join(pieces)


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")  # a line with its end
_INDENT = re.compile(r"[ \t]*")
_ELSE_OR_FINALLY = re.compile(r"\s*(?:else|finally)\s*:")
# The statements with an `else:` or `finally:` block (`except*`'s from Python 3.11), and a
# `match` statement's `case` (3.10).
_BLOCKS_WITH_ELSE = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, *node_kinds("TryStar"))
_MATCH_CASE = node_kinds("match_case")


class AstRule(AsksTfNames):
    """Base class of a source rule of the stdlib-tree shape: `visit_Module` reads the tree
    (its nodes of a kind from `nodes`, in source order) and `report`s each finding with its
    fix, `TextEdit`s of the code it read (None: reported, not fixed); in fix mode the base
    class makes every reported edit once. `self.options` holds the transform's parameters;
    the transform it belongs to is the registry's, the one whose `codemod` names this
    class. Choose it over `SourceCodemod` where the fix is a span of text replaced (a name,
    an argument); a fix that moves statements or wraps them in blocks wants libcst's tree.
    """

    DESCRIPTION: ClassVar[str] = ""
    # Its examples, the user's view of what it does (each becomes a test):
    VALID: ClassVar[tuple[str, ...]] = ()  # code it reports nothing on
    INVALID: ClassVar[tuple[Example, ...]] = ()  # code it reports on, and what the fix makes

    @classmethod
    def transform(cls) -> type[Transform]:
        """The transform whose source surface this is (the registry's)."""
        from graphfix.registry import transform_of_codemod

        return transform_of_codemod(cls)

    def __init__(self, path: str = "<string>", options: dict[str, Any] | None = None, *,
                 fix: bool = True, project: FileView | None = None):
        self.path = path
        self.options = options or {}
        self.fix = fix  # False: check mode, findings only
        self._project = project
        self.findings: list[Finding] = []
        self._edits: dict[TextEdit, None] = {}  # every finding's, once each, in order
        self._name = self.transform().name

    def visit_Module(self, node: ast.Module) -> None:
        """Read the file and report its findings (subclasses)."""

    def run(self, code: str, tree: ast.Module) -> str:
        """Check `code`, whose tree `tree` is; in fix mode, the code with every reported
        edit made (else `code` itself)."""
        place_import_aliases(tree, code)  # (Python 3.9: their positions)
        self._code, self.tree = code, tree
        self._parents: dict[ast.AST, ast.AST] | None = None
        self._order: list[ast.AST] = []
        self._line_starts: list[int] | None = None
        self._lines: list[str] | None = None
        self._tf_names: ScopedAstTfNames | None = None
        self._scopes: Scopes | None = None
        self.visit_Module(tree)
        if self.fix and self._edits:
            return apply_edits(code, list(self._edits), self._name)
        return code

    @property
    def edits(self) -> bool:
        """Whether this rule edits the file: in fix mode, once it reported a fixed finding."""
        return self.fix and bool(self._edits)

    # -- the tree ----------------------------------------------------------------------------

    def _index(self) -> dict[ast.AST, ast.AST]:
        """Each node's parent, and every node in the order a walk meets it (made once)."""
        if self._parents is None:
            parents: dict[ast.AST, ast.AST] = {}
            order = self._order
            stack: list[ast.AST] = [self.tree]
            while stack:
                node = stack.pop()
                order.append(node)
                children = []  # (`ast.iter_child_nodes`, without a generator's cost)
                for field in node._fields:
                    value = getattr(node, field, None)
                    if isinstance(value, ast.AST):
                        children.append(value)
                    elif type(value) is list:
                        children.extend(item for item in value if isinstance(item, ast.AST))
                for child in children:
                    parents[child] = node
                children.reverse()
                stack.extend(children)
            self._parents = parents
        return self._parents

    def parent(self, node: ast.AST) -> ast.AST | None:
        """The node `node` is a child of; None for the module (and nodes not in the tree)."""
        return self._index().get(node)

    def nodes(self, *kinds: type) -> list:
        """Every node of `kinds` (`ast.Call`, ...) in the tree, in source order."""
        self._index()
        found = [node for node in self._order if isinstance(node, kinds)]
        return sorted(found, key=lambda node: (node.lineno, node.col_offset))

    # -- the code ----------------------------------------------------------------------------

    def offset(self, line: int, byte_column: int) -> int:
        """The character offset in the code of a parser position (ast's columns are UTF-8
        bytes)."""
        if self._line_starts is None:
            self._line_starts = [0, *(m.end() for m in LINE_BREAK.finditer(self._code))]
        start = self._line_starts[line - 1]
        text = self._code[start:start + byte_column]
        if text.isascii():
            return start + byte_column
        return start + len(self._code[start:].encode("utf-8")[:byte_column].decode("utf-8"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        """Where `node`'s text starts and ends, as character offsets of the code."""
        return (self.offset(node.lineno, node.col_offset),
                self.offset(node.end_lineno, node.end_col_offset))

    def code(self, node: ast.AST) -> str:
        """`node`'s source text, as the file spells it, with the parentheses around an
        expression (as libcst's `code_for_node` gives it)."""
        start, end = self.span(node)
        if isinstance(node, ast.expr):
            start, end = self._parenthesized(node, start, end)
        text = self._code[start:end]
        return text if "\n" not in text else self._without_block_indent(node, text)

    def _without_block_indent(self, node: ast.AST, text: str) -> str:
        """A node's text over several lines as libcst gives it alone: a line that continues
        it inside brackets loses the indentation of the block around its statement (libcst
        keeps that indentation with the block, not with the node); a backslash's
        continuation and a string's lines are kept as they are."""
        statement = node
        while not isinstance(statement, ast.stmt):
            statement = self.parent(statement)
            if statement is None:
                return text
        at = self.offset(statement.lineno, 0)
        indent = _INDENT.match(self._code, at).group()
        if not indent:
            return text
        in_strings = _lines_inside_strings(text, node.lineno)
        lines = _LINE.findall(text)
        for number, line in enumerate(lines[1:], node.lineno + 1):
            if (line.startswith(indent) and number not in in_strings
                    and not lines[number - node.lineno - 1].rstrip("\r\n").endswith("\\")):
                lines[number - node.lineno] = line[len(indent):]
        return "".join(lines)

    def position(self, node: ast.AST) -> tuple[int, int]:
        """(line, column), both from 1, where `node` starts (the column in characters)."""
        start = self.offset(node.lineno, node.col_offset)
        return node.lineno, start - self._line_starts[node.lineno - 1] + 1

    def _parenthesized(self, node: ast.expr, start: int, end: int) -> tuple[int, int]:
        """The span of `node` with the parentheses that are its own (`(tf.x)`), not its
        parent's (a call's around its one argument, a class's around its one base)."""
        code = self._code
        before, after, i, j = [], [], start, end
        while True:
            i = _skip_back(code, i - 1)
            if i < 0 or code[i] != "(":
                break
            before.append(i)
        while True:
            j = _skip_on(code, j)
            if j >= len(code) or code[j] != ")":
                break
            after.append(j)
            j += 1
        pairs = min(len(before), len(after))
        parent = self.parent(node)
        if pairs and ((isinstance(parent, ast.Call) and parent.args == [node]
                       and not parent.keywords)
                      or (isinstance(parent, ast.ClassDef) and parent.bases == [node]
                          and not parent.keywords)):
            pairs -= 1  # the parent's own brackets
        if not pairs:
            return start, end
        return before[pairs - 1], after[pairs - 1] + 1

    # -- TF names ----------------------------------------------------------------------------

    @property
    def scopes(self) -> Scopes:
        """What each name of the file is bound to, scope by scope (libcst's reading)."""
        if self._scopes is None:
            self._scopes = Scopes(self.tree, self.parent, self._code)
        return self._scopes

    @property
    def tf_names(self) -> ScopedAstTfNames:
        """The file's TF names (imports, module aliases, the project's re-exports and star
        imports), resolved when first asked."""
        if self._tf_names is None:
            self._tf_names = ScopedAstTfNames(self.tree, self.scopes,
                                              *self._project_resolvers())
        return self._tf_names

    @property
    def project(self) -> FileView:
        """The project model as this file sees it (`graphfix.source.project`); a file
        checked alone (`graphfix.check_source`) is a project of its own."""
        if self._project is None or self._project.stale:
            from graphfix.source.project import Project

            others = self._project.project.parts if self._project is not None else {}
            # (stale: an earlier rule's fix changed the file: its own part is read anew)
            self._project = Project({**others, self.path: None}).with_code(self.path,
                                                                           self._code)
        return self._project

    # -- findings ----------------------------------------------------------------------------

    def report(self, node: ast.AST, message: str, *,
               fix: TextEdit | Sequence[TextEdit] | None = None,
               severity: str = "error") -> None:
        """Record a finding at `node`'s position, with its fix (None: reported, not fixed);
        nothing if the user suppressed it there. Edits several findings share are made once."""
        if self.suppressed(node):
            return
        edits = (fix,) if isinstance(fix, TextEdit) else tuple(fix or ())
        for edit in edits:
            self._edits.setdefault(edit)
        line, col = self.position(node)
        self.findings.append(Finding(  # (its edits are made by `run`)
            path=self.path, transform=self._name, message=message, line=line, col=col,
            severity=severity, edit=edits or None))  # type: ignore[arg-type]

    def _code_lines(self) -> list[str]:
        """The code's lines as `str.splitlines` gives them (libcst's rule for suppression
        comments reads them so)."""
        if self._lines is None:
            self._lines = code_lines(self._code)
        return self._lines

    def suppressed(self, node: ast.AST) -> bool:
        """Whether `# graphfix: ignore[...]` covers `node`: on its line, or on the first line
        (or the comment line just above) of any enclosing statement or `with` block (also an
        `else:` or `finally:` block, a dict entry, a parameter: the nodes libcst has)."""
        lines = self._code_lines()
        for start in self._start_lines(node):
            for number in (start, start - 1):
                if (1 <= number <= len(lines)
                        and comment_ignores(lines[number - 1], number == start, self._name)):
                    return True
        return False

    def _start_lines(self, node: ast.AST):
        """The first line of `node` and of each node around it, libcst's nodes read from
        the stdlib tree: an `else:`/`finally:` block starts at its keyword, a dict's value
        at its key, a parameter's default at the parameter, a `case` at its pattern."""
        child, current = None, node
        while current is not None and not isinstance(current, ast.Module):
            line = getattr(current, "lineno", None)
            if line is not None:
                yield line
            if isinstance(current, ast.Dict) and child is not None and child in current.values:
                key = current.keys[current.values.index(child)]
                if key is not None:
                    yield key.lineno
            elif isinstance(current, ast.arguments) and child is not None:
                yield from self._parameter_line(current, child)
            elif isinstance(current, _BLOCKS_WITH_ELSE) and child is not None:
                block = (current.orelse if child in current.orelse
                         else getattr(current, "finalbody", ()))
                if child in block and not self._is_elif(current, child):
                    yield self._keyword_line(block[0])
            elif isinstance(current, ast.comprehension):
                yield current.target.lineno
            elif isinstance(current, _MATCH_CASE):  # (`case` and its pattern: one line)
                yield current.pattern.lineno
            child, current = current, self.parent(current)

    @staticmethod
    def _parameter_line(arguments: ast.arguments, default: ast.AST):
        positional = [*arguments.posonlyargs, *arguments.args]
        if default in arguments.defaults:
            at = len(positional) - len(arguments.defaults) + arguments.defaults.index(default)
            yield positional[at].lineno
        elif default in arguments.kw_defaults:
            yield arguments.kwonlyargs[arguments.kw_defaults.index(default)].lineno

    def _is_elif(self, statement: ast.AST, child: ast.AST) -> bool:
        if not (isinstance(statement, ast.If) and statement.orelse == [child]
                and isinstance(child, ast.If)):
            return False
        start = self.offset(child.lineno, child.col_offset)
        return self._code.startswith("elif", start)

    def _keyword_line(self, first: ast.stmt) -> int:
        """The line of the `else:` or `finally:` before a block's first statement."""
        lines = self._code_lines()
        for number in range(first.lineno, 0, -1):
            if number <= len(lines) and _ELSE_OR_FINALLY.match(lines[number - 1]):
                return number
        return first.lineno


def _lines_inside_strings(text: str, first_line: int) -> set[int]:
    """The lines of an expression's `text` (its first at `first_line`) that a string's own
    text continues onto (a triple-quoted string's lines)."""
    import io
    import tokenize

    found: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(f"({text})").readline):
            if token.type == tokenize.STRING and token.end[0] > token.start[0]:
                found.update(range(first_line + token.start[0], first_line + token.end[0]))
    except (tokenize.TokenError, SyntaxError):
        pass
    return found


_BLANK = " \t\r\n\\\f"


def _skip_back(code: str, i: int) -> int:
    """The last character at or before `i` that is no white space, line continuation or
    comment (a comment is read as from a line's first `#`)."""
    while i >= 0:
        if code[i] in "\r\n":
            line_start = max(code.rfind("\n", 0, i), code.rfind("\r", 0, i)) + 1
            comment = code.find("#", line_start, i)
            if comment >= 0:
                i = comment
        elif code[i] not in _BLANK:
            return i
        i -= 1
    return i


def _skip_on(code: str, j: int) -> int:
    """The first character at or after `j` that is no white space, line continuation or
    comment."""
    while j < len(code):
        if code[j] == "#":
            while j < len(code) and code[j] not in "\r\n":
                j += 1
        elif code[j] in _BLANK:
            j += 1
        else:
            return j
    return j
