"""Files graphfix writes: staged beside their targets and renamed into place together
(`StagedWrites`, `write_atomically`), each target checked first (`writable_target`); cache
folders by `make_cache_folder`.

Graph outputs, fixed sources, the JSON report, source cache entries and the kernel registry
snapshot are all written here, so each is whole or absent, never half-written, and no
temporary file outlives the run however it ends (an error, Ctrl-C, SIGTERM). What a write
never does: replace a symlink (it writes through to the file the link names, keeping the
link), rewrite a read-only file (unless forced), or replace a FIFO, device or socket. Both
the graph side and the source side import this module; it imports only the standard library.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import stat
import threading
from pathlib import Path
from typing import Callable, Iterable, Iterator

CACHEDIR_TAG = ("Signature: 8a477f597d28d172789f06886806bc55\n"
                "# This file is a cache directory tag created by graphfix.\n"
                "# For information about cache directory tags see https://bford.info/cachedir/\n")

# The signals that end a run in an orderly way: while a temporary file is made, or the staged
# files are renamed into place or removed, they wait (they are delivered right after).
_STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class RefusedWrite(OSError):
    """A target graphfix will not write; str() is one line naming the file and why."""

    def __init__(self, path: str | os.PathLike, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = Path(path), problem

    def __str__(self) -> str:
        return self.args[0]


def file_kind(mode: int) -> str | None:
    """What a file of `mode` is, if not a regular file or a directory ("a FIFO", ...)."""
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return None


def path_problem(path: str | os.PathLike) -> str | None:
    """Why `path` cannot be read as an input without opening it (which would block on a
    FIFO): a symlink loop, a missing file, a name too long, not a regular file; else None."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return _stat_problem(path, exc)
    kind = file_kind(mode)
    return f"not a regular file ({kind})" if kind else None


