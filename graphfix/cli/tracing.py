"""`graphfix trace SCRIPT`, and what `check --trace` / `fix --trace` do with the graph a
script builds (`graphfix.trace`): the graph transforms' findings at the script's lines."""

from __future__ import annotations

from pathlib import Path

from graphfix.cli import options as opt
from graphfix.cli.app import Command, app
from graphfix.cli.output import check_format, echo, emit, fail
from graphfix.findings import Report, at_least


def traced(script: str, args: list[str], runs: int | None, until: str | None,
           timeout: float):
    """The `Trace` of `script`, or the trace's one-line error, exit 2."""
    from graphfix.trace import TraceError, trace

    try:
        return trace(script, args, runs=runs, until=until, timeout=timeout)
    except TraceError as exc:
        fail(str(exc))


@app.command("trace", cls=Command)
def trace_command(script: opt.Script, args: opt.ScriptArgs = None, out: opt.TraceOut = None,
                  runs: opt.Runs = None, until: opt.Until = None,
                  timeout: opt.TraceTimeout = 300.0, fmt: opt.TextOrJson = "text") -> int:
    """Run a script until it starts training and write the graph it built, with the line
    that made each node and every Session.run seen (this runs the script's code)."""
    import json

    from graphfix.storage import StagedWrites

    check_format(fmt)
    target = out if out is not None else Path(Path(script).stem + ".trace")
    if target.exists() and not target.is_dir():
        fail(f"{target}: exists and is not a folder (-o names the folder to write into)")
    captured = traced(script, list(args or []), runs, until, timeout)
    files = captured.files()

    def fill(folder: Path) -> None:
        for name, data in files.items():
            (folder / name).write_bytes(data)

    try:
        with StagedWrites() as staged:
            staged.add_directory(target, fill)
            staged.commit()
    except OSError as exc:
        fail(f"{exc.filename or target}: cannot write: {exc.strerror or exc}")
    if fmt == "json":
        echo(json.dumps({"script": script, "output": str(target),
                         "nodes": len(captured.meta_graph.graph_def.node),
                         "sites": {n: s.to_json() for n, s in captured.sites.items()},
                         "runs": [r.to_json() for r in captured.runs],
                         "stopped": captured.stopped}, indent=2))
    else:
        echo(f"{captured.summary()} -> {target}")
    return 0


def check_traced(paths: list[str], selected, *, fix: bool, fmt: str, report_path,
                 least: str, runs, until, timeout, out: str | None = None,
                 dry_run: bool = False) -> int:
    """`check --trace` / `fix --trace`: PATH is the script, the words after it its
    arguments. check reports the graph findings at the lines that made their nodes; fix
    fixes the traced graph and writes it to -o OUT (a .meta file), the changes at the
    lines that made what they changed."""
    from graphfix.graph import graphfile
    from graphfix.graph.kernels import NoGpuKernelsError
    from graphfix.trace.at_sites import check_trace

    script, *args = paths
    if fix and out is None and not dry_run:
        fail("a fixed traced graph needs somewhere to go: add -o OUT.meta (or --dry-run)")
    captured = traced(script, args, runs, until, timeout)
    try:
        findings, changes = check_trace(captured, selected, fix=fix)
    except NoGpuKernelsError as exc:
        fail(str(exc))
    except (graphfile.InputError, ValueError) as exc:
        fail(f"{script}: the traced graph: {exc}")
    report = Report(findings=at_least(findings, least), changes=changes,
                    notes=[captured.summary()])
    (report.changed_paths if changes else report.unchanged_paths).append(script)
    if fix and changes and not dry_run:
        fixed = graphfile.GraphFile(Path(out), "metagraph", False, captured.meta_graph)
        try:
            graphfile.save(fixed, out)
        except graphfile.InputError as exc:
            fail(str(exc))
    emit(report, fmt, report_path, fixing=fix)
    return report.exit_code(fixing=fix)
