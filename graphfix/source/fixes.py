"""What a source rule's fix does to a file: edits of the tree the rule read, applied once.

A rule reports a finding with `fix=`: one edit, or a tuple of them (a finding whose fix is
several edits, as a moved feed is: an entry leaves a dict, a load goes before the run).
Findings may share edits; an edit reported twice is made once. The edits name nodes of the
tree as the rule read it; `SourceCodemod` makes them all in one traversal, at the node each
one changes, after the edits inside that node were made:

- `Replace(node, change)`: the node becomes `change(node as updated)`;
- `Remove(node)`: a dict entry or a call argument leaves its brackets, which stay where they
  were (commas and the comment of a last entry go with it);
- `InsertBefore(statement, lines)`: lines of code go just before a small statement (one of a
  line's `;`-separated statements is split onto a line of its own);
- `WrapInWith(statements, header)`: adjacent statements of one block move into a `with
  HEADER:` block; wraps with the same header side by side in one block become one block;
- `AddImport(module, asname)`: the file imports `module` (libcst's AddImportsVisitor).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Union

import libcst as cst

# (Union, not `|`: an alias is evaluated at import, and Python 3.9 has no `type | type`)
Replacement = Union[cst.CSTNode, cst.FlattenSentinel, cst.RemovalSentinel]


@dataclasses.dataclass(frozen=True)
class Replace:
    """`node` becomes `change(updated)`, given the node with the edits inside it made."""

    node: cst.CSTNode
    change: Callable[[cst.CSTNode], Replacement]


@dataclasses.dataclass(frozen=True)
class Remove:
    """A dict entry (`cst.DictElement`) or call argument (`cst.Arg`) leaves its brackets."""

    node: cst.DictElement | cst.StarredDictElement | cst.Arg


@dataclasses.dataclass(frozen=True)
class InsertBefore:
    """`lines` (statements as code, one each) go just before the small statement `statement`."""

    statement: cst.BaseSmallStatement
    lines: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class WrapInWith:
    """Adjacent statements of one block (or one `if x: ...` suite) move under `with HEADER:`."""

    statements: tuple[cst.CSTNode, ...]
    header: str


@dataclasses.dataclass(frozen=True)
class AddImport:
    """The file imports `module` (as `asname`) if it does not yet."""

    module: str
    asname: str | None = None


Edit = Union[Replace, Remove, InsertBefore, WrapInWith, AddImport]


def edits_of(fix: Edit | Sequence[Edit] | None) -> tuple[Edit, ...]:
    """A `fix=` value as a tuple of edits."""
    if fix is None:
        return ()
    if isinstance(fix, (Replace, Remove, InsertBefore, WrapInWith, AddImport)):
        return (fix,)
    return tuple(fix)


def where_made(edit: Edit, parent: Callable[[cst.CSTNode], cst.CSTNode | None]
               ) -> cst.CSTNode | None:
    """The node at whose leave an edit is made (None: after the traversal)."""
    if isinstance(edit, Replace):
        return edit.node
    if isinstance(edit, (Remove, InsertBefore)):
        return parent(edit.node if isinstance(edit, Remove) else edit.statement)
    if isinstance(edit, WrapInWith):
        first = edit.statements[0]
        return first if isinstance(first, cst.SimpleStatementSuite) else parent(first)
    return None


def make(original: cst.CSTNode, updated: cst.CSTNode, edits: list[Edit],
         config: cst.PartialParserConfig, produced: dict) -> Replacement:
    """`updated` (the node `original` became in this traversal) with `edits` made on it.

    `produced` maps a statement this traversal turned into several (or none) to what it
    became, so that a block's edits find their statements after such a change."""
    result: Replacement = updated
    removed = {e.node for e in edits if isinstance(e, Remove)}
    if removed:
        result = _without_elements(original, result, removed)
    inserted: dict[cst.CSTNode, list[str]] = {}
    for edit in edits:
        if isinstance(edit, InsertBefore):
            inserted.setdefault(edit.statement, []).extend(edit.lines)
    if inserted:
        result = _with_lines_before(original, result, inserted, config)
    wraps = [e for e in edits if isinstance(e, WrapInWith)]
    if wraps:
        result = _wrapped(original, result, wraps, produced)
    for edit in edits:
        if isinstance(edit, Replace):
            result = edit.change(result)
    return result


def with_argument(call: cst.Call, keyword: str, value: str) -> cst.Call:
    """`call` with `keyword=value` after its last argument (the change of a `Replace`), laid
    out as its arguments are: on the line of the last, or on a line of its own before a
    trailing comma, which it keeps."""
    args = list(call.args)
    trailing = args[-1].comma if isinstance(args[-1].comma, cst.Comma) else None
    between = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    if trailing is not None:
        between = (args[-2].comma if len(args) > 1 and isinstance(args[-2].comma, cst.Comma)
                   else cst.Comma(whitespace_after=call.whitespace_before_args))
    if args:
        args[-1] = args[-1].with_changes(comma=between)
    equal = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                            whitespace_after=cst.SimpleWhitespace(""))
    added = cst.Arg(value=cst.parse_expression(value), keyword=cst.Name(keyword), equal=equal,
                    comma=trailing or cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=[*args, added])


