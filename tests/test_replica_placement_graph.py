"""replica-placement on graphs: agreement with TF's replica_device_setter, greedy balance."""

from __future__ import annotations

import pytest

import graphfix
from graphfix.graph.devices import DeviceSpec
from graphfix.graph.index import VARIABLE_OPS, GraphIndex

from conftest import FIXTURES, error_lines, run_cli


def _mlp(tf, sizes=(4, 8, 8, 2), optimizer="adam", use_resource=False):
    tf1 = tf.compat.v1
    x = tf1.placeholder(tf.float32, [None, sizes[0]], name="x")
    y = tf1.placeholder(tf.float32, [None, sizes[-1]], name="y")
    net = x
    for i, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:])):
        w = tf1.get_variable(f"w{i}", [fan_in, fan_out], use_resource=use_resource)
        b = tf1.get_variable(f"b{i}", [fan_out], initializer=tf1.zeros_initializer(),
                             use_resource=use_resource)
        net = tf.matmul(net, w) + b
    loss = tf.reduce_mean(tf.square(net - y), name="loss")
    step = tf1.train.get_or_create_global_step()
    opt = (tf1.train.AdamOptimizer(0.01) if optimizer == "adam"
           else tf1.train.GradientDescentOptimizer(0.1))
    opt.minimize(loss, global_step=step, name="train")
    tf1.global_variables_initializer()


MODELS = {
    "mlp_adam_ref": lambda tf: _mlp(tf),
    "mlp_adam_resource": lambda tf: _mlp(tf, use_resource=True),
    "mlp_sgd": lambda tf: _mlp(tf, optimizer="sgd"),
    "wide": lambda tf: _mlp(tf, sizes=(16, 3, 64, 5, 2)),
}


def _build(tf, build, device_fn=None):
    graph = tf.Graph()
    with graph.as_default():
        if device_fn is None:
            build(tf)
        else:
            with tf.compat.v1.device(device_fn):
                build(tf)
    return graph.as_graph_def()


@pytest.mark.parametrize("ps_tasks", [1, 2, 3])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_agrees_with_replica_device_setter(tf, model, ps_tasks):
    tf1 = tf.compat.v1
    by_tf = _build(tf, MODELS[model], tf1.train.replica_device_setter(ps_tasks=ps_tasks))
    plain = _build(tf, MODELS[model])
    fixed, changes = graphfix.fix_graph(plain, only=["replica-placement"],
                                        settings={"replica-placement": {"ps_tasks": ps_tasks}})
    ours = {n.name: n.device for n in fixed.node}
    theirs = {n.name: n.device for n in by_tf.node}
    assert {n.name for n in fixed.node if n.op in VARIABLE_OPS and not n.device} == set()
    # Under the setter, tf.group() also splits its NoOp per device: only NoOps may differ.
    kinds = {n.name: n.op for n in list(by_tf.node) + list(fixed.node)}
    assert {n for n in set(ours) ^ set(theirs) if kinds[n] != "NoOp"} == set()
    # Where TF's placer runs each node: a variable's colocation group runs where the
    # variable is (a member naming another device is overridden along its ref or resource
    # edge, as the placer does).
    def effective(graph_def):
        index = GraphIndex(graph_def)
        out = {}
        for positions in index.colocation_groups().values():
            members = [index.node_at(p) for p in positions]
            variables = [n for n in members if n.op in VARIABLE_OPS]
            for node in members:
                out[node.name] = variables[0].device if variables else node.device
        return out

    ours, theirs = effective(fixed), effective(by_tf)
    # tf.group() builds its NoOp under its inputs' shared device (when they share one) and
    # the setter keeps it there; in a graph built without the setter that device is empty.
    # A NoOp computes nothing, so where it runs does not matter.
    mismatched = {n: (ours[n], theirs[n]) for n in set(ours) & set(theirs)
                  if DeviceSpec.parse(ours[n]) != DeviceSpec.parse(theirs[n])
                  and kinds[n] != "NoOp"}
    assert mismatched == {}
    variables = {n.name: n.device for n in by_tf.node if n.op in VARIABLE_OPS}
    assert {n: ours[n] for n in variables} == variables, "variables exactly as TF puts them"


