"""A source file as text, without libcst: decoding, Python's own syntax check, the result of
running codemods on it. The run's cheap steps (reading, the text pre-filter, the cache) use
these, so a run whose files are all cached or filtered out never imports libcst.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
import warnings
from typing import Iterator

from graphfix.findings import Finding


def node_kinds(*names: str) -> tuple[type, ...]:
    """The `ast` node classes named that this Python has (`match`'s from 3.10, `except*`'s
    from 3.11): a tree it parsed holds no other kind, so the rest need no test."""
    return tuple(getattr(ast, name) for name in names if hasattr(ast, name))


def place_import_aliases(tree: ast.Module, code: str) -> None:
    """Give each `import` name of `tree` (`ast.alias`) its position in `code`, as Python
    3.10+ parses it with one: Python 3.9 gives an alias none, and the rules that rename an
    import (`from tensorflow import X as Y`) report and edit it where it is."""
    if sys.version_info >= (3, 10):
        return
    lines = code_lines(code)
    for statement in ast.walk(tree):
        if isinstance(statement, (ast.Import, ast.ImportFrom)) and statement.names:
            _place_aliases(statement, lines)


def _place_aliases(statement: ast.Import | ast.ImportFrom, lines: list[str]) -> None:
    first, last = statement.lineno - 1, statement.end_lineno - 1
    head = lines[first].encode("utf-8")[:statement.col_offset].decode("utf-8", "replace")
    segment = [line + "\n" for line in lines[first:last + 1]]
    segment[-1] = (lines[last].encode("utf-8")[:statement.end_col_offset]
                   .decode("utf-8", "replace") + "\n")
    segment[0] = segment[0][len(head):]

    def where(row: int, col: int) -> tuple[int, int]:  # (line, UTF-8 byte column) in code
        line = first + row
        column = col + (len(head) if row == 0 else 0)
        return line + 1, len(lines[line][:column].encode("utf-8"))

    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO("".join(segment)).readline)
                  if t.type in (tokenize.NAME, tokenize.OP)]
    except (tokenize.TokenError, SyntaxError):
        return
    at = next((i + 1 for i, t in enumerate(tokens) if t.string == "import"), len(tokens))
    for alias in statement.names:
        while at < len(tokens) and tokens[at].string in "(,":
            at += 1
        if at >= len(tokens):
            return
        start = end = tokens[at]
        at += 1
        while at + 1 < len(tokens) and tokens[at].string == ".":  # a dotted module name
            end, at = tokens[at + 1], at + 2
        if alias.asname is not None and at + 1 < len(tokens) and tokens[at].string == "as":
            end, at = tokens[at + 1], at + 2
        alias.lineno, alias.col_offset = where(start.start[0] - 1, start.start[1])
        alias.end_lineno, alias.end_col_offset = where(end.end[0] - 1, end.end[1])


class SourceResult:
    """What running codemods on one file gave: new code (or the reason it was skipped)."""

    # The file as libcst read it (`run_source`: its tree and metadata), for another run over
    # the same code; None where it was not parsed. It holds the whole tree: drop it when done.
    read = None

    def __init__(self, path: str, code: str, new_code: str, findings: list[Finding],
                 skipped: str | None = None, encoding: str = "utf-8"):
        self.path = path
        self.code = code
        self.new_code = new_code
        self.findings = findings
        self.skipped = skipped
        self.encoding = encoding  # the file's own (PEP 263 cookie, BOM), kept when written

    @property
    def changed(self) -> bool:
        return self.skipped is None and self.new_code != self.code

    @property
    def new_bytes(self) -> bytes:
        """`new_code` encoded as the file was (UnicodeEncodeError if it no longer can be)."""
        return self.new_code.encode(self.encoding)

    def unified_diff(self, old_label: str, new_label: str) -> list[str]:
        """The change as a unified diff between `old_label` and `new_label`."""
        import difflib  # (the graph path imports this module for the pre-checks, never diffs)

        return list(difflib.unified_diff(self.code.splitlines(keepends=True),
                                         self.new_code.splitlines(keepends=True),
                                         old_label, new_label))


class SourceDecodeError(ValueError):
    """A source file's bytes are not text in its declared (or default UTF-8) encoding."""


