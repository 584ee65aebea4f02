"""A source finding's fix as text (the JSON report's `replacements`, SARIF's `fixes`).

The text is what `graphfix fix` would write, not a description of it: the check's run makes
it (`driver.run(fix_texts=True)`: the same rules, settings and project model, in the worker
that checks the file, and only for a file with a fixable finding), and each difference
between a file and its fixed text becomes one `Replacement` of the unfixed file. Each is
given to one fixable finding of that file: the one whose line it covers, else the nearest
(an import a fix adds at the top goes to the nearest finding). So the replacements of all a file's findings, applied together, make
exactly the file `fix` writes; a finding's own may need the others' (an import they share).

Sources only: a graph's fix is no text edit, and a notebook's findings count lines within
their cell, not within the notebook's JSON.
"""

from __future__ import annotations

import bisect
import difflib
import re
from pathlib import Path

from graphfix.findings import Finding, Replacement, Report

# A line ends at LF, CRLF or a lone CR (SARIF's line breaks too).
_AFTER_LINE_BREAK = re.compile(r"(?<=\n)|(?<=\r)(?!\n)")


def _lines(text: str) -> list[str]:
    """`text`'s lines with their line breaks."""
    return [line for line in _AFTER_LINE_BREAK.split(text) if line]


# Words, runs of blanks, line breaks and single other characters: what a changed run of
# lines is compared by, so that two findings' edits on adjacent lines come apart.
_TOKEN = re.compile(r"\w+|[ \t]+|\r\n|\r|\n|[^\w \t\r\n]")


def _offsets(pieces: list[str]) -> list[int]:
    """Where each piece starts in their concatenation, and where the last ends."""
    out = [0]
    for piece in pieces:
        out.append(out[-1] + len(piece))
    return out


def text_replacements(old: str, new: str) -> list[Replacement]:
    """The replacements that make `old` into `new`, in order: the changed runs of lines,
    compared again word by word, and cut where an unchanged line break lies between two
    changes (so each piece is about one place)."""
    old_lines, new_lines = _lines(old), _lines(new)
    line_starts, new_starts = _offsets(old_lines), _offsets(new_lines)

    # The end of a last line without a line break is on that line, not on the next.
    ends_open = bool(old_lines) and not old_lines[-1].endswith(("\n", "\r"))

    def position(offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(line_starts, offset) - 1
        if ends_open and line == len(old_lines):
            line -= 1
        return line + 1, offset - line_starts[line] + 1

    out = []
    for a1, a2, b1, b2 in _changed_lines(old_lines, new_lines):
        base, new_base = line_starts[a1], new_starts[b1]
        old_tokens = _TOKEN.findall(old[base:line_starts[a2]])
        new_tokens = _TOKEN.findall(new[new_base:new_starts[b2]])
        old_at, new_at = _offsets(old_tokens), _offsets(new_tokens)
        pieces: list[list[int]] = []  # [first old token, end, first new token, end]
        by_tokens = difflib.SequenceMatcher(None, old_tokens, new_tokens, autojunk=False)
        between = ""  # the unchanged tokens since the last change
        for tag2, i1, i2, j1, j2 in by_tokens.get_opcodes():
            if tag2 == "equal":
                between = "".join(old_tokens[i1:i2])
                continue
            if pieces and not any(b in between for b in "\r\n"):
                pieces[-1][1], pieces[-1][3] = i2, j2
            else:
                pieces.append([i1, i2, j1, j2])
            between = ""
        for i1, i2, j1, j2 in pieces:
            start, end = base + old_at[i1], base + old_at[i2]
            out.append(Replacement(offset=start, length=end - start, start=position(start),
                                   end=position(end),
                                   text=new[new_base + new_at[j1]:new_base + new_at[j2]]))
    return out


def _changed_lines(old: list[str], new: list[str]) -> list[tuple[int, int, int, int]]:
    """(first, end) in `old` and (first, end) in `new` of each run of lines that differs.
    The lines both share at the start and at the end are set aside first: difflib's time
    grows with the square of the lines it compares, and a fix changes few lines of a long
    file (0.2 s of a warm check of tf-slim was its 4,254-line layers_test.py)."""
    same = min(len(old), len(new))
    head = 0
    while head < same and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < same - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    by_lines = difflib.SequenceMatcher(None, old[head:len(old) - tail],
                                       new[head:len(new) - tail], autojunk=False)
    return [(head + a1, head + a2, head + b1, head + b2)
            for tag, a1, a2, b1, b2 in by_lines.get_opcodes() if tag != "equal"]


def _owner(replacement: Replacement, findings: list[Finding]) -> Finding:
    """The finding a replacement belongs to: the first (in `findings`' order) whose line it
    covers, else the nearest (the first of two as near)."""
    first = replacement.start[0]
    last = max(first, replacement.end[0] - (replacement.end[1] == 1))

    def distance(finding: Finding) -> int:
        return max(first - finding.line, finding.line - last, 0)

    return min(findings, key=distance)


def _may_carry(finding: Finding) -> bool:
    """Whether a finding's fix can be text: a fixable finding of a Python source."""
    return finding.fixable and finding.line is not None and finding.cell is None


def give_replacements(report: Report, fixed: dict[str, tuple[str, str]]) -> None:
    """Give each fixable source finding of `report` its part of its file's fix; `fixed`:
    the path (as the findings name it) -> (text of the file, text `fix` would write)."""
    by_path: dict[str, list[Finding]] = {}
    for finding in filter(_may_carry, report.findings):
        by_path.setdefault(finding.path, []).append(finding)
    for path, findings in by_path.items():
        if path not in fixed:
            continue
        for replacement in text_replacements(*fixed[path]):
            _owner(replacement, findings).replacements.append(replacement)


def fixed_texts(outputs) -> dict[str, tuple[str, str]]:
    """From the outputs a fix would write (`driver.run(fix_texts=True)` gives them in a
    check): each Python source's path -> (its text now, the text the fix writes), decoded
    as Python reads them."""
    from graphfix.source.syntax import SourceDecodeError, decode_source

    out = {}
    for output in outputs:
        if output.data is None or output.target is None or Path(output.target).suffix != ".py":
            continue
        try:
            old, _ = decode_source(Path(output.target).read_bytes())
            new, _ = decode_source(output.data)
        except (OSError, SourceDecodeError):
            continue  # (changed or gone since the check read it: no replacements)
        out[output.label] = (old, new)
    return out