def test_greedy_balances_uneven_variables(tf, capsys):
    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [None, 10], name="x")
        # Creation order sends both large variables to task 0 under round-robin.
        shapes = {"big_a": [10, 500], "small0": [10, 10], "big_b": [10, 500],
                  "small1": [10, 10], "small2": [10, 20], "small3": [10, 5]}
        variables = [tf1.get_variable(name, shape) for name, shape in shapes.items()]
        out = sum(tf.reduce_sum(tf.matmul(x, v)) for v in variables)
        tf.identity(out, name="out")
    graph_def = graph.as_graph_def()
    shares = {}
    for strategy in ("round-robin", "greedy"):
        _, changes = graphfix.fix_graph(graph_def, only=["replica-placement"], settings={
            "replica-placement": {"ps_tasks": 2, "strategy": strategy}})
        load = changes[0].details["ps_bytes"]
        shares[strategy] = max(load.values()) / sum(load.values())
        print(f"{strategy}: bytes per ps task {load}, largest task holds {shares[strategy]:.0%}")
    assert shares["greedy"] <= 0.60 < shares["round-robin"]


def test_pipeline_op_pinned_on_ps_moves_to_worker(tf):
    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():  # the seed's program
        with tf.device("/job:ps/task:0"):
            init = tf1.constant_initializer([0])
            c = tf1.get_variable("myc", shape=[], initializer=init)
            res = tf.add(c, 1, name="pipeline_add")  # lands on the ps
        tf1.assign(c, res, name="train_op")
    graph_def = graph.as_graph_def()
    findings = graphfix.check_graph(graph_def, only=["replica-placement"])
    assert [f.node for f in findings] == ["pipeline_add/y", "pipeline_add"]
    assert "runs on the parameter server" in findings[0].message
    fixed, _ = graphfix.fix_graph(graph_def, only=["replica-placement"])
    devices = {n.name: n.device for n in fixed.node}
    assert devices["pipeline_add"] == "/job:worker"
    assert devices["myc"] == "/job:ps/task:0"
    # The assign names no device and is bound to myc by its ref edge: the placer keeps it
    # with myc, so the fix leaves it as it is.
    assert devices["train_op"] == ""
    assert GraphIndex(fixed).group_root("train_op") == GraphIndex(fixed).group_root("myc")


def test_ps_tasks_zero_is_a_clear_error(tmp_path):
    graph = FIXTURES / "variables_to_cpu" / "seed000_ref" / "after.pbtxt"
    result = run_cli("check", graph, "--only", "replica-placement",
                     "--set", "replica-placement.ps_tasks=0")
    assert result.returncode == 2
    assert "replica-placement.ps_tasks must be at least 1, not 0" in error_lines(result.stderr)[0]


def test_fixed_worker_pinned_graph_trains_on_a_local_cluster(tmp_path):
    """Everything pinned to /job:worker/task:0, fixed for 2 ps tasks, then a real step on a
    local cluster (2 ps, 2 workers, loopback) where the variables live on the ps tasks."""
    import json

    before = FIXTURES / "replica_placement" / "mlp_on_worker0" / "before.pbtxt"
    fixed = tmp_path / "fixed.pbtxt"
    run_cli("fix", before, "-o", fixed, "--only", "replica-placement",
            "--set", "replica-placement.ps_tasks=2", check_exit=1)
    result = run_cli("verify", fixed, "--cluster", "ps=2,worker=2", "--fetch", "train",
                     "--format", "json", check_exit=0)
    doc = json.loads(result.stdout)
    checks = {c["name"]: c for c in doc["checks"]}
    assert checks["run"]["passed"] and checks["loss"]["passed"], doc
    assert "w0 on /job:ps/replica:0/task:0/device:CPU:0" in checks["variables"]["detail"]
    assert "b0 on /job:ps/replica:0/task:1/device:CPU:0" in checks["variables"]["detail"]
    assert any(line.startswith("/job:ps/task:0:") for line in doc["placement"])


def test_cluster_that_does_not_cover_the_graph():
    fixed = FIXTURES / "replica_placement" / "mlp_on_worker0" / "after.pbtxt"
    result = run_cli("verify", fixed, "--cluster", "ps=1,worker=1")
    assert result.returncode == 2
    assert "is placed on /job:ps/task:1, which the cluster (ps=1, worker=1) does not have" \
        in error_lines(result.stderr)[0]
    bad = run_cli("verify", fixed, "--cluster", "ps=two")
    assert bad.returncode == 2 and "--cluster takes JOB=TASKS" in error_lines(bad.stderr)[0]


