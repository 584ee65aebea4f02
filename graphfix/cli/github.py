"""GitHub Actions workflow commands for `--format github`: one `::error`/`::warning`/
`::notice` line per finding or failed verify check, which the Actions runner shows as an
annotation on the file and line (see GitHub's "Workflow commands for GitHub Actions").

`command` is this format's boundary: each name it carries is made visible
(`graphfix.escaping`) and then escaped as GitHub's spec says; the plain lines printed
beside the commands go through `escaping.log_line`, so that no line but these commands is
one."""

from __future__ import annotations

from graphfix.escaping import visible
from graphfix.findings import Change, Finding, Report

# A finding's severity -> the workflow command that annotates with it.
COMMANDS = {"error": "error", "warning": "warning", "info": "notice"}
TAB = "\t"  # (kept in a message as it is: it moves no line)


def escape_data(text: str) -> str:
    """A command's message: `%`, CR and LF escaped (the runner decodes them back)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A property value (file, title): also `:` and `,`, which end a property."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(kind: str, message: str, **properties) -> str:
    """`::kind prop=value,...::message`, properties that are None left out; control and
    bidi characters in the message and the values made visible, then escaped."""
    props = ",".join(f"{key}={escape_property(visible(str(value), keep=TAB))}"
                     for key, value in properties.items() if value is not None)
    data = escape_data(visible(message, keep=TAB))
    return f"::{kind}{' ' + props if props else ''}::{data}"


def finding_command(finding: Finding) -> str:
    """A source finding annotates its line and column; a graph finding, which has no line,
    annotates the graph file with the node in its title."""
    title = finding.transform if finding.node is None else f"{finding.transform} @{finding.node}"
    if finding.cell is not None:
        title = f"{title} (cell {finding.cell})"
    line = None if finding.cell is not None else finding.line
    col = None if line is None else (finding.col or 1)
    message = finding.message + (" (fixable)" if finding.fixable else "")
    return command(COMMANDS.get(finding.severity, "notice"), message, file=finding.path,
                   line=line, col=col, title=title)


def change_command(change: Change) -> str:
    """A fix's change: a notice on the line it edited (a graph's: the file, the node in the
    title), so a pull request shows what `fix` did where."""
    title = change.transform if change.node is None else f"{change.transform} @{change.node}"
    line = change.line if change.cell is None else None
    return command("notice", f"fixed: {change.description}", file=change.path, line=line,
                   title=title)


def report_lines(report: Report) -> list[str]:
    """A check's or fix's annotations: each finding, each change a fix made, then each file
    that failed."""
    lines = [finding_command(f) for f in report.findings]
    lines += [change_command(c) for c in report.changes]
    lines += [command("error", failure["error"], file=failure["path"], title="graphfix")
              for failure in report.failed]
    return lines


def verify_lines(result) -> list[str]:
    """A verify result's annotations: one `::error` per failed check, on the graph file."""
    return [command("error", check.detail or check.message or "failed", file=result.path,
                    title=f"verify {check.name}")
            for check in result.checks if not check.passed]
