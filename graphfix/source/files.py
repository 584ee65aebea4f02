"""Which sources a directory holds for graphfix: `*.py` and `*.ipynb`, recursively, without
hidden folders (`.ipynb_checkpoints` too), virtual environments, node_modules, build output,
what `.gitignore` ignores, and what `--exclude GLOB` (or `exclude` in `[tool.graphfix]`)
names."""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import Iterable

NOTEBOOK_SUFFIX = ".ipynb"
SOURCE_SUFFIXES = (".py", NOTEBOOK_SUFFIX)  # Python files; Jupyter notebooks
SKIP_DIRS = frozenset({"node_modules", "__pycache__", "venv", "site-packages", "build", "dist"})


def excluded(relative: str, patterns: Iterable[str], absolute: str | None = None) -> bool:
    """Whether a path (relative to the directory given, `/`-separated) matches a glob: the
    whole relative path, or its last part (`tests/*`, `*_pb2.py`, `legacy`). A glob that
    starts with `/` is matched against the `absolute` path instead (how `exclude` of a
    pyproject.toml is anchored at its folder)."""
    name = relative.rstrip("/").rsplit("/", 1)[-1]
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        if pattern.startswith("/"):
            if absolute is not None and fnmatch.fnmatchcase(absolute, pattern):
                return True
            continue
        if pattern.startswith("./"):
            pattern = pattern[2:]
        if fnmatch.fnmatchcase(relative, pattern) or fnmatch.fnmatchcase(name, pattern):
            return True
    return False


def anchored(patterns: Iterable[str], folder: Path) -> tuple[str, ...]:
    """Globs of a configuration file in `folder`: those naming a path (`gen/*`) are made
    absolute there, so they mean the same from any working directory; names stay."""
    out = []
    for pattern in patterns:
        bare = pattern.rstrip("/").removeprefix("./")
        if "/" in bare and not bare.startswith(("/", "*")):
            out.append(f"{folder.resolve().as_posix()}/{bare}")
        else:
            out.append(pattern)
    return tuple(out)


def walk_sources(root: Path, excludes: Iterable[str] = (), *, gitignore: bool = True
                 ) -> list[Path]:
    """Every Python file and notebook under `root` graphfix should read, sorted; OSError
    (naming it) for a sub-directory that cannot be listed, rather than leaving it out."""
    excludes = tuple(excludes)
    top = root.resolve().as_posix().rstrip("/") + "/"
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, onerror=_raise):
        base = Path(dirpath)
        rel_dir = base.relative_to(root).as_posix()
        prefix = "" if rel_dir == "." else rel_dir + "/"
        dirnames[:] = sorted(
            d for d in dirnames
            if not d.startswith(".") and d not in SKIP_DIRS
            and not os.path.exists(base / d / "pyvenv.cfg")  # (False if d cannot be read)
            and not excluded(prefix + d, excludes, top + prefix + d)
        )
        for name in sorted(filenames):
            if name.endswith(SOURCE_SUFFIXES) and not excluded(prefix + name, excludes,
                                                     top + prefix + name):
                found.append(base / name)
    if gitignore and found:
        ignored = git_ignored(root, found)
        found = [p for p in found if p not in ignored]
    return sorted(found)


def _raise(error: OSError) -> None:
    raise error


def git_ignored(root: Path, paths: list[Path]) -> set[Path]:
    """Those of `paths` that git ignores, asked once (nothing if `root` is not in a git work
    tree, or git is not installed). Tracked files are never ignored."""
    import shutil
    import subprocess  # here: a run over graphs alone never needs them

    git = shutil.which("git")
    if git is None:
        return set()
    relative = {p.relative_to(root).as_posix(): p for p in paths}
    try:
        inside = subprocess.run([git, "-C", str(root), "rev-parse", "--is-inside-work-tree"],
                                capture_output=True, text=True, timeout=60)
        if inside.returncode != 0 or inside.stdout.strip() != "true":
            return set()
        answer = subprocess.run([git, "-C", str(root), "check-ignore", "--stdin", "-z"],
                                input="\0".join(relative).encode() + b"\0",
                                capture_output=True, timeout=300)
    except (OSError, subprocess.SubprocessError):
        return set()
    if answer.returncode not in (0, 1):  # 1: nothing ignored; else git could not tell
        return set()
    names = answer.stdout.decode(errors="surrogateescape").split("\0")
    return {relative[n] for n in names if n in relative}
