"""What others write to graphfix's standard output and standard error while a command runs
TensorFlow: TF's C++ log lines, and the graphs verify runs, whose `Print` ops write the
graph's own strings (untrusted, like its node names) to descriptor 1 or 2. No format of
graphfix escaped those, and on stdout they would come before a `--format json` document.

`divert`, run just before TF is imported (`tf_runtime.before_import`), makes descriptors 1
and 2 pipes: each line written to either reaches standard error through the text format's
boundary (`output.echo`, which makes it visible). graphfix's own `sys.stdout` and
`sys.stderr` are reopened on the real ones, so stdout holds graphfix's report alone and a
terminal keeps its progress display. `restore` puts the descriptors back and waits for the
last lines; `main` calls it as the command ends.
"""

from __future__ import annotations

import io
import os
import sys
import threading

from graphfix.cli.output import echo, guarded

_FLUSH_WAIT = 5.0  # seconds `restore` waits for a pipe's last lines


class _Diverted:
    """The real descriptors (duplicated), graphfix's streams before, the readers."""

    def __init__(self, real: dict[int, int], streams: tuple, readers: list[threading.Thread]):
        self.real, self.streams, self.readers = real, streams, readers


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
    _diverted = _Diverted(real, streams, readers)
    for reader in readers:
        reader.start()


def restore() -> None:
    """The descriptors and streams as `divert` found them, once the lines written before
    have been passed on. Nothing where they are not diverted."""
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
            echo(raw.decode("utf-8", "surrogateescape").rstrip("\n").removesuffix("\r"),
                 err=True)
