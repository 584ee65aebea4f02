"""What the commands print: one-line errors, the text, JSON and SARIF report, `--report FILE`,
the progress bar of long source runs and the phases of a long verify or trace.

The boundary of the text format: every line goes out through `echo`, which makes the names
in it visible (`escaping.log_line`); a document (JSON, SARIF, JUnit XML, GitHub's workflow
commands) through `echo_document`, its format having escaped them. Standard output is
`guard_stdout`'s: a write it cannot take raises `StdoutLost`, which `main` ends the run with.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
import time
from pathlib import Path

from graphfix import registry
from graphfix.escaping import json_document, log_line
from graphfix.findings import Report

MAX_CHANGE_LINES = 200  # a 1M-node graph can make 200k changes: past this, count them
PROGRESS_MIN_FILES = 50  # smaller runs finish before a bar would help


def echo(line: str = "", *, err: bool = False) -> None:
    """One line of text on stdout (stderr if `err`), the names in it made visible."""
    _write(log_line(line), sys.stderr if err else sys.stdout)


def echo_document(text: str, *, errors: str = "backslashreplace") -> None:
    """A document whose format escaped what it holds (JSON, XML, workflow commands), on
    stdout as it is; a character stdout's encoding lacks is written as `errors` says."""
    _write(text, sys.stdout, errors)


def _write(text: str, stream, errors: str = "backslashreplace") -> None:
    if stream is None:  # (closed when graphfix started, not by `main`: nowhere to write)
        return
    if errors != getattr(stream, "errors", errors):  # (the stream's own: `guard_stdout`)
        encoding = getattr(stream, "encoding", None) or "utf-8"
        text = text.encode(encoding, errors).decode(encoding)
    try:
        print(text, file=stream)
    except OSError:
        if stream is not sys.stderr:  # (stderr full or gone: nowhere left to say anything)
            raise


class StdoutLost(Exception):
    """Standard output took no more: full, closed, or a pipe whose reader left."""

    def __init__(self, error: OSError):
        super().__init__(error.strerror or str(error))
        self.errno = error.errno

    @property
    def reader_left(self) -> bool:
        """A pipe whose reader stopped reading (`| head -1`): nothing more is wanted."""
        return self.errno == errno.EPIPE


class _GuardedStream:
    """A text stream whose failed writes raise StdoutLost (its other methods the stream's)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            raise StdoutLost(exc) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise StdoutLost(exc) from None

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def guard_stdout() -> str | None:
    """Make standard output and standard error safe to write before a command runs: a
    closed descriptor 0, 1 or 2 is held by /dev/null (so no file graphfix opens, and no
    message TF's C++ logs, lands on it), characters their encoding lacks are escaped
    (`\\xe9`) rather than raising, and stdout's failed writes raise StdoutLost. Returns why
    stdout cannot be written (closed), else None."""
    closed = None
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            held = os.open(os.devnull, os.O_RDWR)
            if held != fd:  # (the lowest free descriptor: a lower one was closed too)
                os.dup2(held, fd)
                os.close(held)
            if fd == 1:
                closed = "standard output is closed"
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    if sys.stdout is not None:
        sys.stdout = guarded(sys.stdout)
    return closed


def guarded(stream):
    """`stream`, its failed writes raising StdoutLost: standard output's, as graphfix
    writes it."""
    return stream if isinstance(stream, _GuardedStream) else _GuardedStream(stream)


def drop_stdout() -> None:
    """What is left in stdout's buffer goes to /dev/null (written at exit, it would fail
    again)."""
    try:
        fd = sys.stdout.fileno()  # (the real stdout's, where `foreign_output` diverted 1)
    except (AttributeError, OSError, ValueError):
        fd = sys.__stdout__.fileno() if sys.__stdout__ is not None else 1
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def fail(message: str) -> None:
    """One line on stderr, exit 2: how every error ends."""
    echo(f"graphfix: error: {message}", err=True)
    raise SystemExit(2)


def check_format(fmt: str, allowed: tuple[str, ...] = ("text", "json")) -> None:
    """`--format` is one of `allowed`, or the run stops with a one-line error."""
    if fmt not in allowed:
        fail(f"--format must be {' or '.join(allowed)}, not {fmt!r}")


def report_bytes(doc: dict) -> bytes:
    """What `--report FILE.json` holds for the JSON document `doc`."""
    return (json.dumps(doc, indent=2) + "\n").encode()


def report_document(report: Report, *, fixing: bool) -> dict:
    """A check's or a fix's JSON document: the report, and which TensorFlow's kernels
    placement was judged by ({"tensorflow": {"version": "2.16", "source": "table"}})."""
    from graphfix.graph import kernels

    return {**report.to_json(fixing=fixing), "tensorflow": kernels.selected().to_json()}


def write_report(path: Path, doc: dict) -> None:
    """`--report FILE.json`: the JSON document, written atomically."""
    from graphfix.graph.graphfile import InputError, write_output

    try:
        write_output(path, report_bytes(doc))
    except InputError as exc:
        fail(str(exc))




def show_verify(result, fmt: str, report_path: Path | None) -> None:
    """Print a verify result (text lines, JSON, GitHub annotations or JUnit XML) and write
    its report file if asked."""
    doc = result.to_json()
    if report_path is not None:
        write_report(report_path, doc)
    if fmt == "github":
        from graphfix.cli.github import verify_lines

        for line in verify_lines(result):
            echo_document(line)
        for line in result.to_lines():  # (the log shows the whole verdict too)
            echo(line)
    elif fmt == "junit":
        from graphfix.cli.junit import verify_junit

        echo_document(verify_junit(result), errors="xmlcharrefreplace")
    elif fmt == "json":
        echo_document(json_document(doc))
    else:
        for line in result.to_lines():
            echo(line)


def in_file_order(findings: list) -> list:
    """Findings (or changes) by file, then (notebook cell,) line and column, as a reader
    goes through a file; a graph's, which have no line, in the order they were made."""
    return sorted(findings, key=lambda f: (f.path, f.cell or 0, f.line or 0,
                                           getattr(f, "col", None) or 0))


