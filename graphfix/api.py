"""The Python API: the same transforms as the CLI, on objects an export pipeline holds."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from graphfix import registry
from graphfix.graph import graphfile as graphio
from graphfix.graph.devices import target_devices as target_devices_of
from graphfix.graph import proto
from graphfix.findings import Change, Changes, Finding
from graphfix.driver import Selected, apply_to_graph

if TYPE_CHECKING:
    from graphfix.trace import Trace
    from graphfix.verification.run import VerifyResult


def _selected(only, settings, target_devices) -> Selected:
    transforms = registry.select(list(only) if only else None)
    checked = registry.validate_settings(settings or {})
    try:
        devices = target_devices_of(target_devices or ())
    except ValueError as exc:
        raise registry.UsageError(f"target_devices: {exc}") from None
    return Selected.build(transforms, checked, devices)


# The messages a graph is given as, by kind: graphfix's own (`graphfix.graph.proto`) or TF's.
_MESSAGE_KINDS = (("graphdef", "tensorflow.GraphDef"), ("metagraph", "tensorflow.MetaGraphDef"),
                  ("savedmodel", "tensorflow.SavedModel"))


def _tf_version(version: str | None):
    """Placement judged by TensorFlow `version`'s table inside the block (None: the
    installed TF's, else the newest); UsageError, one line, for a version with none."""
    from graphfix.graph import kernels

    if version is not None:
        try:
            kernels.table_version(version)
        except kernels.TfVersionError as exc:
            raise registry.UsageError(f"tf_version: {exc}") from None
    return kernels.tf_version(version)


class _Holder:
    """A graph in whatever kind the caller gave, as a GraphFile we may edit, and the way back.

    A message is read into graphfix's own classes (a copy: the caller's is never edited)
    and given back in the caller's: TF's message class where the caller gave TF's (or a
    `tf.Graph`), graphfix's where it gave graphfix's or a path."""

    def __init__(self, graph: Any):
        self.kind = None
        self.tf_message = False
        if isinstance(graph, (str, os.PathLike)):
            self.kind = "path"
            self.file = graphio.load(graph)
            self.label = str(graph)
            return
        self.label = "<graph>"
        if isinstance(graph, (bytes, bytearray)):
            self.kind = "bytes"
            self.file = _parse_bytes(bytes(graph))
            return
        for kind, full_name in _MESSAGE_KINDS:
            if proto.is_message(graph, full_name):
                self.tf_message = not proto.is_own(graph)
                if self.tf_message:
                    copy = proto.from_tf(graph)
                else:
                    copy = type(graph)()
                    copy.CopyFrom(graph)  # never edit the caller's message
                self.kind = "message"
                self.file = graphio.GraphFile(Path(self.label), kind, False, copy)
                return
        if type(graph).__name__ == "Graph" and hasattr(graph, "as_graph_def"):
            import tensorflow as tf

            self.kind = "tf.Graph"
            meta = proto.from_tf(tf.compat.v1.train.export_meta_graph(graph=graph))
            self.file = graphio.GraphFile(Path(self.label), "metagraph", False, meta)
            return
        raise TypeError(
            "graph must be a path, bytes, a GraphDef/MetaGraphDef/SavedModel message or a "
            f"tf.Graph, not {type(graph).__name__}"
        )

    def result(self, out=None):
        if self.kind == "path":
            if out is None:
                return self.file.message
            return graphio.save(self.file, out)
        if self.kind == "bytes":
            return self.file.serialize()
        if self.kind == "tf.Graph":
            import tensorflow as tf

            graph = tf.Graph()
            with graph.as_default():
                tf.compat.v1.train.import_meta_graph(proto.to_tf(self.file.message))
            return graph
        return proto.to_tf(self.file.message) if self.tf_message else self.file.message


def _parse_bytes(data: bytes) -> graphio.GraphFile:
    reasons = []
    for kind, full_name in _MESSAGE_KINDS:
        cls = proto.message_class(full_name)
        try:
            msg = graphio.parse(data, cls, text=False, what=cls.__name__)
        except ValueError as exc:
            reasons.append(str(exc))
            continue
        return graphio.GraphFile(Path("<bytes>"), kind, False, msg)
    raise graphio.InputError(f"<bytes>: {reasons[0]}")


