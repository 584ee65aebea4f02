"""How big each transform's package is: its lines of code, besides docstrings, comments and
blank lines (the measure issue 35 sets a new transform, at most 150 in at most two files).

    .venv/bin/python tools/transform_size.py [transforms/NAME ...]
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def code_lines(source: str) -> int:
    """The lines of `source` that hold code: not blank, not only a comment, not a docstring."""
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            docstrings.update(range(body[0].lineno, body[0].end_lineno + 1))
    lines = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                              tokenize.DEDENT, tokenize.ENDMARKER):
            lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines - docstrings)


def package_size(folder: Path) -> tuple[int, int]:
    """(files, lines of code) of a transform's package."""
    files = sorted(folder.glob("*.py"))
    return len(files), sum(code_lines(f.read_text()) for f in files)


def main(folders: list[str]) -> None:
    for folder in map(Path, folders or sorted(str(p) for p in (REPO / "transforms").iterdir()
                                               if (p / "__init__.py").exists())):
        files, lines = package_size(folder)
        print(f"{folder.name}: {lines} lines of code in {files} file(s)")


if __name__ == "__main__":
    main(sys.argv[1:])