def decode_source(raw: bytes) -> tuple[str, str]:
    """(text, encoding) of a Python file's bytes, as Python reads them: a BOM or a PEP 263
    `# -*- coding: ... -*-` cookie, else UTF-8. SourceDecodeError with a one-line reason."""
    import tokenize  # (not on the graph path)

    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        raise SourceDecodeError(str(exc).split(" for ")[0]) from None
    try:
        return raw.decode(encoding), encoding
    except UnicodeDecodeError as exc:
        name = "UTF-8" if encoding.startswith("utf-8") else encoding
        hint = "" if name != "UTF-8" else "; no coding cookie"
        raise SourceDecodeError(f"not {name} ({exc.reason} at byte {exc.start}{hint})") from None
    except LookupError:
        raise SourceDecodeError(f"unknown encoding: {encoding}") from None


_PYTHON2 = re.compile(r"^\s*(print\s+[^\s(=]|exec\s+[^\s(=])|^\s*except\s+\w+\s*,\s*\w+\s*:|\bur?\"|`")


def _python2_hint(code: str) -> str:
    return " (Python 2 code?)" if any(_PYTHON2.search(ln) for ln in code.splitlines()) else ""


def parse_python(code: str) -> tuple[ast.Module | None, str | None]:
    """(Python's own tree of `code`, None), or (None, why Python cannot compile it, in one
    line)."""
    try:
        return ast.parse(code), None
    except SyntaxError as error:
        what = f": {error.msg}" if error.msg else ""
        return None, (f"syntax error at line {error.lineno or 1}, column {error.offset or 1}"
                      f"{what}{_python2_hint(code)}")
    except (ValueError, MemoryError, RecursionError) as error:  # NUL bytes, too deep
        text = str(error).splitlines()[0] if str(error) else type(error).__name__
        return None, f"cannot parse: {text}"


def python_syntax_error(code: str) -> str | None:
    """Why Python itself cannot compile `code`, in one line; None if it can. (libcst's
    grammar accepts some code Python 3 does not, such as `except E, e:`.)"""
    return parse_python(code)[1]


# -- the syntax pre-check: the stdlib's parser before libcst --------------------------------
#
# A file the text pre-filter lets through is parsed by `ast` (CPython's own C parser, about
# 15x cheaper than libcst with its scope analysis) once for all the rules the text let
# through, and each rule's declared calls and predicate (`graphfix.source.prefilter`) look
# for the construct its codemod acts on. Most files that merely mention `device` or
# `run(` end there. These checks are conservative: a False means the codemod finds nothing.


class Syntax:
    """A file's `ast` tree, walked once: what the transforms' pre-checks read."""

    def __init__(self, tree: ast.Module):
        self.tree = tree
        self.calls: list[ast.Call] = []
        self.withs: list[ast.With | ast.AsyncWith] = []
        self.assigns: list[ast.Assign | ast.AnnAssign | ast.AugAssign] = []
        self.strings: list[str] = []
        # Every name the code reads or binds: variables, attributes, imported modules and
        # symbols (each part of a dotted import); not the names of functions it defines.
        self.identifiers: set[str] = set()
        self.imports: dict[str, str] = {}  # a name an import binds -> what it imports
        # Names bound by `for` (loops, comprehensions) and `with ... as`.
        self.loop_names: set[str] = set()
        # What `name = value` / `name: T = value` assign to each name, anywhere in the file.
        self.assigned: dict[str, list[ast.expr]] = {}
        for node in ast.walk(tree):
            kind = type(node)
            if kind is ast.Name:
                self.identifiers.add(node.id)
            elif kind is ast.Attribute:
                self.identifiers.add(node.attr)
            elif kind is ast.Call:
                self.calls.append(node)
            elif kind is ast.Constant:
                if type(node.value) is str:
                    self.strings.append(node.value)
            elif kind in (ast.Assign, ast.AnnAssign, ast.AugAssign):
                self.assigns.append(node)
                if kind is not ast.AugAssign and node.value is not None:
                    for target in (node.targets if kind is ast.Assign else (node.target,)):
                        if type(target) is ast.Name:
                            self.assigned.setdefault(target.id, []).append(node.value)
            elif kind in (ast.With, ast.AsyncWith):
                self.withs.append(node)
                self.loop_names.update(i.optional_vars.id for i in node.items
                                       if isinstance(i.optional_vars, ast.Name))
            elif kind in (ast.For, ast.AsyncFor, ast.comprehension):
                if isinstance(node.target, ast.Name):
                    self.loop_names.add(node.target.id)
            elif kind in (ast.Import, ast.ImportFrom):
                base = f"{node.module}." if kind is ast.ImportFrom and node.module else ""
                for alias in node.names:
                    self.identifiers.update(f"{base}{alias.name}".split("."))
                    bound = alias.asname or alias.name.split(".")[0]
                    self.imports[bound] = f"{base}{alias.name}"

    @classmethod
    def parse(cls, code: str) -> Syntax | None:
        """The file's syntax; None where Python 3 cannot parse it, or it is too large to
        (libcst, or the size check before it, then says why)."""
        if beyond_size_limits(code) is not None:
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # `"\d"` and the like: SyntaxWarning, not ours
            try:
                return cls(ast.parse(code))
            except (SyntaxError, ValueError, MemoryError, RecursionError):
                return None