def check_graph(graph: Any, *, only: Iterable[str] | None = None,
                settings: dict[str, dict] | None = None,
                target_devices: Iterable[str] = (),
                tf_version: str | None = None) -> list[Finding]:
    """Findings for a graph.

    Args:
        graph: a path, serialized bytes, a GraphDef / MetaGraphDef / SavedModel message
            (TF's or graphfix's own, `graphfix.graph.proto`) or a `tf.Graph`. It is not
            changed.
        only: names of the transforms to run. Defaults to all.
        settings: `{transform: {param: value}}`, each value as its param declares (a
            repeatable param takes a list); UsageError, one line, for an unknown transform
            or param or a bad value. Defaults to each param's default.
        target_devices: devices the graph should place on. Defaults to none given.
        tf_version: the TensorFlow ("2.16") whose kernels placement is judged by, from
            graphfix's table of them, whatever TF is installed (UsageError, naming those
            shipped, for one it has no table of). Defaults to the installed TF's version,
            else the newest table.

    Returns:
        The findings, each with `node` set.
    """
    holder = _Holder(graph)
    selected = _selected(only, settings, target_devices)
    findings: list[Finding] = []
    with _tf_version(tf_version):
        for graph_def, meta in holder.file.graph_defs():
            found, _, _ = apply_to_graph(graph_def, meta, holder.label, selected, fix=False)
            findings.extend(found)
    return findings


def fix_graph(graph: Any, *, only: Iterable[str] | None = None,
              settings: dict[str, dict] | None = None, target_devices: Iterable[str] = (),
              out: str | os.PathLike | None = None,
              tf_version: str | None = None) -> tuple[Any, list[Change]]:
    """Fix a graph; return (fixed graph of the kind given, changes).

    Args:
        graph: as for `check_graph`. A message given is copied, never edited.
        only, settings, target_devices, tf_version: as for `check_graph`.
        out: for a path, where to write the fixed graph (same format). Defaults to not
            writing: the fixed message is returned instead.

    Returns:
        (fixed, changes): `fixed` is a new message / bytes / `tf.Graph` like the input, a
        message of the class given (for a path, graphfix's own: `graphfix.graph.proto.to_tf`
        makes it TF's), or the written path when `out` is given; `changes` lists every edit, and
        `changes.renames` maps each tensor a fix moved to its new name.
    """
    holder = _Holder(graph)
    selected = _selected(only, settings, target_devices)
    changes = Changes()
    with _tf_version(tf_version):
        for graph_def, meta in holder.file.graph_defs():
            _, made, _ = apply_to_graph(graph_def, meta, holder.label, selected, fix=True)
            changes.extend(made)
    return holder.result(out), changes


def _run_source(code, path, codemods, fix):
    from graphfix.source.run import run_source

    return run_source(code, path, codemods, fix=fix)


def _source_codemods(code, only, settings):
    """The rules of the selected transforms the pre-filter leaves work in `code` (as a run
    over files does): the others' modules (libcst's, for a libcst rule) are not imported."""
    from graphfix.source.prefilter import prefilter

    selected = _selected(only, settings, ())
    work = prefilter(code, [t for t, _ in selected.transforms]).work
    return [(t.source_codemod(), o) for t, o in selected.transforms if t in work]


def check_source(code: str, *, path: str = "<string>", only: Iterable[str] | None = None,
                 settings: dict[str, dict] | None = None) -> list[Finding]:
    """Findings for Python source code. A file that cannot be parsed raises SyntaxError."""
    result = _run_source(code, path, _source_codemods(code, only, settings), False)
    if result.skipped:
        raise SyntaxError(f"{path}: {result.skipped}")
    return result.findings


def fix_source(code: str, *, path: str = "<string>", only: Iterable[str] | None = None,
               settings: dict[str, dict] | None = None) -> tuple[str, list[Finding]]:
    """Fix Python source code; return (new code, the findings it addressed)."""
    result = _run_source(code, path, _source_codemods(code, only, settings), True)
    if result.skipped:
        raise SyntaxError(f"{path}: {result.skipped}")
    return result.new_code, result.findings


