"""verify runs a graph as its user's program would: train ops of every convention, live
fetches, function bodies on the stand-in devices, tables, queue runners, SavedModel variables,
and TF's whole error message."""

from __future__ import annotations

import json

import subprocess
import sys

import numpy as np

import graphfix

from conftest import FIXTURES, run_cli


def _checks(result) -> dict:
    return {c.name: c for c in result.checks}


def _graph(tf, build):
    graph = tf.Graph()
    with graph.as_default():
        build(tf.compat.v1)
    return graph


def test_function_bodies_run_on_the_stand_in_devices(tf):
    """A While built with control flow v2 under /gpu:0: its cond and body are functions
    whose nodes ask for the GPU too."""
    def build(tf1):
        tf1.enable_control_flow_v2()
        x = tf1.placeholder(tf.float32, [4], name="x")
        with tf.device("/gpu:0"):
            w = tf1.get_variable("w", [4], use_resource=True)
            _, out = tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * w), [0, x])
        tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(out), name="train_op")

    graph_def = _graph(tf, build).as_graph_def()
    assert any(n.device == "/device:GPU:0" for f in graph_def.library.function
               for n in f.node_def), "the bodies ask for the GPU"
    result = graphfix.verify(graph_def)
    assert result.passed, result.to_lines()


def test_the_assign_add_that_apply_gradients_returns_is_the_step_it_runs(tf):
    """`apply_gradients(global_step=..., name="train_op")` returns the step's AssignAdd: in a
    bare GraphDef (no collections) it is the train op, and verify runs it."""
    def build(tf1):
        x = tf1.placeholder(tf.float32, [None, 2], name="x")
        w = tf1.get_variable("w", [2, 1])
        step = tf1.train.get_or_create_global_step()
        opt = tf1.train.GradientDescentOptimizer(0.5)
        loss = tf.reduce_mean(tf.matmul(x, w), name="loss")
        opt.apply_gradients(opt.compute_gradients(loss), global_step=step, name="train_op")

    graph_def = _graph(tf, build).as_graph_def()
    assert {n.name: n.op for n in graph_def.node}["train_op"].startswith("AssignAdd")
    result = graphfix.verify(graph_def, steps=2)
    assert result.passed, result.to_lines()
    assert result.values["variable:global_step"] == 2, "two steps ran the train op"


def test_outputs_a_cond_may_leave_dead_are_not_fetched(tf):
    """An inference graph with a v1 `cond`: the branch outputs are dead on one side, and
    fetching them fails with "Retval ... does not have value"."""
    def build(tf1):
        tf1.disable_control_flow_v2()
        flag = tf1.placeholder_with_default(True, [], name="flag")
        x = tf1.placeholder(tf.float32, [2], name="x")
        pred = tf.cond(flag, lambda: x * 2.0, lambda: x - 1.0)
        tf.identity(pred, name="prediction")

    result = graphfix.verify(_graph(tf, build).as_graph_def())
    assert result.passed, result.to_lines()
    assert "prediction:0" in result.values


def test_tables_are_initialized(tf):
    def build(tf1):
        keys = tf.constant(["a", "b"])
        table = tf1.lookup.StaticHashTable(
            tf1.lookup.KeyValueTensorInitializer(keys, tf.constant([1, 2], tf.int64)), -1)
        words = tf1.placeholder(tf.string, [None], name="words")
        tf.identity(table.lookup(words), name="ids")

    graph = _graph(tf, build)
    with graph.as_default():
        meta = tf.compat.v1.train.export_meta_graph(graph=graph)
    for form in (meta, graph.as_graph_def()):  # the collection, then the ops alone
        result = graphfix.verify(form, feeds={"words": np.array([b"b", b"z"], dtype=object)},
                                 fetches=["ids:0"])
        assert result.passed, result.to_lines()
        assert list(result.values["ids:0"]) == [2, -1]


def _queue_graph(tf, enqueue_forever: bool):
    def build(tf1):
        queue = tf1.FIFOQueue(4, [tf.float32], shapes=[[2]], name="inputs")
        if enqueue_forever:
            enqueue = queue.enqueue(tf1.random_normal([2]))
            tf1.train.add_queue_runner(tf1.train.QueueRunner(queue, [enqueue]))
        batch = queue.dequeue(name="batch")
        w = tf1.get_variable("w", [2])
        tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(batch * w),
                                                         name="train_op")

    graph = _graph(tf, build)
    with graph.as_default():
        return tf.compat.v1.train.export_meta_graph(graph=graph)


def test_queue_runners_are_started_and_a_starving_queue_fails_in_time(tf):
    fed = graphfix.verify(_queue_graph(tf, enqueue_forever=True), steps=3)
    assert fed.passed, fed.to_lines()
    starved = graphfix.verify(_queue_graph(tf, enqueue_forever=False), step_timeout=2)
    run = _checks(starved)["run"]
    assert not run.passed and "a step ran past 2 s" in run.detail, run.detail
    assert run.message, "TF's whole message is kept"


def test_a_slow_step_that_waits_on_no_thread_is_not_cut_short(tf):
    # A big model's step on a slow machine (slim VGG-16 with its weights on the CPU took
    # over a minute here) cannot starve: only graphs that dequeue are bounded.
    def build(tf1):
        x = tf1.random_normal([400, 400], seed=1)
        for _ in range(40):
            x = tf.tanh(tf.matmul(x, x))
        tf.identity(tf.reduce_sum(x), name="total")

    result = graphfix.verify(_graph(tf, build).as_graph_def(), fetches=["total"], steps=3,
                             step_timeout=0.001)
    assert result.passed, result.to_lines()


