"""The placement check beyond variables: what TF's placer refuses, and only that (issue 17).

Each graph is built with real TensorFlow; TF's own placer (the oracle of
fixtures/real_models/oracle.py: TF's placer on CPU stand-ins with TF's C++ kernel lookup for
the GPU) says what a machine with the GPUs would do, and graphfix's `check` is held to it.
"""

from __future__ import annotations

import json
import sys

import pytest

from conftest import FIXTURES, run_cli

sys.path.insert(0, str(FIXTURES))

tf = pytest.importorskip("tensorflow")
from real_models import oracle  # noqa: E402

tf1 = tf.compat.v1


def _write(tmp_path, build, name="graph.pb"):
    graph = tf.Graph()
    with graph.as_default():
        build()
    path = tmp_path / name
    path.write_bytes(graph.as_graph_def().SerializeToString())
    return path


def _findings(path, *extra, exit_code=None):
    done = run_cli("check", "--format", "json", *extra, path, check_exit=exit_code)
    return json.loads(done.stdout)["findings"]


def _errors(path, *extra):
    return [f for f in _findings(path, *extra) if f["severity"] == "error"]


def test_a_device_the_targets_lack_is_tfs_error_and_the_variables_move_by_scope(tmp_path):
    def build():
        with tf.device("/gpu:3"):
            weights = tf1.get_variable("w", [2, 2])
            tf.matmul(tf.ones([2, 2]), weights, name="product")

    path = _write(tmp_path, build)
    assert _errors(path) == [], "no targets given: any device the graph names is taken"
    [error] = _errors(path, "--target-devices", "/gpu:0,/gpu:1")
    assert error["details"]["kind"] == "no-device" and not error["fixable"]
    assert set(error["details"]["groups"]) == {"w", "ones", "product"}
    assert error["message"].startswith(
        "Cannot assign a device for operation w/Initializer/random_uniform/RandomUniform: "
        "{{node w/Initializer/random_uniform/RandomUniform}} was explicitly assigned to "
        "/device:GPU:3 but available devices are [ "
        "/job:localhost/replica:0/task:0/device:CPU:0, "
        "/job:localhost/replica:0/task:0/device:GPU:0, "
        "/job:localhost/replica:0/task:0/device:GPU:1 ]")

    # One GPU reads w: not a shared variable, so by default nothing moves (moving it alone
    # would not place the graph: compute is the user's to re-place).
    kept = tmp_path / "kept.pb"
    run_cli("fix", "--target-devices", "/gpu:0,/gpu:1", "-o", kept, path)
    [left] = _errors(kept, "--target-devices", "/gpu:0,/gpu:1")
    assert set(left["details"]["groups"]) == {"w", "ones", "product"}
    fixed = tmp_path / "fixed.pb"
    run_cli("fix", "--target-devices", "/gpu:0,/gpu:1", "-o", fixed, path,
            "--set", "variables-to-cpu.scope=every-gpu-variable")
    [left] = _errors(fixed, "--target-devices", "/gpu:0,/gpu:1")
    assert set(left["details"]["groups"]) == {"ones", "product"}, \
        "the variable moved to the CPU; compute is the user's to re-place"


def test_tfs_own_words_for_a_device_the_process_lacks(tmp_path):
    # The same rule on the CPU, where TF can be asked: one process has one CPU.
    def build():
        with tf.device("/cpu:3"):
            tf.identity(tf.constant(1.0), name="copy")

    path = _write(tmp_path, build)
    [copy] = _errors(path, "--target-devices", "/gpu:0")
    assert copy["details"]["kind"] == "no-device"
    graph = tf.Graph()
    with graph.as_default():
        tf1.import_graph_def(tf1.GraphDef.FromString(path.read_bytes()), name="")
    config = tf1.ConfigProto(allow_soft_placement=False)
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        with tf1.Session(graph=graph, config=config) as session:
            session.run("copy:0")
    ours = copy["message"].split(" but available devices are")[0]
    assert ours.startswith("Cannot assign a device for operation copy: ")
    assert ours in raised.value.message


