"""Do no harm on correct real training graphs (issue 36): graphs built with tf_keras, tf-slim
and tf.compat.v1.layers, trained by TF's optimizers, as TF writes them (a bare GraphDef and a
MetaGraphDef), give no finding from any transform, and `fix -o` writes each byte for byte
as it was read. The same models without the update ops' dependency are still found and
fixed, and the fixed graph's step moves the moving statistics.

A few small graphs of fixtures/real_models/do_no_harm.py's grid stand for it here (the
whole grid, 144 graphs, is its `main`); they are built in a process of their own, as
tf.compat.v1.layers needs TF_USE_LEGACY_KERAS before TF loads.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from conftest import FIXTURES, run_cli

sys.path.insert(0, str(FIXTURES))

tf = pytest.importorskip("tensorflow")

# The shape of a tf_keras MobileNetV2 trained by Adam on resource variables: TF's Adam
# reads each beta power again after its assign, two sinks that read only.
ADAM_RESOURCE = "keras_cnn_bn-adam-resource-1"
CORRECT = [
    ADAM_RESOURCE,
    "keras_cnn_bn-momentum_step-ref-2",  # with a Saver: it restores the moving statistics
    "keras_lstm-adagrad-resource-1",
    "slim_create_train_op-rmsprop_step-ref-1",
    "layers_bn-sgd_step-resource-2",
    # tf_keras's legacy RMSprop updates with assign ops: no Apply op in the graph
    "keras_get_updates-rmsprop_step-resource-1",
]
BUGGY = ["keras_cnn_bn-adam-resource-1-bug", "layers_bn-momentum_step-ref-2-bug",
         "slim_create_train_op-adam_step-resource-1-bug",
         "keras_get_updates-rmsprop_step-ref-1-bug"]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, tuple[pathlib.Path, str]]:
    """Every graph of CORRECT and BUGGY as .pb and .meta: "NAME.pb" -> (path, train op)."""
    out = tmp_path_factory.mktemp("do_no_harm")
    done = subprocess.run(
        [sys.executable, str(FIXTURES / "real_models" / "do_no_harm.py"), out, *CORRECT, *BUGGY],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    graphs = {}
    for line in done.stdout.splitlines():
        path, _ops, train = line.split()
        graphs[pathlib.Path(path).name] = (pathlib.Path(path), train)
    return graphs


def _files(built, names):
    return [built[f"{name}.{kind}"][0] for name in names for kind in ("pb", "meta")]


@pytest.fixture(scope="module")
def checked(built) -> dict:
    """`graphfix check --format json` of every correct graph, in one run."""
    result = run_cli("check", "--format", "json", *_files(built, CORRECT))
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def fixed_correct(built, tmp_path_factory) -> pathlib.Path:
    """`graphfix fix -o DIR` of every correct graph, in one run: DIR."""
    out = tmp_path_factory.mktemp("fixed_correct")
    result = run_cli("fix", *_files(built, CORRECT), "-o", out)
    assert result.returncode in (0, 1), (result.stdout, result.stderr)  # (each file's test
    return out                                                           # says what changed)


@pytest.mark.parametrize("kind", ["pb", "meta"])
@pytest.mark.parametrize("name", CORRECT)
def test_a_correct_training_graph_gives_no_finding(checked, built, name, kind):
    path = str(built[f"{name}.{kind}"][0])
    assert [f for f in checked["findings"] if f["path"] == path] == []
    assert [f for f in checked["failed"] if f["path"] == path] == []


@pytest.mark.parametrize("kind", ["pb", "meta"])
@pytest.mark.parametrize("name", CORRECT)
def test_fix_writes_a_correct_training_graph_byte_for_byte(fixed_correct, built, name, kind):
    original = built[f"{name}.{kind}"][0]
    assert (fixed_correct / original.name).read_bytes() == original.read_bytes()


def test_adams_reads_after_its_beta_power_assigns_are_no_train_op(built):
    """What update-ops takes for the train op of the bare GraphDef: Adam's group, not the
    reads of beta1_power and beta2_power after their assigns, which nothing consumes."""
    from graphfix.graph import graphfile, training
    from graphfix.graph.index import index_for

    path, train = built[f"{ADAM_RESOURCE}.pb"]
    index = index_for(graphfile.load(path).message)
    reads = [n for n in ("Adam/ReadVariableOp_1", "Adam/ReadVariableOp_3") if n in index]
    assert reads and all(index.is_sink(n) for n in reads)  # (the shape TF builds)
    assert training.train_ops(index) == ([train], "detected") and train == "Adam"


def test_a_read_after_the_step_is_the_train_op_where_nothing_else_runs_after_it(tf):
    """A loop that runs `identity(global_step)` after its step runs the step through it:
    a read is passed over only for another sink after the step, never left with none."""
    from graphfix.graph import training
    from graphfix.graph.index import index_for

    tf1 = tf.compat.v1
    with tf.Graph().as_default() as graph:
        w = tf1.get_variable("w", [3], use_resource=False)
        step = tf1.Variable(0, name="global_step", trainable=False, use_resource=False)
        loss = tf.reduce_sum(tf.square(w), name="loss")
        train = tf1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train")
        with tf.control_dependencies([train]):
            tf.identity(step, name="step_after_training")
    index = index_for(graph.as_graph_def())
    assert training.is_value_read(index, "step_after_training")
    assert training.detect_train_ops(index) == ["step_after_training"]


@pytest.fixture(scope="module")
def bugs_fixed(built, tmp_path_factory) -> tuple[dict, pathlib.Path, dict]:
    """(`check --format json` of every BUGGY graph, the folder `fix -o` wrote them to, and
    `check --format json` of what it wrote), each one run."""
    out = tmp_path_factory.mktemp("fixed_bugs")
    files = _files(built, BUGGY)
    found = json.loads(run_cli("check", "--format", "json", *files).stdout)
    run_cli("fix", *files, "-o", out, check_exit=1)
    again = json.loads(run_cli("check", "--format", "json", out).stdout)
    return found, out, again


@pytest.mark.parametrize("kind", ["pb", "meta"])
@pytest.mark.parametrize("name", BUGGY)
def test_without_the_update_ops_dependency_the_bug_is_found_and_fixed(built, bugs_fixed, name,
                                                                     kind):
    from real_models.do_no_harm import run_step

    found, out, again = bugs_fixed
    path, train = built[f"{name}.{kind}"]
    findings = [f for f in found["findings"] if f["path"] == str(path)]
    # (a MetaGraphDef of slim's loop names two train ops: the optimizer's apply_gradients
    # puts its op in TRAIN_OP, create_train_op the loss it reads after the step)
    assert train.partition(":")[0] in {f["node"] for f in findings}, findings
    assert all(f["transform"] == "update-ops" and f["fixable"]
               and "batch-norm moving averages never update" in f["message"]
               for f in findings), findings
    fixed = out / path.name
    assert [f for f in again["findings"] if f["path"] == str(fixed)] == []

    before = run_step(path, train)
    assert before and all(np.array_equal(b, a) for b, a in before.values()), "the bug"
    after = run_step(fixed, train)
    assert after.keys() == before.keys()
    assert all(not np.array_equal(b, a) for b, a in after.values())
