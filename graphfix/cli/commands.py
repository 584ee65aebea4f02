"""The commands: list, check, fix, verify, demo, as typed functions on the typer `app`. Each
returns its exit code; what they print is `graphfix.cli.output`'s."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from graphfix import registry
from graphfix.cli import options as opt
from graphfix.cli.app import Command, app
from graphfix.cli.output import (check_format, echo, echo_document, emit, fail, phases_shown,
                                 progress, report_bytes, report_document, show_statistics,
                                 show_verify)
from graphfix.escaping import json_document
from graphfix.findings import at_least


def _devices(text: str | None, origin: str = "--target-devices") -> tuple[str, ...]:
    """The target devices a comma-separated list names (one line, exit 2, for a bad one,
    naming the option or config key it came from)."""
    from graphfix.graph.devices import target_devices

    try:
        return target_devices(d for d in (text or "").split(",") if d)
    except ValueError as exc:
        fail(f"{origin}: {exc}")


def _names(given: list[str] | None) -> list[str]:
    """Transform names as --select and --ignore take them: repeated, or comma-separated."""
    return [name.strip() for item in given or () for name in item.split(",") if name.strip()]


def _chosen(only: list[str] | None, select: list[str] | None) -> list[str] | None:
    """The transforms --only and --select name together (ruff's --select; both may be
    given), or None where neither is."""
    names = [*(only or ()), *_names(select)]
    return names or None


def _without(transforms: list, ignore: list[str] | None) -> list:
    """`transforms` less those --ignore names (one line, exit 2, for an unknown name)."""
    try:
        ignored = {registry.get_transform(name).name for name in _names(ignore)}
    except registry.UsageError as exc:
        fail(str(exc))
    return [t for t in transforms if t.name not in ignored]


def _selected(only, settings, targets, ignore=None):
    from graphfix.driver import Selected

    try:
        transforms = registry.select(only)
        parsed = registry.parse_settings(settings or [])
    except registry.UsageError as exc:
        fail(str(exc))
    return Selected.build(_without(transforms, ignore), parsed, _devices(targets))


def _tf_version(ctx: typer.Context, version: str | None) -> None:
    """`--tf-version X.Y`: placement judged by that TensorFlow's table until the command
    ends (one line, exit 2, naming the versions graphfix ships, for one it has none of)."""
    from graphfix.graph import kernels

    try:
        ctx.with_resource(kernels.tf_version(version))
    except kernels.TfVersionError as exc:
        fail(f"--tf-version: {exc}")


def _say_kernels(verbose: bool) -> None:
    """`--verbose`: which TensorFlow's kernels placement was judged by, on stderr."""
    if verbose:
        from graphfix.graph import kernels

        echo(f"graphfix: {kernels.selected().describe()}", err=True)


def _severity(given: str | None, configured: str | None) -> str:
    """The least severe finding shown: --severity, else the configuration's, else info."""
    from graphfix.findings import SEVERITIES

    if given is not None and given not in SEVERITIES:
        fail(f"--severity must be one of {', '.join(SEVERITIES)}, not {given!r}")
    return given or configured or SEVERITIES[-1]


def _configured(paths, only, settings, targets, exclude, ignore=None):
    """The run's transforms, excludes, configured cache folder and least severity shown:
    `[tool.graphfix]` of the nearest pyproject.toml, overridden by what the command line
    gives (`ignore`: --ignore, taken from what the rest chose)."""
    from graphfix import config as config_module
    from graphfix.driver import Selected
    from graphfix.source.files import anchored

    try:
        config = config_module.load(paths)
    except config_module.ConfigError as exc:
        fail(str(exc))
    if config.path is None:
        return _selected(only, settings, targets, ignore), tuple(exclude or ()), None, None
    where = f"{config.path}: [tool.graphfix]"
    try:
        if only:
            transforms = registry.select(only)
        else:
            disabled = {registry.get_transform(n).name for n in config.disable}
            transforms = [t for t in registry.select(config.only) if t.name not in disabled]
    except registry.UsageError as exc:
        fail(str(exc) if only else f"{where}: {exc}")
    parsed = {name: dict(options) for name, options in config.settings.items()}
    try:
        for name, options in registry.parse_settings(settings or []).items():
            parsed.setdefault(name, {}).update(options)
    except registry.UsageError as exc:
        fail(str(exc))
    devices = (_devices(targets) if targets is not None
               else _devices(config.target_devices, f"{where}: target-devices"))
    excludes = tuple(exclude) if exclude else anchored(config.exclude, config.path.parent)
    return (Selected.build(_without(transforms, ignore), parsed, devices), excludes,
            config.cache_dir, config.severity)


