"""Outputs: the files a fix would write, checked before anything is written, then written
all together or none (`write_outputs`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from graphfix.findings import Change, Report
from graphfix.graph import graphfile as graphio
from graphfix.storage import RefusedWrite, StagedWrites, writable_target


class Output:
    """A file a fix would write: where, what, and for a SavedModel the loaded file."""

    def __init__(self, label: str, target: Path | None, data: bytes | None = None,
                 graph_file: graphio.GraphFile | None = None, diff: list[str] | None = None):
        self.label = label
        self.target = target
        self.data = data
        self.graph_file = graph_file
        self.diff = [] if diff is None else diff


def rewritten_files(changes: list[Change], want_diff: bool = False) -> list[Output]:
    """The `Output`s of the files other than the graph that a graph fix rewrote
    (stateful-custom-ops' C++: a Change whose details carry `file` and its new `text`), to be
    written with the graph's outputs, all or none (`write_outputs`), by `run` and by a fix of
    a traced graph alike; the text leaves the Change (the report names the file). With
    `want_diff`, each carries its unified diff against the file as it is."""
    import difflib

    rewritten = []
    for change in changes:
        if "file" in change.details and "text" in change.details:
            text = change.details.pop("text")
            target = Path(change.details["file"])
            diff = []
            if want_diff:
                diff = list(difflib.unified_diff(
                    target.read_text(encoding="utf-8").splitlines(keepends=True),
                    text.splitlines(keepends=True), *_diff_labels(change.path)))
            rewritten.append(Output(change.path, target, data=text.encode("utf-8"),
                                    diff=diff))
    return rewritten


def _diff_labels(label: str) -> tuple[str, str]:
    """git's a/ b/ prefixes for a relative path; an absolute path is shown as it is."""
    return (label, label) if Path(label).is_absolute() else (f"a/{label}", f"b/{label}")


def refuse_overwriting_inputs(report: Report, outputs: list[Output], inputs: list[Path]) -> None:
    """A failure for each graph output that would land on another input of the run (`fix
    g.pb s.py -o s.py`), found before anything is written."""
    read = {os.path.realpath(p): p for p in inputs}
    for output in outputs:
        if output.graph_file is None:
            continue
        real = os.path.realpath(output.target)
        if real != os.path.realpath(output.graph_file.path) and real in read:
            report.failed.append({"path": output.label, "error": f"its output {output.target} "
                                  f"is the input {read[real]}"})


def preflight(outputs: list[Output], *, force: bool = False,
              reports: Sequence[tuple[str, Path]] = ()) -> None:
    """Refuse, with an InputError naming the file, before anything is written: an output
    whose directory is missing or cannot be written, a read-only file (unless `force`), a
    FIFO or directory in a file's place, a SavedModel copy into a directory it may not
    replace (`graphfile.check_saved_model_copy`), two outputs (the reports included: each
    (what it is, its path)) to one file. A symlink is written through
    (`graphfix.storage.writable_target`)."""
    seen: dict[str, str] = {}
    for label, target, real in _real_targets(outputs, force, reports):
        if real in seen:
            raise graphio.InputError(f"{target}: both {seen[real]} and {label} would be "
                                     "written to it")
        seen[real] = label


def _real_targets(outputs, force, reports):
    """(what is written, its target, the real path it changes) for each output and
    report."""
    try:
        for output in outputs:
            graph_file = output.graph_file
            if graph_file is None:
                real = writable_target(output.target, force=force)
            elif graph_file.kind != "savedmodel":
                real = writable_target(output.target, force=force)
            elif os.path.realpath(output.target) == os.path.realpath(graph_file.path):
                real = writable_target(output.target / graph_file.proto_name, force=force)
            else:
                real = graphio.check_saved_model_copy(graph_file, output.target, force=force)
            yield output.label, output.target, os.path.realpath(real)
        for label, report_path in reports:
            real = writable_target(report_path, force=force)
            yield label, report_path, os.path.realpath(real)
    except RefusedWrite as exc:
        raise graphio.InputError(str(exc)) from None


def _one_per_file(outputs: list[Output]) -> list[Output]:
    """`outputs` without the fixed sources that repeat an earlier one: the same file reached
    twice (by a symlink beside it in a tree), fixed to the same bytes."""
    kept, written = [], {}
    for output in outputs:
        if output.graph_file is None:
            real = os.path.realpath(output.target)
            if written.get(real, None) == output.data:
                continue
            written.setdefault(real, output.data)
        kept.append(output)
    return kept


def write_outputs(outputs: list[Output], *, force: bool = False,
                  reports: Sequence[tuple[str, Path, bytes]] = ()) -> None:
    """Write every output and each of the `reports` (what it is, as "the --report file",
    its path, its bytes): all staged beside their targets, then renamed into place together
    (`graphfix.storage.StagedWrites`), or, where one cannot be written, none; InputError
    naming the first that fails. `preflight`'s checks come first."""
    outputs = _one_per_file(outputs)
    preflight(outputs, force=force, reports=[(label, path) for label, path, _ in reports])
    with StagedWrites() as staged:
        for output in outputs:
            try:
                if output.graph_file is not None:
                    graphio.stage(output.graph_file, output.target, staged, force=force)
                else:
                    staged.add(writable_target(output.target, force=force), output.data)
            except OSError as exc:
                raise graphio.InputError(f"{output.target}: cannot write: "
                                         f"{exc.strerror or exc}") from None
        for _, report_path, data in reports:
            try:
                staged.add(writable_target(report_path, force=force), data)
            except OSError as exc:
                raise graphio.InputError(f"{report_path}: cannot write: "
                                         f"{exc.strerror or exc}") from None
        try:
            staged.commit()
        except OSError as exc:
            raise graphio.InputError(f"{exc.filename or 'output'}: cannot write: "
                                     f"{exc.strerror or exc}") from None
