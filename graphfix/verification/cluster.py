"""`graphfix verify --cluster`: a ps/worker graph run as its job runs it, on a real TF
cluster on loopback (one `tf.distribute.Server` per task, in this process).

A graph built for between-graph replication names one worker task (each worker builds the
same graph for its own task): it runs on every worker task of the cluster at once, one
session per replica, each in its own thread, each replica's copy naming its own task where
the graph names its one. That is how synchronous training runs: a `SyncReplicasOptimizer`
step ends only once every replica's gradient is in, so one worker stepping alone waits for
ever. A graph that names several worker tasks (in-graph replication: one client drives
them all) runs from worker 0 alone.

The chief (worker 0) initializes the variables, as the session manager's chief does; every
other replica initializes its own (local variables, tables) after it. Queue runners run as
a job starts them: those of a queue the workers share (one with a `shared_name`, such as
SyncReplicasOptimizer's token queue) on the chief only, the others on every replica. A
shared token queue that no queue runner fills, whose refill runs after the optimizer's
update (SyncReplicasOptimizer's chief queue runner: its hook starts it, no collection
holds it), is refilled in a loop on the chief, and the enqueue that fills it first
(`get_init_tokens_op`) runs once on the chief before the steps. Every wait is bounded
(`step_timeout`); what a replica or a queue runner raised is one line of the result.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import socket
import threading
import time
import types
from typing import Any, Sequence

import numpy as np

from graphfix.graph import graphfile as graphio
from graphfix.graph import placement, training
from graphfix.graph.devices import DeviceSpec
from graphfix.graph.index import VARIABLE_OPS, GraphIndex, index_for
from graphfix.phases import phase
from graphfix.tf_runtime import import_runtime
from graphfix.verification import inputs
from graphfix.verification.run import (
    STEP_TIMEOUT, Check, VerifyError, VerifyResult, _check_feeds, _checkpoint_of, _devices_from,
    _fetch_targets, _first_graph, _first_line, _function_nodes, _import, _init_ops,
    _may_starve, _placed, _read_variables, _restore, _table_inits, _variable_reads,
    default_fetches, plan_devices, runnable_copy)

# Each task of a local cluster is a TF server in this process, with its own threads.
MAX_CLUSTER_TASKS = 64
WORKER_JOB = "worker"
_QUEUE_OPS = frozenset({"FIFOQueue", "FIFOQueueV2", "PaddingFIFOQueue", "PaddingFIFOQueueV2",
                        "RandomShuffleQueue", "RandomShuffleQueueV2", "PriorityQueue",
                        "PriorityQueueV2"})
_ENQUEUE_OPS = frozenset({"QueueEnqueue", "QueueEnqueueV2", "QueueEnqueueMany",
                          "QueueEnqueueManyV2"})
_TAKE = "TakeGradient"  # (the accumulators' take of an aggregated gradient, in every op's name)
_LOSS_POLL = 0.05
_FROM_TASK = re.compile(r"^From /job:[^/\s]+/replica:\d+/task:\d+:$")
_STOP_GRACE = 1.0  # seconds a queue runner's cancel may take  # seconds between two reads of the loss while an update may still land


def parse_cluster(text: str) -> dict[str, int]:
    """`ps=2,worker=2` -> {"ps": 2, "worker": 2}; VerifyError when malformed."""
    cluster = {}
    for part in text.split(","):
        job, eq, count = part.partition("=")
        count = count.strip()
        if (not eq or not job.strip() or not (count.isascii() and count.isdigit())
                or int(count) < 1):
            raise VerifyError(f"--cluster takes JOB=TASKS,... such as ps=2,worker=2, not {text!r}")
        if job.strip() in cluster:
            raise VerifyError(f"--cluster {text!r} names job {job.strip()!r} twice")
        cluster[job.strip()] = int(count)
    if sum(cluster.values()) > MAX_CLUSTER_TASKS:
        raise VerifyError(f"--cluster {text!r} asks for {sum(cluster.values())} tasks; a local "
                          f"cluster runs at most {MAX_CLUSTER_TASKS}")
    if WORKER_JOB not in cluster:
        raise VerifyError(f"--cluster {text!r} has no worker job to run the steps from")
    return cluster


def check_cluster_covers(index: GraphIndex, cluster: dict[str, int]) -> None:
    """VerifyError for a node placed on a job or task the cluster does not have."""
    for node in index:
        spec = DeviceSpec.parse(node.device)
        if spec.job is None:
            continue
        tasks = cluster.get(spec.job, 0)
        if spec.task is not None and spec.task >= tasks or spec.job not in cluster:
            described = ", ".join(f"{j}={n}" for j, n in cluster.items())
            raise VerifyError(
                f"node {node.name} is placed on {node.device}, which the cluster ({described}) "
                "does not have")


def free_ports(count: int) -> list[int]:
    """Ports on 127.0.0.1 the OS has just handed out (loopback only)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def start_local_cluster(cluster: dict[str, int], cpu_count: int = 1):
    """A real in-process TF cluster on loopback: {job: [Server]} (servers live with the
    process; they cannot be stopped, so start one cluster per verify)."""
    tf = import_runtime()

    ports = iter(free_ports(sum(cluster.values())))
    spec = {job: [f"127.0.0.1:{next(ports)}" for _ in range(n)] for job, n in cluster.items()}
    config = tf.compat.v1.ConfigProto(device_count={"CPU": cpu_count})
    servers = {
        job: [tf.distribute.Server(tf.train.ClusterSpec(spec), job_name=job, task_index=i,
                                   config=config, start=True) for i in range(n)]
        for job, n in cluster.items()
    }
    return servers, spec