def _hand_made(tmp_path, nodes):
    """A GraphDef of Consts and Identities: (name, op, device, dtype, inputs, `_class` names)."""
    graph_def = tf1.GraphDef()
    for name, op, device, dtype, inputs, classes in nodes:
        node = graph_def.node.add(name=name, op=op, device=device, input=inputs)
        node.attr["dtype" if op == "Const" else "T"].type = dtype.as_datatype_enum
        if op == "Const":
            node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(
                "x" if dtype == tf.string else 1.0, dtype=dtype))
        if classes:
            node.attr["_class"].list.s.extend(f"loc:@{c}".encode() for c in classes)
    path = tmp_path / "hand_made.pb"
    path.write_bytes(graph_def.SerializeToString())
    return path


def test_a_class_members_own_device_does_not_decide(tmp_path):
    # TF's Python importer gives a `_class` member the device of the node it names: a
    # string Const that names a CPU node places, whatever device it asks for itself.
    path = _hand_made(tmp_path, [
        ("anchor", "Const", "/device:CPU:0", tf.float32, [], []),
        ("label", "Const", "/device:GPU:0", tf.string, [], ["anchor"]),
    ])
    assert oracle.place(oracle.graph_def_of(path)).places
    assert _errors(path, "--target-devices", "/gpu:0") == []


def test_a_real_conflict_is_an_error_and_its_members_are_still_checked(tmp_path):
    # `copy` names two nodes that ask for devices that cannot merge.
    path = _hand_made(tmp_path, [
        ("anchor", "Const", "/device:CPU:0", tf.float32, [], []),
        ("label", "Const", "/device:GPU:0", tf.string, [], []),
        ("copy", "Identity", "", tf.float32, ["anchor"], ["anchor", "label"]),
    ])
    [refused, *_] = oracle.place(oracle.graph_def_of(path)).failures
    assert refused.kind == "conflict"
    [error] = _errors(path, "--target-devices", "/gpu:0")
    assert error["details"]["kind"] == "conflict" and not error["fixable"]
    # TF's words: `copy` joins `anchor`'s group, then `label`'s, where the two clash.
    assert "Cannot colocate nodes {{colocation_node copy}} and {{colocation_node label}}" \
        in refused.reason
    assert error["message"].startswith("Cannot colocate nodes copy and label: ")
    assert error["details"]["node"] == "copy"
    assert error["details"]["no_kernel"] == ["label"], "its string Const has no GPU kernel"
    assert "no kernel on the device each asks for: Const label" in error["message"]


def test_a_function_call_op_runs_anywhere(tmp_path):
    from tensorflow.python.framework import function

    @function.Defun(tf.float32)
    def double(x):
        return x * 2

    def build():
        with tf.device("/gpu:0"):
            double(tf.constant(1.0), name="call")

    path = _write(tmp_path, build)
    graph_def = oracle.graph_def_of(path)
    assert any(n.op == graph_def.library.function[0].signature.name for n in graph_def.node)
    assert oracle.place(graph_def).places
    assert _errors(path, "--target-devices", "/gpu:0") == []


def test_an_op_this_tensorflow_does_not_know_is_not_judged(tmp_path):
    graph_def = tf1.GraphDef()
    custom = graph_def.node.add(name="image_id", op="GetImageID", device="/device:GPU:0")
    custom.attr["T"].type = tf.string.as_datatype_enum
    path = tmp_path / "custom.pb"
    path.write_bytes(graph_def.SerializeToString())
    assert _errors(path, "--target-devices", "/gpu:0") == []


def test_a_print_two_calls_deep_is_found_in_the_inner_body_and_fixed(tmp_path):
    @tf.function
    def inner(x):
        tf.print("x is", x)
        return x + 1

    @tf.function
    def outer(x):
        return inner(x) * 2

    def build():
        with tf.device("/gpu:1"):
            outer(tf.constant(1.0))

    path = _write(tmp_path, build)
    expected = {(f.function, f.node) for f in oracle.place(oracle.graph_def_of(path)).failures}
    assert expected and all(function.startswith("__inference_inner") for function, _ in expected)
    errors = _errors(path, "--target-devices", "/gpu:0,/gpu:1")
    assert {(f["details"]["function"], n) for f in errors
            for n in f["details"]["no_kernel"]} == expected
    assert all("'/device:GPU:1'" in f["message"] for f in errors)

    fixed = tmp_path / "fixed.pb"
    run_cli("fix", "--target-devices", "/gpu:0,/gpu:1", "-o", fixed, path)
    assert _errors(fixed, "--target-devices", "/gpu:0,/gpu:1") == []
    assert oracle.place(oracle.graph_def_of(fixed)).places
