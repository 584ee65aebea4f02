"""`graphfix verify`: prove a graph places and runs on its target devices.

1. Static: predict TF's placer with TF's own kernel registry (`graphfix.graph.placement`).
2. Run: import into a fresh graph, run the initializers, then `steps` steps of the train op
   (or the given fetches) with seeded synthetic feeds. On real GPUs when this process sees
   them; otherwise each target GPU is stood in for by a logical CPU device, and the report
   says "simulated".
3. Compare (optional): the same run of the original graph (with soft placement, since it
   may not place) must give the same outputs and variable values, except those the fixes
   change on purpose (`graphfix.verification.compare`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
import time
import zlib
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from graphfix.graph import graphfile as graphio
from graphfix.graph import kernels
from graphfix.graph import placement
from graphfix.graph import proto
from graphfix.graph import training
from graphfix.verification import inputs
from graphfix.verification import logdir as _logdir
from graphfix.verification.inputs import SEED
from graphfix.tf_runtime import import_runtime, physical_gpus
from graphfix.graph.devices import DeviceSpec
from graphfix.graph.index import VARIABLE_OPS, GraphError, GraphIndex
from graphfix.graph.index import index_for
from graphfix.graph.validity import shown
from graphfix.phases import phase
from graphfix.findings import IntendedChange

# What fills a lookup table (a Saver's restore fills one too: those under save/ are not these).
_TABLE_INIT_OPS = frozenset({
    "InitializeTable", "InitializeTableV2", "InitializeTableFromTextFile",
    "InitializeTableFromTextFileV2", "InitializeTableFromDataset", "LookupTableImport",
    "LookupTableImportV2"})
STEP_TIMEOUT = 60.0  # seconds a step that waits on other threads may take (see _may_starve)
# Ops that wait for another thread to give them something: a queue's dequeue, a barrier's or
# an accumulator's take, a staging area's unstage. Only a graph holding one can starve, so
# only its steps are bounded (a big model's honest step on a slow machine is not).
_WAITING_OPS = ("Dequeue", "TakeMany", "TakeGrad", "TakeIndexedSlices", "Unstage")
_NOT_OUTPUTS = frozenset({"NoOp", "Assign", "AssignVariableOp", "SaveV2", "RestoreV2",
                          "MergeV2Checkpoints", "ShardedFilename", "StringJoin", "Const"})


class VerifyError(Exception):
    """Bad input to verify (unreadable graph, bad feed file): one line, exit 2."""


@dataclasses.dataclass
class Check:
    """One check's verdict; `detail` is one line, `message` TF's whole error where it gave one,
    `names` the nodes the detail counts, by what they are (in JSON where there are some)."""

    name: str
    passed: bool
    detail: str = ""
    message: str = ""
    names: dict[str, list[str]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class VerifyResult:
    """Each check, pass or fail, plus where the run happened."""

    path: str
    devices: list[str]
    simulated: bool
    checks: list[Check] = dataclasses.field(default_factory=list)
    values: dict[str, Any] = dataclasses.field(default_factory=dict)
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    placement: list[str] = dataclasses.field(default_factory=list)  # ops and bytes per device

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def to_lines(self) -> list[str]:
        where = ", ".join(self.devices) or "CPU"
        mode = "simulated on logical CPU devices" if self.simulated else "on real devices"
        lines = [f"verify {self.path}: {mode} ({where})"]
        for check in self.checks:
            mark = "pass" if check.passed else "FAIL"
            lines.append(f"  {mark}  {check.name}" + (f": {check.detail}" if check.detail else ""))
        lines += [f"  placement  {line}" for line in self.placement]
        lines.append("verified" if self.passed else "verification failed")
        return lines

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "passed": self.passed,
            "simulated": self.simulated,
            "devices": self.devices,
            "checks": [{k: v for k, v in dataclasses.asdict(c).items()
                        if k not in ("message", "names") or v} for c in self.checks],
            "seconds": {k: round(v, 4) for k, v in self.seconds.items()},
            "placement": self.placement,
        }


def verify_path(path: str, **options) -> VerifyResult:
    """Load a graph file and verify it. VerifyError (a usage error: exit 2) for bad input:
    an unreadable or invalid graph, a bad option (`steps` under 1, a fetch the graph does
    not have, a cluster too big to start here), all said before TF is imported."""
    graph_file, index = _load_valid(path)
    compare = options.pop("compare", None)
    original = _load_valid(compare)[0] if compare else None
    for label, graph_def in ((path, index.graph_def),
                             *([(compare, _first_graph(original)[0])] if compare else [])):
        _check_no_python_functions(label, graph_def)
    steps = options.get("steps", 1)
    if steps < 1:
        raise VerifyError(f"--steps must be at least 1, not {steps}")
    _check_fetches(path, index, options.get("fetches") or ())
    from graphfix.verification import custom_ops

    custom_ops.check_libraries(options.get("op_libraries") or ())
    feeds = _load_feeds(options.pop("feeds", []) or [])
    cluster = options.pop("cluster", None)
    if cluster:
        from graphfix.verification.cluster import parse_cluster, verify_on_cluster

        if compare:
            # (a pass would read as if the two graphs had been compared)
            raise VerifyError(
                f"{path}: --compare with --cluster: a run on a local cluster is not compared "
                f"with the original; verify it on the cluster without --compare")
        options.pop("target_devices", None)
        options.pop("intended_changes", None)
        return verify_on_cluster(graph_file, parse_cluster(cluster), feeds=feeds, label=path,
                                 **options)
    return verify_graph(graph_file, compare=original, feeds=feeds, label=path, **options)


def _load_valid(path: str) -> tuple[graphio.GraphFile, GraphIndex]:
    """A graph file read, and the index of the graph verify runs (VerifyError if either is
    not valid: `graphfix.graph.validity`)."""
    try:
        graph_file = graphio.load(path)
        graph_def, meta = _first_graph(graph_file)
        return graph_file, index_for(graph_def, meta)
    except graphio.InputError as exc:
        raise VerifyError(str(exc)) from None
    except GraphError as exc:
        raise VerifyError(f"{path}: {exc}") from None


def _check_no_python_functions(path: str, graph_def) -> None:
    """VerifyError for a graph that calls Python functions (`tf.py_func`,
    `tf.numpy_function`): they live in the process that built the graph, not in the file."""
    calls = inputs.python_function_nodes(graph_def)
    if calls:
        raise VerifyError(
            f"{path}: {len(calls)} node(s) call Python functions (py_func, numpy_function; "
            f"{shown(calls[0])} the first), which only the process that built the graph has, so "
            f"the graph cannot run from the file: verify the script that builds it: "
            f"graphfix verify SCRIPT.py")


def _check_fetches(path: str, index: GraphIndex, fetches: Sequence[str]) -> None:
    """VerifyError for a `--fetch` that names no node of the graph or an output it lacks."""
    for fetch in fetches:
        name, colon, port = fetch.partition(":")
        if name not in index:
            raise VerifyError(f"--fetch {fetch}: {path} has no node named {name!r}")
        if not colon:
            continue
        if not (port.isascii() and port.isdigit()):
            raise VerifyError(f"--fetch {fetch}: {port!r} is not an output number")
        outputs = index.signatures.output_types(index.node(name))
        if outputs is not None and int(port) >= len(outputs):
            raise VerifyError(f"--fetch {fetch}: {name} ({index.node(name).op}) has "
                              f"{len(outputs)} output(s)")


def _load_feeds(specs: Sequence[str]) -> dict[str, np.ndarray]:
    out = {}
    for spec in specs:
        name, eq, file = spec.partition("=")
        if not eq or not name or not file:
            raise VerifyError(f"--feed takes NAME=FILE.npy, not {spec!r}")
        try:
            out[name] = np.load(file, allow_pickle=False)
        except FileNotFoundError:
            raise VerifyError(f"{file}: no such file") from None
        except (ValueError, OSError) as exc:
            raise VerifyError(f"{file}: not a .npy array ({str(exc).splitlines()[0]})") from None
    return out


def gpu_devices(available: Sequence[str] | None = None) -> list[str]:
    """The GPUs this process sees (`available` injects a device list, for tests)."""
    if available is not None:
        return [d for d in available if DeviceSpec.parse(d).device_type == "GPU"]
    return [f"/device:GPU:{i}" for i, _ in enumerate(physical_gpus())]


def _first_graph(graph_file: graphio.GraphFile):
    graphs = graph_file.graph_defs()
    if not graphs:
        raise VerifyError(f"{graph_file.path}: holds no graph")
    return graphs[0]


def plan_devices(index: GraphIndex, real_gpus: list[str]) -> tuple[dict[str, str], bool, int]:
    """Map each GPU the graph names to a device of this process.

    Returns (GPU index -> device string, simulated?, CPU devices needed). Without real GPUs,
    GPU k is stood in for by logical CPU k + 1, so towers stay on distinct devices.
    """
    wanted = sorted({
        spec.device_index or 0
        for node in (*index, *_function_nodes(index.graph_def))
        if node.device and (spec := DeviceSpec.parse(node.device)).device_type == "GPU"
    })
    if real_gpus or not wanted:
        return {}, False, 1
    return {str(k): f"CPU:{k + 1}" for k in wanted}, True, max(wanted) + 2


def _function_nodes(graph_def) -> list:
    """The nodes of the graph's function bodies (a While's cond and body, a tf.function's)."""
    return [node for function in graph_def.library.function for node in function.node_def]