def verify(graph: Any, *, compare: Any = None, steps: int = 1, fetches: Sequence[str] = (),
           feeds: Mapping[str, Any] | None = None, target_devices: Iterable[str] = (),
           tolerance: float = 1e-5, op_libraries: Sequence[str] = (),
           logdir: str | os.PathLike | None = None,
           available_devices: Sequence[str] | None = None,
           step_timeout: float = 60.0) -> "VerifyResult":
    """Import and run a graph on the target devices (`graphfix.verification.run.verify_graph`).

    Args:
        graph: as for `check_graph`.
        compare: the original graph, any kind `check_graph` takes: the fixed graph's outputs
            must match its own (except what a fix changes on purpose). Defaults to none.
        steps: how many times to run the train op or the fetches; at least 1.
        fetches: tensor or op names to run. Defaults to the train ops, else the outputs.
        feeds: placeholder name -> value (a numpy array). Defaults to seeded values.
        target_devices: the devices the graph should place on, as for `check_graph`.
        tolerance: the allowed absolute and relative difference with `compare` (0 or more).
        op_libraries: custom-op libraries (`.so`) to load before the graph is imported.
        logdir: where to write TensorBoard's graph dashboard runs (`verify --logdir`).
        available_devices: the devices to run on instead of asking TF (tests, dry runs).
        step_timeout: seconds a step of a graph that dequeues may take before the run fails
            (a queue that starves); more than 0.

    Returns:
        A `VerifyResult`: `.passed`, `.checks`, `.values`, `.to_lines()`, `.to_json()`.

    Raises:
        UsageError: a bad argument (`tolerance` below 0, a device graphfix does not know),
            or TensorFlow is not installed here (one line: what to install).
        VerifyError: what `graphfix verify` refuses, in its words (`steps` under 1, a fetch
            the graph does not have, a graph that calls Python functions, a library that
            cannot be read, a logdir that cannot be written). Both are `graphfix.Error`s.
    """
    from graphfix.tf_runtime import require_tensorflow

    require_tensorflow("graphfix.verify", registry.UsageError)  # (before what imports numpy)
    from graphfix.graph.index import GraphError, index_for
    from graphfix.registry import intended_changes, verify_checks
    from graphfix.verification.run import VerifyError, check_request, verify_graph

    if isinstance(step_timeout, bool) or not isinstance(step_timeout, (int, float)) or not (
            0 < step_timeout < float("inf")):
        raise registry.UsageError(f"step_timeout must be a number above 0, not {step_timeout!r}")
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not (
            0 <= tolerance < float("inf")):
        raise registry.UsageError(f"tolerance must be a number, 0 or more, not {tolerance!r}")
    try:
        devices = target_devices_of(target_devices or ())
    except ValueError as exc:
        raise registry.UsageError(f"target_devices: {exc}") from None
    original = _Holder(compare).file if compare is not None else None
    holder = _Holder(graph)
    try:
        index = index_for(*holder.file.graph_defs()[0])
    except GraphError as exc:
        raise VerifyError(f"{holder.label}: {exc}") from None
    check_request(holder.label, index, steps=steps, fetches=list(fetches),
                  op_libraries=list(op_libraries), steps_name="steps")
    options: dict[str, Any] = {}
    if logdir is not None:
        from graphfix.verification.logdir import check_logdir

        options["logdir"] = check_logdir(Path(logdir))
    return verify_graph(holder.file, compare=original, label=holder.label, steps=steps,
                        fetches=list(fetches), feeds=dict(feeds) if feeds else None,
                        target_devices=devices, available_devices=available_devices,
                        tolerance=float(tolerance), op_libraries=list(op_libraries),
                        step_timeout=float(step_timeout), intended_changes=intended_changes,
                        checks=verify_checks(), **options)


def trace(script: str | os.PathLike, args: Sequence[str] = (), *, runs: int | None = None,
          until: str | None = None, timeout: float = 300.0) -> "Trace":
    """Run a Python script until it starts training and return the graph it built, with
    the line that made each node (`graphfix.trace.trace`). This runs the script's code.

    Args:
        script: the script's path.
        args: its command-line arguments (`sys.argv[1:]`).
        runs: stop after this many `Session.run` calls (at least 1). Defaults to the first
            run of a train op.
        until: stop when the script reaches "FILE:LINE" (before that line runs).
        timeout: seconds (more than 0) the script may run before it is stopped.

    Returns:
        A `Trace`: `meta_graph`, `sites` (each node's line), `runs`, `to_json()`.

    Raises:
        UsageError: a bad argument (`runs` under 1, `timeout` not above 0, `args` a string).
        TraceError: the script gave no graph (it raised, never ran a session, outlived the
            timeout), in one line. Both are `graphfix.Error`s.

    (`graphfix.trace(...)`, the package called, is the same call.)
    """
    from graphfix.trace import trace as run_trace

    return run_trace(script, args, runs=runs, until=until, timeout=timeout)
