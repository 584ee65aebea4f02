"""`graphfix trace SCRIPT`, and what `check --trace` / `fix --trace` do with the graph a
script builds (`graphfix.trace`): the graph transforms' findings at the script's lines."""

from __future__ import annotations

from pathlib import Path

from graphfix.cli import options as opt
from graphfix.cli.app import Command, app
from graphfix.cli.output import (check_format, echo, echo_document, emit, fail, phases_shown,
                                 show_verify)
from graphfix.escaping import json_document
from graphfix.findings import Report, at_least


def traced(script: str, args: list[str], runs: int | None, until: str | None,
           timeout: float, label: str | None = None, verify: dict | None = None):
    """The `Trace` of `script` (named `label`), or the trace's one-line error, exit 2;
    `verify`: the options of the verify to come (see `trace`)."""
    from graphfix.trace import TraceError, trace

    try:
        with phases_shown("trace"):
            return trace(script, args, runs=runs, until=until, timeout=timeout, label=label,
                         verify=verify)
    except TraceError as exc:
        fail(str(exc))


@app.command("trace", cls=Command)
def trace_command(script: opt.Script, args: opt.ScriptArgs = None, out: opt.TraceOut = None,
                  runs: opt.Runs = None, until: opt.Until = None,
                  timeout: opt.TraceTimeout = 300.0, fmt: opt.TextOrJson = "text") -> int:
    """Run a script until it starts training and write the graph it built, with the line
    that made each node and every Session.run seen (this runs the script's code)."""
    from graphfix.cli.commands import needs_tensorflow
    from graphfix.storage import StagedWrites

    needs_tensorflow("graphfix trace")

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
        echo_document(json_document({
            "script": script, "output": str(target),
            "nodes": len(captured.meta_graph.graph_def.node),
            "sites": {n: s.to_json() for n, s in captured.sites.items()},
            "runs": [r.to_json() for r in captured.runs],
            "op_libraries": captured.op_libraries,
            "sessions": [c.to_json() for c in captured.sessions],
            "soft_placement": captured.soft_placement,
            "stopped": captured.stopped}))
    else:
        echo(f"{captured.summary()} -> {target}")
    return 0


def check_traced(paths: list[str], selected, *, fix: bool, fmt: str, report_path,
                 least: str, runs, until, timeout, out: str | None = None,
                 dry_run: bool = False, diff: bool = False, force: bool = False) -> int:
    """`check --trace` / `fix --trace`: PATH is the script, the words after it its
    arguments. check reports the graph findings at the lines that made their nodes; fix
    fixes the traced graph and writes it to -o OUT (a .meta file, or a folder: the script's
    name with .meta in it), the changes at the lines that made what they changed. The C++
    sources stateful-custom-ops reads (its `sources`, and the .cc files beside the script:
    `give_files_to_params`) are fixed with the graph and written with it, all or nothing;
    `diff` shows their diff, writes nothing."""
    from graphfix.driver import Output, rewritten_files, give_files_to_params, write_outputs
    from graphfix.graph import graphfile
    from graphfix.graph.kernels import NoGpuKernelsError
    from graphfix.trace.at_sites import check_trace

    script, *args = paths
    if fix and out is None and not (dry_run or diff):
        fail("a fixed traced graph needs somewhere to go: add -o OUT.meta (or --dry-run)")
    captured = traced(script, args, runs, until, timeout)
    # (the script is the run's only input; the graph it built makes the run one with a graph)
    _, with_sources = give_files_to_params([(script, Path(script), None)], selected,
                                           with_graph=True)
    try:
        findings, changes = check_trace(captured, with_sources, fix=fix)
    except NoGpuKernelsError as exc:
        fail(str(exc))
    except (graphfile.InputError, ValueError) as exc:
        fail(f"{script}: the traced graph: {exc}")
    report = Report(findings=at_least(findings, least), changes=changes,
                    notes=[captured.summary()])
    if not fix:
        report.notes.extend(_disagreements(script, selected, findings))
    rewritten = rewritten_files(changes, want_diff=diff) if fix else []
    (report.changed_paths if changes else report.unchanged_paths).append(script)
    report.changed_paths.extend(output.label for output in rewritten)
    if fix and changes and not (dry_run or diff):
        target = Path(out)
        if target.is_dir():  # (as a fixed graph file goes into a folder: by its name)
            target = target / f"{Path(script).stem}.meta"
        fixed = graphfile.GraphFile(Path(out), "metagraph", False, captured.meta_graph)
        try:
            write_outputs([Output(str(out), target, graph_file=fixed), *rewritten], force=force)
        except graphfile.InputError as exc:
            fail(str(exc))
    emit(report, fmt, report_path, fixing=fix,
         extra_lines=[line.rstrip("\n") for o in rewritten for line in o.diff])
    return report.exit_code(fixing=fix)