def worker_tasks_named(graph_def) -> set[int]:
    """The worker tasks the graph's devices name (function bodies too)."""
    tasks = set()
    for node in (*graph_def.node, *_function_nodes(graph_def)):
        if node.device:
            spec = DeviceSpec.parse(node.device)
            if spec.job == WORKER_JOB and spec.task is not None:
                tasks.add(spec.task)
    return tasks


def replica_tasks(graph_def, workers: int) -> list[int]:
    """The worker tasks that each run the graph: all of them for a graph that names at most
    one worker task (between-graph replication), worker 0 alone for one naming several."""
    return [0] if len(worker_tasks_named(graph_def)) > 1 else list(range(workers))


def for_task(graph_def, task: int):
    """The graph as worker `task` builds it: the one worker task it names becomes `task`
    (the caller's graph is untouched; the same graph where it names none, or is `task`'s)."""
    named = worker_tasks_named(graph_def)
    if not named or named == {task}:
        return graph_def
    (own,) = named
    copy = type(graph_def)()
    copy.CopyFrom(graph_def)
    for node in (*copy.node, *_function_nodes(copy)):
        if node.device:
            spec = DeviceSpec.parse(node.device)
            if spec.job == WORKER_JOB and spec.task == own:
                node.device = spec.replace(task=task).to_string()
    return copy


@dataclasses.dataclass
class ClusterRun:
    """What the replicas' run gave: the chief's view of it."""

    error: str | None
    error_message: str = ""
    replicas: list[int] = dataclasses.field(default_factory=list)
    devices: dict[str, str] = dataclasses.field(default_factory=dict)  # node -> where it ran
    loss: tuple[float, float] | None = None
    values: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    variables_after: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class _Replica:
    task: int
    graph: Any
    session: Any = None
    targets: list = dataclasses.field(default_factory=list)
    feed_dict: dict = dataclasses.field(default_factory=dict)
    error: str | None = None
    error_message: str = ""
    results: list = dataclasses.field(default_factory=list)
    metadata: Any = None


@dataclasses.dataclass
class _ChiefWork:
    """What only the chief runs besides the steps: the queue runners of shared queues (by
    queue name), a token queue's refills that no queue runner runs, its first tokens, and
    every op a refill runs (no replica's step runs those)."""

    shared_queues: set[str]
    refills: list
    first_tokens: list
    refilling: set[str]


def _chief_work(graph) -> _ChiefWork:
    """Find, in an imported graph, what the chief of a synchronous job runs (see the
    module docstring): the shared queues; a token queue's refills, the enqueues that run
    after an aggregated gradient is taken (SyncReplicasOptimizer's `sync_op`); its first
    tokens, the other enqueues into it (`get_init_tokens_op`)."""
    import tensorflow as tf

    runners = graph.get_collection(tf.compat.v1.GraphKeys.QUEUE_RUNNERS)
    run_by_runners = {op.name for runner in runners for op in runner.enqueue_ops}
    shared, refills, first, refilling = set(), [], [], set()
    for op in graph.get_operations():
        if op.type not in _QUEUE_OPS or not op.get_attr("shared_name"):
            continue
        shared.add(op.name)
        enqueues = [c for c in op.outputs[0].consumers() if c.type in _ENQUEUE_OPS]
        before = {e.name: _ancestors(e) for e in enqueues}
        after_take = [e for e in enqueues if any(_TAKE in a.type for a in before[e.name])]
        if not after_take:
            continue  # no token queue: a queue the steps feed
        refills += [e for e in after_take if e.name not in run_by_runners]
        first += [e for e in enqueues if e not in after_take and e.name not in run_by_runners]
        refilling.update(a.name for e in after_take for a in before[e.name])
    return _ChiefWork(shared, refills, first, refilling)


