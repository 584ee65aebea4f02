"""The `graphfix` command line: list, check, fix, verify, demo.

Built on the standard library's argparse: the graph path's whole budget on a 26k-node graph
is a few hundred milliseconds, and a CLI framework that builds a validator per option
(typer 0.29 builds a pydantic adapter for each) would spend it before reading the graph.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
import time
from pathlib import Path

from graphfix import __version__, registry
from graphfix.graph.proto import TensorFlowMissing
from graphfix.findings import Report


MAX_CHANGE_LINES = 200  # a 1M-node graph can make 200k changes: past this, count them


def echo(line: str = "", *, err: bool = False) -> None:
    print(line, file=sys.stderr if err else sys.stdout)


def fail(message: str) -> None:
    """One line on stderr, exit 2: how every error ends."""
    echo(f"graphfix: error: {message}", err=True)
    raise SystemExit(2)


def _write_report(path: Path, doc: dict) -> None:
    """`--report FILE.json`: the JSON document, written atomically."""
    from graphfix.graph.graphfile import InputError, write_output

    try:
        write_output(path, (json.dumps(doc, indent=2) + "\n").encode())
    except InputError as exc:
        fail(str(exc))


def _selected(only, settings, targets):
    from graphfix.driver import Selected

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
    from graphfix.driver import Selected
    from graphfix.source.files import anchored

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


def _cache_dir(args: argparse.Namespace, configured: Path | None) -> Path | None:
    """Where this run caches source results and TF's kernel registry's answers (graphs'
    results are not cached: reading one is the work): --cache-dir (or GRAPHFIX_CACHE_DIR),
    else the configuration's `cache-dir`, else .graphfix_cache in the project root; None
    with --no-cache (or GRAPHFIX_NO_CACHE set to 1, true or yes)."""
    no_cache = os.environ.get("GRAPHFIX_NO_CACHE", "").strip().lower() in ("1", "true", "yes")
    if args.no_cache or no_cache:
        return None
    given = args.cache_dir or os.environ.get("GRAPHFIX_CACHE_DIR")
    if given:
        return Path(given)
    if configured is not None:
        return configured
    from graphfix.config import CACHE_DIR_NAME, project_root

    return project_root(args.paths) / CACHE_DIR_NAME


def _emit(report: Report, fmt: str, report_path: Path | None, *, fixing: bool,
          extra_lines: list[str] = ()) -> None:
    if fmt == "sarif":
        from graphfix.cli.sarif import to_sarif

        echo(json.dumps(to_sarif(report, registry.all_transforms()), indent=2))
        fmt = "quiet"
    # A 1M-node graph makes 200k changes: build the JSON document only where it is shown.
    doc = report.to_json(fixing=fixing) if fmt == "json" or report_path is not None else None
    if report_path is not None:
        _write_report(report_path, doc)
    if fmt == "json":
        echo(json.dumps(doc, indent=2))
        return
    if fmt == "quiet":
        for failure in report.failed:
            echo(f"graphfix: error: {failure['path']}: {failure['error']}", err=True)
        return
    for line in extra_lines:
        echo(line)
    for finding in report.findings:
        echo(finding.to_text())
    if fixing:
        shown = report.changes[:MAX_CHANGE_LINES]
        for change in shown:
            echo(change.to_text())
        if len(report.changes) > len(shown):
            echo(f"... and {len(report.changes) - len(shown)} more change(s) "
                       "(--format json or --report FILE lists them all)")
    for skip in report.skipped:
        echo(f"{skip['path']}: skipped: {skip['reason']}")
    for failure in report.failed:
        echo(f"graphfix: error: {failure['path']}: {failure['error']}", err=True)
    for note in report.notes:
        echo(note)
    s = report.summary()
    if fixing:
        echo(f"{s['changes']} change(s) in {s['files_changed']} file(s); "
                   f"{s['files_unchanged']} unchanged, {s['skipped']} skipped, {s['failed']} failed")
    else:
        with_findings = len({f.path for f in report.findings})
        clean = max(0, s["files_unchanged"] - with_findings)
        echo(f"{s['findings']} finding(s) ({s['fixable']} fixable) in {with_findings} "
                   f"file(s); {clean} clean, {s['skipped']} skipped, {s['failed']} failed")


def _check_format(fmt: str, allowed: tuple[str, ...] = ("text", "json")) -> None:
    if fmt not in allowed:
        fail(f"--format must be {' or '.join(allowed)}, not {fmt!r}")


def list_command(args: argparse.Namespace) -> int:
    """List the transforms: name, surfaces, one-line summary."""
    _check_format(args.fmt)
    transforms = registry.all_transforms()
    if args.fmt == "json":
        doc = [
            {"name": t.name, "surfaces": t.surfaces(), "summary": t.summary,
             "params": [{"name": p.name, "default": p.default, "help": p.help,
                         "choices": p.choices} for p in t.params]}
            for t in transforms.values()
        ]
        echo(json.dumps(doc, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table("name", "surfaces", "summary", box=None, pad_edge=False)
    for t in transforms.values():
        table.add_row(t.name, ", ".join(t.surfaces()), t.summary)
    Console(width=120).print(table)
    return 0


def _jobs(args: argparse.Namespace) -> int:
    """The processes that read sources (a graph is read and written by this one)."""
    return args.jobs or os.cpu_count() or 1


def _without_collector_for_graphs(paths: list[str]) -> None:
    """Turn off Python's cyclic garbage collector for a run over graphs only. A graph's
    index, groups and changes are millions of small objects in no cycle; once the
    collector runs again it walks all of them, more than once (a second on a 1M-node
    graph). Reference counting still frees them; the process ends with the run, and
    `main` ends it without freeing them one by one. Runs that read sources keep it
    (libcst's trees do hold cycles)."""
    global _graphs_only
    from graphfix.graph import graphfile as graphio

    if paths and all(graphio.is_graph_path(Path(p)) for p in paths):
        gc.disable()
        _graphs_only = True


_graphs_only = False  # this process's run read graphs only


def check(args: argparse.Namespace) -> int:
    """Report findings; exit 0 clean, 1 findings, 2 error."""
    from graphfix.graph.kernels import NoGpuKernelsError
    from graphfix.driver import run

    _check_format(args.fmt, ("text", "json", "sarif"))
    selected, excludes, configured_cache = _configured(
        args.paths, args.only, args.settings, args.target_devices, args.exclude)
    _without_collector_for_graphs(args.paths)
    try:
        with _progress() as progress:
            report, _ = run(args.paths, selected, fix=False, excludes=excludes,
                            jobs=_jobs(args), progress=progress,
                            cache_dir=_cache_dir(args, configured_cache))
    except NoGpuKernelsError as exc:
        fail(str(exc))
    _emit(report, args.fmt, args.report_path, fixing=False)
    return report.exit_code(fixing=False)


def fix(args: argparse.Namespace) -> int:
    """Apply fixes: graphs to -o OUT (or --in-place), sources in place. Exit 1 if changed."""
    from graphfix.graph import graphfile as graphio
    from graphfix.graph.kernels import NoGpuKernelsError
    from graphfix.driver import preflight, run, write_outputs

    _check_format(args.fmt)
    if args.out and args.in_place:
        fail("give either -o OUT or --in-place, not both")
    selected, excludes, configured_cache = _configured(
        args.paths, args.only, args.settings, args.target_devices, args.exclude)
    writing = not (args.diff or args.dry_run)
    has_graphs = any(graphio.is_graph_path(Path(p)) for p in args.paths)
    if writing and has_graphs and not args.out and not args.in_place:
        fail("fixed graphs need somewhere to go: add -o OUT or --in-place")
    _without_collector_for_graphs(args.paths)
    try:
        with _progress() as progress:
            report, outputs = run(args.paths, selected, fix=True, out=args.out,
                                  in_place=args.in_place, want_diff=args.diff, excludes=excludes,
                                  jobs=_jobs(args), progress=progress,
                                  cache_dir=_cache_dir(args, configured_cache))
    except NoGpuKernelsError as exc:
        fail(str(exc))
    diff_lines = [line.rstrip("\n") for o in outputs for line in o.diff]
    if writing and not report.failed:
        try:
            preflight(outputs)
            write_outputs(outputs)
        except graphio.InputError as exc:
            report.failed.append({"path": str(exc).split(": ")[0], "error": str(exc)})
            _emit(report, args.fmt, None, fixing=True)
            return 2
    _emit(report, args.fmt, args.report_path, fixing=True, extra_lines=diff_lines)
    return report.exit_code(fixing=True)


def verify(args: argparse.Namespace) -> int:
    """Re-import a graph and run it on the target devices; exit 0 pass, 1 fail, 2 error."""
    from graphfix.graph.kernels import NoGpuKernelsError
    from graphfix.verification.run import VerifyError, verify_path

    _check_format(args.fmt)
    devices = tuple(d for d in (args.target_devices or "").split(",") if d)
    try:
        result = verify_path(args.graph, steps=args.steps, fetches=args.fetch or [],
                             feeds=args.feed or [], compare=args.compare,
                             target_devices=devices, cluster=args.cluster)
    except (VerifyError, NoGpuKernelsError) as exc:
        fail(str(exc))
    doc = result.to_json()
    if args.report_path is not None:
        _write_report(args.report_path, doc)
    if args.fmt == "json":
        echo(json.dumps(doc, indent=2))
    else:
        for line in result.to_lines():
            echo(line)
    return 0 if result.passed else 1


def demo(args: argparse.Namespace) -> int:
    """The seed bugs end to end, on built-in fixtures: found, fixed, verified."""
    from graphfix.cli.demo import run_demo

    return run_demo()


def _terminal_columns() -> int:
    """The terminal's width as `shutil.get_terminal_size` finds it ($COLUMNS, then the
    terminal of stdout, else 80)."""
    try:
        columns = int(os.environ.get("COLUMNS", 0))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Formatter(argparse.HelpFormatter):
    """argparse's help formatter. argparse makes one for every option it adds, and each
    imports shutil for the terminal's width unless given one (5 ms of every start)."""

    def __init__(self, prog, indent_increment=2, max_help_position=24, width=None):
        super().__init__(prog, indent_increment, max_help_position,
                         width if width is not None else _terminal_columns() - 2)


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors as one line (`graphfix: error: ...`) and exit 2."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        command = self.prog.removeprefix("graphfix").strip()
        fail(f"{command + ': ' if command else ''}{message} (see {self.prog} --help)")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _add_run_options(command: argparse.ArgumentParser, *, formats: str) -> None:
    """The options check and fix share."""
    command.add_argument("paths", nargs="+", metavar="PATH",
                         help="graphs (.pb, .pbtxt, .meta, SavedModel directories), Python "
                              "files, notebooks, or directories of them")
    command.add_argument("--only", action="append", metavar="NAME",
                         help="run only this transform (repeatable)")
    command.add_argument("--set", dest="settings", action="append", metavar="NAME.key=value",
                         help="a transform parameter (repeatable)")
    command.add_argument("--format", dest="fmt", default="text", help=formats)
    command.add_argument("--report", dest="report_path", type=Path, metavar="FILE",
                         help="also write the JSON report to FILE")
    command.add_argument("--target-devices", metavar="DEVICES",
                         help="devices to place on, e.g. /gpu:0,/gpu:1")
    command.add_argument("--exclude", action="append", metavar="GLOB",
                         help="skip files and folders matching GLOB (repeatable)")
    command.add_argument("--jobs", "-j", type=_positive, metavar="N",
                         help="processes that read sources at once (default: one per core)")
    command.add_argument("--no-cache", action="store_true",
                         help="neither read nor write the source result cache "
                              "(also: GRAPHFIX_NO_CACHE=1)")
    command.add_argument("--cache-dir", type=Path, metavar="DIR",
                         help="where source results are cached (also: GRAPHFIX_CACHE_DIR; "
                              "default: .graphfix_cache in the project root)")


_COMMANDS = ("list", "check", "fix", "verify", "demo")


class _NotBuilt:
    """A command left out of this run's parser: its options go nowhere."""

    def add_argument(self, *args, **kwargs) -> None:
        pass


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line: every command, its options and its help. With `only` (a
    command's name), that command alone: a run needs its own options, and building them
    all (5 ms) costs more than reading a small graph."""
    parser = _Parser(prog="graphfix", description="Find and fix TF1-style multi-GPU and "
                     "distributed-training bugs in graphs and code.")
    parser.add_argument("--version", action="version", version=f"graphfix {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def command(function, name=None):
        name = name or function.__name__
        if only not in (None, name):
            return _NotBuilt()
        doc = function.__doc__
        sub = commands.add_parser(name, help=doc, description=doc)
        sub.set_defaults(run=function)
        return sub

    listing = command(list_command, "list")
    listing.add_argument("--format", dest="fmt", default="text", help="text or json")

    _add_run_options(command(check), formats="text, json or sarif")

    fixing = command(fix)
    _add_run_options(fixing, formats="text or json")
    fixing.add_argument("-o", "--output", dest="out", metavar="OUT",
                        help="where to write fixed graphs")
    fixing.add_argument("--in-place", action="store_true",
                        help="rewrite graphs in place (atomic)")
    fixing.add_argument("--diff", action="store_true", help="show what would change; write nothing")
    fixing.add_argument("--dry-run", action="store_true", help="report changes; write nothing")

    verifying = command(verify)
    verifying.add_argument("graph", metavar="GRAPH", help="the graph to import and run")
    verifying.add_argument("--steps", type=int, default=1,
                           help="steps of the train op (or fetches) to run")
    verifying.add_argument("--fetch", action="append", metavar="NAME", help="tensor or op to run")
    verifying.add_argument("--feed", action="append", metavar="NAME=FILE.npy",
                           help="a value to feed (repeatable)")
    verifying.add_argument("--compare", metavar="ORIGINAL",
                           help="the original graph: outputs must match")
    verifying.add_argument("--cluster", metavar="ps=N,worker=M",
                           help="run on a local TF cluster on loopback")
    verifying.add_argument("--format", dest="fmt", default="text", help="text or json")
    verifying.add_argument("--report", dest="report_path", type=Path, metavar="FILE",
                           help="also write the JSON report to FILE")
    verifying.add_argument("--target-devices", metavar="DEVICES",
                           help="devices to place on, e.g. /gpu:0,/gpu:1")

    command(demo)
    return parser


def main(argv: list[str] | None = None) -> None:
    # TF's C++ start-up chatter (cuda probes, cpu features) is not ours to show.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    words = sys.argv[1:] if argv is None else argv
    # A command first builds that command alone (`graphfix --help fix` lists them all).
    parser = build_parser(words[0] if words and words[0] in _COMMANDS else None)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        prog = f"graphfix {args.command}" if args.command else "graphfix"
        fail(f"{args.command + ': ' if args.command else ''}unrecognized arguments: "
             f"{' '.join(unknown)} (see {prog} --help)")
    if args.command is None:
        parser.print_help()
        sys.exit(0)
    try:
        code = args.run(args)
        sys.stdout.flush()
    except KeyboardInterrupt:
        sys.exit(130)
    except registry.UsageError as exc:  # e.g. a broken third-party transform
        fail(str(exc))
    except TensorFlowMissing as exc:
        fail(str(exc))
    except BrokenPipeError:
        # `graphfix check ... | head`: the reader left; say nothing more.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    if _graphs_only and argv is None and sys.getprofile() is None and sys.gettrace() is None:
        _exit_without_teardown(code)  # (not under a profiler or coverage: they write at exit)
    sys.exit(code)


def _exit_without_teardown(code: int) -> None:
    """End the process as it stands. Freeing a graph's index object by object at exit
    costs as much as a transform (40 ms after ResNet-50 x8, seconds after a 1M-node
    graph); the OS takes the memory back at once. Graph runs have written and closed
    their files by now and hold no other resources (mypy ends the same way)."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        code = code or 1
    os._exit(code)