def _stat_problem(path, exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    if exc.errno == errno.ENOENT:
        if os.path.islink(path):
            return f"symlink to a missing file ({os.readlink(path)})"
        return "no such file or directory"
    if exc.errno == errno.ENAMETOOLONG:
        return "file name longer than this file system allows"
    return exc.strerror or str(exc)


def writable_target(path: str | os.PathLike, *, force: bool = False) -> Path:
    """The file a write to `path` changes, or RefusedWrite naming `path` and the reason.

    A symlink is written through: the file it names is rewritten and the link kept (a link
    to a missing file, or a loop, is refused). An existing target must be a regular file
    with a write permission bit (mode bits, so that root is refused too), unless `force`;
    its directory must exist and be writable; its name must fit the file system.
    """
    path = Path(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise RefusedWrite(path, f"symlink to a missing file ({os.readlink(path)})") from None
        target, info = path, None
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:
            raise RefusedWrite(path, f"cannot write: {path.parent} is not a directory") from None
        raise RefusedWrite(path, f"cannot write: {_stat_problem(path, exc)}") from None
    else:
        target = Path(os.path.realpath(path)) if os.path.islink(path) else path
    if info is not None:
        if stat.S_ISDIR(info.st_mode):
            raise RefusedWrite(path, "cannot write: is a directory")
        kind = file_kind(info.st_mode)
        if kind:
            raise RefusedWrite(path, f"cannot write: not a regular file ({kind})")
        if not force and (not info.st_mode & 0o222 or not os.access(target, os.W_OK)):
            raise RefusedWrite(path, "read-only file (add --force to rewrite it)")
    _check_directory(path, target.parent if str(target.parent) else Path("."), target.name)
    return target


def _check_directory(shown: Path, parent: Path, name: str) -> None:
    """RefusedWrite naming `shown` unless `name` can be made in `parent`."""
    try:
        is_dir = parent.is_dir()
        name_max = os.pathconf(parent, "PC_NAME_MAX") if is_dir else 255
    except OSError as exc:
        raise RefusedWrite(shown, f"cannot write: {_stat_problem(parent, exc)}") from None
    if not is_dir:
        raise RefusedWrite(shown, f"cannot write: directory {parent} does not exist")
    if len(os.fsencode(name)) > name_max:
        raise RefusedWrite(shown, f"cannot write: file name longer than this file system "
                           f"allows ({name_max} bytes)")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise RefusedWrite(shown, "cannot write: permission denied")


@contextlib.contextmanager
def stopping_signals_deferred() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP wait until the block ends (then take effect): for the
    steps that must not stop half-way, making a temporary and recording it, renaming the
    staged files into place, removing them."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPPING_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _stop(signum, frame) -> None:
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def terminate_as_exit() -> Iterator[None]:
    """SIGTERM and SIGHUP, whose default ends the process on the spot, raise SystemExit
    (128 + the signal) in the block, so that it cleans up first: while files are staged
    (they are removed), while a script is traced (`graphfix.trace`: its processes end).
    (Only the main thread can set handlers; a handler someone else set is kept.)"""
    changed = []
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(signum) is signal.SIG_DFL:
                changed.append((signum, signal.signal(signum, _stop)))
    try:
        yield
    finally:
        for signum, handler in changed:
            signal.signal(signum, handler)


class StagedWrites:
    """Files and directories written beside their targets, then renamed into place together
    by `commit`; on leaving the `with` block every temporary still staged is removed, so an
    error or an interruption before `commit` writes nothing and leaves nothing.

    `commit` renames one target after another with the stopping signals deferred: only a
    crash of the machine or SIGKILL can leave some targets new and others old.
    """

    def __init__(self) -> None:
        self._files: list[tuple[str, Path]] = []  # (temporary, target)
        self._directories: list[tuple[str, Path]] = []
        self._signals = terminate_as_exit()

    def __enter__(self) -> StagedWrites:
        self._signals.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.discard()
        finally:
            self._signals.__exit__(*exc)

    def add(self, target: Path, data: bytes | Iterable[bytes]) -> None:
        """Write `data` (bytes, or pieces of bytes in order) to a temporary beside `target`
        (a real path: see `writable_target`), to replace it at `commit`. The new file keeps
        the mode of the file it replaces (a new one gets 0o644). OSError if it cannot be
        written (its temporary is removed with the others when the `with` block ends)."""
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except OSError:
            mode = 0o644
        with stopping_signals_deferred():
            temporary, descriptor = _new_temporary(target, directory=False)
            self._files.append((temporary, target))
        with os.fdopen(descriptor, "wb", buffering=1 << 20) as handle:
            if isinstance(data, bytes):
                handle.write(data)
            else:
                handle.writelines(data)
        os.chmod(temporary, mode)

    def add_directory(self, target: Path, fill: Callable[[Path], None]) -> None:
        """A new directory beside `target`, filled by `fill(directory)`, to take `target`'s
        place at `commit`. Entries of an existing `target` that the new directory does not
        have are moved into it: a directory is never emptied of files graphfix did not
        write."""
        with stopping_signals_deferred():
            temporary, _ = _new_temporary(target, directory=True)
            self._directories.append((temporary, target))
        fill(Path(temporary))

    def commit(self) -> None:
        """Rename every staged file and directory into place; OSError naming the target
        that failed (those before it are in place, the rest removed)."""
        with stopping_signals_deferred():
            try:
                while self._files:
                    temporary, target = self._files[0]
                    os.replace(temporary, target)
                    self._files.pop(0)
                while self._directories:
                    temporary, target = self._directories[0]
                    _replace_directory(Path(temporary), target)
                    self._directories.pop(0)
            except OSError as exc:
                raise OSError(exc.errno, exc.strerror, str(target)) from None

    def discard(self) -> None:
        """Remove every temporary still staged."""
        with stopping_signals_deferred():
            for temporary, _ in self._files:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
            for temporary, _ in self._directories:
                shutil.rmtree(temporary, ignore_errors=True)
            self._files.clear()
            self._directories.clear()


def _replace_directory(new: Path, target: Path) -> None:
    """Put `new` in `target`'s place, carrying over the entries only the old one has; the
    old entries `new` replaces are removed last."""
    if not target.exists():
        os.replace(new, target)
        return
    for entry in target.iterdir():
        if not os.path.lexists(new / entry.name):
            os.replace(entry, new / entry.name)
    old, _ = _new_temporary(target, directory=True)
    os.rmdir(old)
    os.replace(target, old)
    os.replace(new, target)
    shutil.rmtree(old, ignore_errors=True)


def _new_temporary(target: Path, *, directory: bool) -> tuple[str, int | None]:
    """A new file (opened for writing: its descriptor) or directory in `target`'s directory
    (so the rename stays on one file system), named after it: `.NAME.1a2b3c4d.tmp` (a long
    NAME shortened, so that the temporary's name fits wherever `target`'s does)."""
    parent = target.parent if str(target.parent) else Path(".")
    stem = os.fsdecode(os.fsencode(target.name)[:120])
    while True:
        temporary = os.path.join(parent, f".{stem}.{os.urandom(4).hex()}.tmp")
        try:
            if directory:
                os.mkdir(temporary, 0o755)
                return temporary, None
            return temporary, os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue


def write_atomically(path: str | os.PathLike, data: bytes | Iterable[bytes]) -> None:
    """Write `data` (bytes, or pieces of bytes written in order) to `path` through a
    temporary file beside it and a rename; OSError if it cannot be written (RefusedWrite
    where `writable_target` refuses it), and then no temporary file is left.

    Atomic against graphfix failing or being killed: `path` holds the old bytes or the new,
    never part of them. A rewritten file keeps its permissions; a new one gets 0o644. Not
    flushed to the disk (no fsync, as ruff and black do not): that guards against the
    machine crashing and costs more than writing a large graph.
    """
    target = writable_target(path, force=True)
    with StagedWrites() as staged:
        staged.add(target, data)
        staged.commit()


def make_cache_folder(directory: Path) -> None:
    """Create `directory` (and its parents) as a cache folder: with a CACHEDIR.TAG (backup
    tools skip it) and a .gitignore of `*` (git ignores it). OSError if it cannot be."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in (("CACHEDIR.TAG", CACHEDIR_TAG),
                       (".gitignore", "# Created by graphfix.\n*\n")):
        if not (directory / name).exists():
            write_atomically(directory / name, text.encode())