def _ancestors(op) -> set:
    """The ops `op` runs after (its inputs' and control inputs', all the way up)."""
    seen, pending = set(), list(op.control_inputs) + [t.op for t in op.inputs]
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        pending.extend(current.control_inputs)
        pending.extend(t.op for t in current.inputs)
    return seen


def _telling(exc) -> str:
    """The line of TF's error that says what went wrong (`run._first_line`), past the
    line naming the task it came from (`From /job:worker/replica:0/task:0:`)."""
    message = getattr(exc, "message", str(exc))
    kept = "\n".join(line for line in message.splitlines() if not _FROM_TASK.match(line))
    return _first_line(types.SimpleNamespace(message=kept))


def _op_name(target) -> str:
    return getattr(target, "op", target).name


def _local_init_ops(graph) -> list:
    """What every replica but the chief initializes: its local variables and tables."""
    import tensorflow as tf

    with graph.as_default():
        local = [v.initializer for v in tf.compat.v1.local_variables()]
    return local + _table_inits(graph)


class _Background:
    """The queue runners' loops and the token queue's refills, in daemon threads of ours
    (a TF queue runner's thread raises into the terminal when the session closes under a
    blocked run); what they raised, other than being stopped, kept as one line each."""

    def __init__(self, step_timeout: float):
        self.threads: list[threading.Thread] = []
        self.errors: list[tuple[str, str]] = []
        self.timeout = step_timeout
        self._stopping = threading.Event()
        self._cancels: list[tuple[Any, Any]] = []  # (session, a queue runner's cancel op)
        self._lock = threading.Lock()

    def start_runners(self, session, runners) -> None:
        """Each queue runner's enqueue ops, each in a loop of its own, as `QueueRunner`
        runs them: the queue closed once every loop of the runner met its end."""
        for runner in runners:
            live = [len(runner.enqueue_ops)]
            if runner.cancel_op is not None:
                self._cancels.append((session, runner.cancel_op))
            for op in runner.enqueue_ops:
                self._start(session, op, f"the queue runner of {runner.queue.name}",
                            runner, live)

    def start_loop(self, session, op, label: str) -> None:
        self._start(session, op, label, None, None)

    def _start(self, session, op, label, runner, live) -> None:
        thread = threading.Thread(target=self._loop, args=(session, op, label, runner, live),
                                  daemon=True, name=f"graphfix-verify-{op.name}")
        thread.start()
        self.threads.append(thread)

    def _loop(self, session, op, label: str, runner, live) -> None:
        import tensorflow as tf

        options = tf.compat.v1.RunOptions(timeout_in_ms=int(self.timeout * 1000))
        ended = (tuple(runner.queue_closed_exception_types) if runner is not None
                 else (tf.errors.OutOfRangeError,))
        while not self._stopping.is_set():
            try:
                session.run(op, options=options)
            except tf.errors.DeadlineExceededError:
                continue  # (nothing to enqueue yet, such as no round of gradients: wait on)
            except ended:
                break  # its input ran out, or its queue was closed
            except Exception as exc:  # what a stopped session raises, or a real failure
                if not self._stopping.is_set():
                    self.errors.append((f"{label}: {_telling(exc)}",
                                        getattr(exc, "message", str(exc))))
                    if runner is not None and runner.cancel_op is not None:
                        # (as a queue runner does: its readers fail now, not at their bound)
                        with contextlib.suppress(Exception):
                            session.run(runner.cancel_op, options=_quick())
                return
        if runner is not None and not self._stopping.is_set():
            with self._lock:
                live[0] -= 1
                last = live[0] == 0
            if last:  # (the dequeuers then get an end of input, not a wait)
                with contextlib.suppress(Exception):
                    session.run(runner.close_op, options=options)

    def stop(self) -> None:
        """Stop every loop: the queues' pending enqueues cancelled; a loop blocked in another
        op (a refill waiting for gradients) ends when its session closes, quietly."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        for session, cancel in self._cancels:
            with contextlib.suppress(Exception):
                session.run(cancel, options=_quick())


def _quick():
    import tensorflow as tf

    return tf.compat.v1.RunOptions(timeout_in_ms=int(_STOP_GRACE * 1000))


def run_replicas(graph_def, meta, tasks: Sequence[int], targets_by_task: dict[int, str], *,
                 steps: int, fetches: Sequence[str], feeds: dict, cpu_count: int, soft: bool,
                 loss_name: str | None = None, checkpoint: str | None = None,
                 step_timeout: float = STEP_TIMEOUT) -> ClusterRun:
    """Run the graph on each worker task of `tasks` at once (see the module docstring):
    the chief (`tasks[0]`) initializes, every replica steps `steps` times in its own
    thread, the chief's first step traced (where each op ran)."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    seconds: dict[str, float] = {}
    clock = time.perf_counter()
    phase("importing the graph for each replica")
    replicas = []
    for task in tasks:
        graph = tf.Graph()
        try:
            _import(graph, for_task(graph_def, task), meta)
        except Exception as exc:  # TF's importer raises what it likes
            detail = f"{type(exc).__name__}: {exc}"
            return ClusterRun(f"the graph does not import into TensorFlow: "
                              f"{detail.splitlines()[0]}", detail)
        replicas.append(_Replica(task, graph))
    chief = replicas[0]
    restore = _restore(chief.graph, meta, checkpoint)
    chief_init = _table_inits(chief.graph) + ([] if restore else _init_ops(chief.graph, meta))
    inits = {r.task: _local_init_ops(r.graph) for r in replicas[1:]}
    work = _chief_work(chief.graph)
    for replica in replicas:
        # (the inner optimizer's update is in the `train_op` collection too: the chief's
        # refill runs it, after the replicas' gradients are in, never a replica's step)
        targets = _fetch_targets(replica.graph, meta, fetches)
        replica.targets = [t for t in targets if _op_name(t) not in work.refilling] or targets
        replica.feed_dict = inputs.feed_values(replica.graph, graph_def, feeds)
    with chief.graph.as_default():
        reads = _variable_reads(chief.graph, [op for op in chief.graph.get_operations()
                                              if op.type in VARIABLE_OPS])
    loss = chief.graph.get_tensor_by_name(loss_name) if loss_name else None
    seconds["graph_import"] = time.perf_counter() - clock
    clock = time.perf_counter()
    config = tf1.ConfigProto(device_count={"CPU": cpu_count}, allow_soft_placement=soft)
    bounded = (tf1.RunOptions(timeout_in_ms=int(step_timeout * 1000))
               if _may_starve(chief.graph) or len(replicas) > 1 else tf1.RunOptions())
    background = _Background(step_timeout)
    out = ClusterRun(None, replicas=list(tasks), seconds=seconds)
    doing = "starting the sessions"
    try:
        with contextlib.ExitStack() as sessions:
            for replica in replicas:
                replica.session = sessions.enter_context(tf1.Session(
                    targets_by_task[replica.task], graph=replica.graph, config=config))
            sessions.callback(background.stop)  # (before the sessions close)
            doing = "initializing"
            phase("initializing (the chief, then the other replicas)")
            if restore:
                chief.session.run(*restore)
            if chief_init:
                chief.session.run(chief_init, feed_dict=chief.feed_dict, options=bounded)
            for replica in replicas[1:]:
                if inits[replica.task]:
                    replica.session.run(inits[replica.task], feed_dict=replica.feed_dict,
                                        options=bounded)
            if work.first_tokens:
                chief.session.run(work.first_tokens, options=bounded)
            _start_background(background, replicas, work)
            before = (float(chief.session.run(loss, chief.feed_dict, options=bounded))
                      if loss is not None else None)
            phase(f"{max(steps, 1)} step(s) on {len(replicas)} replica(s) at once")
            _step_all(replicas, steps, bounded, step_timeout)
            failed = _failure(replicas, background)
            if failed is not None:
                out.error, out.error_message = failed
                return out
            out.values = {t.name: np.asarray(v) for t, v in zip(chief.targets, chief.results)
                          if isinstance(v, np.ndarray) or np.isscalar(v)}
            doing = "reading the loss after the steps"
            if before is not None:
                after = _loss_after(chief, loss, before, bounded,
                                    step_timeout if work.refilling else 0.0)
                out.loss = (before, after)
            out.variables_after = _read_variables(chief.session, reads)
            out.devices = _devices_from(chief.metadata) if chief.metadata is not None else {}
            background.stop()
            failed = _failure([], background)
            if failed is not None:
                out.error, out.error_message = failed
                return out
    except tf.errors.OpError as exc:
        # (a queue runner's error first: it is why a read of its queue failed)
        failed = _failure([], background)
        if failed is not None:
            out.error, out.error_message = failed
        elif isinstance(exc, tf.errors.DeadlineExceededError):
            out.error = f"{doing} ran past {step_timeout:g} s"
            out.error_message = getattr(exc, "message", str(exc))
        else:
            out.error, out.error_message = _telling(exc), getattr(exc, "message", str(exc))
        return out
    finally:
        background.stop()
    seconds["run"] = time.perf_counter() - clock
    return out