def runnable_copy(graph_def, mapping: dict[str, str]):
    """The graph as verify runs it (one copy; the caller's graph is untouched):

    * each GPU device replaced by its stand-in CPU device (`mapping`: GPU index -> "CPU:k"),
      in the main graph and in every function body;
    * each random op left unseeded (seed = seed2 = 0) seeded from its name, so every run
      draws the same numbers and two graphs agree node by node.
    """
    copy = type(graph_def)()
    copy.CopyFrom(graph_def)
    for node in (*copy.node, *_function_nodes(copy)):
        if mapping and node.device:
            spec = DeviceSpec.parse(node.device)
            if spec.device_type == "GPU":
                kind, index = mapping[str(spec.device_index or 0)].split(":")
                node.device = _replaced(spec, kind, int(index))
        attrs = node.attr
        if "seed2" in attrs and "seed" in attrs and attrs["seed"].i == 0 and attrs["seed2"].i == 0:
            attrs["seed"].i = SEED
            attrs["seed2"].i = zlib.crc32(node.name.encode()) & 0x7FFFFFFF
    return copy


@functools.lru_cache(maxsize=256)
def _replaced(spec: DeviceSpec, kind: str, index: int) -> str:
    return spec.replace(device_type=kind, device_index=index).to_string()


@dataclasses.dataclass
class _Run:
    error: str | None
    values: dict[str, np.ndarray]
    variables_before: dict[str, np.ndarray]
    variables_after: dict[str, np.ndarray]
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    devices: dict[str, str] = dataclasses.field(default_factory=dict)  # node -> where it ran
    loss: tuple[float, float] | None = None  # before and after the steps
    error_message: str = ""  # TF's whole message, where `error` is its telling line
    queue_threads: int = 0  # queue runner threads that fed the steps
    run_metadata: Any = None  # the traced first step's RunMetadata, where it was traced
    observed: dict[str, list[np.ndarray]] = dataclasses.field(default_factory=dict)  # per step


