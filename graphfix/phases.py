"""The phases of a long run, as each begins: verify's TensorFlow import, graph import,
placement check and each step; a trace's script and each of its session runs.

Code that runs long says `phase("importing TensorFlow")`; the command line listens
(`listening`) only where a person watches, on a terminal (`graphfix.cli.output`). With no
listener a phase costs one call."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

_listeners: list[Callable[[str], None]] = []


def phase(text: str) -> None:
    """Say that the phase `text` begins."""
    for listener in _listeners:
        listener(text)


def listened() -> bool:
    """Whether anyone listens (a trace's parent reads its child's phases only then)."""
    return bool(_listeners)


@contextlib.contextmanager
def listening(listener: Callable[[str], None]) -> Iterator[None]:
    """Call `listener(text)` for each phase begun inside the block."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)