def _start_background(background: _Background, replicas: list[_Replica],
                      work: _ChiefWork) -> None:
    """The queue runners: the chief all of its graph's, every other replica those of the
    queues the workers do not share; the token queue's refills on the chief."""
    import tensorflow as tf

    key = tf.compat.v1.GraphKeys.QUEUE_RUNNERS
    for k, replica in enumerate(replicas):
        runners = replica.graph.get_collection(key)
        if k:
            runners = [r for r in runners if r.queue.name not in work.shared_queues]
        background.start_runners(replica.session, runners)
    for op in work.refills:
        background.start_loop(replicas[0].session, op, f"the chief's refill of {op.inputs[0].op.name}")


def _step_all(replicas: list[_Replica], steps: int, bounded, step_timeout: float) -> None:
    """Every replica's steps, each replica in its own thread, in lockstep: no replica starts
    its next step before every replica ended this one (a synchronous job aggregates a
    round's gradients from all replicas; one running ahead would spend the tokens of the
    others, and with the same number of steps each, the last would wait for ever). A
    replica that fails stops the others; one still stepping past its bound is recorded."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    rounds = threading.Barrier(len(replicas))

    def step(replica: _Replica, traced: bool) -> None:
        try:
            for k in range(max(steps, 1)):
                rounds.wait(timeout=step_timeout)
                if traced and k == 0:
                    options = tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE,
                                             timeout_in_ms=bounded.timeout_in_ms)
                    replica.metadata = tf1.RunMetadata()
                    replica.results = replica.session.run(
                        replica.targets, replica.feed_dict, options=options,
                        run_metadata=replica.metadata)
                else:
                    replica.results = replica.session.run(replica.targets, replica.feed_dict,
                                                          options=bounded)
        except threading.BrokenBarrierError:
            return  # another replica failed (its error says why) or waited too long
        except tf.errors.DeadlineExceededError as exc:
            replica.error = f"a step ran past {step_timeout:g} s"
            replica.error_message = getattr(exc, "message", str(exc))
        except Exception as exc:  # an op's error
            replica.error = _telling(exc)
            replica.error_message = getattr(exc, "message", str(exc))
        if replica.error is not None:
            rounds.abort()

    threads = [threading.Thread(target=step, args=(r, k == 0), daemon=True,
                                name=f"graphfix-verify-worker-{r.task}")
               for k, r in enumerate(replicas)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + step_timeout * (max(steps, 1) + 1)
    for replica, thread in zip(replicas, threads):
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive() and replica.error is None:
            replica.error = f"its steps ran past {step_timeout * max(steps, 1):g} s"
    if not any(r.error for r in replicas) and rounds.broken:
        replicas[0].error = f"a replica waited past {step_timeout:g} s for the others' step"


def _failure(replicas: list[_Replica], background: _Background) -> tuple[str, str] | None:
    """The one line that says why the run failed, and TF's whole message: a queue runner's
    error first (the replicas then starve), then a replica's own error, then a wait."""
    if background.errors:
        return background.errors[0]
    failed = [r for r in replicas if r.error is not None]
    waits = [r for r in failed if "ran past" in r.error]
    for replica in [r for r in failed if r not in waits] + waits:
        line = replica.error
        if replica in waits and len(replicas) > 1:
            line += (f" ({len(replicas)} replicas stepped at once: one waited on the others "
                     f"or on the chief's queue runners)")
        return f"/job:{WORKER_JOB}/task:{replica.task}: {line}", replica.error_message
    return None


