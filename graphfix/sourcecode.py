"""A source file as text, without libcst: decoding, Python's own syntax check, the result of
running codemods on it. The run's cheap steps (reading, the text pre-filter, the cache) use
these, so a run whose files are all cached or filtered out never imports libcst.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import io
import re
import tokenize

from graphfix.findings import Finding


@dataclasses.dataclass
class SourceResult:
    """What running codemods on one file gave: new code (or the reason it was skipped)."""

    path: str
    code: str
    new_code: str
    findings: list[Finding]
    skipped: str | None = None
    encoding: str = "utf-8"  # the file's own (PEP 263 cookie, BOM), kept when written

    @property
    def changed(self) -> bool:
        return self.skipped is None and self.new_code != self.code

    @property
    def new_bytes(self) -> bytes:
        """`new_code` encoded as the file was (UnicodeEncodeError if it no longer can be)."""
        return self.new_code.encode(self.encoding)

    def unified_diff(self, old_label: str, new_label: str) -> list[str]:
        """The change as a unified diff between `old_label` and `new_label`."""
        return list(difflib.unified_diff(self.code.splitlines(keepends=True),
                                         self.new_code.splitlines(keepends=True),
                                         old_label, new_label))


class SourceDecodeError(ValueError):
    """A source file's bytes are not text in its declared (or default UTF-8) encoding."""


def decode_source(raw: bytes) -> tuple[str, str]:
    """(text, encoding) of a Python file's bytes, as Python reads them: a BOM or a PEP 263
    `# -*- coding: ... -*-` cookie, else UTF-8. SourceDecodeError with a one-line reason."""
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


def python_syntax_error(code: str) -> str | None:
    """Why Python itself cannot compile `code`, in one line; None if it can. (libcst's
    grammar accepts some code Python 3 does not, such as `except E, e:`.)"""
    try:
        ast.parse(code)
    except SyntaxError as error:
        what = f": {error.msg}" if error.msg else ""
        return (f"syntax error at line {error.lineno or 1}, column {error.offset or 1}"
                f"{what}{_python2_hint(code)}")
    except (ValueError, MemoryError, RecursionError) as error:  # NUL bytes, too deep
        return f"cannot parse: {str(error).splitlines()[0] if str(error) else type(error).__name__}"
    return None