# -- removing entries ---------------------------------------------------------------------------

def _without(items, originals, dropped, closing=None):
    """(`items` minus those whose original is dropped, the whitespace before the closing
    bracket). When the last item goes, the one left last takes its comma and the closing
    whitespace, so the bracket stays where it was; the comment that followed the dropped
    item goes with it, the kept item keeps its own."""
    kept = [new for old, new in zip(originals, items) if old not in dropped]
    if not kept or originals[-1] not in dropped:
        return kept, closing
    mine, theirs = kept[-1].comma, items[-1].comma
    own_line = cst.TrailingWhitespace()
    if isinstance(mine, cst.Comma) and isinstance(mine.whitespace_after,
                                                  cst.ParenthesizedWhitespace):
        own_line = mine.whitespace_after.first_line
    comma = theirs
    if isinstance(theirs, cst.Comma):
        if isinstance(mine, cst.Comma):
            comma = comma.with_changes(whitespace_before=mine.whitespace_before)
        if isinstance(theirs.whitespace_after, cst.ParenthesizedWhitespace):
            comma = comma.with_changes(
                whitespace_after=theirs.whitespace_after.with_changes(first_line=own_line))
    if isinstance(closing, cst.ParenthesizedWhitespace):
        closing = closing.with_changes(first_line=own_line)
    kept[-1] = kept[-1].with_changes(comma=comma)
    return kept, closing


def _without_elements(original, updated, removed):
    if isinstance(original, cst.Dict):
        kept, closing = _without(updated.elements, original.elements, removed,
                                 updated.rbrace.whitespace_before)
        if not kept:
            return updated.with_changes(elements=[], lbrace=cst.LeftCurlyBrace(),
                                        rbrace=cst.RightCurlyBrace())
        return updated.with_changes(
            elements=kept, rbrace=updated.rbrace.with_changes(whitespace_before=closing))
    if isinstance(original, cst.Call):
        kept, _ = _without(updated.args, original.args, removed)
        return updated.with_changes(args=kept)
    raise TypeError(f"Remove: cannot remove from a {type(original).__name__}")


# -- inserting lines ----------------------------------------------------------------------------

def _split_lines(originals, smalls, inserted, config) -> list[cst.SimpleStatementLine]:
    """The small statements of one line as lines, the lines inserted before each."""
    lines: list[cst.SimpleStatementLine] = []
    start = 0
    for i, small in enumerate(originals):
        if small not in inserted:
            continue
        if i > start:
            piece = list(smalls[start:i])
            piece[-1] = piece[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
            lines.append(cst.SimpleStatementLine(body=piece))
        lines += [cst.ensure_type(cst.parse_statement(text, config), cst.SimpleStatementLine)
                  for text in inserted[small]]
        start = i
    last = list(smalls[start:])
    last[-1] = last[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
    lines.append(cst.SimpleStatementLine(body=last))
    return lines


def _with_lines_before(original, updated, inserted, config):
    lines = _split_lines(original.body, updated.body, inserted, config)
    if isinstance(original, cst.SimpleStatementSuite):
        return cst.IndentedBlock(body=lines, header=updated.trailing_whitespace)
    lines[-1] = lines[-1].with_changes(trailing_whitespace=updated.trailing_whitespace)
    lines[0] = lines[0].with_changes(leading_lines=updated.leading_lines)
    return cst.FlattenSentinel(lines)


# -- wrapping in `with` -------------------------------------------------------------------------

def with_block(header: str, statements: list[cst.BaseStatement]) -> cst.With:
    """`with HEADER:` holding `statements`, where the first of them was (its comments above
    move above the `with`)."""
    first = statements[0]
    template = cst.ensure_type(cst.parse_statement(f"with {header}:\n    pass\n"), cst.With)
    body = [first.with_changes(leading_lines=()), *statements[1:]]
    return template.with_changes(body=cst.IndentedBlock(body=body),
                                 leading_lines=first.leading_lines)


def _wrapped(original, updated, wraps: list[WrapInWith], produced: dict):
    if isinstance(original, cst.SimpleStatementSuite):
        line = cst.SimpleStatementLine(body=updated.body,
                                       trailing_whitespace=updated.trailing_whitespace)
        return cst.IndentedBlock(body=[with_block(wraps[0].header, [line])])
    header_of = {s: w.header for w in wraps for s in w.statements}
    pieces, at = [], 0  # what each original statement became, in order
    for statement in original.body:
        count = len(produced.get(statement, (None,)))
        pieces.append(list(updated.body[at : at + count]))
        at += count
    body, i = [], 0
    while i < len(original.body):
        header = header_of.get(original.body[i])
        if header is None:
            body += pieces[i]
            i += 1
            continue
        end = i + 1
        while end < len(original.body) and header_of.get(original.body[end]) == header:
            end += 1
        statements = [s for piece in pieces[i:end] for s in piece]
        if statements:  # (none where an edit inside removed them all)
            body.append(with_block(header, statements))
        i = end
    return updated.with_changes(body=body)
