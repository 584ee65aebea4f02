"""Files graphfix writes: each through `write_atomically`, cache folders by `make_cache_folder`.

Graph outputs, fixed sources, the JSON report, source cache entries and the kernel registry
snapshot are all written here, so each is whole or absent, never half-written. Both the
graph side and the source side import this module; it imports only the standard library.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterable

CACHEDIR_TAG = ("Signature: 8a477f597d28d172789f06886806bc55\n"
                "# This file is a cache directory tag created by graphfix.\n"
                "# For information about cache directory tags see https://bford.info/cachedir/\n")


def write_atomically(path: str | os.PathLike, data: bytes | Iterable[bytes]) -> None:
    """Write `data` (bytes, or pieces of bytes written in order) to `path` through a
    temporary file beside it and a rename; OSError if it cannot be written, and then no
    temporary file is left.

    Atomic against graphfix failing or being killed: `path` holds the old bytes or the new,
    never part of them. A rewritten file keeps its permissions; a new one gets 0o644. Not
    flushed to the disk (no fsync, as ruff and black do not): that guards against the
    machine crashing and costs more than writing a large graph.
    """
    path = Path(path)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mode = 0o644
    temporary, descriptor = _temporary_beside(path)
    try:
        with os.fdopen(descriptor, "wb", buffering=1 << 20) as handle:
            if isinstance(data, bytes):
                handle.write(data)
            else:
                handle.writelines(data)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _temporary_beside(path: Path) -> tuple[str, int]:
    """A new file in `path`'s directory (so the rename stays on one file system), opened for
    writing: (its path, its descriptor)."""
    while True:
        temporary = os.path.join(path.parent, f".{path.name}.{os.urandom(4).hex()}.tmp")
        try:
            return temporary, os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue


def make_cache_folder(directory: Path) -> None:
    """Create `directory` (and its parents) as a cache folder: with a CACHEDIR.TAG (backup
    tools skip it) and a .gitignore of `*` (git ignores it). OSError if it cannot be."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in (("CACHEDIR.TAG", CACHEDIR_TAG),
                       (".gitignore", "# Created by graphfix.\n*\n")):
        if not (directory / name).exists():
            write_atomically(directory / name, text.encode())
