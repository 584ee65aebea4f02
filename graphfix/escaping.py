"""The characters a name from an input (a node, a device, a file name) may hold that would act
on whoever reads graphfix's output rather than be read: control characters (an ESC sequence
recolours or rewrites a terminal; a line break starts a line of its own, which a CI log may
take as a command), bidi overrides (text shown in another order than it is), the code points
XML 1.0 cannot hold, and the lone surrogates that stand for a file name's undecodable bytes.

`visible` writes each as an escape a person can read (`\\x1b`, `\\u202e`, `\\n`, a file
name's byte 0xff as `\\xff`); each output format's own boundary (`graphfix.cli.output` for
text lines, `github`, `junit`, the HTML report) applies it to what it prints. A backslash is
left as it is: the escapes make a name harmless, not reversible. `log_line`, `json_document`
and `xml_document` also keep GitHub's runner from taking a line of them for a workflow
command (graphfix's output is read in CI logs, whatever its format).
"""

from __future__ import annotations

import functools
import json
import re

# C0 and C1 controls and DEL; line and paragraph separators; bidi embeddings, overrides,
# isolates and marks; XML's excluded U+FFFE/U+FFFF; lone surrogates.
_HOSTILE = ("\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
            "\ufffe\uffff\ud800-\udfff")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


@functools.lru_cache(maxsize=None)
def _pattern(keep: str) -> re.Pattern:
    kept = "".join(re.escape(c) for c in keep)
    return re.compile(f"(?![{kept}])[{_HOSTILE}]" if kept else f"[{_HOSTILE}]")


def _escape(match: re.Match) -> str:
    char = match.group()
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if 0xDC80 <= code <= 0xDCFF:  # a byte no codec decoded (os.fsdecode's surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, keep: str = "") -> str:
    """`text` with every control character, line break, bidi control, XML-excluded code
    point and lone surrogate written as a visible escape, except the characters in `keep`
    (say, a tab)."""
    return _pattern(keep).sub(_escape, text)


def log_line(text: str) -> str:
    """One line of text for a terminal or a CI log: `visible` (tabs kept), and never taken
    for a workflow command by GitHub's runner, which reads `::command` at the start of a line
    (after blanks) and `##[command]` anywhere in it: the first colon of a leading `::` is
    written `\\x3a`, the second `#` of `##[` as `\\x23`."""
    line = visible(text, keep="\t")
    stripped = line.lstrip()
    if stripped.startswith("::"):
        at = len(line) - len(stripped)
        line = f"{line[:at]}\\x3a{line[at + 1:]}"
    return line.replace("##[", "#\\x23[")


def json_document(value) -> str:
    """`value` as indented JSON that a CI log takes for no workflow command: JSON's own
    escapes (pure ASCII), and `[` of a `##[` inside a string written `\\u005b` (a line of
    it never starts with `::`). `json.loads` gives `value` back exactly."""
    return json.dumps(value, indent=2).replace("##[", "##\\u005b")


def xml_document(text: str) -> str:
    """An XML document whose names `visible` made safe, changed so that a CI log takes none
    of its lines for a workflow command: a text line starting with `::` has its first colon
    as the character reference `&#58;`, a `##[` its `[` as `&#91;`. An XML parser reads the
    same document."""
    lines = []
    for line in text.split("\n"):
        stripped = line.lstrip()
        if stripped.startswith("::"):
            at = len(line) - len(stripped)
            line = f"{line[:at]}&#58;{line[at + 1:]}"
        lines.append(line.replace("##[", "##&#91;"))
    return "\n".join(lines)
