"""Jupyter notebooks (`*.ipynb`) as a source: cells in, one module out, cells back.

A notebook's code cells share one namespace (`import tensorflow.compat.v1 as tf` in cell 1
is what `tf` means in cell 5), so graphfix reads them as one module: the Python cells in
order, each but the first preceded by a marker statement (`__graphfix_cell__(N)`) that no
codemod touches, so the fixed module splits back into the same cells. IPython lines
(`%magic`, `!shell`, `x = !cmd`, `obj?`, a `%%time` cell's first line) are swapped for a
placeholder statement of the same line count before parsing and restored byte for byte
after; a cell whose cell magic makes it something else (`%%bash`, `%%writefile`) is not
read at all. Markdown and raw cells, outputs and metadata are never touched.

`run_notebook` is `codemod.run_source` for a notebook's bytes: findings name the cell
(`Finding.cell`, counted from 1 over every cell, as an editor shows them; `line` within that
cell) and `new_bytes` is the fixed notebook in the JSON style of the original.
"""

from __future__ import annotations

import ast
import bisect
import dataclasses
import difflib
import json
import re
from typing import Any

from graphfix.source.syntax import SourceResult, beyond_parser_limits, python_syntax_error
from graphfix.findings import Finding

# Cell magics whose body is Python run in the notebook's own namespace.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})

_CELL_MARKER = "__graphfix_cell__({})"
_IPYTHON_PLACEHOLDER = "__graphfix_ipython__({})"
_MARKER_LINE = re.compile(r"__graphfix_cell__\((\d+)\)\r?\n?")
_PLACEHOLDER_LINE = re.compile(r"([ \t]*)__graphfix_ipython__\((\d+)\)(\r?\n?)")

# Where a message or a skip reason names lines of the module: `line 15`, `lines 15, 20`.
_LINES = re.compile(r"\blines? (\d+(?:(?:, | and )\d+)*)\b")

# An IPython escape at the start of a logical line: `%magic`, `!shell`, `?obj`, `obj?`,
# `files = !ls`, `t = %timeit -o f()`.
_ESCAPE = re.compile(
    r"[ \t]*(?:[%!?]"
    r"|[\w.*]+\?{1,2}[ \t]*$"
    r"|[\w.]+(?:[ \t]*,[ \t]*[\w.]+)*[ \t]*=[ \t]*[%!])"
)


class NotebookError(ValueError):
    """A notebook graphfix cannot read, or cannot write a fix back into (one-line reason)."""


@dataclasses.dataclass
class _Cell:
    """One Python code cell: where it is, its text, and its text as plain Python."""

    number: int  # 1-based, over every cell of the notebook
    text: str  # the cell's source as one string
    python: str  # IPython lines swapped for placeholders; ends in a newline unless empty
    start: int = 0  # the module line of its first line


@dataclasses.dataclass
class _Style:
    """How the original file was serialized, so a rewrite looks the same."""

    indent: int | str | None
    ensure_ascii: bool
    separators: tuple[str, str] | None
    trailing_newline: bool
    crlf: bool
    bom: bool