_IGNORE = re.compile(r"#\s*graphfix:\s*ignore(?:\[([^\]]*)\])?")


LINE_BREAK = re.compile(r"\r\n|\r|\n")  # where Python's parser ends a line


def code_lines(code: str) -> list[str]:
    """`code`'s lines as Python's parser numbers them: broken at LF, CRLF and CR only (not
    at the form feeds, U+2028 and the other breaks `str.splitlines` also splits at, which
    would number every later line wrong)."""
    lines = LINE_BREAK.split(code)
    return lines[:-1] if lines and lines[-1] == "" else lines


def comment_ignores(line: str, same_line: bool, transform: str) -> bool:
    """Whether a source line's `# graphfix: ignore[...]` covers `transform`: on the line
    itself (`same_line`), or as a comment line of its own just above (a trailing comment on
    the line above covers only that line)."""
    match = _IGNORE.search(line)
    if not match:
        return False
    if not same_line and not line.lstrip().startswith("#"):
        return False
    names = match.group(1)
    return names is None or transform in {n.strip() for n in names.split(",")}


def ignored_at(code: str, line: int, transform: str) -> bool:
    """Whether `# graphfix: ignore[...]` covers `transform` at `line` of `code`: on that
    line, or on the first line (or the comment line just above) of a statement or block
    holding it; the rule the codemods follow (`SourceCodemod.suppressed`), for a finding
    that comes from elsewhere (a traced graph's, at the line that made its node)."""
    lines = code_lines(code)
    starts = {line}
    if "graphfix" in code:
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError):
            tree = None
        if tree is not None:
            starts |= {node.lineno for node in ast.walk(tree) if isinstance(node, ast.stmt)
                       and node.lineno <= line <= (node.end_lineno or node.lineno)}
    else:
        return False
    return any(1 <= number <= len(lines)
               and comment_ignores(lines[number - 1], number == start, transform)
               for start in starts for number in (start, start - 1))