def _cache_dir(paths: list[str], no_cache: bool, cache_dir: Path | None,
               configured: Path | None) -> Path | None:
    """Where this run caches source results and TF's kernel registry's answers (graphs'
    results are not cached: reading one is the work): --cache-dir (or GRAPHFIX_CACHE_DIR),
    else the configuration's `cache-dir`, else .graphfix_cache in the project root; None
    with --no-cache (or GRAPHFIX_NO_CACHE set to 1, true or yes)."""
    no_cache_env = os.environ.get("GRAPHFIX_NO_CACHE", "").strip().lower() in ("1", "true", "yes")
    if no_cache or no_cache_env:
        return None
    given = cache_dir or os.environ.get("GRAPHFIX_CACHE_DIR")
    if given:
        return Path(given)
    if configured is not None:
        return configured
    from graphfix.config import CACHE_DIR_NAME, project_root

    return project_root(paths) / CACHE_DIR_NAME


def _graphs_for_html(paths: list[str], html: Path | None) -> list[str]:
    """The graph files among `paths` that `--html` shows (a one-line error, before anything
    runs, if it is given and there are none)."""
    from graphfix.graph.graphfile import is_graph_path

    graphs = [p for p in paths if is_graph_path(Path(p))]
    if html is not None and not graphs:
        fail("--html shows graphs: give a graph file (.pb, .pbtxt, .meta, SavedModel)")
    return graphs


def _html_file(html: Path, graphs: list[str], selected, verify: list[dict] | None = None
               ) -> tuple[str, Path, bytes]:
    """`--html FILE`, to be written with the command's other files (`_write_files`): the
    page `graphfix report` writes for `graphs` as their files are now, with verify's
    checks."""
    from graphfix.report.html import build

    page, _ = build(graphs, selected, verify=verify)  # (a graph that fails shows on the page)
    return ("the --html page", html, page.encode())


def _json_file(report_path: Path, doc: dict) -> tuple[str, Path, bytes]:
    """`--report FILE.json`, to be written with the command's other files."""
    return ("the --report file", report_path, report_bytes(doc))


def _write_files(files: list[tuple[str, Path, bytes]]) -> None:
    """The reports a command writes (what each is, its path, its bytes), all or none
    (`driver.write_outputs`): one line naming the file and exit 2 where one cannot be."""
    from graphfix.driver import write_outputs
    from graphfix.graph.graphfile import InputError

    if files:
        try:
            write_outputs([], reports=files)
        except InputError as exc:
            fail(str(exc))


def needs_tensorflow(what: str) -> None:
    """`what` (a command, an option) runs TF: where it is not installed, the one line that
    says what to install, exit 2, before anything else is read or run."""
    from graphfix.tf_runtime import require_tensorflow

    try:
        require_tensorflow(what, registry.UsageError)
    except registry.UsageError as exc:
        fail(str(exc))


def _checked_logdir(logdir: Path) -> Path:
    """A --logdir that can be written, or a one-line error before anything runs."""
    needs_tensorflow("--logdir")
    from graphfix.verification.logdir import LogdirError, check_logdir

    try:
        return check_logdir(logdir)
    except LogdirError as exc:
        fail(str(exc))


def _graphs_before(outputs) -> dict:
    """The label -> first GraphDef, as its file holds it now (before `--in-place` rewrites
    it), of each graph a fix would write."""
    from graphfix.graph import graphfile

    return {o.label: graphfile.load(o.label).graph_defs()[0][0]
            for o in outputs if o.graph_file is not None}