class Notebook:
    """A parsed notebook: its JSON document, its Python cells, and their text as one module.

    `code` is that module; `locate` maps its lines to cells; `cell_texts` splits a fixed
    module back into cell sources (NotebookError if it cannot be) and `dumps` writes them
    into the notebook.
    """

    def __init__(self, raw: bytes):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NotebookError(f"not a Jupyter notebook: not UTF-8 ({exc.reason} at byte "
                                f"{exc.start})") from None
        self._bom = text.startswith("\ufeff")
        self._text = text.removeprefix("\ufeff")
        try:
            doc = json.loads(self._text)
        except json.JSONDecodeError as exc:
            raise NotebookError(f"not a Jupyter notebook: invalid JSON at line {exc.lineno}, "
                                f"column {exc.colno}: {exc.msg}") from None
        except RecursionError:
            raise NotebookError("not a Jupyter notebook: JSON nested too deeply") from None
        self.doc: dict[str, Any] = _validated(doc)
        self._placeholders: dict[int, tuple[int, str, str]] = {}  # k -> (cell, indent, line)
        self.cells = [_Cell(number, text, self._plain_python(number, text))
                      for number, text in _python_cells(doc)]
        parts: list[str] = []
        line = 1
        for position, cell in enumerate(self.cells):
            if position:
                parts.append(_CELL_MARKER.format(cell.number) + "\n")
                line += 1
            cell.start = line
            parts.append(cell.python)
            line += cell.python.count("\n")
        self.code = "".join(parts)
        self._starts = [c.start for c in self.cells]

    # -- reading ---------------------------------------------------------------------------

    def _plain_python(self, number: int, text: str) -> str:
        """The cell's text with each IPython line swapped for a placeholder statement."""
        lines = text.splitlines(keepends=True)
        out = []
        for index, (line, escape) in enumerate(_escape_lines(lines)):
            if escape is None:
                out.append(line)
                continue
            body = line.rstrip("\r\n")
            key = len(self._placeholders) + 1
            self._placeholders[key] = (number, escape, body)
            out.append(escape + _IPYTHON_PLACEHOLDER.format(key) + line[len(body):])
        python = "".join(out)
        if python and not python.endswith("\n"):
            python += "\n"
        return python

    def syntax_error(self) -> str | None:
        """Why some Python cell does not parse on its own (naming the cell), or None."""
        for cell in self.cells:
            reason = python_syntax_error(cell.python)
            if reason is not None:
                return f"cell {cell.number}: {reason}"
        return None

    def locate(self, line: int) -> tuple[int, int]:
        """(cell number, line within that cell) of a line of `code`."""
        if not self.cells:
            return 1, max(1, line)
        position = max(0, bisect.bisect_right(self._starts, line) - 1)
        cell = self.cells[position]
        return cell.number, max(1, line - cell.start + 1)

    def relocate(self, text: str) -> str:
        """A message or reason naming lines of `code` (`line 15`, `lines 15, 20`), made to
        name them in their cells (`cell 3, line 8`, `cell 3, lines 8, 13`)."""
        return _LINES.sub(self._relocated, text)

    def _relocated(self, match: re.Match) -> str:
        places = [self.locate(int(n)) for n in re.findall(r"\d+", match.group(1))]
        cells = sorted({cell for cell, _ in places})
        if len(cells) == 1:
            word = "line" if len(places) == 1 else "lines"
            return f"cell {cells[0]}, {word} {', '.join(str(line) for _, line in places)}"
        return "; ".join(f"cell {cell}, line {line}" for cell, line in places)

    # -- writing ---------------------------------------------------------------------------

    def cell_texts(self, code: str) -> dict[int, str]:
        """{cell number: new source} for the cells a fixed module changes; NotebookError if
        the fix moved code across cells or would leave a cell that does not parse."""
        parts: list[list[str]] = [[]]
        markers: list[int] = []
        for line in code.splitlines(keepends=True):
            match = _MARKER_LINE.fullmatch(line)
            if match:
                markers.append(int(match.group(1)))
                parts.append([])
            elif _MARKER_LINE.search(line):  # a fix put the marker in a block
                raise NotebookError(self._joined(int(_MARKER_LINE.search(line).group(1))))
            else:
                parts[-1].append(line)
        if markers != [c.number for c in self.cells[1:]]:
            raise NotebookError("the fix would move code across notebook cells")
        changed: dict[int, str] = {}
        for cell, lines in zip(self.cells, parts):
            python = "".join(lines)
            if python == cell.python:
                continue
            if _unparsable(python):
                raise NotebookError(f"the fix would leave cell {cell.number} unparsable")
            text = self._restored(cell.number, lines)
            if not cell.text.endswith("\n") and text.endswith("\n"):
                text = text[:-1]  # a cell's last line has no newline unless it had one
            if text != cell.text:
                changed[cell.number] = text
        return changed

    def _joined(self, number: int) -> str:
        before = max(c.number for c in self.cells if c.number < number)
        return (f"the fix would join cells {before} and {number} in one block "
                f"(merge the two cells, or fix them by hand)")

    def _restored(self, number: int, lines: list[str]) -> str:
        """A cell's lines with each placeholder back to its IPython line (re-indented as the
        placeholder was, should a fix have wrapped it in a block)."""
        out = []
        for line in lines:
            match = _PLACEHOLDER_LINE.fullmatch(line)
            if match is None:
                if "__graphfix_ipython__(" in line:
                    raise NotebookError(f"the fix would change an IPython line of cell {number}")
                out.append(line)
                continue
            cell, indent, original = self._placeholders[int(match.group(2))]
            if cell != number:
                raise NotebookError("the fix would move code across notebook cells")
            if original.startswith(indent):
                original = match.group(1) + original[len(indent):]
            out.append(original + match.group(3))
        return "".join(out)

    def dumps(self, texts: dict[int, str]) -> bytes:
        """The notebook with these cells' sources replaced, serialized as the original was
        (indentation, key order, escaping, final newline, line endings); each new source in
        its cell's own form (a list of lines or one string)."""
        style = self._style()
        cells = list(self.doc["cells"])
        for number, text in texts.items():
            cell = dict(cells[number - 1])
            lines = text.splitlines(keepends=True)
            cell["source"] = lines if isinstance(cell["source"], list) else text
            cells[number - 1] = cell
        doc = dict(self.doc, cells=cells)
        try:
            return _serialize(doc, style)
        except RecursionError:
            raise NotebookError("cannot write the fix back: JSON nested too deeply") from None

    def cell_diff(self, texts: dict[int, str], old_label: str, new_label: str) -> list[str]:
        """A unified diff per changed cell, labelled `a/nb.ipynb:cell 3`."""
        by_number = {c.number: c for c in self.cells}
        out: list[str] = []
        for number, text in sorted(texts.items()):
            out.extend(difflib.unified_diff(
                _diff_lines(by_number[number].text), _diff_lines(text),
                f"{old_label}:cell {number}", f"{new_label}:cell {number}"))
        return out

    def _style(self) -> _Style:
        """The serialization that reproduces the original file, if one of nbformat's and
        json.dumps' usual ones does; else nbformat's, with the original's indentation."""
        text = self._text
        crlf = "\r\n" in text and not re.search(r"(?<!\r)\n", text)
        if crlf:
            text = text.replace("\r\n", "\n")
        trailing = text.endswith("\n")
        body = text[:-1] if trailing else text
        indent = _indent_of(body)
        separators: list[tuple[str, str] | None] = [None] if indent is not None else [
            (", ", ": "), (",", ":")]
        for ensure_ascii in (False, True):
            for seps in separators:
                style = _Style(indent, ensure_ascii, seps, trailing, crlf, self._bom)
                try:
                    if _dumps(self.doc, style) == body:
                        return style
                except RecursionError:
                    raise NotebookError("cannot write the fix back: JSON nested too "
                                        "deeply") from None
        return _Style(indent if indent is not None else 1, False, None, trailing, crlf,
                      self._bom)


