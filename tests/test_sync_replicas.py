"""SyncReplicasOptimizer on ps/worker graphs (issue 32, case 4 and "Sync training on a
cluster"): replica-placement follows replica_device_setter's own rules, shared resources
(gradient accumulators, the token queue) stay on a ps task and each worker keeps its own
local step; verify --cluster steps every replica at once, as the real job does.

The graphs are built as TF's tutorial builds them (mnist_replica.py): the model under
`replica_device_setter(worker_device="/job:worker/task:0/gpu:0", cluster=...)`,
`SyncReplicasOptimizer(GradientDescent, replicas_to_aggregate=2, total_num_replicas=2)`,
`minimize(loss, global_step)`, the chief's session hook, queue runner and init tokens op.
"""

from __future__ import annotations

import sys
import time

import pytest

import graphfix
from graphfix.graph.devices import DeviceSpec
from graphfix.graph.graphfile import serialize
from graphfix.graph.index import GraphIndex

from conftest import FIXTURES, run_cli

tf = pytest.importorskip("tensorflow")
tf1 = tf.compat.v1
CLUSTER = {"ps": ["127.0.0.1:2222", "127.0.0.1:2223"],
           "worker": ["127.0.0.1:2224", "127.0.0.1:2225"]}
ONLY = ["replica-placement"]
TWO_PS = {"replica-placement": {"ps_tasks": 2}}
# What SyncReplicasOptimizer puts on the ps tasks by its own `tf.device(var.device)` and
# `tf.device(global_step.device)` scopes besides the state: the constants its take and the
# inner optimizer read, the token fills and the group NoOps. A fix of a hand-placed graph
# has no reason to move them off the worker (they compute nothing a ps must hold).
SETTER_EXTRAS = frozenset({"Const", "Fill", "NoOp"})


def _ref_variables(next_creator, **kwargs):
    kwargs["use_resource"] = False
    return next_creator(**kwargs)


def sync_replicas_graph(device, *, task: int = 0, ref: bool = False,
                        chief_runner_collected: bool = False):
    """The tutorial's synchronous job as worker `task` builds it, under `device` (None: the
    setter), as a MetaGraphDef; `ref` makes its variables ref variables (TF1's default);
    `chief_runner_collected` adds the chief queue runner to QUEUE_RUNNERS (as users who
    start it with `start_queue_runners` do)."""
    graph = tf.Graph()
    if device is None:
        device = tf1.train.replica_device_setter(
            worker_device="/job:worker/task:%d/gpu:0" % task,
            cluster=tf1.train.ClusterSpec(CLUSTER))
    with graph.as_default(), tf1.variable_creator_scope(
            _ref_variables if ref else (lambda next_creator, **kw: next_creator(**kw))):
        with tf1.device(device):
            step = tf1.train.get_or_create_global_step()
            x = tf1.placeholder(tf.float32, [None, 4], name="x")
            y = tf1.placeholder(tf.float32, [None, 2], name="y")
            w = tf1.get_variable("w", [4, 2])
            b = tf1.get_variable("b", [2], initializer=tf1.zeros_initializer())
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y), name="loss")
            opt = tf1.train.SyncReplicasOptimizer(tf1.train.GradientDescentOptimizer(0.1),
                                                  replicas_to_aggregate=2,
                                                  total_num_replicas=2)
            train = opt.minimize(loss, global_step=step)
            opt.make_session_run_hook(is_chief=task == 0)
            if chief_runner_collected:
                tf1.train.add_queue_runner(opt.get_chief_queue_runner())
            opt.get_init_tokens_op()
            opt.ready_for_local_init_op.mark_used()  # (the chief's hook reads it)
            tf1.global_variables_initializer()
        tf1.add_to_collection(tf1.GraphKeys.TRAIN_OP, train)
        return tf1.train.export_meta_graph(graph=graph, clear_devices=False)


def _devices(meta) -> dict[str, str]:
    return {n.name: n.device for n in meta.graph_def.node}


def _where(meta) -> dict[str, tuple[str, DeviceSpec]]:
    """Node -> (op, the job and task its colocation group asks for): where TF's placer
    puts it (a member that joined by a handle or lists `_class` follows its group)."""
    index = GraphIndex(meta.graph_def)
    listed, joined = index.colocation_listed(), index.handle_joined()
    out = {}
    for positions in index.colocation_groups().values():
        merged = DeviceSpec()
        for p in positions:
            if index.devices[p] and p not in listed and p not in joined:
                merged = merged.merge(DeviceSpec.parse(index.devices[p]))
        for p in positions:
            out[index.names[p]] = (index.ops[p], DeviceSpec(job=merged.job, task=merged.task))
    return out