def _write_fix_logdir(logdir: Path, outputs, before: dict) -> None:
    """`fix --logdir DIR`: each fixed graph's first GraphDef as TensorBoard's graph dashboard
    reads it, before the fix (`before`, from `_graphs_before`) and after; in DIR/before and
    DIR/after, or DIR/NAME/ (NAME: the path given, / as _) for several graphs. No step runs
    in a fix: `verify --logdir` adds where each node ran."""
    from graphfix.tf_runtime import import_runtime
    from graphfix.verification.logdir import AFTER, BEFORE, write_run

    fixed = [o for o in outputs if o.graph_file is not None]
    if fixed:
        import_runtime()  # (TF's writer; imported as graphfix does, its start-up lines kept off)
    for output in fixed:
        folder = logdir if len(fixed) == 1 else logdir / output.label.replace("/", "_")
        write_run(folder, BEFORE, before[output.label])
        write_run(folder, AFTER, output.graph_file.graph_defs()[0][0])


def _diff_of(output) -> list[str]:
    """An output's `--diff` lines; a graph's node-level diff under the header a source's
    unified diff has (`--- a/PATH`, `+++ b/PATH`), so each graph of several is named."""
    if output.graph_file is None or not output.diff:
        return output.diff
    absolute = Path(output.label).is_absolute()
    return [f"--- {'' if absolute else 'a/'}{output.label}",
            f"+++ {'' if absolute else 'b/'}{output.label}", *output.diff]


def _jobs(jobs: int | None) -> int:
    """The processes that read sources (a graph is read and written by this one)."""
    return jobs or os.cpu_count() or 1


@app.command("list", cls=Command)
def list_command(fmt: opt.TextOrJson = "text") -> int:
    """List the transforms: name, surfaces, one-line summary."""
    check_format(fmt)
    transforms = registry.all_transforms()
    if fmt == "json":
        doc = [
            {"name": t.name, "surfaces": t.surfaces(), "summary": t.summary,
             "params": [{"name": p.name, "default": p.default, "help": p.help,
                         "choices": p.choices} for p in t.params]}
            for t in transforms.values()
        ]
        echo_document(json_document(doc))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table("name", "surfaces", "summary", box=None, pad_edge=False)
    for t in transforms.values():
        table.add_row(t.name, ", ".join(t.surfaces()), t.summary)
    Console(width=120).print(table)
    return 0


@app.command(cls=Command)
def check(ctx: typer.Context, paths: opt.Paths, only: opt.Only = None,
          select: opt.Select = None, ignore: opt.Ignore = None, settings: opt.Settings = None,
          target_devices: opt.TargetDevices = None, tf_version: opt.TfVersion = None,
          fmt: opt.CheckFormat = "text", report_path: opt.ReportPath = None,
          fix: opt.CheckFix = False, statistics: opt.Statistics = False,
          exclude: opt.Exclude = None,
          jobs: opt.Jobs = None, no_cache: opt.NoCache = False,
          cache_dir: opt.CacheDir = None,
          timeout_per_file: opt.TimeoutPerFile = opt.TIMEOUT_PER_FILE,
          severity: opt.MinSeverity = None, trace: opt.Trace = False, runs: opt.Runs = None,
          until: opt.Until = None, timeout: opt.TraceTimeout = 300.0,
          html: opt.Html = None, verbose: opt.Verbose = False) -> int:
    """Report findings; exit 0 clean, 1 findings, 2 error. With --fix: fix what is fixable,
    report what remains, exit by that."""
    from graphfix.driver import run
    from graphfix.graph.kernels import NoGpuKernelsError

    check_format(fmt, ("text", "json", "sarif", "github", "junit"))
    if statistics and fmt not in ("text", "json"):
        fail(f"--statistics prints text or json, not {fmt}")
    if fix and trace:
        fail("check --fix fixes files: fix a traced script with graphfix fix --trace")
    _tf_version(ctx, tf_version)
    selected, excludes, configured_cache, configured_severity = _configured(
        paths, _chosen(only, select), settings, target_devices, exclude, ignore)
    least = _severity(severity, configured_severity)
    if trace and html is not None:
        fail("--html shows graph files, not a traced script")
    graphs = _graphs_for_html(paths, html)
    if trace:
        needs_tensorflow("graphfix check --trace")
        from graphfix.cli.tracing import check_traced

        return check_traced(paths, selected, fix=False, fmt=fmt, report_path=report_path,
                            least=least, runs=runs, until=until, timeout=timeout)
    cache = _cache_dir(paths, no_cache, cache_dir, configured_cache)
    # --fix: the page shows the graphs as they were and as fixed, so it is made first
    page = _html_file(html, graphs, selected) if fix and html is not None else None
    # (then the check below sees the files as fixed: what it finds is what remains)
    fixed = _fixed_in_place(paths, selected, excludes, _jobs(jobs), timeout_per_file, cache,
                            fmt) if fix else []
    # JSON and SARIF carry each source fix as text: what `fix` would write, made in the
    # same run (the outputs of a check are never written).
    fix_texts = fmt in ("json", "sarif") or report_path is not None
    try:
        with progress() as shown:
            report, outputs = run(paths, selected, fix=False, excludes=excludes,
                                  jobs=_jobs(jobs), progress=shown,
                                  timeout_per_file=timeout_per_file, cache_dir=cache,
                                  fix_texts=fix_texts)
    except NoGpuKernelsError as exc:
        fail(str(exc))
    if fix_texts:
        from graphfix.cli import replacements

        replacements.give_replacements(report, replacements.fixed_texts(outputs))
    report.findings = at_least(report.findings, least)
    report.changes = fixed  # (check --fix: what it changed before it checked)
    _say_kernels(verbose)
    files = [_json_file(report_path, report_document(report, fixing=False))] if report_path else []
    if html is not None:
        files.append(page or _html_file(html, graphs, selected))
    _write_files(files)  # (the report and the page: both or neither)
    if statistics:
        show_statistics(report, fmt)
    else:
        emit(report, fmt, None, fixing=False,
             transforms=[t for t, _ in selected.transforms])
    return report.exit_code(fixing=False)