def _validated(doc: Any) -> dict[str, Any]:
    """`doc` if it is an nbformat 4 notebook of Python; else NotebookError saying why not."""
    if not isinstance(doc, dict) or "nbformat" not in doc:
        raise NotebookError("not a Jupyter notebook: no 'nbformat' version")
    version = doc["nbformat"]
    if version != 4:
        raise NotebookError(f"not a Jupyter notebook in nbformat 4 (nbformat {version})")
    cells = doc.get("cells")
    if not isinstance(cells, list) or not all(
            isinstance(c, dict) and _is_source(c.get("source", "")) for c in cells):
        raise NotebookError("not a Jupyter notebook: 'cells' is not a list of cells")
    metadata = _object(doc, "metadata")
    language = (_object(metadata, "kernelspec", "metadata.").get("language")
                or _object(metadata, "language_info", "metadata.").get("name"))
    if language is not None and not isinstance(language, str):
        raise NotebookError("not a Jupyter notebook: its kernel language is not a string")
    if isinstance(language, str) and language.lower() != "python":
        raise NotebookError(f"not a Python notebook (kernel language: {language})")
    return doc


def _object(doc: dict[str, Any], key: str, where: str = "") -> dict[str, Any]:
    """`doc[key]` if it is a JSON object ({} if absent or null); NotebookError naming the key
    if it is something else."""
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        kind = {str: "a string", list: "a list", bool: "a boolean"}.get(type(value), "a number")
        raise NotebookError(f"not a Jupyter notebook: '{where}{key}' is {kind}, not an object")
    return value


