"""`graphfix check` and `graphfix fix` of graph files, run without typer: the graph path's
command line. typer (with click and its converters) costs a one-layer graph's `fix` more
than the rest of the run together, and a graph needs none of what it offers there.

`run(words)` takes only the plainest command lines: `check` or `fix`, then graph files (a
`.pb`, `.pbtxt`, `.meta` or SavedModel directory each) and only these options, each as its
own word: `-o`/`--output OUT`, `--in-place`, `--only NAME` and `--set NAME.key=value`
(repeatable), `--format text` or `json`, `--force`; no `[tool.graphfix]` table applies, and
nothing in them is an error.
For any other command line it returns None before it has read anything, and `main` gives
the words to typer's command line, which does the same thing more slowly (tests compare the
two: tests/test_cli_graph_path.py). What it does is what `graphfix.cli.commands.check` and
`fix` do for such a line, in the same order, through the same functions.
"""

from __future__ import annotations

import os
from pathlib import Path

# option -> (the command's parameter, takes a value); a flag's value is True.
_OPTIONS = {
    "-o": ("out", True), "--output": ("out", True), "--in-place": ("in_place", False),
    "--only": ("only", True), "--set": ("settings", True), "--format": ("fmt", True),
    "--force": ("force", False),
}
_REPEATABLE = ("only", "settings")
_FORMATS = ("text", "json")
_TIMEOUT_PER_FILE = 600.0  # (graphfix.cli.options.TIMEOUT_PER_FILE, typer-free: sources only)


def _parsed(words: list[str]) -> dict | None:
    """The command and its parameters, or None where the line is not the plainest kind."""
    if not words or words[0] not in ("check", "fix"):
        return None
    command, rest = words[0], iter(words[1:])
    given: dict = {"command": command, "paths": [], "only": [], "settings": []}
    for word in rest:
        if not word.startswith("-"):
            given["paths"].append(word)
            continue
        name, takes_value = _OPTIONS.get(word, (None, False))
        if name is None or (command == "check" and name in ("out", "in_place", "force")):
            return None
        if not takes_value:
            given[name] = True
            continue
        value = next(rest, None)
        if value is None or value.startswith("-") or (name not in _REPEATABLE and name in given):
            return None
        if name in _REPEATABLE:
            given[name].append(value)
        else:
            given[name] = value
    if given.get("fmt", "text") not in _FORMATS or not given["paths"]:
        return None
    if command == "fix" and (given.get("out") is not None) == bool(given.get("in_place")):
        return None  # (neither, or both: the command line's own error)
    from graphfix.graph.graphfile import is_graph_path

    if not all(is_graph_path(Path(p)) for p in given["paths"]):
        return None
    return given


def _selected(given: dict):
    """The run's transforms with their settings, or None where `[tool.graphfix]` applies or
    a name or setting is not one (the command line's own answer)."""
    from graphfix import config, registry
    from graphfix.driver import Selected

    try:
        if config.load(given["paths"]).path is not None:
            return None
        transforms = registry.select(given["only"] or None)
        settings = registry.parse_settings(given["settings"])
    except (config.ConfigError, registry.UsageError):
        return None
    return Selected.build(transforms, settings, ())


def _cache_dir(paths: list[str]) -> Path | None:
    """As `graphfix.cli.commands._cache_dir` answers without --no-cache or --cache-dir."""
    if os.environ.get("GRAPHFIX_NO_CACHE", "").strip().lower() in ("1", "true", "yes"):
        return None
    if os.environ.get("GRAPHFIX_CACHE_DIR"):
        return Path(os.environ["GRAPHFIX_CACHE_DIR"])
    from graphfix.config import CACHE_DIR_NAME, project_root

    return project_root(paths) / CACHE_DIR_NAME


def run(words: list[str]) -> int | None:
    """Run `graphfix WORDS...` where it is the plainest check or fix of graph files and
    return its exit code; None, having done nothing, for any other command line."""
    given = _parsed(words)
    if given is None:
        return None
    selected = _selected(given)
    if selected is None:
        return None
    from graphfix.cli.output import emit, fail, progress
    from graphfix.driver import run as run_inputs
    from graphfix.driver import write_outputs
    from graphfix.findings import SEVERITIES, at_least
    from graphfix.graph import graphfile
    from graphfix.graph.kernels import NoGpuKernelsError

    fixing, fmt, paths = given["command"] == "fix", given.get("fmt", "text"), given["paths"]
    try:
        with progress() as shown:
            report, outputs = run_inputs(
                paths, selected, fix=fixing, out=given.get("out"),
                in_place=given.get("in_place", False), excludes=(),
                jobs=os.cpu_count() or 1, progress=shown, timeout_per_file=_TIMEOUT_PER_FILE,
                cache_dir=_cache_dir(paths), fix_texts=not fixing and fmt == "json")
    except NoGpuKernelsError as exc:
        fail(str(exc))
    if not fixing and fmt == "json" and outputs:
        from graphfix.cli import replacements

        replacements.give_replacements(report, replacements.fixed_texts(outputs))
    report.findings = at_least(report.findings, SEVERITIES[-1])
    if not fixing:
        emit(report, fmt, None, fixing=False, transforms=[t.name for t, _ in selected.transforms])
        return report.exit_code(fixing=False)
    if not report.failed:
        try:
            write_outputs(outputs, force=given.get("force", False))
        except graphfile.InputError as exc:
            path, _, error = str(exc).partition(": ")
            report.failed.append({"path": path, "error": error})
            emit(report, fmt, None, fixing=True)
            return 2
    emit(report, fmt, None, fixing=True)
    return report.exit_code(fixing=True)
