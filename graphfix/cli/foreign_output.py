"""What others write to graphfix's standard output and standard error while a command runs
TensorFlow: TF's C++ log lines, and the graphs verify runs, whose `Print` ops write the
graph's own strings (untrusted, like its node names) to descriptor 1 or 2. No format of
graphfix escaped those, and on stdout they would come before a `--format json` document.

`divert`, run just before TF is imported (`tf_runtime.before_import`), makes descriptors 1
and 2 pipes: each line written to either reaches standard error through the text format's
boundary (`output.echo`, which makes it visible). graphfix's own `sys.stdout` and
`sys.stderr` are reopened on the real ones, so stdout holds graphfix's report alone and a
terminal keeps its progress display. What TF writes through Python goes to `sys.stderr`,
graphfix's own, the real descriptor: so while diverted, the `logging` records of TF and absl
(`WARNING:tensorflow:...`, which can name a node, a collection or a file) and the warnings
`warnings.warn` shows pass through the same boundary, a line at a time (`_PythonOutput`).
`restore` puts the descriptors and the Python-level routes back and waits for the last
lines; `main` calls it as the command ends.
"""

from __future__ import annotations

import io
import logging
import os
import sys
import threading
import warnings

from graphfix.cli.output import echo, guarded

_FLUSH_WAIT = 5.0  # seconds `restore` waits for a pipe's last lines


class _Diverted:
    """The real descriptors (duplicated), graphfix's streams before, the readers, the
    Python-level routes."""

    def __init__(self, real: dict[int, int], streams: tuple, readers: list[threading.Thread],
                 python: _PythonOutput):
        self.real, self.streams, self.readers, self.python = real, streams, readers, python


class _PythonOutput(logging.Handler):
    """What TF and the libraries it brings write through Python, passed on like a
    descriptor's lines. On the root logger: TF's `get_logger` then adds no handler of its
    own (one bound to the `sys.stderr` of its first call, the real descriptor), and its
    records, absl's, and any other library's reach `emit`, formatted as TF's own handler
    formats them. `warnings.showwarning` likewise, for a warning shown on standard error."""

    def __init__(self):
        super().__init__()
        self.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
        self._showwarning = None

    def install(self) -> None:
        logging.getLogger().addHandler(self)
        self._showwarning = warnings.showwarning
        warnings.showwarning = self.show_warning

    def uninstall(self) -> None:
        logging.getLogger().removeHandler(self)
        if warnings.showwarning == self.show_warning:  # (not replaced since by another)
            warnings.showwarning = self._showwarning

    def emit(self, record: logging.LogRecord) -> None:
        try:
            _pass_on_text(self.format(record))
        except Exception:
            self.handleError(record)

    def show_warning(self, message, category, filename, lineno, file=None, line=None):
        """`warnings.showwarning`, its text passed on; one asked into a file of its own
        written there as Python writes it."""
        if file is not None:
            self._showwarning(message, category, filename, lineno, file, line)
            return
        _pass_on_text(warnings.formatwarning(message, category, filename, lineno, line))


_diverted: _Diverted | None = None


def divert() -> None:
    """Descriptors 1 and 2 to pipes passed on to standard error a line at a time, escaped;
    `sys.stdout` and `sys.stderr` onto the real ones. Nothing where they are diverted
    already, or where graphfix's streams are not descriptors 1 and 2 (an embedding
    program's, a test's capture)."""
    global _diverted
    if _diverted is not None:
        return
    try:
        if (sys.stdout.fileno(), sys.stderr.fileno()) != (1, 2):
            return
        sys.stdout.flush()
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return
    real = {fd: os.dup(fd) for fd in (1, 2)}
    readers = []
    for fd in (1, 2):
        read_end, write_end = os.pipe()
        os.dup2(write_end, fd)
        os.close(write_end)
        readers.append(threading.Thread(target=_pass_on, args=(read_end,), daemon=True,
                                        name=f"graphfix-foreign-output-{fd}"))
    streams = (sys.stdout, sys.stderr)
    sys.stdout = guarded(_reopened(sys.stdout, real[1]))
    sys.stderr = _reopened(sys.stderr, real[2])
    python = _PythonOutput()
    python.install()
    _diverted = _Diverted(real, streams, readers, python)
    for reader in readers:
        reader.start()


def restore() -> None:
    """The descriptors, streams and Python-level routes (logging, warnings) as `divert`
    found them, once the lines written before have been passed on. Nothing where they are
    not diverted."""
    global _diverted
    if _diverted is None:
        return
    diverted, _diverted = _diverted, None
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # (StdoutLost: the run has said so already)
            pass
    for fd, real in diverted.real.items():
        os.dup2(real, fd)  # (the pipe's last writer gone: its reader sees the end)
    for reader in diverted.readers:
        reader.join(_FLUSH_WAIT)
    diverted.python.uninstall()
    sys.stdout, sys.stderr = diverted.streams
    for real in diverted.real.values():
        os.close(real)


def _reopened(stream, fd: int):
    """A text stream like `stream` (encoding, errors, buffering) writing to `fd`."""
    return io.TextIOWrapper(io.FileIO(fd, "w", closefd=False),
                            encoding=getattr(stream, "encoding", None) or "utf-8",
                            errors=getattr(stream, "errors", None) or "backslashreplace",
                            line_buffering=getattr(stream, "line_buffering", True))


def _pass_on(read_end: int) -> None:
    with open(read_end, "rb") as pipe:
        for raw in pipe:
            _pass_on_text(raw.decode("utf-8", "surrogateescape"))


def _pass_on_text(text: str) -> None:
    """`text`, a line at a time (split where a descriptor's reader splits: at `\\n`), on
    standard error through the text format's boundary."""
    for line in text.removesuffix("\n").split("\n"):
        echo(line.removesuffix("\r"), err=True)