def _is_source(source: Any) -> bool:
    return isinstance(source, str) or (
        isinstance(source, list) and all(isinstance(line, str) for line in source))


def _python_cells(doc: dict[str, Any]):
    """(cell number, source) of each code cell holding Python (not `%%bash` and the like)."""
    for number, cell in enumerate(doc["cells"], start=1):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        text = source if isinstance(source, str) else "".join(source)
        first = text.lstrip().split("\n", 1)[0]
        if first.startswith("%%"):
            name = first[2:].split(None, 1)[0] if first[2:].strip() else ""
            if name not in PYTHON_CELL_MAGICS:
                continue
        yield number, text


def _escape_lines(lines: list[str]):
    """(line, indent) for each line, indent not None where the line is (or continues) an
    IPython escape: one that starts a logical line (not inside brackets or a string)."""
    depth = 0
    string: str | None = None  # the open string's delimiter
    continued = False  # the line before ended in a backslash
    escape_indent: str | None = None  # inside an escape continued by backslashes
    for line in lines:
        body = line.rstrip("\r\n")
        if escape_indent is not None:
            yield line, escape_indent
            if not body.endswith("\\"):
                escape_indent = None
            continue
        if depth == 0 and string is None and not continued and _ESCAPE.match(body):
            indent = body[: len(body) - len(body.lstrip(" \t"))]
            yield line, indent
            if body.endswith("\\"):
                escape_indent = indent
            continue
        yield line, None
        depth, string, continued = _scan(body, depth, string)


def _scan(body: str, depth: int, string: str | None) -> tuple[int, str | None, bool]:
    """Bracket depth, open string and backslash continuation after one line of Python."""
    i, n = 0, len(body)
    while i < n:
        ch = body[i]
        if string is not None:
            if ch == "\\":
                i += 2
                continue
            if body.startswith(string, i):
                i += len(string)
                string = None
                continue
            i += 1
            continue
        if ch == "#":
            return depth, None, False
        if ch in "\"'":
            string = ch * 3 if body.startswith(ch * 3, i) else ch
            i += len(string)
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        i += 1
    backslash = body.endswith("\\") and (len(body) - len(body.rstrip("\\"))) % 2 == 1
    if string is not None and len(string) == 1 and not backslash:
        string = None  # an unterminated one-line string: Python reports it, not us
    return depth, string, backslash and (string is None or len(string) == 1)


def _unparsable(python: str) -> bool:
    """Whether Python cannot parse `python`."""
    try:
        ast.parse(python)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return True
    return False


def _indent_of(body: str) -> int | str | None:
    """The indentation of a pretty-printed JSON document (None: all on one line)."""
    lines = body.split("\n", 2)
    if len(lines) < 2:
        return None
    second = lines[1]
    indent = second[: len(second) - len(second.lstrip(" \t"))]
    if not indent:
        return 0
    return len(indent) if set(indent) == {" "} else indent


def _dumps(doc: dict[str, Any], style: _Style) -> str:
    return json.dumps(doc, indent=style.indent, ensure_ascii=style.ensure_ascii,
                      separators=style.separators)


def _serialize(doc: dict[str, Any], style: _Style) -> bytes:
    text = _dumps(doc, style) + ("\n" if style.trailing_newline else "")
    if style.crlf:
        text = text.replace("\n", "\r\n")
    return (("\ufeff" if style.bom else "") + text).encode("utf-8")