def tail_name(node: ast.expr) -> str | None:
    """The last name of `x`, `a.b.x`: what a call calls, as far as its syntax says."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def strings_in(node: ast.AST) -> Iterator[str]:
    """The string constants within an expression (f-string parts included)."""
    for inner in ast.walk(node):
        if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
            yield inner.value


def call_arguments(call: ast.Call) -> list[ast.expr]:
    """Every argument a call is given, positional and keyword."""
    return [*call.args, *(k.value for k in call.keywords)]


# -- what libcst can read: the limits, checked by a token scan before any parse -------------
#
# libcst's native parser crashes the process (signal 11) on deep nesting that CPython's own
# parser refuses cleanly, and the codemods' visitors recurse once per level of the tree, so
# a file nested past Python's recursion limit fails in them. The scan below bounds that
# depth from the tokens: each operator, `.`, unary `not`/`-`, adjacent string, keyword of a
# chain (`lambda`, `if`/`else`) and bracket adds a level to the expression it is in, a comma,
# colon, `=` or the statement's end closes it; a bracket also costs BRACKET_LEVELS levels
# for what the tree builds around it (a call's argument, a list's element). The figures are
# measured (the figures are in docs/guide.md, "Inputs"): at Python's default
# recursion limit the rules' visitors take about 318 chained operators and 137 nested
# brackets; MAX_DEPTH keeps a margin below both. The size limits bound a worker's memory
# and time: libcst's tree of a 30,000-line file already takes about 300 MB.

MAX_DEPTH = 250
BRACKET_LEVELS = 1  # besides the level the bracket itself adds: 137 brackets ~ 2.3 levels each
MAX_LINES = 50_000
MAX_BYTES = 5_000_000

# What the scan stops at: strings and comments (skipped), brackets, and what ends an
# expression (`,`, `;`, `:`, a newline, `=`); between them, it counts the levels at once.
_STRING = "|".join((
    r"'''(?:[^'\\]|\\.|'(?!''))*'''",
    r'"""(?:[^"\\]|\\.|"(?!""))*"""',
    r"'(?:[^'\\\n]|\\.)*'",
    r'"(?:[^"\\\n]|\\.)*"',
))
_STRUCTURE = re.compile(  # (the lookahead first: most positions start none of these)
    r"(?=[\"'#()\[\]{},;:\n=l])(?:"
    rf"(?P<string>{_STRING})"
    r"|(?P<comment>#[^\n]*)|(?P<open>[(\[{])|(?P<close>[)\]}])|(?P<lambda>\blambda\b)"
    r"|(?P<end>[,;:\n]|(?<![=!<>:])=(?!=)))")
_LEVEL = re.compile(r"\*\*|//|<<|>>|->|[-+*/%@&|^~<>]|\.(?!\d)|\b(?:not|and|or|if|else|await|in|is)\b")


def beyond_parser_limits(code: str | bytes) -> str | None:
    """Why libcst must not be given `code` (nested or sized past what it and the rules can
    read: see MAX_DEPTH, MAX_LINES, MAX_BYTES), in one line; None if it may. A token scan,
    no parse: cheap beside one, and safe on any input."""
    too_large = beyond_size_limits(code)
    if too_large is not None:
        return too_large
    text = code.decode("latin-1") if isinstance(code, bytes) else code  # (only ASCII matters)
    levels = _LEVEL.findall
    enclosing: list[tuple[int, int]] = []  # (depth outside, chain) at each open bracket
    outside = chain = 0  # the levels around the current expression; its own so far
    last = 0  # where the text not yet counted starts
    for match in _STRUCTURE.finditer(text):
        start = match.start()
        if start > last:
            chain += len(levels(text, last, start))
            if outside + chain > MAX_DEPTH:
                return _too_deep(text, start)
        last = match.end()
        kind = match.lastgroup
        if kind == "end":
            if match.group() != "\n":
                chain = 0
            elif not enclosing:
                outside = chain = 0  # a statement's end
            continue
        if kind == "open":
            enclosing.append((outside, chain + 1))
            outside += chain + 1 + BRACKET_LEVELS
            chain = 0
        elif kind == "close":
            if enclosing:
                outside, chain = enclosing.pop()
            continue
        elif kind == "lambda":  # its body is within it, past the `:` that ends its arguments
            outside += chain + 1
            chain = 0
        elif kind == "string":
            chain += 1
        else:
            continue
        if outside + chain > MAX_DEPTH:
            return _too_deep(text, start)
    if len(text) > last:
        chain += len(levels(text, last))
    return _too_deep(text, len(text)) if outside + chain > MAX_DEPTH else None


def _too_deep(text: str, where: int) -> str:
    line = text.count("\n", 0, where) + 1
    return (f"nested too deeply for graphfix to parse (line {line}; it reads expressions "
            f"at most {MAX_DEPTH} levels deep)")


def beyond_size_limits(code: str | bytes) -> str | None:
    """Why `code` is too large for graphfix to parse (MAX_BYTES, MAX_LINES, MAX_TOKENS);
    None if not."""
    if len(code) > MAX_BYTES:
        return (f"too large for graphfix to parse ({len(code):,} bytes; it reads at most "
                f"{MAX_BYTES:,})")
    lines = code.count(b"\n" if isinstance(code, bytes) else "\n") + 1
    if lines > MAX_LINES:
        return (f"too large for graphfix to parse ({lines:,} lines; it reads at most "
                f"{MAX_LINES:,})")
    if too_many_tokens(code):
        return (f"too large for graphfix to parse (more than {MAX_TOKENS:,} tokens; its "
                f"parsers would need more than {PARSE_MEMORY_BOUND} of memory for it)")
    return None


# -- the token limit: what the parsers build grows with the tokens, not the bytes -----------
#
# One or two bytes can make a token, and every token a few nodes of each tree: a 3 MB file
# holding a list of 1.5 million numbers is within both size limits and took `check` past
# 5.7 GB. Measured per token (the peak one file adds to a process that runs every rule over
# it: libcst's tree, its metadata and CPython's tree together; generated files of one
# construct repeated), the costliest are one-name lines (about 4.6 KB a token, bounded by
# MAX_LINES to about 450 MB) and a call's arguments `f(a, a, ...)` (about 4.2 KB); a list of
# numbers takes about 2.1 KB, ordinary statements about 3.1 KB, CPython's tree alone at most
# about 0.9 KB. At MAX_TOKENS a whole `check` of a call with 156,000 tokens of arguments
# peaked at 690 MB (the interpreter and graphfix: about 55 MB), under PARSE_MEMORY_BOUND.
# The largest files of TensorFlow's, Keras's and NumPy's trees count at most about 157,000
# by the byte bound below (TensorFlow's gen_array_ops.py, 75,673 tokens).

PARSE_MEMORY_BOUND = "1 GB"
MAX_TOKENS = 160_000


def too_many_tokens(code: str | bytes) -> bool:
    """Whether `code` has more than MAX_TOKENS tokens. A bound from the bytes first (each
    token starts with a byte that begins a word or is neither a word's nor a space's): a
    text within the limit by it, as every file of TensorFlow's own tree, is not read
    further. Past it, Python's own tokenizer counts, a string or a comment as one token (an
    f-string's replacement fields are code: it counts as the bytes' bound does), and stops
    at the first token past the limit."""
    if len(code) <= MAX_TOKENS:  # (fewer bytes, or characters, than that: fewer tokens)
        return False
    data = code if isinstance(code, bytes) else code.encode("utf-8", "surrogatepass")
    if _tokens_at_most(data) <= MAX_TOKENS:
        return False
    counted = _python_tokens(code, MAX_TOKENS)
    return counted is None or counted > MAX_TOKENS


def _byte_classes() -> bytes:
    """A `bytes.translate` table: `w` for a byte of a word (ASCII letters, digits, `_`, and
    every byte of a non-ASCII character), a space for a blank, `.` for any other byte (an
    operator's, a bracket's, a quote's, a line break's: each may start a token)."""
    word = set(b"_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    return bytes(ord("w") if byte in word or byte >= 0x80 else ord(" ") if byte in b" \t\f"
                 else ord(".") for byte in range(256))


_BYTE_CLASSES = _byte_classes()


def _tokens_at_most(data: bytes) -> int:
    """An upper bound of the tokens in `data` (indents and dedents aside): its words and its
    other non-blank bytes, each counted as one."""
    classes = data.translate(_BYTE_CLASSES)
    return (classes.count(b".") + classes.count(b" w") + classes.count(b".w")
            + classes.startswith(b"w"))


def _python_tokens(code: str | bytes, limit: int) -> int | None:
    """How many tokens Python's tokenizer reads in `code` (indents, dedents and the end
    aside; an f-string as its bytes' bound, see `_tokens_at_most`), or the first count past
    `limit`; None where the tokenizer stops at an error."""
    import tokenize  # (not on the graph path)

    if isinstance(code, bytes):
        tokens = tokenize.tokenize(io.BytesIO(code).readline)
    else:
        tokens = tokenize.generate_tokens(io.StringIO(code).readline)
    uncounted = {tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER, tokenize.ENCODING}
    count = 0
    try:
        for token in tokens:
            if token.type in uncounted:
                continue
            text = token.string
            if token.type == tokenize.STRING and "f" in _string_prefix(text).lower():
                count += _tokens_at_most(text.encode("utf-8", "surrogatepass"))
            else:
                count += 1
            if count > limit:
                return count
    except (tokenize.TokenError, SyntaxError, ValueError, UnicodeError):
        return None
    return count


def _string_prefix(literal: str) -> str:
    """A string literal's prefix (`rb`, `f`, ...): the letters before its first quote."""
    return literal[:len(literal) - len(literal.lstrip("rRbBuUfF"))]