def emit(report: Report, fmt: str, report_path: Path | None, *, fixing: bool,
         extra_lines: list[str] = (), transforms: list[str] | None = None) -> None:
    """Print a check's or a fix's report in `fmt` (text, json, sarif, github, junit), and
    write it to `report_path` as JSON when one is given. `transforms`: the transforms that
    ran (`Transform` classes: JUnit's testcases; default: every registered one).

    Text, in file order (JSON, SARIF and the rest keep the run's): each change a fix made,
    once; then the findings left to a person (a check's every finding; a fix's, those it
    did not fix)."""
    if fmt == "github":
        from graphfix.cli.github import report_lines

        for line in report_lines(report):
            echo_document(line)
        fmt = "text"  # (then the usual lines, which the Actions log shows)
    if fmt == "junit":
        from graphfix.cli.junit import report_junit

        ran = transforms or list(registry.all_transforms().values())
        echo_document(report_junit(report, ran), errors="xmlcharrefreplace")
        fmt = "quiet"
    if fmt == "sarif":
        from graphfix.cli.sarif import to_sarif

        echo_document(json_document(to_sarif(report, registry.all_transforms())))
        fmt = "quiet"
    # A 1M-node graph makes 200k changes: build the JSON document only where it is shown.
    doc = (report_document(report, fixing=fixing) if fmt == "json" or report_path is not None
           else None)
    if report_path is not None:
        write_report(report_path, doc)
    if fmt == "json":
        echo_document(json_document(doc))
        for failure in report.failed:  # (stdout may go to a file or a pipe: errors show)
            echo(f"graphfix: error: {failure['path']}: {failure['error']}", err=True)
        return
    if fmt == "quiet":
        for failure in report.failed:
            echo(f"graphfix: error: {failure['path']}: {failure['error']}", err=True)
        return
    for line in extra_lines:
        echo(line)
    shown = in_file_order(report.changes[:MAX_CHANGE_LINES])
    for change in shown:
        echo(change.to_text())
    if len(report.changes) > len(shown):
        echo(f"... and {len(report.changes) - len(shown)} more change(s) "
             "(--format json or --report FILE lists them all)")
    # (a fix's fixable findings are its changes, shown above)
    for finding in in_file_order(report.findings):
        if not (fixing and finding.fixable):
            echo(finding.to_text())
    for skip in report.skipped:
        echo(f"{skip['path']}: skipped: {skip['reason']}")
    for failure in report.failed:
        echo(f"graphfix: error: {failure['path']}: {failure['error']}", err=True)
    for note in report.notes:
        echo(note)
    s = report.summary()
    if fixing:
        echo(f"{s['changes']} change(s) in {s['files_changed']} file(s); "
             f"{s['files_unchanged']} unchanged, {s['skipped']} skipped, {s['failed']} failed")
    else:
        echo(_check_summary(report))