def _run(graph_def, meta, *, steps, fetches, feeds, cpu_count, soft, target: str = "",
         loss_name: str | None = None, watched: set[str] = frozenset(),
         checkpoint: str | None = None, step_timeout: float = STEP_TIMEOUT,
         trace: bool = False, observed: Sequence[str] = (),
         configure: Callable[[Any], None] | None = None) -> _Run:
    """Import and run a graph; `watched` variables are also read before the steps; the
    first step is traced (FULL_TRACE: where each op ran) on a cluster or with `trace`;
    the outputs of the `observed` nodes are fetched with each step and kept per step
    (`_Run.observed`); `configure` edits the session's ConfigProto.

    As a user's program runs it: variables initialized, or restored from `checkpoint` (a
    SavedModel's variables) through the graph's own Saver; tables initialized; queue runners
    started before the steps and stopped after; in a graph that waits on other threads
    (`_may_starve`), no step takes longer than `step_timeout` seconds (a queue that starves
    fails the run instead of hanging it)."""
    import tensorflow as tf

    seconds = {}
    clock = time.perf_counter()
    tf1 = tf.compat.v1
    graph = tf.Graph()
    phase("importing the graph")
    try:
        _import(graph, graph_def, meta)
    except Exception as exc:  # TF's importer raises what it likes (ValueError, TypeError...)
        detail = f"{type(exc).__name__}: {exc}"
        return _Run(f"the graph does not import into TensorFlow: {detail.splitlines()[0]}",
                    {}, {}, {}, error_message=detail)
    variables = [op for op in graph.get_operations() if op.type in VARIABLE_OPS]
    restore = _restore(graph, meta, checkpoint)
    init_ops = (_table_inits(graph) + ([] if restore else _init_ops(graph, meta))
                + _iterator_inits(graph))
    reads = _variable_reads(graph, variables)
    targets = _fetch_targets(graph, meta, fetches)
    feed_dict = inputs.feed_values(graph, graph_def, feeds)
    seconds["graph_import"] = time.perf_counter() - clock
    clock = time.perf_counter()
    config = tf1.ConfigProto(device_count={"CPU": cpu_count}, allow_soft_placement=soft)
    if configure is not None:
        configure(config)
    # (Not a variant, which cannot be fetched, nor a handle, the same on every step.)
    observed_tensors = {t.name: t for name in observed
                        for t in graph.get_operation_by_name(name).outputs
                        if t.dtype not in (tf.variant, tf.resource)}
    observed_values: dict[str, list[np.ndarray]] = {}
    values: dict[str, np.ndarray] = {}
    before: dict[str, np.ndarray] = {}
    after: dict[str, np.ndarray] = {}
    devices: dict[str, str] = {}
    metadata = None
    loss = None
    loss_tensor = graph.get_tensor_by_name(loss_name) if loss_name else None
    bounded = (tf1.RunOptions(timeout_in_ms=int(step_timeout * 1000)) if _may_starve(graph)
               else tf1.RunOptions())
    threads: list = []  # the queue runners' threads, once started
    try:
        with tf1.Session(target, graph=graph, config=config) as session:
            phase("initializing")
            if restore:
                session.run(*restore)
            if init_ops:
                session.run(init_ops, feed_dict=feed_dict)
            with _queue_runners_running(session) as threads:
                before, after, loss, metadata = _steps(
                    session, targets, feed_dict, values, reads, watched, loss_tensor, steps,
                    bounded, traced=bool(target) or trace,
                    observed=(observed_tensors, observed_values))
                devices = _devices_from(metadata) if metadata is not None else {}
    except tf.errors.DeadlineExceededError as exc:
        waiting = (f" ({len(threads)} queue runner thread(s) started): its input queues starved"
                   if threads else "")
        return _Run(f"a step ran past {step_timeout:g} s{waiting}", values, before, after,
                    error_message=getattr(exc, "message", str(exc)))
    except tf.errors.OpError as exc:
        return _Run(_first_line(exc), values, before, after,
                    error_message=getattr(exc, "message", str(exc)))
    seconds["run"] = time.perf_counter() - clock
    return _Run(None, values, before, after, seconds, devices, loss, queue_threads=len(threads),
                run_metadata=metadata, observed=observed_values)


