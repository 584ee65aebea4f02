"""The result cache of source files: a second `check` of an unchanged tree reads results
instead of parsing (the design of ruff's `.ruff_cache`).

One entry per file and run configuration, a small JSON file named by the SHA-256 of
everything the file's result depends on:

* the file's bytes and its path as given (findings carry it; update-ops names other files
  in its messages);
* the installed graphfix: its version and a hash of its Python files (graphfix and
  graphfix.transforms), so a reinstall during development starts afresh, plus the files of
  any third-party transform in use; the Python version (its parser decides what is skipped)
  and libcst's;
* the active codemods, in order, with their options;
* what the file may read of the project model: the parts of every file its imports connect
  it to, either way (`Project.context_digest`: update-ops reads another file's batch norms,
  feed-to-assign another file's variables), so a change there re-checks it.

Each file's survey, its part of the project model with it, is cached the same way (keyed by
file bytes, path and the run's configuration), so a warm run parses nothing. An entry holds
what `check` reports for the file (findings, or why it was skipped) and, where a check that
gives the fixes as text made it (`driver.run(fix_texts=True)`) for a file with a fixable
finding, the text `fix` would write; `fix` uses an entry only to skip a file known to be
clean or unreadable. Entries are written atomically; an entry that cannot be read or
understood is a miss; a folder that cannot be written turns the cache off for the run. The
cache never fails a run.

Entries no run has used for `MAX_UNUSED_DAYS` are deleted, as are older graphfix versions'
folders once emptied: a run marks the entries it reads as used (at most once a day each),
and sweeps the folder at its end, at most once a day (`.pruned` holds when it last did).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

from graphfix.findings import Finding
from graphfix.storage import make_cache_folder, write_atomically

ENTRY_FORMAT = 6  # bump when what an entry holds changes
MAX_UNUSED_DAYS = 30  # an entry no run has read or written for this long is deleted
_DAY = 24 * 3600.0


def _sha256(*parts: bytes | str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", "surrogateescape") if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "little"))  # no two part lists hash alike
        digest.update(data)
    return digest.hexdigest()


def installed_code_fingerprint(extra_files=()) -> str:
    """A hash of the installed graphfix's Python files (its transforms included) and of
    `extra_files`; ~4 ms, once per run."""
    from graphfix.registry import graphfix_code_folders

    digest = hashlib.sha256()
    for folder in graphfix_code_folders():
        for path in sorted(folder.rglob("*.py")):
            digest.update(path.relative_to(folder).as_posix().encode())
            digest.update(path.read_bytes())
    for path in sorted(set(extra_files)):
        try:
            digest.update(path.encode())
            digest.update(Path(path).read_bytes())
        except OSError:
            digest.update(b"unreadable")
    return digest.hexdigest()


# -- the cache ------------------------------------------------------------------------------


def _libcst_version() -> str:
    """The installed libcst's version, from the name of its `.dist-info` folder beside it
    (importing `importlib.metadata` alone is 35-90 ms, a tenth of a warm check; it is the
    fallback where no such folder is found)."""
    spec = importlib.util.find_spec("libcst")
    if spec is None or not spec.submodule_search_locations:
        return "unknown"
    package = Path(list(spec.submodule_search_locations)[0])
    found = sorted(package.parent.glob("libcst-*.dist-info"))
    if len(found) == 1:
        return found[0].name[len("libcst-"):-len(".dist-info")]
    from importlib import metadata

    try:
        return metadata.version("libcst")
    except metadata.PackageNotFoundError:
        return "unknown"


class SourceCache:
    """Cached results of one run's codemods, in `directory`. Open with `SourceCache.open`,
    which gives None where the folder cannot be used. Safe across forked workers."""

    def __init__(self, directory: Path, transforms: list[tuple[type, dict]]):
        import graphfix

        self.directory = directory
        self.entries = directory / graphfix.__version__
        # The run's transforms that have a source surface, with their options. Transforms,
        # not their codemods: a run whose files are all cached never imports libcst.
        self.transforms = [(t, o) for t, o in transforms if t.codemod is not None]
        from graphfix.registry import graphfix_code_folders

        own = graphfix_code_folders()
        third_party = set()
        for transform, _ in self.transforms:  # third-party transforms' code is in the key
            for source in _code_files(transform):
                if not any(folder in source.parents for folder in own):
                    third_party.add(str(source))
        self.code_key = _sha256(str(ENTRY_FORMAT), graphfix.__version__,
                                installed_code_fingerprint(third_party), sys.version,
                                _libcst_version())
        options = [[t.name, _codemod_name(t), json.dumps(o, sort_keys=True, default=repr)]
                   for t, o in self.transforms]
        self.run_key = _sha256(self.code_key, json.dumps(options))
        self.writable = True

    @classmethod
    def open(cls, directory: Path, transforms: list[tuple[type, dict]]) -> SourceCache | None:
        """The cache in `directory` (created, with a CACHEDIR.TAG and a .gitignore of `*`),
        or None if it cannot be created or written."""
        try:
            make_cache_folder(directory)
            cache = cls(directory, transforms)
            cache.entries.mkdir(exist_ok=True)
            if not os.access(cache.entries, os.W_OK | os.X_OK):
                return None
        except OSError:
            return None
        return cache

    # -- keys -----------------------------------------------------------------------------

    def result_key(self, label: str, raw: bytes, code: str | None, work=(),
                   context: str = "") -> str | None:
        """The key of one file's result, given its bytes, the code the codemods see in them
        (None: none, it is skipped before any runs), the names of the transforms whose
        codemods run on it (`work`) and what it reads of the project model (`context`:
        `Project.context_digest`)."""
        return _sha256("result", self.run_key, label, hashlib.sha256(raw).digest(),
                       json.dumps(list(work) if code is not None else []), context)

    def survey_key(self, label: str, raw: bytes) -> str:
        """The key of what the pre-checks said of a file, its project part included."""
        return _sha256("survey", self.run_key, label, hashlib.sha256(raw).digest())

    # -- entries --------------------------------------------------------------------------

    def _path(self, key: str) -> Path:
        return self.entries / key[:2] / key[2:]

    def _read(self, key: str) -> dict | None:
        path = self._path(key)
        try:
            with open(path, "rb") as handle:
                data = handle.read()
                modified = os.fstat(handle.fileno()).st_mtime
            doc = json.loads(data)
        except (OSError, ValueError):
            return None
        if not (isinstance(doc, dict) and doc.get("key") == key):
            return None
        if time.time() - modified > _DAY:  # used: `prune` keeps it (once a day is enough)
            try:
                os.utime(path)
            except OSError:
                pass
        return doc

    def _write(self, key: str, doc: dict) -> None:
        if not self.writable:
            return
        path = self._path(key)
        try:
            path.parent.mkdir(exist_ok=True)
            write_atomically(path, json.dumps({"key": key, **doc}).encode())
        except (OSError, ValueError):
            self.writable = False  # a full disk, a folder gone: stop trying, keep running

    def load_result(self, key: str) -> CachedResult | None:
        """A file's cached result; None on a miss (or an entry that does not make sense)."""
        doc = self._read(key)
        if doc is None:
            return None
        try:
            skipped = doc["skipped"]
            findings = [Finding.as_recorded(f) for f in doc["findings"]]
        except Exception:  # a hand-edited or truncated entry: a miss
            return None
        fixed = doc.get("fixed")
        if not (skipped is None or isinstance(skipped, str)) or not (
                fixed is None or isinstance(fixed, str)):
            return None
        return CachedResult(findings, skipped, fixed)

    def store_result(self, key: str, findings: list[Finding], skipped: str | None,
                     fixed: str | None = None) -> None:
        """`fixed`: the text `fix` would write for the file, where it was made (a file with
        a fixable finding, checked with the fixes as text)."""
        self._write(key, {"findings": [f.to_json() for f in findings], "skipped": skipped,
                          "fixed": fixed})

    def load_survey(self, key: str) -> dict | None:
        """What the pre-checks said of a file (as JSON); None on a miss."""
        doc = self._read(key)
        survey = doc.get("survey") if doc is not None else None
        return survey if isinstance(survey, dict) else None

    def store_survey(self, key: str, survey: dict) -> None:
        self._write(key, {"survey": survey})

    # -- pruning --------------------------------------------------------------------------

    def prune(self, now: float | None = None) -> int:
        """Delete the entries (of any graphfix version) that no run has used for
        `MAX_UNUSED_DAYS`, and other versions' folders left empty; at most once a day.
        Return how many entries went. Never fails: what cannot be deleted stays."""
        now = time.time() if now is None else now
        marker = self.directory / ".pruned"
        try:
            if now - marker.stat().st_mtime < _DAY:
                return 0
        except FileNotFoundError:
            pass
        except OSError:
            return 0
        try:
            marker.touch()
            os.utime(marker, (now, now))
        except OSError:
            return 0  # a cache no run can mark would be swept by every run
        cutoff = now - MAX_UNUSED_DAYS * _DAY
        removed = 0
        for version in _listed(self.directory, folders=True):
            for shard in _listed(version.path, folders=True):
                for entry in _listed(shard.path, folders=False):
                    try:
                        if entry.stat().st_mtime < cutoff:
                            os.unlink(entry.path)
                            removed += 1
                    except OSError:
                        continue
                if version.path != str(self.entries):  # (this run's shards stay: it writes)
                    _remove_if_empty(shard.path)
            if version.path != str(self.entries):
                _remove_if_empty(version.path)
        return removed