def _check_summary(report: Report) -> str:
    """A check's last line; `check --fix` starts it with what it fixed."""
    s = report.summary()
    with_findings = len({f.path for f in report.findings})
    clean = max(0, s["files_unchanged"] - with_findings)
    fixed = (f"fixed {s['changes']} change(s) in {len({c.path for c in report.changes})} "
             "file(s); left " if report.changes else "")
    return (f"{fixed}{s['findings']} finding(s) ({s['fixable']} fixable) in {with_findings} "
            f"file(s); {clean} clean, {s['skipped']} skipped, {s['failed']} failed")


def statistics(findings: list) -> list[dict]:
    """Per transform, its findings and how many are fixable: most first (ruff's
    --statistics)."""
    counts: dict[str, list[int]] = {}
    for finding in findings:
        count = counts.setdefault(finding.transform, [0, 0])
        count[0] += 1
        count[1] += bool(finding.fixable)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1][0], kv[0]))
    return [{"transform": name, "count": count, "fixable": fixable}
            for name, (count, fixable) in ranked]


def show_statistics(report: Report, fmt: str) -> None:
    """`check --statistics`: the findings counted per transform (text: a line each, count
    first, then the check's last line; json: `statistics` and `summary`), failures on
    stderr as always."""
    rows = statistics(report.findings)
    if fmt == "json":
        summary = {**report.summary(), "exit_code": report.exit_code(fixing=False)}
        echo_document(json_document({"statistics": rows, "summary": summary}))
    else:
        width = max([len(str(row["count"])) for row in rows], default=1)
        for row in rows:
            echo(f"{row['count']:>{width}}  {row['transform']}  ({row['fixable']} fixable)")
    for failure in report.failed:
        echo(f"graphfix: error: {failure['path']}: {failure['error']}", err=True)
    if fmt != "json":
        echo(_check_summary(report))


@contextlib.contextmanager
def progress():
    """A `progress(total)` for `driver.run`: a rich progress bar on stderr for runs over
    PROGRESS_MIN_FILES source files when stderr is a terminal; else nothing is shown."""
    state: dict = {}

    def start(total: int):
        if total < PROGRESS_MIN_FILES or not sys.stderr.isatty():
            return None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

        # No refresh thread (auto_refresh=False): the run forks worker processes.
        bar = Progress("[progress.description]{task.description}", BarColumn(),
                       MofNCompleteColumn(), TimeRemainingColumn(),
                       console=Console(file=sys.stderr), transient=True, auto_refresh=False)
        bar.start()
        task = bar.add_task("sources", total=total)
        state["bar"] = bar
        last = [0.0]

        def tick() -> None:
            bar.advance(task)
            now = time.monotonic()
            if now - last[0] > 0.1 or bar.finished:
                last[0] = now
                bar.refresh()

        return tick

    try:
        yield start
    finally:
        if "bar" in state:
            state["bar"].stop()


@contextlib.contextmanager
def phases_shown(command: str):
    """While a long verify or trace runs (`graphfix.phases`): the phase it is in, on one
    line of stderr that rich redraws (spinner, `COMMAND: PHASE`, time so far) and clears at
    the end, when stderr is a terminal; nothing in a pipe or a file, where every redraw
    would stay. (The refresh thread is safe here: verify and trace start processes only by
    exec, never by fork.)"""
    from graphfix import phases

    if not sys.stderr.isatty():
        yield
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    # The line is drawn on a descriptor of its own for this terminal: once TF is imported,
    # descriptor 2 is a pipe (`foreign_output`), and sys.stderr is left as it is.
    with os.fdopen(os.dup(sys.stderr.fileno()), "w", encoding=sys.stderr.encoding or "utf-8",
                   errors="backslashreplace") as terminal:
        # (a phase names the script and its lines: shown as text, never as rich markup)
        shown = Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False),
                         TimeElapsedColumn(), console=Console(file=terminal), transient=True,
                         redirect_stdout=False, redirect_stderr=False)
        task = shown.add_task(f"{command}: starting", total=None)

        def begin(text: str) -> None:
            shown.update(task, description=f"{command}: {log_line(text)}")
            shown.refresh()  # (a phase shorter than a refresh still shows)

        with shown, phases.listening(begin):
            yield