def _may_starve(graph) -> bool:
    """Whether a step can wait for ever on another thread (see `_WAITING_OPS`)."""
    return any(any(mark in op.type for mark in _WAITING_OPS) for op in graph.get_operations())


def _import(graph, graph_def, meta) -> None:
    """Import a graph (and a MetaGraphDef's collections) into `graph`, as
    `import_meta_graph` does but without building a Saver from the variables when the
    MetaGraphDef has none (TF cannot rebuild one over every saveable: a hash table's fails);
    a graph's own Saver is read from its saver_def where it restores."""
    import tensorflow as tf

    with graph.as_default():
        if meta is None:
            tf.compat.v1.import_graph_def(proto.to_tf(graph_def), name="")
            return
        from tensorflow.python.framework import meta_graph

        meta_copy = type(meta)()
        meta_copy.CopyFrom(meta)
        meta_copy.graph_def.CopyFrom(graph_def)
        meta_graph.import_scoped_meta_graph(proto.to_tf(meta_copy), clear_devices=False)


def _steps(session, targets, feed_dict, values, reads, watched, loss_tensor, steps, bounded,
           traced, observed):
    """Run the steps in an initialized session: (watched variables before, every variable
    after, the loss before and after or None, the first step's RunMetadata if `traced`);
    the values fetched go into `values`; `observed` is (name -> tensor fetched with each
    step, name -> the list its value of each step is appended to)."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    before, metadata, loss = {}, None, None
    if watched:
        before = _read_variables(session, {k: v for k, v in reads.items() if k in watched})
    loss_before = (session.run(loss_tensor, feed_dict, options=bounded)
                   if loss_tensor is not None else None)
    observed_tensors, observed_values = observed
    fetched = (targets, list(observed_tensors.values()))
    for step in range(max(steps, 1)):
        phase(f"step {step + 1} of {max(steps, 1)}")
        if traced and step == 0:  # a distributed run: record where each op ran
            options = tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE,
                                     timeout_in_ms=bounded.timeout_in_ms)
            metadata = tf1.RunMetadata()
            results, seen = session.run(fetched, feed_dict, options=options,
                                        run_metadata=metadata)
        else:
            results, seen = session.run(fetched, feed_dict=feed_dict, options=bounded)
        for name, value in zip(observed_tensors, seen):
            observed_values.setdefault(name, []).append(np.asarray(value))
    for fetched, value in zip(targets, results):
        if isinstance(value, np.ndarray) or np.isscalar(value):
            values[fetched.name] = np.asarray(value)
    after = _read_variables(session, reads)
    if loss_tensor is not None:
        loss = (float(loss_before), float(session.run(loss_tensor, feed_dict,
                                                      options=bounded)))
    return before, after, loss, metadata


def _devices_from(metadata) -> dict[str, str]:
    """Node name -> the device it ran on, from a traced step's step stats."""
    out = {}
    for device in metadata.step_stats.dev_stats:
        for stats in device.node_stats:
            out.setdefault(stats.node_name.split(":")[0], device.device)
    return out


