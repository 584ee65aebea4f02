"""`[tool.graphfix]` in `pyproject.toml`: a project's own defaults for check and fix.

    [tool.graphfix]
    only = ["variables-to-cpu", "update-ops"]   # or: disable = ["feed-to-assign"]
    exclude = ["*_pb2.py", "third_party"]
    target-devices = "/gpu:0,/gpu:1"              # or a list
    cache-dir = ".cache/graphfix"                 # default: .graphfix_cache beside this file
    [tool.graphfix.set]
    "variables-to-cpu.scope" = "no-kernel"

The nearest `pyproject.toml` with a `[tool.graphfix]` table, looking upward from the first
path given (or the working directory), is the one read. Its `exclude` globs that name a path
(`gen/*`) are relative to its own folder, from whatever folder graphfix is run; a bare name
(`*_pb2.py`, `legacy`) matches at any depth. Options given on the command line
override the file's (`--only` its `only` and `disable`, `--exclude` its `exclude`,
`--target-devices` its `target-devices`, `--set NAME.key` that one key, `--cache-dir` or
GRAPHFIX_CACHE_DIR its `cache-dir`, which is relative to the file's folder).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

KEYS = ("only", "disable", "exclude", "target-devices", "set", "cache-dir", "severity")
CACHE_DIR_NAME = ".graphfix_cache"  # the cache folder's name, in the project root
PROJECT_MARKERS = ("pyproject.toml", ".git")


def project_root(paths: list[str]) -> Path:
    """Where the default cache folder goes: the nearest folder holding a pyproject.toml or
    .git at or above the first path given; else the working directory (as ruff does)."""
    # (realpath: a symlink loop given is the run's error to report, not a RuntimeError here)
    start = Path(os.path.realpath(paths[0])) if paths else Path.cwd()
    if not start.is_dir():
        start = start.parent
    for folder in (start, *start.parents):
        if any((folder / marker).exists() for marker in PROJECT_MARKERS):
            return folder
    return Path.cwd()


class ConfigError(ValueError):
    """A `[tool.graphfix]` table graphfix cannot use; str() is one line naming the file."""


class Config:
    def __init__(self, path: Path | None = None, only: list[str] | None = None,
                 disable: list[str] | None = None, exclude: list[str] | None = None,
                 target_devices: str | None = None,
                 settings: dict[str, dict[str, Any]] | None = None,
                 cache_dir: Path | None = None):
        self.path = path
        self.only = only
        self.disable = [] if disable is None else disable
        self.exclude = [] if exclude is None else exclude
        self.target_devices = target_devices
        # {transform: {param: value}}, checked by `registry.validate_settings`
        self.settings = {} if settings is None else settings
        self.cache_dir = cache_dir  # absolute
        self.severity: str | None = None  # the least severe finding shown


def find(start: Path) -> tuple[Path, dict] | None:
    """The nearest pyproject.toml with a [tool.graphfix] table at or above `start`."""
    start = Path(os.path.realpath(start))
    if not start.is_dir():
        start = start.parent
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            tool = _read(candidate).get("tool", {})
            table = tool.get("graphfix") if isinstance(tool, dict) else None
            if table is not None:
                return candidate, table
    return None


def _read(path: Path) -> dict:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not _may_configure_graphfix(data):
        return {}  # not ours to parse (nor to judge)
    # (here: most runs find no pyproject.toml that mentions graphfix)
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # tomllib is tomli, taken into the standard library in 3.11
        import tomli as tomllib

    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid TOML: nested too deeply") from None


# The spellings a [tool.graphfix] table can take: `[tool.graphfix]` or `tool.graphfix.x =`
# (quoted or spaced too), a `graphfix` key under a `[tool]` table, an inline `tool = {...}`.
_DOTTED = re.compile(rb"""tool["']?\s*\.\s*["']?graphfix\b""")
_TOOL_TABLE = re.compile(rb"^\s*\[\s*tool\s*\]|^\s*tool\s*=\s*\{", re.MULTILINE)


def _may_configure_graphfix(data: bytes) -> bool:
    """Whether a pyproject.toml may hold a [tool.graphfix] table (a look at the text that
    spares most runs importing and running a TOML parser; never wrong the other way)."""
    if b"graphfix" not in data:
        return False
    return bool(_DOTTED.search(data)) or bool(_TOOL_TABLE.search(data))


def load(paths: list[str]) -> Config:
    """The configuration that applies to a run over `paths` (empty if there is none)."""
    found = find(Path(paths[0]) if paths else Path.cwd())
    if found is None:
        return Config()
    path, table = found
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.graphfix] must be a table")
    unknown = [k for k in table if k not in KEYS]
    if unknown:
        raise ConfigError(f"{path}: [tool.graphfix] has no key {unknown[0]!r}; "
                          f"it takes: {', '.join(KEYS)}")
    config = Config(path)
    if "only" in table:
        config.only = _strings(path, "only", table["only"])
    config.disable = _strings(path, "disable", table.get("disable", []))
    config.exclude = _strings(path, "exclude", table.get("exclude", []))
    devices = table.get("target-devices")
    if devices is not None:
        if isinstance(devices, str):
            config.target_devices = devices
        else:
            config.target_devices = ",".join(_strings(path, "target-devices", devices))
    if "cache-dir" in table:
        value = table["cache-dir"]
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{path}: [tool.graphfix] cache-dir must be a folder name")
        try:
            config.cache_dir = path.parent.resolve() / Path(value).expanduser()
        except RuntimeError as exc:  # `~user/...` naming no user of this machine
            raise ConfigError(f"{path}: [tool.graphfix] cache-dir: {exc}") from None
    if "severity" in table:
        from graphfix.findings import SEVERITIES

        if table["severity"] not in SEVERITIES:
            raise ConfigError(f"{path}: [tool.graphfix] severity must be one of "
                              f"{', '.join(SEVERITIES)}, not {table['severity']!r}")
        config.severity = table["severity"]
    config.settings = _settings(path, table.get("set", {}))
    return config


def _settings(path: Path, table: Any) -> dict[str, dict[str, Any]]:
    """The `set` table (`"NAME.key" = value`, or `[tool.graphfix.set.NAME] key = value`) as
    `{NAME: {key: value}}`, checked as the command line's `--set` is."""
    from graphfix.registry import UsageError, validate_settings

    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.graphfix] set must be a table of "
                          '"NAME.key" = value')
    given: dict[str, dict[str, Any]] = {}
    for key, value in table.items():
        if isinstance(value, dict):  # [tool.graphfix.set.variables-to-cpu] scope = "..."
            if "." in key:
                raise ConfigError(f"{path}: [tool.graphfix] set.{key!r} must be a value, "
                                  "not a table")
            given.setdefault(key, {}).update(value)
            continue
        name, dot, param = key.partition(".")
        if not dot:
            raise ConfigError(f'{path}: [tool.graphfix] set takes "NAME.key" = value, '
                              f"not {key!r}")
        given.setdefault(name, {})[param] = value
    try:
        return validate_settings(given)
    except UsageError as exc:
        raise ConfigError(f"{path}: [tool.graphfix] set: {exc}") from None


def _strings(path: Path, key: str, value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: [tool.graphfix] {key} must be a list of strings")
    return list(value)