def _fixed_in_place(paths, selected, excludes, jobs, timeout_per_file, cache, fmt) -> list:
    """`check --fix`'s first half: every fix made and written in place (sources as `fix`
    writes them, graphs as `fix --in-place`), all or nothing; the changes made. Where an
    input cannot be fixed, nothing is written, the failure is shown as `fix` shows it and
    the run ends with exit 2."""
    from graphfix.driver import run, write_outputs
    from graphfix.graph import graphfile
    from graphfix.graph.kernels import NoGpuKernelsError

    try:
        with progress() as shown:
            report, outputs = run(paths, selected, fix=True, in_place=True, excludes=excludes,
                                  jobs=jobs, progress=shown, timeout_per_file=timeout_per_file,
                                  cache_dir=cache)
    except NoGpuKernelsError as exc:
        fail(str(exc))
    if not report.failed:
        try:
            write_outputs(outputs)
        except graphfile.InputError as exc:
            path, _, error = str(exc).partition(": ")
            report.failed.append({"path": path, "error": error})
    if report.failed:
        report.findings = []
        emit(report, fmt if fmt in ("text", "json", "github") else "text", None, fixing=True)
        raise SystemExit(2)
    return report.changes


@app.command(cls=Command)
def fix(ctx: typer.Context, paths: opt.Paths, only: opt.Only = None,
        select: opt.Select = None, ignore: opt.Ignore = None, settings: opt.Settings = None,
        target_devices: opt.TargetDevices = None, tf_version: opt.TfVersion = None,
        fmt: opt.FixFormat = "text",
        report_path: opt.ReportPath = None, out: opt.Out = None, in_place: opt.InPlace = False,
        force: opt.Force = False, diff: opt.Diff = False, dry_run: opt.DryRun = False,
        exclude: opt.Exclude = None, jobs: opt.Jobs = None, no_cache: opt.NoCache = False,
        cache_dir: opt.CacheDir = None,
        timeout_per_file: opt.TimeoutPerFile = opt.TIMEOUT_PER_FILE,
        severity: opt.MinSeverity = None, trace: opt.Trace = False, runs: opt.Runs = None,
        until: opt.Until = None, timeout: opt.TraceTimeout = 300.0,
        verify: opt.VerifyFix = False, html: opt.Html = None,
        logdir: opt.FixLogdir = None, verbose: opt.Verbose = False) -> int:
    """Apply fixes (graphs to -o OUT or --in-place, sources in place); exit 1 if changed."""
    from graphfix.driver import run, write_outputs
    from graphfix.graph import graphfile
    from graphfix.graph.kernels import NoGpuKernelsError

    check_format(fmt, ("text", "json", "github"))
    _tf_version(ctx, tf_version)
    if out and in_place:
        fail("give either -o OUT or --in-place, not both")
    selected, excludes, configured_cache, configured_severity = _configured(
        paths, _chosen(only, select), settings, target_devices, exclude, ignore)
    least = _severity(severity, configured_severity)
    if (trace or verify) and html is not None:
        fail("--html shows graph files, not a traced script")
    if (trace or verify) and logdir is not None:
        fail("fix --logdir writes graph files' runs: verify the fixed script's graph with "
             "verify --logdir")
    graphs = _graphs_for_html(paths, html)
    if logdir is not None:
        logdir = _checked_logdir(logdir)
    if trace:
        needs_tensorflow("graphfix fix --trace")
        from graphfix.cli.tracing import check_traced

        return check_traced(paths, selected, fix=True, fmt=fmt, report_path=report_path,
                            least=least, runs=runs, until=until, timeout=timeout, out=out,
                            dry_run=dry_run, diff=diff, force=force)
    if verify:
        needs_tensorflow("graphfix fix --verify")
        from graphfix.cli.tracing import fix_verified

        return fix_verified(paths, selected, fmt=fmt, report_path=report_path, runs=runs,
                            until=until, timeout=timeout, force=force, diff=diff,
                            dry_run=dry_run)
    writing = not (diff or dry_run)
    has_graphs = any(graphfile.is_graph_path(Path(p)) for p in paths)
    if writing and has_graphs and not out and not in_place:
        fail("fixed graphs need somewhere to go: add -o OUT or --in-place")
    try:
        with progress() as shown:
            report, outputs = run(paths, selected, fix=True, out=out, in_place=in_place,
                                  want_diff=diff, excludes=excludes, jobs=_jobs(jobs),
                                  progress=shown, timeout_per_file=timeout_per_file,
                                  cache_dir=_cache_dir(paths, no_cache, cache_dir,
                                                       configured_cache))
    except NoGpuKernelsError as exc:
        fail(str(exc))
    report.findings = at_least(report.findings, least)  # (shown; every fix is still made)
    _say_kernels(verbose)
    diff_lines = [line.rstrip("\n") for o in outputs for line in _diff_of(o)]
    before = _graphs_before(outputs) if logdir is not None and writing else {}
    # The reports (--report, --html: the page shows the graphs as they were and as fixed,
    # so it is made before they are rewritten) are written with the outputs, all or none.
    # A failed run writes no page, and its --report alone.
    reports = []
    if report_path is not None and not report.failed:
        reports.append(_json_file(report_path, report_document(report, fixing=True)))
        report_path = None
    if html is not None and not report.failed:
        reports.append(_html_file(html, graphs, selected))
    if writing and not report.failed:
        try:
            write_outputs(outputs, force=force, reports=reports)
        except graphfile.InputError as exc:
            path, _, error = str(exc).partition(": ")
            report.failed.append({"path": path, "error": error})
            emit(report, fmt, None, fixing=True)
            return 2
    else:
        _write_files(reports)
    emit(report, fmt, report_path, fixing=True, extra_lines=diff_lines)
    if logdir is not None and writing and not report.failed:
        _write_fix_logdir(logdir, outputs, before)
    return report.exit_code(fixing=True)


