"""The script's session config in a trace: with `allow_soft_placement=True` (the CIFAR-10
multi-GPU pattern) TF's placer moves what has no GPU kernel to the CPU, so a summary built in
a GPU tower is no finding and a variable moved so is a warning; without it, TF fails: the
error as for a graph file. Real TF: the scripts are traced, the premise measured."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import FIXTURES, REPO

from graphfix import registry
from graphfix.driver import Selected, apply_to_graph
from graphfix.graph import placement
from graphfix.graph.index import index_for
from graphfix.trace import trace
from graphfix.trace.at_sites import check_trace

HERE = FIXTURES / "trace"
CIFAR = HERE / "cifar10_towers_soft.py"
SEED000 = HERE / "seed000.py"
TRACES = {
    "soft": (CIFAR, ()),
    "hard": (CIFAR, ("--no-soft-placement",)),
    "monitored": (CIFAR, ("--monitored",)),
    "seed000": (SEED000, ()),
}
# The lines that build summaries in the towers (activations, sparsity, losses).
SUMMARY_LINES = ("tf.summary.histogram(tensor_name", "tf.summary.scalar(tensor_name",
                 "tf.summary.scalar(l.op.name, l)")
COUNTER = 'seen = tf.get_variable("images_seen"'
NO_GPU_KERNEL = ("Could not satisfy explicit device specification '/device:GPU:0' because no "
                 "supported kernel for GPU devices is available")


def line_of(path, text: str) -> int:
    (number,) = [i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    return number


@pytest.fixture(scope="module")
def traces():
    with ThreadPoolExecutor(2) as pool:
        return dict(zip(TRACES, pool.map(lambda item: trace(item[0], item[1]),
                                         TRACES.values())))


def findings_of(captured):
    findings, _ = check_trace(captured, Selected.build(registry.select(None), {}, ()))
    return findings


def test_the_premise_tf_soft_placement_moves_what_has_no_kernel_to_the_cpu():
    """TF 2.21, XLA_CPU standing in for a GPU (a device that exists but has no kernel for an
    int32 VariableV2 or a ScalarSummary): without soft placement TF refuses the graph, with
    it every node runs on the CPU."""
    code = textwrap.dedent("""
        import tensorflow.compat.v1 as tf
        tf.disable_v2_behavior()
        for soft in (False, True):
            g = tf.Graph()
            with g.as_default():
                with tf.device('/device:XLA_CPU:0'):
                    v = tf.Variable(2, name='int_var')
                    s = tf.summary.scalar('x', tf.constant(3.0))
                init = tf.global_variables_initializer()
            try:
                with tf.Session(graph=g, config=tf.ConfigProto(allow_soft_placement=soft)) as sess:
                    md = tf.RunMetadata()
                    sess.run(init)
                    sess.run([v, s], options=tf.RunOptions(output_partition_graphs=True),
                             run_metadata=md)
                    print(soft, sorted({n.device.rpartition('/')[2] for pg in md.partition_graphs
                                        for n in pg.node if n.name in ('int_var', 'x')}))
            except tf.errors.InvalidArgumentError as exc:
                print(soft, [l for l in str(exc).splitlines() if 'Cannot assign' in l][0])
    """)
    env = {**os.environ, "TF_XLA_FLAGS": "--tf_xla_enable_xla_devices",
           "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=300, check=True).stdout.splitlines()
    hard, soft = [line for line in out if line.startswith(("False", "True"))]
    assert ("Could not satisfy explicit device specification '/device:XLA_CPU:0' because no "
            "supported kernel for XLA_CPU devices is available") in hard
    assert soft == "True ['device:CPU:0']"


def test_the_trace_records_each_session_config_and_its_runs_session(traces):
    soft, hard, monitored = traces["soft"], traces["hard"], traces["monitored"]
    (made,) = soft.sessions
    assert made.allow_soft_placement and made.on_graph
    assert made.site.line == line_of(CIFAR, "sess = tf.Session(config=config)")
    assert {run.session for run in soft.runs} == {0} and soft.soft_placement
    assert "its sessions allow soft placement" in soft.summary()
    assert [s.allow_soft_placement for s in hard.sessions] == [False]
    assert not hard.soft_placement and "soft placement" not in hard.summary()
    # MonitoredTrainingSession(config=...) makes its session with the script's config
    assert [s.allow_soft_placement for s in monitored.sessions] == [True]
    assert monitored.sessions[0].site.line == line_of(CIFAR, "with tf.train.MonitoredTrainingSession(config")
    assert monitored.soft_placement
    doc = soft.files()["trace.json"].decode()
    assert '"allow_soft_placement": true' in doc and '"session": 0' in doc


@pytest.mark.parametrize("name", ["soft", "monitored"])
def test_with_soft_placement_tower_summaries_are_no_finding_and_the_gpu_counter_a_warning(
        traces, name):
    findings = findings_of(traces[name])
    assert not [f for f in findings if f.severity == "error"]
    lines = {f.line for f in findings if f.path == str(CIFAR)}
    assert not lines & {line_of(CIFAR, text) for text in SUMMARY_LINES}
    (counter,) = findings
    assert (counter.line, counter.severity) == (line_of(CIFAR, COUNTER), "warning")
    assert "allow_soft_placement moves it to the CPU" in counter.message
    assert counter.fixable and counter.details["nodes"] == ["count_0/images_seen",
                                                             "count_1/images_seen"]
    (first, _) = counter.details["graph_findings"]
    assert first["details"]["kind"] == "soft-placed" and first["details"]["soft_placement"]


def test_without_soft_placement_the_same_script_is_refused_as_today(traces):
    findings = findings_of(traces["hard"])
    errors = {f.line: f for f in findings if f.severity == "error"}
    expected = {line_of(CIFAR, text) for text in SUMMARY_LINES} | {line_of(CIFAR, COUNTER)}
    assert set(errors) == expected
    assert all(NO_GPU_KERNEL in f.message for f in errors.values())
    losses = errors[line_of(CIFAR, "tf.summary.scalar(l.op.name, l)")]
    assert "tower_0/tower_0/total_loss" in losses.details["nodes"]
    assert any("ScalarSummary" in g["message"] for g in losses.details["graph_findings"])


def test_seed000_sessions_ask_for_no_soft_placement_and_d_stays_an_error(traces):
    captured = traces["seed000"]
    assert [s.allow_soft_placement for s in captured.sessions] == [False] * 4
    assert [r.session for r in captured.runs] == [0, 1, 2, 3]
    assert not captured.soft_placement
    (found,) = findings_of(captured)
    assert found.severity == "error" and NO_GPU_KERNEL in found.message
    assert found.line == line_of(SEED000, "d = tf.Variable(2)")


def test_soft_placement_is_the_placement_layers_word_and_a_graph_file_is_unchanged(tf):
    """`placement.problems(soft_placement=True)`: a group with no GPU kernel but a CPU one is
    soft-placed, not refused; without it (a graph file's check) the error stays."""
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/gpu:0"):
            tf.compat.v1.Variable(2, name="int_var")
            tf.compat.v1.summary.scalar("loss", tf.constant(1.0))
    meta = tf.compat.v1.train.export_meta_graph(graph=graph, clear_devices=False)
    index = index_for(meta.graph_def, meta)
    hard = {p.group.anchor: p for p in placement.problems(index)}
    soft = {p.group.anchor: p for p in placement.problems(index, soft_placement=True)}
    assert set(hard) == set(soft) == {"int_var", "loss", "loss/tags"}
    assert all(p.kind == "no-kernel" and p.refused for p in hard.values())
    assert all(p.kind == "soft-placed" and not p.refused for p in soft.values())
    assert [p.no_kernel for p in soft.values()] == [p.no_kernel for p in hard.values()]
    selected = Selected.build(registry.select(["variables-to-cpu"]), {}, ())
    as_file, _, _ = apply_to_graph(meta.graph_def, meta, "g.meta", selected, fix=False)
    assert sorted((f.node, f.severity) for f in as_file) == [
        ("int_var", "error"), ("loss", "error"), ("loss/tags", "error")]
    as_soft, _, _ = apply_to_graph(meta.graph_def, meta, "g.meta", selected, fix=False,
                                   soft_placement=True)
    assert [(f.node, f.severity) for f in as_soft] == [("int_var", "warning")]


@pytest.mark.parametrize("name, passed", [("soft", True), ("hard", False)])
def test_verify_places_and_runs_the_traced_graph_as_the_scripts_sessions_do(traces, name,
                                                                           passed):
    """`verify SCRIPT`'s placement check and run take the sessions' soft placement: the
    summaries TF moves to the CPU are no placement failure; without it, TF's error."""
    from graphfix.cli.tracing import _verified

    result = _verified(traces[name], str(CIFAR), steps=1)
    assert result.passed is passed
    checks = [c for c in result.checks if c.name == "placement"]
    if passed:
        (check,) = checks
        assert "26 with none there that soft placement moves to the CPU" in check.detail
        assert [c.name for c in result.checks if c.passed] == ["placement", "run"]
    else:
        assert checks and not any(c.passed for c in checks)
        assert all(NO_GPU_KERNEL.replace("GPU:0", "GPU:") in c.detail.replace("GPU:1", "GPU:")
                   .replace("GPU:0", "GPU:") for c in checks)


def test_a_supervisors_managed_session_config_is_the_scripts(tmp_path):
    """`tf.train.Supervisor.managed_session(config=...)`: the session its SessionManager
    makes is recorded with the script's config, and the summary under /gpu:0 is no finding."""
    script = tmp_path / "supervised.py"
    script.write_text(textwrap.dedent("""\
        import tensorflow as tf
        with tf.device("/gpu:0"):
            x = tf.Variable(1.0)
            tf.summary.scalar("x", x)
        step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(tf.square(x), global_step=step)
        sv = tf.train.Supervisor(logdir=None, summary_op=None)
        with sv.managed_session(config=tf.ConfigProto(allow_soft_placement=True)) as sess:
            sess.run(train_op)
    """))
    captured = trace(script)
    assert [(s.allow_soft_placement, s.site.line) for s in captured.sessions] == [(True, 8)]
    assert captured.soft_placement and captured.runs[-1].train
    # (the float variable on the one GPU is no finding either: no tower on another reads it)
    assert findings_of(captured) == []


PS_WORKER_SOFT = """\
import socket
import sys
import tensorflow as tf
sockets = [socket.socket() for _ in range(2)]
for sock in sockets:
    sock.bind(("127.0.0.1", 0))
ps_address, worker_address = ["127.0.0.1:%d" % sock.getsockname()[1] for sock in sockets]
for sock in sockets:
    sock.close()
cluster = tf.train.ClusterSpec({"ps": [ps_address], "worker": [worker_address]})
ps = tf.train.Server(cluster, job_name="ps", task_index=0)
worker = tf.train.Server(cluster, job_name="worker", task_index=0)
with tf.device("/job:ps/task:0"):
    x = tf.get_variable("x", [], initializer=tf.constant_initializer(3.0))
    step = tf.train.get_or_create_global_step()
with tf.device("/job:worker/task:0/device:GPU:0"):
    loss = tf.square(x, name="loss")
    tf.summary.scalar("loss", loss)
train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
config = tf.ConfigProto(allow_soft_placement="--no-soft-placement" not in sys.argv)
with tf.Session(worker.target, config=config) as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(train_op)
"""


def test_verify_on_a_cluster_places_and_runs_as_the_scripts_sessions_do(tmp_path):
    """A ps/worker script (verified on a local cluster) whose summary under the worker's
    GPU has no GPU kernel: with its sessions' soft placement, the placement check passes
    saying soft placement moves it and the step runs on the cluster; without, TF's error,
    and no cluster is started. As `verify SCRIPT` does in one process."""
    import json

    from conftest import run_cli

    script = tmp_path / "ps_worker_soft.py"
    script.write_text(PS_WORKER_SOFT)
    soft = json.loads(run_cli("verify", script, "--format", "json", check_exit=0).stdout)
    checks = {c["name"]: c for c in soft["checks"]}
    # (the summary and its tag, a string constant: neither has a GPU kernel)
    assert "but 2 with none there that soft placement moves to the CPU" in \
        checks["placement"]["detail"], soft
    assert checks["run"]["passed"] and checks["run"]["detail"].endswith(
        "from /job:worker/task:0")
    assert sorted(d.partition(" ")[0] for d in soft["devices"]) == [
        "/job:ps/task:0", "/job:worker/task:0"]

    hard = json.loads(run_cli("verify", script, "--format", "json", "--",
                              "--no-soft-placement", check_exit=1).stdout)
    assert [(c["name"], c["passed"]) for c in hard["checks"]] == [("placement", False)] * 2
    on_worker = NO_GPU_KERNEL.replace("'/device:GPU:0'", "'/job:worker/task:0/device:GPU:0'")
    assert all(on_worker in c["detail"] for c in hard["checks"]), hard
    assert hard["devices"] == ["local cluster ps=1, worker=1"]  # (none started)