def _state(meta) -> dict[str, str]:
    """The synchronisation's state: accumulators, token queue, local step."""
    return {n.name: n.op for n in meta.graph_def.node
            if n.op in ("ResourceConditionalAccumulator", "ConditionalAccumulator", "FIFOQueueV2")
            or n.name == "sync_rep_local_step"}


@pytest.mark.parametrize("ref", [False, True], ids=["resource", "ref"])
def test_graph_the_setter_placed_has_no_finding_and_is_not_rewritten(ref):
    """Today: 22 findings (accumulators and token queue "pipeline ops" moved to a task-less
    /job:worker, the local step moved to a ps task)."""
    built = sync_replicas_graph(None, ref=ref)
    assert graphfix.check_graph(built, only=ONLY) == []
    fixed, changes = graphfix.fix_graph(built, only=ONLY)
    assert changes == []
    assert serialize(fixed, text=False) == serialize(built, text=False)


def _written_by_today(meta):
    """The devices replica-placement's fix wrote before: the accumulators, the token queue
    and what uses them on /job:worker with no task, the local step on a ps task."""
    wrong = type(meta)()
    wrong.CopyFrom(meta)
    index = GraphIndex(wrong.graph_def)
    state = _state(meta)
    for name, op in state.items():
        for node in index.group_of(name):
            spec = DeviceSpec.parse(node.device)
            if name == "sync_rep_local_step":
                node.device = spec.replace(job="ps", task=1).to_string()
            else:
                node.device = spec.replace(job="worker", task=None).to_string()
    return wrong


@pytest.mark.parametrize("wrong", ["all_on_worker0", "written_by_today"])
def test_hand_placed_graph_is_fixed_into_what_the_setter_gives(wrong):
    setter = sync_replicas_graph(None)
    if wrong == "all_on_worker0":
        bad = sync_replicas_graph("/job:worker/task:0/gpu:0")
        settings = TWO_PS
    else:
        bad = _written_by_today(setter)
        settings = {}
    findings = graphfix.check_graph(bad, only=ONLY, settings=settings)
    said = {f.node: f.message for f in findings}
    for name in ("sync_replicas/conditional_accumulator", "sync_token_q"):
        assert "is shared by the workers" in said[name], said
    if wrong == "written_by_today":
        assert "each worker's own" in said["sync_rep_local_step"]
    fixed, _ = graphfix.fix_graph(bad, only=ONLY, settings=settings)
    ours, theirs = _where(fixed), _where(setter)
    differ = {n: (theirs[n][1].to_string(), ours[n][1].to_string())
              for n in set(ours) & set(theirs) if ours[n][1] != theirs[n][1]}
    # Only what the setter-built program itself put on the ps, computing nothing there
    # that a ps must hold; ours leaves it on the worker.
    assert {theirs[n][0] for n in differ} <= SETTER_EXTRAS, differ
    assert all(DeviceSpec.parse(o).job == "worker" for _, o in differ.values()), differ
    state = _state(setter)
    assert {n: ours[n][1].to_string() for n in state} == {
        "sync_rep_local_step": "/job:worker/task:0",
        "sync_replicas/conditional_accumulator": "/job:ps/task:1",  # with w
        "sync_replicas/conditional_accumulator_1": "/job:ps/task:0",  # with b
        "sync_token_q": "/job:ps/task:0",  # with the global step
    }
    assert {n: ours[n][1] for n in state} == {n: theirs[n][1] for n in state}


def test_default_fix_of_a_hand_placed_graph_places_on_a_local_cluster(tmp_path):
    """TF's placer (the oracle: a real local cluster, GPUs stood in for by CPUs) accepts
    the default fix of the graph placed by hand on worker 0's GPU."""
    sys.path.insert(0, str(FIXTURES))
    from real_models import oracle

    bad = sync_replicas_graph("/job:worker/task:0/gpu:0")
    fixed, _ = graphfix.fix_graph(bad, settings=TWO_PS)
    verdict = oracle.place(fixed.graph_def)
    assert verdict.places, verdict.failures
    assert {DeviceSpec.parse(d).job for d in _devices(fixed).values() if d} == {"ps", "worker"}


def test_verify_steps_every_replica_at_once_on_a_local_cluster(tmp_path):
    """Today: one worker steps, the step waits 60 s ("queues starved") and a queue runner
    thread prints a traceback."""
    path = tmp_path / "sync.meta"
    path.write_bytes(serialize(sync_replicas_graph(None, chief_runner_collected=True), text=False))
    fixed = tmp_path / "fixed.meta"
    graphfix.fix_graph(str(path), out=fixed)
    clock = time.perf_counter()
    result = run_cli("verify", fixed, "--cluster", "ps=2,worker=2", "--steps", "3")
    seconds = time.perf_counter() - clock
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    assert ("run: initialized, then 3 step(s) ran from /job:worker/task:0, "
            "/job:worker/task:1 at once") in result.stdout
    assert "sync_rep_local_step on /job:worker/replica:0/task:0" in result.stdout
    assert "pass  loss" in result.stdout
    assert seconds < 40, seconds