def _op_libraries(graph: str, settings: list[str] | None) -> list[str]:
    """The custom-op libraries to load before a graph is verified: `--set
    stateful-custom-ops.op_library=my_ops.so` (repeatable), else the same key of
    `[tool.graphfix]`, as check and fix read it. One line, exit 2, for another setting."""
    from graphfix import config as config_module

    name, key = registry.OP_LIBRARY
    try:
        given = registry.parse_settings(settings or [])
    except registry.UsageError as exc:
        fail(str(exc))
    others = [f"{n}.{k}" for n, options in given.items() for k in options if (n, k) != (name, key)]
    if others:
        fail(f"verify: --set {others[0]} is not verify's; it takes only "
             f"--set {name}.{key}=LIBRARY.so")
    if key in given.get(name, {}):
        return given[name][key]
    try:
        configured = config_module.load([graph])  # (its settings checked as it is read)
    except config_module.ConfigError as exc:
        fail(str(exc))
    return configured.settings.get(name, {}).get(key) or []


@app.command(cls=Command)
def verify(graph: opt.Graph, args: opt.ScriptArgs = None, steps: opt.Steps = 1,
           fetch: opt.Fetch = None, settings: opt.Settings = None,
           feed: opt.Feed = None, compare: opt.Compare = None, cluster: opt.Cluster = None,
           target_devices: opt.TargetDevices = None, fmt: opt.VerifyFormat = "text",
           report_path: opt.ReportPath = None, runs: opt.Runs = None, until: opt.Until = None,
           timeout: opt.TraceTimeout = 300.0, logdir: opt.Logdir = None,
           html: opt.Html = None) -> int:
    """Re-import a graph and run it on the target devices; exit 0 pass, 1 fail, 2 error."""
    needs_tensorflow("graphfix verify")
    from graphfix.graph.kernels import NoGpuKernelsError
    from graphfix.registry import intended_changes, verify_checks
    from graphfix.verification.run import VerifyError, verify_path

    check_format(fmt, ("text", "json", "github", "junit") if not graph.endswith(".py")
                 else ("text", "json"))
    if graph.endswith(".py") and html is not None:
        fail("--html shows graph files, not a traced script")
    if graph.endswith(".py"):  # a script: the graph it builds
        from graphfix.cli.tracing import verify_traced

        return verify_traced(graph, list(args or []), steps=steps, fetches=fetch or [],
                             target_devices=_devices(target_devices), fmt=fmt,
                             report_path=report_path, runs=runs, until=until, timeout=timeout,
                             op_libraries=_op_libraries(graph, settings))
    if args:  # (only a script takes arguments)
        fail(f"verify: unrecognized arguments: {' '.join(args)} (see graphfix verify --help)")
    if logdir is not None and cluster:
        fail("verify: --logdir is for a graph run in this process, not with --cluster")
    if logdir is not None:  # (checked before TF is imported; nothing is written if bad)
        logdir = _checked_logdir(logdir)
    try:
        with phases_shown("verify"):
            result = verify_path(graph, steps=steps, fetches=fetch or [], feeds=feed or [],
                                 compare=compare, target_devices=_devices(target_devices),
                                 cluster=cluster, op_libraries=_op_libraries(graph, settings),
                                 intended_changes=intended_changes, checks=verify_checks(),
                                 **({"logdir": logdir} if logdir else {}))
    except (VerifyError, NoGpuKernelsError) as exc:
        fail(str(exc))
    files = [_json_file(report_path, result.to_json())] if report_path else []
    if html is not None:
        files.append(_html_file(html, [graph], _selected(None, None, target_devices),
                                verify=result.to_json()["checks"]))
    _write_files(files)
    show_verify(result, fmt, None)
    return 0 if result.passed else 1


