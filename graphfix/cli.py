"""The `graphfix` command line: list, check, fix, verify, demo."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import List, Optional

import typer

from graphfix import registry
from graphfix.findings import Report

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Find and fix TF1-style multi-GPU and distributed-training bugs in graphs and code.",
    pretty_exceptions_enable=False,
)

ONLY = typer.Option(None, "--only", help="Run only this transform (repeatable).")
SET = typer.Option(None, "--set", help="Transform parameter NAME.key=value (repeatable).")
FORMAT = typer.Option("text", "--format", help="text or json (check: also sarif).")
REPORT = typer.Option(None, "--report", help="Also write the JSON report to this file.")
TARGETS = typer.Option(None, "--target-devices", help="Devices to place on, e.g. /gpu:0,/gpu:1.")
JOBS = typer.Option(None, "--jobs", "-j", min=1,
                    help="Processes reading sources (default: one per core).")
EXCLUDE = typer.Option(None, "--exclude", metavar="GLOB",
                       help="Skip files and folders matching GLOB (repeatable).")
NO_CACHE = typer.Option(False, "--no-cache", envvar="GRAPHFIX_NO_CACHE",
                        help="Neither read nor write the source result cache.")
CACHE_DIR = typer.Option(None, "--cache-dir", metavar="DIR", envvar="GRAPHFIX_CACHE_DIR",
                         help="Where source results are cached (default: .graphfix_cache "
                              "in the project root).")


MAX_CHANGE_LINES = 200  # a 1M-node graph can make 200k changes: past this, count them


def fail(message: str) -> None:
    """One line on stderr, exit 2: how every error ends."""
    typer.echo(f"graphfix: error: {message}", err=True)
    raise typer.Exit(2)


def _write_report(path: Path, doc: dict) -> None:
    """`--report FILE.json`: the JSON document, written atomically."""
    from graphfix.graphio import InputError, atomic_write

    try:
        atomic_write(path, (json.dumps(doc, indent=2) + "\n").encode())
    except InputError as exc:
        fail(str(exc))


def _selected(only, settings, targets):
    from graphfix.runner import Selected

    try:
        transforms = registry.select(only)
        parsed = registry.parse_settings(settings or [])
    except registry.UsageError as exc:
        fail(str(exc))
    devices = tuple(d for d in (targets or "").split(",") if d)
    return Selected.build(transforms, parsed, devices)


PROGRESS_MIN_FILES = 50  # smaller runs finish before a bar would help


@contextlib.contextmanager
def _progress():
    """A `progress(total)` for `runner.run`: a rich progress bar on stderr for runs over
    PROGRESS_MIN_FILES source files when stderr is a terminal; else nothing is shown."""
    state: dict = {}

    def start(total: int):
        if total < PROGRESS_MIN_FILES or not sys.stderr.isatty():
            return None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

        # No refresh thread (auto_refresh=False): the run forks worker processes.
        bar = Progress("[progress.description]{task.description}", BarColumn(),
                       MofNCompleteColumn(), TimeRemainingColumn(),
                       console=Console(file=sys.stderr), transient=True, auto_refresh=False)
        bar.start()
        task = bar.add_task("sources", total=total)
        state["bar"] = bar
        last = [0.0]

        def tick() -> None:
            bar.advance(task)
            now = time.monotonic()
            if now - last[0] > 0.1 or bar.finished:
                last[0] = now
                bar.refresh()

        return tick

    try:
        yield start
    finally:
        if "bar" in state:
            state["bar"].stop()


def _configured(paths, only, settings, targets, exclude):
    """The run's transforms, excludes and configured cache folder: `[tool.graphfix]` of the
    nearest pyproject.toml, overridden by what the command line gives."""
    from graphfix import config as config_module
    from graphfix.runner import Selected
    from graphfix.sources import anchored

    try:
        config = config_module.load(paths)
    except config_module.ConfigError as exc:
        fail(str(exc))
    if config.path is None:
        return _selected(only, settings, targets), tuple(exclude or ()), None
    where = f"{config.path}: [tool.graphfix]"
    try:
        if only:
            transforms = registry.select(only)
        else:
            disabled = {registry.get_transform(n).name for n in config.disable}
            transforms = [t for t in registry.select(config.only) if t.name not in disabled]
    except registry.UsageError as exc:
        fail(str(exc) if only else f"{where}: {exc}")
    try:
        parsed = registry.parse_settings(config.settings)
    except registry.UsageError as exc:
        fail(f"{where} set: {str(exc).replace('--set takes', 'takes')}")
    try:
        for name, options in registry.parse_settings(settings or []).items():
            parsed.setdefault(name, {}).update(options)
    except registry.UsageError as exc:
        fail(str(exc))
    devices = targets if targets is not None else config.target_devices
    devices = tuple(d for d in (devices or "").split(",") if d)
    excludes = tuple(exclude) if exclude else anchored(config.exclude, config.path.parent)
    return Selected.build(transforms, parsed, devices), excludes, config.cache_dir


def _cache_dir(paths, no_cache: bool, given: Optional[Path], configured: Optional[Path]):
    """Where this run caches source results: --cache-dir (or GRAPHFIX_CACHE_DIR), else the
    configuration's `cache-dir`, else .graphfix_cache in the project root; None with
    --no-cache (or GRAPHFIX_NO_CACHE)."""
    if no_cache:
        return None
    if given is not None:
        return given
    if configured is not None:
        return configured
    from graphfix.cache import CACHE_DIR_NAME, project_root

    return project_root(paths) / CACHE_DIR_NAME


def _emit(report: Report, fmt: str, report_path: Optional[Path], *, fixing: bool,
          extra_lines: list[str] = ()) -> None:
    if fmt == "sarif":
        from graphfix.sarif import to_sarif

        typer.echo(json.dumps(to_sarif(report, registry.all_transforms()), indent=2))
        fmt = "quiet"
    # A 1M-node graph makes 200k changes: build the JSON document only where it is shown.
    doc = report.to_json(fixing=fixing) if fmt == "json" or report_path is not None else None
    if report_path is not None:
        _write_report(report_path, doc)
    if fmt == "json":
        typer.echo(json.dumps(doc, indent=2))
        return
    if fmt == "quiet":
        for failure in report.failed:
            typer.echo(f"graphfix: error: {failure['path']}: {failure['error']}", err=True)
        return
    for line in extra_lines:
        typer.echo(line)
    for finding in report.findings:
        typer.echo(finding.to_text())
    if fixing:
        shown = report.changes[:MAX_CHANGE_LINES]
        for change in shown:
            typer.echo(change.to_text())
        if len(report.changes) > len(shown):
            typer.echo(f"... and {len(report.changes) - len(shown)} more change(s) "
                       "(--format json or --report FILE lists them all)")
    for skip in report.skipped:
        typer.echo(f"{skip['path']}: skipped: {skip['reason']}")
    for failure in report.failed:
        typer.echo(f"graphfix: error: {failure['path']}: {failure['error']}", err=True)
    for note in report.notes:
        typer.echo(note)
    s = report.summary()
    if fixing:
        typer.echo(f"{s['changes']} change(s) in {s['files_changed']} file(s); "
                   f"{s['files_unchanged']} unchanged, {s['skipped']} skipped, {s['failed']} failed")
    else:
        with_findings = len({f.path for f in report.findings})
        clean = max(0, s["files_unchanged"] - with_findings)
        typer.echo(f"{s['findings']} finding(s) ({s['fixable']} fixable) in {with_findings} "
                   f"file(s); {clean} clean, {s['skipped']} skipped, {s['failed']} failed")


def _check_format(fmt: str, allowed: tuple[str, ...] = ("text", "json")) -> None:
    if fmt not in allowed:
        fail(f"--format must be {' or '.join(allowed)}, not {fmt!r}")


@app.command("list")
def list_command(fmt: str = FORMAT) -> None:
    """List the transforms: name, surfaces, one-line summary."""
    _check_format(fmt)
    transforms = registry.all_transforms()
    if fmt == "json":
        doc = [
            {"name": t.name, "surfaces": t.surfaces(), "summary": t.summary,
             "params": [{"name": p.name, "default": p.default, "help": p.help,
                         "choices": p.choices} for p in t.params]}
            for t in transforms.values()
        ]
        typer.echo(json.dumps(doc, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("name", "surfaces", "summary", box=None, pad_edge=False)
    for t in transforms.values():
        table.add_row(t.name, ", ".join(t.surfaces()), t.summary)
    Console(width=120).print(table)


@app.command()
def check(
    paths: List[str] = typer.Argument(..., help="Graphs and Python files or directories."),
    only: Optional[List[str]] = ONLY,
    settings: Optional[List[str]] = SET,
    fmt: str = FORMAT,
    report_path: Optional[Path] = REPORT,
    target_devices: Optional[str] = TARGETS,
    exclude: Optional[List[str]] = EXCLUDE,
    jobs: Optional[int] = JOBS,
    no_cache: bool = NO_CACHE,
    cache_dir: Optional[Path] = CACHE_DIR,
) -> None:
    """Report findings; exit 0 clean, 1 findings, 2 error."""
    from graphfix.kernels import NoGpuKernelsError
    from graphfix.runner import run

    _check_format(fmt, ("text", "json", "sarif"))
    selected, excludes, configured_cache = _configured(paths, only, settings, target_devices,
                                                       exclude)
    try:
        with _progress() as progress:
            report, _ = run(paths, selected, fix=False, excludes=excludes,
                            jobs=jobs or os.cpu_count(), progress=progress,
                            cache_dir=_cache_dir(paths, no_cache, cache_dir, configured_cache))
    except NoGpuKernelsError as exc:
        fail(str(exc))
    _emit(report, fmt, report_path, fixing=False)
    raise typer.Exit(report.exit_code(fixing=False))


@app.command()
def fix(
    paths: List[str] = typer.Argument(..., help="Graphs and Python files or directories."),
    out: Optional[str] = typer.Option(None, "-o", "--output", help="Where to write fixed graphs."),
    in_place: bool = typer.Option(False, "--in-place", help="Rewrite graphs in place (atomic)."),
    only: Optional[List[str]] = ONLY,
    settings: Optional[List[str]] = SET,
    fmt: str = FORMAT,
    report_path: Optional[Path] = REPORT,
    target_devices: Optional[str] = TARGETS,
    diff: bool = typer.Option(False, "--diff", help="Show what would change; write nothing."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Report changes; write nothing."),
    exclude: Optional[List[str]] = EXCLUDE,
    jobs: Optional[int] = JOBS,
    no_cache: bool = NO_CACHE,
    cache_dir: Optional[Path] = CACHE_DIR,
) -> None:
    """Apply fixes: graphs to -o OUT (or --in-place), sources in place. Exit 1 if changed."""
    from graphfix import graphio
    from graphfix.kernels import NoGpuKernelsError
    from graphfix.runner import preflight, run, write_outputs

    _check_format(fmt)
    if out and in_place:
        fail("give either -o OUT or --in-place, not both")
    selected, excludes, configured_cache = _configured(paths, only, settings, target_devices,
                                                       exclude)
    writing = not (diff or dry_run)
    has_graphs = any(graphio.is_graph_path(Path(p)) for p in paths)
    if writing and has_graphs and not out and not in_place:
        fail("fixed graphs need somewhere to go: add -o OUT or --in-place")
    try:
        with _progress() as progress:
            report, outputs = run(paths, selected, fix=True, out=out, in_place=in_place,
                                  want_diff=diff, excludes=excludes,
                                  jobs=jobs or os.cpu_count(), progress=progress,
                                  cache_dir=_cache_dir(paths, no_cache, cache_dir,
                                                       configured_cache))
    except NoGpuKernelsError as exc:
        fail(str(exc))
    diff_lines = [line.rstrip("\n") for o in outputs for line in o.diff]
    if writing and not report.failed:
        try:
            preflight(outputs)
            write_outputs(outputs)
        except graphio.InputError as exc:
            report.failed.append({"path": str(exc).split(": ")[0], "error": str(exc)})
            _emit(report, fmt, None, fixing=True)
            raise typer.Exit(2)
    _emit(report, fmt, report_path, fixing=True, extra_lines=diff_lines)
    raise typer.Exit(report.exit_code(fixing=True))


@app.command()
def verify(
    graph: str = typer.Argument(..., help="The graph to import and run."),
    steps: int = typer.Option(1, "--steps", help="Steps of the train op (or fetches) to run."),
    fetch: Optional[List[str]] = typer.Option(None, "--fetch", help="Tensor or op to run."),
    feed: Optional[List[str]] = typer.Option(None, "--feed", help="NAME=FILE.npy (repeatable)."),
    compare: Optional[str] = typer.Option(None, "--compare", help="Original graph: outputs must match."),
    cluster: Optional[str] = typer.Option(None, "--cluster",
                                          help="Run on a local TF cluster, e.g. ps=2,worker=2."),
    fmt: str = FORMAT,
    report_path: Optional[Path] = REPORT,
    target_devices: Optional[str] = TARGETS,
) -> None:
    """Re-import a graph and run it on the target devices; exit 0 pass, 1 fail, 2 error."""
    from graphfix.verification import VerifyError, verify_path

    _check_format(fmt)
    devices = tuple(d for d in (target_devices or "").split(",") if d)
    try:
        result = verify_path(graph, steps=steps, fetches=fetch or [], feeds=feed or [],
                             compare=compare, target_devices=devices, cluster=cluster)
    except VerifyError as exc:
        fail(str(exc))
    doc = result.to_json()
    if report_path is not None:
        _write_report(report_path, doc)
    if fmt == "json":
        typer.echo(json.dumps(doc, indent=2))
    else:
        for line in result.to_lines():
            typer.echo(line)
    raise typer.Exit(0 if result.passed else 1)


@app.command()
def demo() -> None:
    """The seed bugs end to end, on built-in fixtures: found, fixed, verified."""
    from graphfix.demo import run_demo

    raise typer.Exit(run_demo())


def main() -> None:
    # TF's C++ start-up chatter (cuda probes, cpu features) is not ours to show.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
