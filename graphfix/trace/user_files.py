"""Which files are the user's: a creation site, a run's caller, where a stopped script was,
is the innermost frame in one of them. Read by the traced child and by the parent alike
(no TF here)."""

from __future__ import annotations

import os
import site
import sysconfig
from pathlib import Path


class UserFiles:
    """Every file but the standard library's, installed packages' and graphfix's own."""

    def __init__(self):
        roots = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib",
                                                     "platlib")}
        roots.update(site.getsitepackages())
        roots.add(site.getusersitepackages())
        roots.add(str(Path(__file__).resolve().parents[1]))  # graphfix's package
        self.roots = tuple(os.path.realpath(r) + os.sep for r in roots if r)
        self.known: dict[str, str | None] = {}

    def real(self, filename: str | None) -> str | None:
        """The real path of `filename` if it is a user's file, else None."""
        if not filename:
            return None
        if filename not in self.known:
            real = os.path.realpath(filename)
            mine = (not filename.startswith("<") and os.path.isfile(real)
                    and not real.startswith(self.roots))
            self.known[filename] = real if mine else None
        return self.known[filename]

    def innermost(self, frames) -> list | None:
        """[real path, line, function] of the innermost user frame of `frames` (objects
        with `filename`, `lineno`, `name`; outermost first, a traceback's order), or
        None."""
        for frame in reversed(list(frames)):
            real = self.real(frame.filename)
            if real is not None:
                return [real, frame.lineno, frame.name]
        return None