def _disagreements(script: str, selected, traced_findings) -> list[str]:
    """Where the static codemods and the trace disagree about the script's own file: per
    transform whose lines differ, the lines each found (a note each). A fed variable counts
    at the run that feeds it too (where the codemod says it)."""
    from graphfix.driver import run

    static, _ = run([script], selected, fix=False)
    # A rule with one surface has nothing to say about the other's findings.
    compared = {t.name for t, _ in selected.transforms if {"graph", "source"} <= set(t.surfaces())}
    found = {"the codemod": {}, "the trace": {}}
    for finding in static.findings:
        if finding.transform in compared:
            found["the codemod"].setdefault(finding.transform, set()).add(finding.line)
    for finding in traced_findings:
        if finding.path == script and finding.transform in compared:
            lines = found["the trace"].setdefault(finding.transform, set())
            lines.add(finding.line)
            lines.update(s["line"] for s in finding.details.get("fed_at", ())
                         if s["path"] == script)
    notes = []
    for transform in sorted(set(found["the codemod"]) | set(found["the trace"])):
        said = {who: sorted(lines.get(transform, ())) for who, lines in found.items()}
        if said["the codemod"] != said["the trace"]:
            parts = [f"{who} finds {'line(s) ' + ', '.join(map(str, lines)) if lines else 'nothing'}"
                     for who, lines in said.items()]
            notes.append(f"{script}: {transform}: {'; '.join(parts)}")
    return notes


def verify_traced(script: str, args: list[str], *, steps: int, fetches, target_devices,
                  fmt: str, report_path, runs, until, timeout,
                  op_libraries: list[str] = ()) -> int:
    """`verify SCRIPT [-- ARGS]`: trace the script, then verify the graph it built (import,
    place, run on the target devices), with the custom-op libraries the script loaded and
    those given (`op_libraries`: `--set stateful-custom-ops.op_library=`) loaded first."""
    options = {"label": script, "steps": steps, "fetches": list(fetches),
               "target_devices": list(target_devices), "op_libraries": list(op_libraries)}
    result = _verified(traced(script, args, runs, until, timeout, verify=options), **options)
    show_verify(result, fmt, report_path)
    return 0 if result.passed else 1


def _verified(captured, label: str, **options):
    """The verdict on the graph a trace captured (`verification.traced.verify_trace` with
    `label` and `options`, in this process), or, for a graph that calls the script's Python
    functions, that of the verify its child ran (`Trace.verified`); a one-line error, exit
    2, where verify refuses the graph."""
    from graphfix.graph.kernels import NoGpuKernelsError
    from graphfix.verification.run import VerifyError
    from graphfix.verification.traced import verdict_of, verify_trace

    try:
        if captured.verified is not None:
            return verdict_of(captured.verified)
        from graphfix.registry import verify_checks

        with phases_shown("verify"):
            return verify_trace(captured, label=label, checks=verify_checks(), **options)
    except (VerifyError, NoGpuKernelsError) as exc:
        fail(str(exc))


def fix_verified(paths: list[str], selected, *, fmt: str, report_path, runs, until, timeout,
                 force: bool, diff: bool, dry_run: bool) -> int:
    """`fix --verify SCRIPT [-- ARGS]`: the codemods' fix of the script, written only if the
    fixed script, traced, builds a graph the fixing transforms find clean and that verifies;
    otherwise nothing is written and the report says why (exit 2)."""
    from graphfix.driver import Selected, run, write_outputs
    from graphfix.graph import graphfile
    from graphfix.trace.at_sites import check_trace, given_op_libraries

    script, *args = paths
    if not script.endswith(".py"):
        fail(f"{script}: fix --verify takes a Python script")
    report, outputs = run([script], selected, fix=True, want_diff=diff)
    if report.failed or not outputs:
        report.notes.append(f"{script}: nothing to fix, nothing traced")
        emit(report, fmt, report_path, fixing=True)
        return report.exit_code(fixing=True)
    (output,) = outputs
    fixers = {c.transform for c in report.changes}
    # The fixed copy runs beside the script (its imports and data files are found as they
    # are for the script), under a name no import uses; it is removed whatever happens.
    copy = Path(script).with_name(f".{Path(script).stem}.graphfix-fixed.py")
    why = None
    options = {"label": f"{script} (fixed)", "steps": 1, "fetches": [],
               "target_devices": list(selected.target_devices),
               "op_libraries": given_op_libraries(selected)}
    try:
        copy.write_bytes(output.data)
        fixed = traced(str(copy), args, runs, until, timeout, label=script, verify=options)
    finally:
        copy.unlink(missing_ok=True)
    still, _ = check_trace(fixed, Selected([(t, o) for t, o in selected.transforms
                                            if t.name in fixers], selected.target_devices))
    if still:
        why = (f"the fixed script's graph still has {len(still)} finding(s), the first: "
               f"{still[0].to_text()} (a line of the fixed script)")
    else:
        result = _verified(fixed, **options)
        failed = [c for c in result.checks if not c.passed]
        report.notes.extend(result.to_lines())
        if failed:
            why = f"the fixed script's graph does not verify: {failed[0].name}: {failed[0].detail}"
    if why is not None:
        report.failed.append({"path": script, "error": f"not written: {why}"})
        report.changes, report.changed_paths = [], []
    elif not (diff or dry_run):
        try:
            write_outputs(outputs, force=force)
        except graphfile.InputError as exc:
            report.failed.append({"path": script, "error": str(exc)})
    report.notes.append(f"fixed copy: {fixed.summary()}")
    emit(report, fmt, report_path, fixing=True,
         extra_lines=[line.rstrip("\n") for line in output.diff])
    return report.exit_code(fixing=True)