def _check_feeds(index: GraphIndex, feeds: dict[str, np.ndarray]) -> None:
    """VerifyError for a feed that names no placeholder of the graph or whose shape does not
    fit the placeholder's, read off the GraphDef: said before TF is imported."""
    placeholders = {index.names[p]: p for p in index.positions_of(training.FEEDABLE_OPS)}
    for name, value in feeds.items():
        position = placeholders.get(name.split(":")[0])
        if position is None:
            raise VerifyError(f"--feed {name}: no placeholder of that name; the graph has: "
                              f"{', '.join(sorted(placeholders)) or 'none'}")
        shape = index.node_at(position).attr["shape"].shape
        if shape.unknown_rank:
            continue
        dims = [d.size for d in shape.dim]
        if len(dims) != value.ndim or any(d not in (-1, v) for d, v in zip(dims, value.shape)):
            said = "(" + ", ".join("None" if d == -1 else str(d) for d in dims) + \
                ("," if len(dims) == 1 else "") + ")"
            raise VerifyError(f"--feed {name}: shape {list(value.shape)} does not fit the "
                              f"placeholder's {said}")


_FRAMING = ("Graph execution error", "Detected at node", "[[", "Node:", "Traceback", "File ")
# "2 root error(s) found." lists each as "  (0) FAILED_PRECONDITION: Table not initialized."
_ROOT_COUNT = re.compile(r"^\d+ root error\(s\) found\.$")
_ROOT_ERROR = re.compile(r"^\s*\(\d+\)\s+([A-Z_]+: .*)$")


def _first_line(exc) -> str:
    """The line of TF's error that says what went wrong (not its "Graph execution error:"
    header, its count of root errors, a traceback or a `[[node]]` line): a placement
    message first, else the first root error, else the first other line."""
    message = getattr(exc, "message", str(exc))
    lines = [ln for ln in message.splitlines() if ln.strip()]
    keep = [ln for ln in lines if "Cannot assign" in ln or "Could not satisfy" in ln]
    roots = [m.group(1) for m in map(_ROOT_ERROR.match, lines) if m]
    telling = [ln for ln in lines if not ln.startswith((" ", "\t"))
               and not ln.strip().startswith(_FRAMING) and not _ROOT_COUNT.match(ln.strip())]
    return (keep or roots or telling or lines or [type(exc).__name__])[0].strip()


def _variable_reads(graph, variables) -> dict:
    """A tensor reading each variable's value, made once before the session starts."""
    import tensorflow as tf

    reads = {}
    with graph.as_default():
        for op in variables:
            if op.type == "VarHandleOp":
                with tf.name_scope("graphfix_verify"), tf.device(op.device or None):
                    reads[op.name] = tf.raw_ops.ReadVariableOp(
                        resource=op.outputs[0], dtype=op.get_attr("dtype"))
            else:
                reads[op.name] = op.outputs[0]
    return reads


def _read_variables(session, reads: dict) -> dict[str, np.ndarray]:
    """Every variable's value in one session call (one by one if some cannot be read)."""
    import tensorflow as tf

    try:
        values = session.run(list(reads.values()))
        return {name: np.asarray(v) for name, v in zip(reads, values)}
    except tf.errors.OpError:
        out = {}
        for name, tensor in reads.items():
            try:
                out[name] = np.asarray(session.run(tensor))
            except tf.errors.OpError:
                continue
        return out


