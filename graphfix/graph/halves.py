"""Work aside: forked copies of this process make bytes from the memory they share with it,
so that a second core does half of a long job (a large graph's nodes read field by field
in pure Python, seconds on a million nodes; its serialization).

Forking is allowed only where graphfix owns the process (the `graphfix` command calls
`allow()`, unless told `--jobs 1`; a library does not fork its host's process), and only
where it is safe and pays: on Linux, with another CPU to run on, and with no other thread
in the process (a fork copies only the calling thread, so another thread's locks would
stay held in the copy). Elsewhere `start` returns None and the caller does the work
itself. A child lives only as long as the call that forked it, so it always sees the data
as the caller does.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Callable, Iterator, TypeVar

Part = TypeVar("Part")

# Graphs are read and written in halves from this many nodes: reading a node costs about
# 3 us here (serializing one, 1 us), a fork 1-10 ms.
MIN_NODES = 10_000

_allowed = False
_ending: list[int] = []  # children that sent everything, not yet reaped
_SIZE_BYTES = 8  # a child sends the size of its bytes once it has made them, then them
_PIECE = 1 << 20


def allow(allowed: bool = True) -> None:
    """Let `start` fork this process from now on, or not (the command line owns it)."""
    global _allowed
    _allowed = allowed


def _can_fork() -> bool:
    if not _allowed or sys.platform != "linux":
        return False
    try:
        return len(os.sched_getaffinity(0)) > 1 and len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


class Child:
    """A forked child making bytes. `size()` waits until it has made them (None if it
    failed), `pieces()` then reads them; `stop()` ends it, whatever it is doing."""

    def __init__(self, pid: int, pipe):
        self._pid = pid
        self._pipe = pipe
        self._size: int | None = None

    def size(self) -> int | None:
        head = self._pipe.read(_SIZE_BYTES)
        if len(head) != _SIZE_BYTES:
            self.stop()
            return None
        self._size = int.from_bytes(head, "little")
        return self._size

    def pieces(self) -> Iterator[bytes]:
        """The bytes, in pieces of a MiB; OSError if the child died sending them."""
        left = self._size
        try:
            while left:
                piece = self._pipe.read(min(left, _PIECE))
                if not piece:
                    raise OSError(f"a child process ended {left} bytes short")
                left -= len(piece)
                yield piece
            self._let_go()
        finally:
            self.stop()

    def result(self) -> bytes | None:
        """The bytes whole (None if the child failed)."""
        size = self.size()
        if size is None:
            return None
        data = self._pipe.read(size)
        if len(data) != size:
            self.stop()
            return None
        self._let_go()
        return data

    def _let_go(self) -> None:
        """The child sent everything and ends by itself: not waited for here (a large
        process takes milliseconds to tear down); `start` reaps it later."""
        self._pipe.close()
        _ending.append(self._pid)
        self._pid = 0

    def stop(self) -> None:
        """End the child, whatever it is doing, and wait for it to end."""
        if not self._pid:
            return
        self._pipe.close()
        try:
            os.kill(self._pid, signal.SIGKILL)
            os.waitpid(self._pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass  # (reaped already: SIGCHLD ignored by whoever started this process)
        self._pid = 0


def _reap_ended() -> None:
    """Reap the children let go that have ended (no zombie outlives the next fork)."""
    for pid in list(_ending):
        try:
            ended, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            ended = pid
        if ended:
            _ending.remove(pid)


def start(make: Callable[[], bytes]) -> Child | None:
    """Run `make()` in a forked child; None where this process may not fork (see the
    module docstring). The caller must `stop()` the child or read it to the end."""
    if not _can_fork():
        return None
    _reap_ended()
    reading_end, writing_end = os.pipe()
    pid = os.fork()
    if pid:
        os.close(writing_end)
        return Child(pid, os.fdopen(reading_end, "rb"))
    # The child: it never returns into the caller's code, whatever happens.
    status = 1
    try:
        os.close(reading_end)
        data = make()
        with os.fdopen(writing_end, "wb") as pipe:
            pipe.write(len(data).to_bytes(_SIZE_BYTES, "little"))
            pipe.write(data)
        status = 0
    finally:
        os._exit(status)


def in_halves(count: int, read: Callable[[int, int], Part], to_bytes: Callable[[Part], bytes],
              from_bytes: Callable[[bytes], Part], *, min_count: int = 2) -> list[Part]:
    """`read(start, stop)` over `range(count)`: `[read(0, count)]`, or, from `min_count`
    on and where this process may fork, `[read(0, half), read(half, count)]`, the second
    half read by a child at the same time and handed over through `to_bytes` and
    `from_bytes`."""
    half = count // 2
    child = start(lambda: to_bytes(read(half, count))) if count >= max(min_count, 2) else None
    if child is None:
        return [read(0, count)]
    try:
        first = read(0, half)
    except BaseException:  # (Ctrl-C, a bug): the child must not outlive the call
        child.stop()
        raise
    data = child.result()
    return [first, read(half, count) if data is None else from_bytes(data)]