def test_a_table_whose_initializer_freezing_dropped_fails_in_tfs_telling_words(tf):
    # Freezing keeps what the outputs need: a table's initializer is not among it.
    def build(tf1):
        table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
            tf.constant(["cat", "dog"]), tf.constant([0, 1], tf.int64)), -1)
        label = table.lookup(tf.constant(["dog"]))
        with tf.device("/gpu:0"):  # (its read across devices: TF reports two root errors)
            tf.cast(label, tf.float32, name="score")

    graph_def = _graph(tf, build).as_graph_def()
    frozen = tf.compat.v1.graph_util.extract_sub_graph(graph_def, ["score"])
    run = _checks(graphfix.verify(frozen, fetches=["score"]))["run"]
    assert not run.passed
    assert run.detail.endswith("Table not initialized."), run.detail
    assert "Table not initialized" in run.message, "TF's whole message is kept"


def test_a_saved_models_variables_are_restored(tmp_path):
    """A TF2 SavedModel: its variables come from its variables folder, not initializers."""
    code = ("import tensorflow as tf, sys\n"
            "class Scale(tf.Module):\n"
            "    def __init__(self):\n"
            "        self.w = tf.Variable([3.0, 4.0], name='w')\n"
            "    @tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])\n"
            "    def __call__(self, x):\n"
            "        return {'y': x * self.w}\n"
            "m = Scale()\n"
            "m.w.assign([5.0, 6.0])  # trained: the checkpoint differs from the initial value\n"
            "tf.saved_model.save(m, sys.argv[1], signatures=m.__call__)\n")
    script = tmp_path / "save.py"
    script.write_text(code)  # eager TF2 code: run apart from this process's graph mode
    subprocess.run([sys.executable, script, tmp_path / "model"], check=True,
                   capture_output=True)
    result = graphfix.verify(tmp_path / "model", fetches=["StatefulPartitionedCall:0"],
                             feeds={"serving_default_x": np.array([1.0, 1.0], np.float32)})
    assert result.passed, result.to_lines()
    assert list(result.values["StatefulPartitionedCall:0"]) == [5.0, 6.0]


def test_tfs_whole_error_is_in_json(tmp_path):
    graph = tmp_path / "g.pbtxt"
    graph.write_text('node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } '
                     'attr { key: "shape" value { shape { dim { size: 2 } } } } }\n'
                     'node { name: "bad" op: "CheckNumerics" input: "inf" '
                     'attr { key: "T" value { type: DT_FLOAT } } '
                     'attr { key: "message" value { s: "found a bad value" } } }\n'
                     'node { name: "inf" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } } '
                     'attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } '
                     'float_val: inf } } } }\n')
    result = run_cli("verify", graph, "--fetch", "bad", "--format", "json", check_exit=1)
    run = {c["name"]: c for c in json.loads(result.stdout)["checks"]}["run"]
    assert "found a bad value" in run["detail"], run
    assert "found a bad value" in run["message"] and len(run["message"]) >= len(run["detail"])


def test_cluster_verify_fails_where_variables_live_on_the_worker():
    """Each worker trains its own copy of a variable on /job:worker: the cluster's
    variables check says so."""
    before = FIXTURES / "replica_placement" / "mlp_on_worker0" / "before.pbtxt"
    result = run_cli("verify", before, "--cluster", "ps=1,worker=1", "--fetch", "train",
                     "--format", "json", check_exit=1)
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert not checks["variables"]["passed"]
    assert "not on a ps task, so each worker trains its own copy" in checks["variables"]["detail"]


def test_a_ps_worker_graph_without_a_cluster_names_the_cluster_to_give():
    after = FIXTURES / "replica_placement" / "mlp_on_worker0" / "after.pbtxt"
    result = run_cli("verify", after, "--fetch", "train", "--format", "json", check_exit=1)
    [check] = json.loads(result.stdout)["checks"]
    assert check["name"] == "cluster" and not check["passed"]
    assert check["detail"].endswith("verify it on a local cluster: --cluster ps=2,worker=1")


def test_a_resource_readers_device_is_overridden_and_a_class_conflict_is_not(tf, tmp_path):
    """TF's placer overrides the device of a node that joined a variable's group only by
    reading its handle (an assign_add under another device runs with the variable); TF's
    Python importer gives a `_class` member the device of the node it names; two nodes
    that a `_class` binds to one group with different devices are an error."""
    def build(tf1):
        with tf.device("/cpu:0"):
            v = tf1.get_variable("v", [2], use_resource=True)
        with tf.device("/gpu:1"):
            v.assign_add([1.0, 1.0], name="bump")

    result = graphfix.verify(_graph(tf, build).as_graph_def(), fetches=["bump"])
    assert result.passed, result.to_lines()

    const = ('node { name: "%s" op: "Const" device: "%s" '
             'attr { key: "dtype" value { type: DT_FLOAT } } '
             'attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } '
             'float_val: 1 } } } }\n')
    member = ('node { name: "b" op: "Identity" input: "a" device: "/device:CPU:0" '
              'attr { key: "T" value { type: DT_FLOAT } } '
              'attr { key: "_class" value { list { %s } } } }\n')
    follows = tmp_path / "follows.pbtxt"
    follows.write_text(const % ("a", "/device:GPU:0") + member % 's: "loc:@a"')
    result = graphfix.verify(follows, fetches=["b"])
    assert result.passed, result.to_lines()

    conflict = tmp_path / "conflict.pbtxt"
    conflict.write_text(const % ("a", "/device:GPU:0") + const % ("c", "/device:CPU:0")
                        + member % 's: "loc:@a" s: "loc:@c"')
    checks = _checks(graphfix.verify(conflict, fetches=["b"]))
    assert not checks["placement"].passed
    # TF's words: `b` joins `a`'s group, then `c`'s, where the two clash.
    assert checks["placement"].detail.startswith("Cannot colocate nodes b and c")