@contextlib.contextmanager
def _queue_runners_running(session):
    """The graph's queue runners started for the block (their threads, [] if it has none),
    stopped after it; the threads are daemons, so one stuck in an op never holds the
    process."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    if not session.graph.get_collection(tf1.GraphKeys.QUEUE_RUNNERS):
        yield []
        return
    coordinator = tf1.train.Coordinator()
    threads = tf1.train.start_queue_runners(session, coord=coordinator, daemon=True)
    try:
        yield threads
    finally:
        coordinator.request_stop()
        coordinator.join(threads, stop_grace_period_secs=2, ignore_live_threads=True)


def _table_inits(graph) -> list:
    """What initializes the graph's lookup tables: the table-initializer collection, else
    `init_all_tables`, else every table-initializing op."""
    listed = graph.get_collection("table_initializer")
    if listed:
        return list(listed)
    try:
        return [graph.get_operation_by_name("init_all_tables")]
    except KeyError:
        return [op for op in graph.get_operations()
                if op.type in _TABLE_INIT_OPS and not op.name.startswith("save/")]


def _iterator_inits(graph) -> list:
    """What initializes the graph's tf.data iterators (`make_initializable_iterator`'s
    `MakeIterator`), run with the initializers and fed as the steps are (a parameterized
    dataset's placeholders)."""
    return [op for op in graph.get_operations() if op.type == "MakeIterator"]


def _restore(graph, meta, checkpoint: str | None):
    """(restore op, feed) that loads the variables from `checkpoint` through the graph's
    Saver (its MetaGraphDef's saver_def); None where there is nothing to restore."""
    saver = meta.saver_def if meta is not None and meta.HasField("saver_def") else None
    if checkpoint is None or saver is None or not saver.restore_op_name:
        return None
    try:
        op = graph.get_operation_by_name(saver.restore_op_name.split(":")[0])
        filename = graph.get_tensor_by_name(saver.filename_tensor_name)
    except (KeyError, ValueError):
        return None
    return op, {filename: checkpoint}


def _checkpoint_of(graph_file: graphio.GraphFile) -> str | None:
    """A SavedModel's variables (`DIR/variables/variables`), if it has any."""
    if graph_file.kind != "savedmodel":
        return None
    prefix = Path(graph_file.path) / "variables" / "variables"
    return str(prefix) if prefix.with_suffix(".index").exists() else None


def _init_ops(graph, meta) -> list:
    import tensorflow as tf

    with graph.as_default():
        initializers = [v.initializer for v in tf.compat.v1.global_variables()]
        initializers += [v.initializer for v in tf.compat.v1.local_variables()]
        if initializers:
            return initializers
    try:
        return [graph.get_operation_by_name("init")]
    except KeyError:
        pass
    # A bare GraphDef: each variable's initializing assign (named VAR/Assign by TF).
    ops = []
    for op in graph.get_operations():
        if op.type in ("Assign", "AssignVariableOp") and op.name.endswith("/Assign"):
            ops.append(op)
    return ops


def _fetch_targets(graph, meta, fetches: Sequence[str]) -> list:
    import tensorflow as tf

    if fetches:
        out = []
        for name in fetches:
            try:
                out.append(graph.as_graph_element(name))
            except (KeyError, ValueError) as exc:
                raise VerifyError(f"--fetch {name}: {exc}") from None
        return out
    train_ops = graph.get_collection("train_op")
    if train_ops:
        return list(train_ops)
    consumed = {t.op.name for op in graph.get_operations() for t in op.inputs}
    consumed |= {c.name for op in graph.get_operations() for c in op.control_inputs}
    dead = _maybe_dead(graph)
    saver = _saver_ops(graph, meta)
    outputs = []
    for op in graph.get_operations():
        if op.name in consumed or op.type in _NOT_OUTPUTS or op.type in VARIABLE_OPS:
            continue
        if op.name == "init" or op.name in saver or op.type.startswith("Assign"):
            continue
        if op.name in dead:
            continue  # fetching it fails ("Retval[0] does not have value") when its branch is not taken
        if op.outputs and op.outputs[0].dtype in (tf.variant, tf.resource):
            continue  # (a variant cannot be fetched: a while_v2's TensorList, as map_fn's)
        outputs.append(op.outputs[0] if op.outputs else op)
    return outputs


def _saver_ops(graph, meta) -> set[str]:
    """The Saver's ops, which a program runs to save or restore, never as a step: those
    under `save/` (TF1's Saver) and everything fed by the saver_def's filename tensor (a TF2
    SavedModel's `saver_filename` and the save and restore calls it feeds)."""
    found = {op.name for op in graph.get_operations() if op.name.startswith("save/")}
    saver = meta.saver_def if meta is not None and meta.HasField("saver_def") else None
    if saver is None or not saver.filename_tensor_name:
        return found
    try:
        pending = [graph.get_tensor_by_name(saver.filename_tensor_name).op]
    except (KeyError, ValueError):
        return found
    while pending:
        op = pending.pop()
        if op.name not in found:
            found.add(op.name)
            pending.extend(consumer for tensor in op.outputs for consumer in tensor.consumers())
    return found


def _maybe_dead(graph) -> set[str]:
    """Ops a `cond` may leave dead: downstream of a Switch and not past its Merge."""
    dead: set[str] = set()
    for op in graph.get_operations():  # creation order: inputs first, loops' back edges aside
        if op.type in ("Merge", "RefMerge"):
            continue
        if op.type in ("Switch", "RefSwitch") or any(t.op.name in dead for t in op.inputs):
            dead.add(op.name)
    return dead


def jobs_named(index: GraphIndex) -> dict[str, int]:
    """{job: tasks} of the jobs the graph's devices name (`localhost` aside, the job of a
    single process), by name: the same order on every run."""
    tasks: dict[str, int] = {}
    for device in sorted(set(index.devices)):
        spec = DeviceSpec.parse(device) if device else None
        if spec is not None and spec.job not in (None, "localhost"):
            tasks[spec.job] = max(tasks.get(spec.job, 1), (spec.task or 0) + 1)
    return tasks


def default_fetches(index: GraphIndex) -> tuple[str, ...]:
    """What a user's loop runs when no fetch is given: the train ops (the `train_op`
    collection, else the sinks after the optimizer's Apply ops, such as the `AssignAdd` that
    `apply_gradients(global_step=...)` returns); () for a graph that does not train."""
    return tuple(training.train_ops(index)[0])


def verify_graph(graph_file: graphio.GraphFile, *, steps: int = 1, fetches: Sequence[str] = (),
                 feeds: dict[str, np.ndarray] | None = None, compare=None,
                 target_devices: Sequence[str] = (), available_devices: Sequence[str] | None = None,
                 label: str | None = None, tolerance: float = 1e-5,
                 step_timeout: float = STEP_TIMEOUT, logdir: Path | None = None,
                 op_libraries: Sequence[str] = (), soft_placement: bool = False,
                 intended_changes: Callable[[GraphIndex, GraphIndex],
                                            Sequence[IntendedChange]] | None = None
                 ) -> VerifyResult:
    """Verify a loaded graph: static placement, then a seeded run (see module docstring).

    Args:
        graph_file: the graph, as `graphio.load` gives it.
        steps: how many times to run the train op or fetches. Defaults to 1.
        fetches: names to run. Defaults to the train ops (`default_fetches`), else the
            outputs that every run computes (none a `cond` may leave dead).
        feeds: placeholder name -> value. Defaults to seeded synthetic values.
        compare: the original graph (a GraphFile); its outputs must match.
        target_devices: unused for now beyond the report. Defaults to ().
        available_devices: inject the device list instead of asking TF (for tests).
        label: the path to name in the report.
        tolerance: the allowed absolute and relative difference. Defaults to 1e-5.
        step_timeout: seconds a step of a graph that dequeues may take before the run fails
            (a starving input queue). Defaults to STEP_TIMEOUT.
        logdir: where to write TensorBoard's graph dashboard runs (`logdir.write_run`):
            the graph and its traced step in logdir/after, `compare`'s in logdir/before.
        op_libraries: custom-op libraries (`.so`) to load before the graph is imported;
            the outputs of their ops not registered stateful are checked for folding
            (`custom_ops`: with `steps` of 2 or more).
        soft_placement: the graph's session places it with `allow_soft_placement=True` (a
            traced script's, `Trace.soft_placement`): what TF's placer then moves to the CPU
            is no placement failure (`placement.problems`), and the run has soft placement.
        intended_changes: (original index, fixed index) -> what the fixes between them
            change on purpose (`graphfix.registry.intended_changes`): `compare` lets those
            values differ and names them. Defaults to none: every value must match.
    """
    from graphfix.verification import compare as comparing
    from graphfix.verification import custom_ops

    graph_def, meta = _first_graph(graph_file)
    index = index_for(graph_def, meta)
    _check_feeds(index, feeds or {})
    clock = time.perf_counter()
    phase("importing TensorFlow")
    import_runtime()  # (timed on its own: the fixed cost of every verify)
    seconds = {"tensorflow_import": time.perf_counter() - clock}
    if op_libraries:
        clock = time.perf_counter()
        custom_ops.load_libraries(op_libraries)
        seconds["op_libraries"] = time.perf_counter() - clock
    fetches = tuple(fetches) or default_fetches(index)
    real_gpus = gpu_devices(available_devices)
    mapping, simulated, cpu_count = plan_devices(index, real_gpus)
    devices = real_gpus or sorted({f"/device:GPU:{k} -> /device:{v}" for k, v in mapping.items()})
    result = VerifyResult(label or str(graph_file.path), devices, simulated, seconds=seconds,
                          placement=placement.summary(index))
    jobs = jobs_named(index)
    if jobs:  # one process has only /job:localhost: such a graph runs on a cluster
        cluster = ",".join(f"{job}={count}" for job, count in sorted(jobs.items()))
        result.checks.append(Check("cluster", False, (
            f"the graph places ops on jobs {', '.join(sorted(jobs))}, which one process "
            f"does not have; verify it on a local cluster: --cluster {cluster}")))
        return result

    if not _placed(index, soft_placement, result):
        return result
    if simulated:
        _check_runs_on_cpu_stand_ins(result.path, graph_def)

    runnable = runnable_copy(graph_def, mapping if simulated else {})
    run_graph = functools.partial(
        _run, runnable, meta, steps=steps, fetches=fetches, feeds=feeds or {},
        cpu_count=cpu_count, soft=soft_placement, checkpoint=_checkpoint_of(graph_file),
        step_timeout=step_timeout)
    watched = comparing.update_variables(index)
    # (traced where there are update ops: the step's stats say which of them ran)
    run = run_graph(watched=watched, trace=logdir is not None or bool(watched),
                    observed=custom_ops.unstateful_custom_ops(index))
    if logdir is not None:  # (the graph alone where the step failed)
        _logdir.write_run(logdir, _logdir.AFTER, graph_def, run.run_metadata)
    if run.error:
        result.checks.append(Check("run", False, run.error, run.error_message))
        return result
    result.checks.append(Check("run", True, f"initialized, then {max(steps, 1)} step(s) ran"))
    update_check = comparing.update_ops_check(index, run)
    if update_check is not None:
        result.checks.append(update_check)
    seconds.update(graph_import=run.seconds["graph_import"], run=run.seconds["run"])

    def run_folding_off(nodes: list[str]):
        clock = time.perf_counter()
        again = run_graph(observed=nodes, configure=custom_ops.folding_off)
        seconds["run_folding_off"] = time.perf_counter() - clock
        return again.error, again.observed

    folding_check = custom_ops.folding_check(index, run.observed, steps, run_folding_off)
    if folding_check is not None:
        result.checks.append(folding_check)
    result.values = {**run.values, **{f"variable:{k}": v for k, v in run.variables_after.items()}}

    if compare is not None:
        original_def, original_meta = _first_graph(compare)
        original_index = index_for(original_def, original_meta)
        original_mapping, _, original_cpus = plan_devices(original_index, real_gpus)
        original_runnable = runnable_copy(original_def, original_mapping if simulated else {})
        phase("running the original graph (--compare)")
        reference = _run(original_runnable, original_meta, steps=steps, fetches=fetches,
                         feeds=feeds or {}, cpu_count=max(cpu_count, original_cpus), soft=True,
                         checkpoint=_checkpoint_of(compare), step_timeout=step_timeout,
                         trace=logdir is not None)
        if logdir is not None:
            _logdir.write_run(logdir, _logdir.BEFORE, original_def, reference.run_metadata)
        if reference.error:
            result.checks.append(Check("compare", False, f"original graph failed: {reference.error}",
                                       reference.error_message))
        else:
            intended = (intended_changes(original_index, index) if intended_changes
                        else ())
            result.checks.append(comparing.compare(
                run, reference, tolerance, intended,
                comparing.raced_update_variables(index, original_index)))
    return result




def _check_runs_on_cpu_stand_ins(path: str, graph_def) -> None:
    """VerifyError for a graph with ops that have a GPU kernel and no CPU one (cuDNN's RNN
    ops): placement is checked, but the logical CPU devices standing in for the GPUs cannot
    run them, so only a machine with a GPU can run the graph. A FAIL would read as if the
    fix were wrong."""
    library = {f.signature.name for f in graph_def.library.function}
    nodes = [node for node in (*graph_def.node,
                               *(n for f in graph_def.library.function for n in f.node_def))
             if node.op not in library and kernels.verdict(node.op, "CPU") is not True
             and not kernels.supports(node, "CPU") and kernels.supports(node, "GPU")]
    if nodes:
        raise VerifyError(
            f"{path}: the placement check passes, but {len(nodes)} node(s) have a GPU kernel "
            f"and no CPU one ({shown(nodes[0].op)} {shown(nodes[0].name)} the first), which the "
            f"CPU devices standing in for this machine's missing GPUs cannot run: verify it "
            f"where a GPU is present")


def _placed(index: GraphIndex, soft_placement: bool, result: VerifyResult) -> bool:
    """The "placement" check, added to `result` (its time in `result.seconds`): whether TF's
    placer places every colocation group of the graph (`placement.problems`), with soft
    placement where the graph's session has it (a failed check for each group refused)."""
    clock = time.perf_counter()
    phase("checking placement")
    found = placement.problems(index, soft_placement=soft_placement)
    refused = [p for p in found if p.refused]
    result.seconds["placement_check"] = time.perf_counter() - clock
    if refused:
        result.checks.extend(Check("placement", False, p.message) for p in refused)
        return False
    placed = "every colocation group has a kernel on its device"
    if found:  # (none refused: each is one soft placement moves)
        placed += (f", but {len(found)} with none there that soft placement moves to the "
                   f"CPU, where they have one")
    result.checks.append(Check("placement", True, placed))
    return True