def _loss_after(chief: _Replica, loss, before: float, bounded, wait: float) -> float:
    """The loss after the steps. Where the chief's refill applies the updates (a
    synchronous job aggregates the replicas' gradients after their steps end), it is read
    again until it moves, for at most `wait` seconds."""
    deadline = time.monotonic() + wait
    while True:
        after = float(chief.session.run(loss, chief.feed_dict, options=bounded))
        if not np.isclose(before, after) or time.monotonic() >= deadline:
            return after
        time.sleep(_LOSS_POLL)


def verify_on_cluster(graph_file: graphio.GraphFile, cluster: dict[str, int], *, steps: int = 1,
                      fetches: Sequence[str] = (), feeds: dict[str, np.ndarray] | None = None,
                      label: str | None = None, step_timeout: float = STEP_TIMEOUT,
                      op_libraries: Sequence[str] = (), soft_placement: bool = False
                      ) -> VerifyResult:
    """Run a ps/worker graph on a real local cluster, every replica at once (see the module
    docstring): init, then `steps` steps on each.

    Checks placement first, and runs, as `verify_graph` does: with soft placement where
    the graph's session has it (`soft_placement`: a traced script's,
    `Trace.soft_placement`). Reports where each variable actually lived (from the chief's
    traced step), the ops and bytes per device, and whether the steps changed the loss.
    """
    graph_def, meta = _first_graph(graph_file)
    index = index_for(graph_def, meta)
    fetches = tuple(fetches) or default_fetches(index)
    check_cluster_covers(index, cluster)
    _check_feeds(index, feeds or {})
    mapping, simulated, cpu_count = plan_devices(index, [])
    described = ", ".join(f"{j}={n}" for j, n in cluster.items())
    from graphfix.verification import custom_ops

    custom_ops.load_libraries(op_libraries)
    result = VerifyResult(label or str(graph_file.path), [f"local cluster {described}"],
                          simulated, placement=placement.summary(index))
    if not _placed(index, soft_placement, result):
        return result
    phase(f"starting a local cluster ({described})")
    servers, spec = start_local_cluster(cluster, cpu_count)
    result.devices = [f"/job:{job}/task:{i} {address}" for job, addresses in spec.items()
                      for i, address in enumerate(addresses)]
    runnable = runnable_copy(graph_def, mapping if simulated else {})
    loss = training.detect_loss(index)
    tasks = replica_tasks(graph_def, cluster[WORKER_JOB])
    run = run_replicas(runnable, meta, tasks,
                       {k: s.target for k, s in enumerate(servers[WORKER_JOB])}, steps=steps,
                       fetches=fetches, feeds=feeds or {}, cpu_count=cpu_count,
                       soft=soft_placement, loss_name=loss,
                       checkpoint=_checkpoint_of(graph_file), step_timeout=step_timeout)
    if run.error:
        result.checks.append(Check("run", False, run.error, run.error_message))
        return result
    where = ", ".join(f"/job:{WORKER_JOB}/task:{k}" for k in tasks)
    result.checks.append(Check("run", True, f"initialized, then {max(steps, 1)} step(s) ran "
                                            f"from {where}" + (" at once" if len(tasks) > 1
                                                               else "")))
    local = {index.names[p] for p in training.worker_local_variables(index)}
    variables = sorted(n.name for n in index if n.op in VARIABLE_OPS)
    lived = {v: run.devices[v] for v in variables if v in run.devices}
    where = ", ".join([f"{v} on {d}" for v, d in lived.items()]
                      + [f"{v} not run by the step" for v in variables if v not in lived])
    # Shared by every worker only where a ps task holds it: else each worker trains its own
    # (a worker's own variable, such as SyncReplicasOptimizer's local step, aside).
    off_ps = [v for v, d in lived.items() if "ps" in cluster and v not in local
              and DeviceSpec.parse(d).job != "ps"]
    if off_ps:
        where = (f"{len(off_ps)} of {len(lived)} variable(s) not on a ps task, so each worker "
                 f"trains its own copy: " + where)
    result.checks.append(Check("variables", not off_ps, where))
    result.values = {f"device:{v}": d for v, d in lived.items()}
    if run.loss is not None:
        before, after = run.loss
        changed = not np.isclose(before, after)
        result.checks.append(Check("loss", changed, f"{loss} {before:.6g} -> {after:.6g}"))
    result.seconds.update(run.seconds)
    return result