def test_sharded_savers_per_task_ops_stay_on_their_ps_task(tf):
    """`Saver(sharded=True)` under replica_device_setter saves and restores each ps task's
    variables on that task: a correct graph, no pipeline ops on the ps."""
    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        with tf1.device(tf1.train.replica_device_setter(ps_tasks=2,
                                                        worker_device="/job:worker/task:0")):
            _mlp(tf)
            with tf.device("/job:ps/task:0"):
                tf.add(tf1.get_variable("pinned", []), 1.0, name="pipeline_add")
            tf1.train.Saver(sharded=True)
    graph_def = graph.as_graph_def()
    original = {n.name: n.device for n in graph_def.node}
    on_ps = [name for name, device in original.items()
             if name.startswith("save/") and DeviceSpec.parse(device).job == "ps"]
    assert {DeviceSpec.parse(original[n]).task for n in on_ps} == {0, 1}
    findings = graphfix.check_graph(graph_def, only=["replica-placement"])
    assert [f.node for f in findings] == ["pipeline_add/y", "pipeline_add"]
    fixed, _ = graphfix.fix_graph(graph_def, only=["replica-placement"])
    devices = {n.name: n.device for n in fixed.node}
    assert {n: devices[n] for n in on_ps} == {n: original[n] for n in on_ps}


def test_a_variables_initial_value_computed_on_the_ps_is_not_a_pipeline_op(tf):
    """`tf.Variable(tf.truncated_normal(...) * 0.1)` under a ps scope computes its initial
    value on the ps once, when the variables are initialized, never in a step: no finding
    for it; an op of the step under the same scope still is one."""
    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/job:ps/task:0"):
            w = tf1.Variable(tf1.truncated_normal([4, 2], stddev=0.1) * 2.0, name="w")
            b = tf1.Variable(tf1.constant(0.1, shape=[2]), name="b")
        with tf.device("/job:worker/task:0"):
            x = tf1.placeholder(tf.float32, [None, 4], name="x")
            loss = tf.reduce_mean(tf.matmul(x, w) + b, name="loss")
            tf1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train")
        tf1.global_variables_initializer()
    graph_def = graph.as_graph_def()
    on_ps = {n.name for n in graph_def.node if n.device.startswith("/job:ps")}
    assert {"w/Assign", "truncated_normal", "mul"} <= on_ps
    assert graphfix.check_graph(graph_def, only=["replica-placement"]) == []
    fixed, _ = graphfix.fix_graph(graph_def, only=["replica-placement"])
    assert (fixed.SerializeToString(deterministic=True)
            == graph_def.SerializeToString(deterministic=True))

    with graph.as_default():
        with tf.device("/job:ps/task:0"):
            tf.add(w, 1.0, name="pipeline_add")
    findings = graphfix.check_graph(graph.as_graph_def(), only=["replica-placement"])
    assert [f.node for f in findings] == ["pipeline_add/y", "pipeline_add"]


def test_placeholders_fed_on_the_ps_move_to_the_worker(tf):
    """The inputs made under `/job:ps/task:0` by hand, the model under the setter (a graph
    of the shape of source fixture ps_scope_from_device_tuple): each placeholder is found,
    and the fix is the graph the setter gives with the inputs under it."""
    tf1 = tf.compat.v1

    def build(inputs_device):
        graph = tf.Graph()
        with graph.as_default():
            with tf1.device(inputs_device):
                x = tf1.placeholder(tf.float32, [None, 4], name="x")
                y = tf1.placeholder(tf.float32, [None, 2], name="y")
            with tf1.device(tf1.train.replica_device_setter(
                    ps_tasks=1, worker_device="/job:worker/task:1")):
                w = tf1.get_variable("w", [4, 2])
                loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y), name="loss")
                tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
        return graph.as_graph_def()

    bad = build("/job:ps/task:0")
    findings = graphfix.check_graph(bad, only=["replica-placement"])
    assert {f.node: f.message for f in findings} == {
        name: (f"Placeholder {name} runs on the parameter server (/job:ps/task:0); pipeline "
               f"ops belong on the worker (moves to /job:worker/task:1)")
        for name in ("x", "y")}
    fixed, _ = graphfix.fix_graph(bad, only=["replica-placement"])
    devices = {n.name: n.device for n in fixed.node}
    assert devices["x"] == devices["y"] == "/job:worker/task:1"
    assert devices["w"] == "/job:ps/task:0"
    good = build("/job:worker/task:1")
    assert graphfix.check_graph(good, only=["replica-placement"]) == []