def _listed(path, *, folders: bool) -> list[os.DirEntry]:
    """The folders (or the files) in `path`, not following links; none if it cannot be read."""
    try:
        with os.scandir(path) as entries:
            return [e for e in entries if (e.is_dir(follow_symlinks=False) if folders
                                           else e.is_file(follow_symlinks=False))]
    except OSError:
        return []


def _remove_if_empty(path: str) -> None:
    try:
        os.rmdir(path)
    except OSError:
        pass


class CachedResult:
    """What `check` found in one file, from the cache, and the text `fix` would write for
    it (`fixed`: None where it was not made)."""

    def __init__(self, findings: list[Finding], skipped: str | None,
                 fixed: str | None = None):
        self.findings, self.skipped, self.fixed = findings, skipped, fixed

    @property
    def nothing_to_fix(self) -> bool:
        """No finding (so no codemod changes the file), or a file skipped before any codemod
        ran (unreadable, not Python 3): `fix` would leave it as it is, for the same reason."""
        return self.skipped is not None or not self.findings


def _codemod_name(transform: type) -> str:
    """Which codemod a transform runs, named without importing it (nor libcst)."""
    codemod = transform.codemod
    if isinstance(codemod, str):
        module, _, name = codemod.partition(":")
        return f"{importlib.util.resolve_name(module, transform.__module__)}.{name}"
    return f"{codemod.__module__}.{codemod.__qualname__}"


def _code_files(transform: type) -> list[Path]:
    """The files of a transform and of its codemod's module (found, not imported)."""
    import inspect  # (here: a run over graphs, which finds its cache folder, never needs it)

    files = []
    try:
        files.append(Path(inspect.getfile(transform)).resolve())
    except (TypeError, OSError):
        pass
    module = _codemod_name(transform).rpartition(".")[0]
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin and spec.origin not in ("built-in", "frozen"):
        files.append(Path(spec.origin).resolve())
    return files