def _diff_lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    return lines


# -- the codemod run --------------------------------------------------------------------------


def notebook_code(raw: bytes) -> str:
    """The module a notebook's Python cells make (NotebookError if it is not a notebook)."""
    return Notebook(raw).code


def run_notebook(raw: bytes, path: str, codemods: list, *, fix: bool,
                 project=None) -> NotebookResult:
    """`codemod.run_source` for a notebook's bytes: a `NotebookResult`, whose findings name
    their cell and whose `new_bytes` is the fixed notebook (`project`: the run's model, as
    this notebook's view, `graphfix.source.project.FileView`). Never raises for bad input."""
    try:
        notebook = Notebook(raw)
    except NotebookError as exc:
        return NotebookResult(path, "", "", [], skipped=str(exc))
    code = notebook.code
    from graphfix.source.run import run_source

    # The limits `run_source` checks first, before the cells are parsed one by one here.
    beyond = beyond_parser_limits(code)
    reason = notebook.relocate(beyond) if beyond is not None else notebook.syntax_error()
    if reason is not None:
        return NotebookResult(path, code, code, [], skipped=reason, notebook=notebook)
    result = run_source(code, path, codemods, fix=fix, project=project)
    findings = [_in_cell(f, notebook) for f in result.findings]
    if result.skipped:
        return NotebookResult(path, code, code, findings, notebook=notebook,
                              skipped=notebook.relocate(result.skipped))
    if not fix:
        # A check must not call fixable what `fix` would skip (a fix that joins two cells
        # in one block): it tries the fix as `fix` would, and keeps nothing of it.
        if any(f.fixable for f in findings):
            trial = run_source(code, path, codemods, fix=True, project=project)
            _, reason = _fixed_cells(notebook, code, trial)
            if reason is not None:
                findings = [f.not_fixed(f"not fixed in this notebook: {reason}")
                            if f.fixable else f for f in findings]
        return NotebookResult(path, code, code, findings, notebook=notebook)
    texts, reason = _fixed_cells(notebook, code, result)
    if reason is not None:
        return NotebookResult(path, code, code, findings, skipped=reason, notebook=notebook)
    new_code = result.new_code if texts else code
    return NotebookResult(path, code, new_code, findings, notebook=notebook, cell_sources=texts)


def _fixed_cells(notebook: Notebook, code: str, result) -> tuple[dict[int, str], str | None]:
    """({cell number: new source}, None) for the cells a fixed module changes, or ({}, why
    `fix` skips the notebook)."""
    if result.skipped:
        return {}, notebook.relocate(result.skipped)
    if result.new_code == code:
        return {}, None
    try:
        return notebook.cell_texts(result.new_code), None
    except NotebookError as exc:
        return {}, str(exc)


def _in_cell(finding: Finding, notebook: Notebook) -> Finding:
    if finding.line is None:
        return finding
    cell, line = notebook.locate(finding.line)
    return finding.replace(cell=cell, line=line, message=notebook.relocate(finding.message))


class NotebookResult(SourceResult):
    """A `SourceResult` whose code is a notebook's cells: `new_bytes` is the notebook (JSON)
    and `unified_diff` gives one diff per changed cell."""

    def __init__(self, path: str, code: str, new_code: str, findings: list[Finding],
                 skipped: str | None = None, encoding: str = "utf-8",
                 notebook: Notebook | None = None, cell_sources: dict[int, str] | None = None):
        super().__init__(path, code, new_code, findings, skipped, encoding)
        self.notebook = notebook
        self.cell_sources = {} if cell_sources is None else cell_sources  # the changed ones

    @property
    def changed(self) -> bool:
        return self.skipped is None and bool(self.cell_sources)

    @property
    def new_bytes(self) -> bytes:
        assert self.notebook is not None
        return self.notebook.dumps(self.cell_sources)

    def unified_diff(self, old_label: str, new_label: str) -> list[str]:
        assert self.notebook is not None
        return self.notebook.cell_diff(self.cell_sources, old_label, new_label)