@app.command(cls=Command)
def report(ctx: typer.Context, paths: opt.GraphPaths, out: opt.ReportOut,
           only: opt.Only = None, settings: opt.Settings = None,
           target_devices: opt.TargetDevices = None, tf_version: opt.TfVersion = None) -> int:
    """Write one self-contained HTML page for graphs (devices, moved groups, cross-device
    edges, findings). No graph is changed; exit 2 (and no page) if one cannot be read."""
    from graphfix.graph.graphfile import InputError, is_graph_path, write_output
    from graphfix.report.html import build

    for path in paths:
        if not is_graph_path(Path(path)):
            kind = "a Python script" if path.endswith(".py") else "not a graph"
            fail(f"{path}: {kind}: report shows graphs (.pb, .pbtxt, .meta, SavedModel); "
                 "a script's findings: graphfix check; its graph: graphfix trace, then "
                 "report the .meta it writes")
    _tf_version(ctx, tf_version)
    page, failed = build(list(paths), _selected(only, settings, target_devices))
    if failed:
        fail(f"{failed[0]['path']}: {failed[0]['error']}")
    try:
        write_output(Path(out), page.encode())
    except InputError as exc:
        fail(str(exc))
    echo(f"report written to {out}")
    return 0


@app.command(cls=Command)
def demo() -> int:
    """The seed bugs end to end, on built-in fixtures: found, fixed, verified."""
    needs_tensorflow("graphfix demo")  # (it verifies each fix)
    from graphfix.cli.demo import run_demo

    return run_demo()