def test_verify_runs_the_chief_queue_runner_its_hook_would_start(tmp_path):
    """No QUEUE_RUNNERS collection (the hook starts the chief queue runner): verify finds
    the token queue's refill and first tokens, and runs them on the chief."""
    from graphfix.verification.run import verify_path

    path = tmp_path / "sync.meta"
    path.write_bytes(serialize(sync_replicas_graph(None), text=False))
    fixed = tmp_path / "fixed.meta"
    graphfix.fix_graph(str(path), out=fixed)
    result = verify_path(str(fixed), cluster="ps=2,worker=2", steps=4)
    assert result.passed, result.to_lines()
    assert "4 step(s) ran from /job:worker/task:0, /job:worker/task:1 at once" in \
        result.to_lines()[2]


def test_a_queue_runners_error_is_one_line_of_the_result(tmp_path):
    """A queue runner on the chief whose enqueue fails: the run fails at once with the
    runner's error in one line (the replicas' dequeues end with its queue), no traceback."""
    graph = tf.Graph()
    with graph.as_default():
        with tf1.device(tf1.train.replica_device_setter(
                ps_tasks=1, worker_device="/job:worker/task:0")):
            step = tf1.train.get_or_create_global_step()
            queue = tf1.FIFOQueue(4, tf.float32, shapes=[], shared_name="examples",
                                  name="examples")
            bad = tf.debugging.check_numerics(tf.math.log(-1.0), "a bad example")
            tf1.train.add_queue_runner(tf1.train.QueueRunner(queue, [queue.enqueue(bad)]))
            w = tf1.get_variable("w", [])
            loss = tf.square(w * queue.dequeue(), name="loss")
            train = tf1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
            tf1.global_variables_initializer()
        tf1.add_to_collection(tf1.GraphKeys.TRAIN_OP, train)
        meta = tf1.train.export_meta_graph(graph=graph, clear_devices=False)
    path = tmp_path / "failing_runner.meta"
    path.write_bytes(serialize(meta, text=False))
    clock = time.perf_counter()
    result = run_cli("verify", path, "--cluster", "ps=1,worker=2")
    seconds = time.perf_counter() - clock
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    failed = [line for line in result.stdout.splitlines() if line.startswith("  FAIL")]
    assert failed == ["  FAIL  run: the queue runner of examples: a bad example : "
                      "Tensor had NaN values"], result.stdout
    assert seconds < 40, seconds


# -- the global step made beside the setter (source fixture global_step_beside_setter_sync) --

STEP_BESIDE = FIXTURES / "replica_placement" / "source" / "global_step_beside_setter_sync"


def _trainer_graph(version: str, task: int):
    """The fixture's `Trainer.build` (before.py or after.py, the source fix) as worker
    `task` of CLUSTER builds it, as a MetaGraphDef."""
    path = STEP_BESIDE / f"{version}.py"
    namespace = {"__name__": f"step_beside_{version}"}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    trainer = namespace["Trainer"]()
    trainer.cluster, trainer.task_index = tf1.train.ClusterSpec(CLUSTER), task
    graph = tf.Graph()
    with graph.as_default():
        def make_loss():
            x = tf1.placeholder(tf.float32, [None, 4], name="x")
            return tf.reduce_mean(tf.matmul(x, tf1.get_variable("w", [4, 2])), name="loss")

        _, (sync_hook, _) = trainer.build(make_loss, last_step=10)
        sync_hook._sync_optimizer.ready_for_local_init_op.mark_used()  # (the chief's hook reads it)
        return tf1.train.export_meta_graph(graph=graph, clear_devices=False)


def test_global_step_beside_the_setter_gives_each_worker_its_own_token_queue():
    """Before the source fix, worker 1's global step names no device and the token queue
    SyncReplicasOptimizer builds beside it lands on worker 1 itself: the graph surface
    finds both. After it, the step and the queue are on one ps task, which every worker
    shares, and the graph is the setter's (no finding)."""
    before, after = _trainer_graph("before", 1), _trainer_graph("after", 1)
    where = _where(before)
    assert _devices(before)["global_step"] == ""
    assert where["sync_token_q"][1] == DeviceSpec(job="worker", task=1)
    said = {f.node: f.message for f in graphfix.check_graph(before, only=ONLY)}
    assert "each worker trains its own copy" in said["global_step"], said
    assert "is shared by the workers (shared_name 'sync_token_q')" in said["sync_token_q"]
    where = _where(after)
    assert where["global_step"][1] == where["sync_token_q"][1] == DeviceSpec(job="ps", task=0)
    assert graphfix.check_graph(after, only=ONLY) == []
