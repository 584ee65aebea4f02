"""variables-to-cpu does no harm (issue 32): a group moves to the CPU only where every member
has a kernel there (cases 1), a device the target devices lack hides no missing kernel (5),
and a single-GPU model's float variables are no finding (7).

Each graph is built with real TensorFlow; TF's placer (fixtures/real_models/oracle.py) says
whether the output of `fix` places.
"""

from __future__ import annotations

import json
import sys

import pytest

import graphfix

from conftest import FIXTURES, run_cli

sys.path.insert(0, str(FIXTURES))

tf = pytest.importorskip("tensorflow")
from real_models import oracle  # noqa: E402
from tensorflow.core.framework import graph_pb2  # noqa: E402
from tensorflow.python.util import _pywrap_kernel_registry  # noqa: E402

tf1 = tf.compat.v1
ONLY = ["variables-to-cpu"]
EVERY_GPU_VARIABLE = {"variables-to-cpu": {"scope": "every-gpu-variable"}}
UNITS, INPUTS = 4, 3


def _graph_def(build):
    graph = tf.Graph()
    with graph.as_default():
        build()
    return graph.as_graph_def()


def _has_kernel(node, device_type: str) -> bool:
    """TF's C++ kernel lookup for `node` on `device_type`."""
    probe = type(node)()
    probe.CopyFrom(node)
    probe.device = f"/device:{device_type}:0"
    oracle._add_default_attrs(probe)
    return bool(_pywrap_kernel_registry.TryFindKernelClass(probe.SerializeToString()))


def _places(graph_def) -> list:
    """TF placer's refusals (the oracle's failures) for a graph that may hold ops with a GPU
    kernel only (cuDNN's). The oracle places GPUs on CPU stand-ins, where such an op has no
    kernel at all, so each is replaced by a Placeholder of its type (its name, device and
    `_class` kept; its inputs are values, no ref or resource edge, so no group changes), and
    TF's placer must put its group on a GPU: a NoOp pinned to the CPU and colocated with it
    conflicts ("Cannot colocate"), else the op would land on the CPU, which has no kernel."""
    work = graph_pb2.GraphDef()
    work.CopyFrom(graph_def)
    gpu_only = []
    for node in work.node:
        if _has_kernel(node, "GPU") and not _has_kernel(node, "CPU"):
            assert not any(text.split(":")[0] == node.name and ":" in text
                           for other in work.node for text in other.input), node.name
            kept = {key: node.attr[key] for key in ("_class",) if key in node.attr}
            dtype = node.attr["T"].type
            node.op, controls = "Placeholder", [t for t in node.input if t.startswith("^")]
            node.ClearField("attr")
            node.attr["dtype"].type = dtype
            for key, value in kept.items():
                node.attr[key].CopyFrom(value)
            node.ClearField("input")
            node.input.extend(controls)
            gpu_only.append(node.name)
    failures = oracle.place(work).failures
    standin = graph_pb2.GraphDef()
    standin.CopyFrom(work)
    for node in standin.node:
        node.device = oracle.standin_device(node.device)
    placer = oracle._Placer(8, {})
    for name in gpu_only:
        refusal = placer.error(standin, {f"{oracle.PROBE_PREFIX}_gpu_only": name})
        if refusal is None or "Cannot colocate" not in refusal:
            failures.append(oracle.Failure(name, "no-kernel", "placed off the GPUs, where it "
                                           "has no kernel"))
    return failures


def _canonical_to_params():
    """cuDNN's opaque parameters from canonical weights: a GPU kernel only."""
    return tf.raw_ops.CudnnRNNCanonicalToParams(
        num_layers=1, num_units=UNITS, input_size=INPUTS,
        weights=[tf.ones([UNITS, INPUTS]), tf.ones([UNITS, UNITS])],
        biases=[tf.zeros([UNITS]), tf.zeros([UNITS])], rnn_mode="rnn_tanh")


def _cudnn_rnn(towers: int, resource: bool, summary: bool = False):
    """A cuDNN RNN (tf.compat.v1, raw ops) whose opaque-params variable lives on /gpu:0. Its
    initial value is made by a callable, so the `CudnnRNNCanonicalToParams` op that makes it
    is colocated with the variable (`_class`), as TF1's variables do; each tower runs
    `CudnnRNN` on its own GPU. `summary`: a histogram of the params in the group too."""
    def build():
        with tf.device("/gpu:0"):
            params = tf1.Variable(_canonical_to_params, validate_shape=False,
                                  name="opaque_kernel", use_resource=resource)
            if summary:
                with tf1.colocate_with(params):
                    tf1.summary.histogram("opaque_kernel", params)
        for k in range(towers):
            with tf.device(f"/gpu:{k}"), tf.name_scope(f"tower_{k}"):
                inputs = tf1.placeholder(tf.float32, [5, 2, INPUTS], name="inputs")
                state = tf.zeros([1, 2, UNITS])
                outputs = tf.raw_ops.CudnnRNN(input=inputs, input_h=state, input_c=state,
                                              params=tf.convert_to_tensor(params),
                                              rnn_mode="rnn_tanh")
                tf.identity(outputs[0], name="outputs")
        tf1.global_variables_initializer()
    return _graph_def(build)


def test_the_cudnn_ops_have_a_gpu_kernel_only():
    graph_def = _cudnn_rnn(1, resource=False)
    for op in ("CudnnRNN", "CudnnRNNCanonicalToParams"):
        [node] = [n for n in graph_def.node if n.op == op]
        assert _has_kernel(node, "GPU") and not _has_kernel(node, "CPU"), op
    assert _places(graph_def) == []


@pytest.mark.parametrize("resource", [False, True], ids=["ref", "resource"])
def test_cudnn_params_shared_by_towers_are_reported_not_moved(resource):
    """Case 1: towers on two GPUs read the params: a shared variable, but its group holds an
    op with no CPU kernel. Moving it (as before) gave a graph TF refuses."""
    before = _cudnn_rnn(2, resource)
    assert _places(before) == []
    [finding] = graphfix.check_graph(before, only=ONLY)
    assert finding.severity == "warning" and not finding.fixable
    assert finding.node == "opaque_kernel"
    assert "shared variables belong on the CPU, but its group cannot move there: no CPU " \
           "kernel for: CudnnRNNCanonicalToParams " \
           "opaque_kernel/Initializer/CudnnRNNCanonicalToParams (T=DT_FLOAT)" in finding.message
    fixed, changes = graphfix.fix_graph(before, only=ONLY)
    assert changes == []
    assert fixed == before
    assert _places(fixed) == []
    # The explicit scope asks the same of a single GPU's params, with the same answer.
    one = _cudnn_rnn(1, resource)
    [finding] = graphfix.check_graph(one, only=ONLY, settings=EVERY_GPU_VARIABLE)
    assert not finding.fixable and "no CPU kernel for: CudnnRNNCanonicalToParams" in \
        finding.message
    fixed, changes = graphfix.fix_graph(one, only=ONLY, settings=EVERY_GPU_VARIABLE)
    assert changes == [] and _places(fixed) == []


def test_a_group_without_a_kernel_on_either_device_is_reported_not_moved():
    """Case 1, the no-kernel error's move: a histogram (no GPU kernel) joins the params'
    group (an op with no CPU kernel): no device holds the group, TF refuses it as it is,
    and moving it to the CPU would only trade one refusal for another."""
    before = _cudnn_rnn(1, resource=False, summary=True)
    [histogram] = [n.name for n in before.node if n.op == "HistogramSummary"]
    assert histogram in {f.node for f in _places(before)}
    [error] = [f for f in graphfix.check_graph(before, only=ONLY) if f.severity == "error"]
    assert not error.fixable
    assert "no GPU kernel for: " in error.message
    assert f"HistogramSummary {histogram}" in error.message
    assert "it cannot move to the CPU either: no CPU kernel for: CudnnRNNCanonicalToParams" \
        in error.message
    fixed, changes = graphfix.fix_graph(before, only=ONLY)
    assert changes == [] and fixed == before


def test_a_function_body_group_without_a_cpu_kernel_stays():
    """Case 1 in a function body: a `tf.function` called on /gpu:0 whose `AsString` (no GPU
    kernel) is colocated with `CudnnRNNCanonicalToParams` (no CPU kernel)."""
    @tf.function
    def encode(values):
        params = _canonical_to_params()
        with tf1.colocate_with(params):
            text = tf.strings.as_string(values)
        return params, text

    def build():
        with tf.device("/gpu:0"):
            _, text = encode(tf.constant([1.0, 2.0], name="values"))
            tf.identity(text, name="text")

    before = _graph_def(build)
    [error] = graphfix.check_graph(before, only=ONLY)
    assert error.severity == "error" and not error.fixable
    assert "(in the body of function __inference_encode_" in error.message
    assert "it cannot move to the CPU either: no CPU kernel for: CudnnRNNCanonicalToParams" \
        in error.message
    fixed, changes = graphfix.fix_graph(before, only=ONLY)
    assert changes == [] and fixed == before


def _three_towers():
    """Towers on /gpu:0, /gpu:1, /gpu:2 sharing weights on the CPU, each with an int32 step
    variable and a loss summary on its GPU: neither has a GPU kernel."""
    def build():
        with tf.device("/cpu:0"):
            weights = tf1.get_variable("weights", [2, 2], use_resource=False)
        for k in range(3):
            with tf.device(f"/gpu:{k}"), tf.name_scope(f"tower_{k}"):
                tf1.Variable(0, name="steps", use_resource=False)
                loss = tf.reduce_sum(tf.matmul(tf.ones([2, 2]), weights), name="loss")
                tf1.summary.scalar("loss", loss)
    return _graph_def(build)


def test_a_missing_target_device_hides_no_missing_kernel(tmp_path):
    """Case 5: with targets /gpu:0,/gpu:1, tower 2's groups ask for a device the machine
    lacks and also lack a GPU kernel: TF, on a machine with the device, refuses them for the
    kernel. Each is its own error, beside the one finding for the missing device."""
    graph_def = _three_towers()
    refused = {f.node for f in oracle.place(graph_def).failures}
    assert {f"tower_{k}/steps" for k in range(3)} <= refused
    assert {f"tower_{k}/loss_1" for k in range(3)} <= refused  # (the summary op)
    targets = ("/gpu:0", "/gpu:1")
    findings = graphfix.check_graph(graph_def, only=ONLY, target_devices=targets)
    kernel_errors = [f for f in findings if f.details.get("kind") == "no-kernel"]
    lacking = {name for f in kernel_errors for name in f.details["no_kernel"]}
    assert lacking == refused
    assert {f.details["device"] for f in kernel_errors} == {
        "/device:GPU:0", "/device:GPU:1", "/device:GPU:2"}
    [missing] = [f for f in findings if f.details.get("kind") == "no-device"]
    assert "/device:GPU:2" in missing.message and not missing.fixable
    untargeted = graphfix.check_graph(graph_def, only=ONLY)
    assert len(kernel_errors) == len([f for f in untargeted if f.severity == "error"])

    # The fix moves every group without a kernel; tower 2's compute on the missing GPU is
    # the user's to re-place, and the only error left.
    fixed, _ = graphfix.fix_graph(graph_def, only=ONLY, target_devices=targets)
    assert oracle.place(fixed).places
    left = [f for f in graphfix.check_graph(fixed, only=ONLY, target_devices=targets)
            if f.severity == "error"]
    assert [f.details["kind"] for f in left] == ["no-device"]
    assert graphfix.check_graph(fixed, only=ONLY) == []


def test_a_missing_target_device_hides_no_missing_kernel_in_a_function_body():
    """Case 5 in a function body: a `tf.function` called on /gpu:2, its `AsString` with no
    GPU kernel: with targets /gpu:0,/gpu:1 the call's missing device and the body's missing
    kernel are both said, and the fix moves the body's group."""
    @tf.function
    def report(values):
        return tf.strings.as_string(values)

    def build():
        with tf.device("/gpu:2"):
            tf.identity(report(tf.constant([1.0], name="values")), name="text")

    graph_def = _graph_def(build)
    targets = ("/gpu:0", "/gpu:1")
    findings = graphfix.check_graph(graph_def, only=ONLY, target_devices=targets)
    assert sorted(f.details["kind"] for f in findings) == ["no-device", "no-kernel"]
    [body] = [f for f in findings if f.details["kind"] == "no-kernel"]
    assert body.fixable and body.details["no_kernel"] == ["AsString"]
    assert "(in the body of function __inference_report_" in body.message
    fixed, _ = graphfix.fix_graph(graph_def, only=ONLY, target_devices=targets)
    assert oracle.place(fixed).places
    assert graphfix.check_graph(fixed, only=ONLY) == []


def _towers(gpus: list[int], resource: bool):
    """A model trained on the GPUs listed, one tower each, its float variables (and Adam's
    slots) made by tower 0 on its GPU and read by every tower, as the recipe without
    `_variable_on_cpu` builds it."""
    def build():
        losses = []
        for k, gpu in enumerate(gpus):
            with tf.device(f"/gpu:{gpu}"), tf.name_scope(f"tower_{k}"):
                with tf1.variable_scope("model", reuse=k > 0):
                    weights = tf1.get_variable("weights", [2, 1], use_resource=resource)
                    bias = tf1.get_variable("bias", [1], use_resource=resource,
                                            initializer=tf1.zeros_initializer())
                losses.append(tf.reduce_sum(tf.matmul(tf.ones([3, 2]), weights) + bias))
        with tf.device(f"/gpu:{gpus[0]}"):
            train = tf1.train.AdamOptimizer(0.1).minimize(tf.add_n(losses), name="train")
            tf1.add_to_collection("train_op", train)
            tf1.global_variables_initializer()
    return _graph_def(build)


@pytest.mark.parametrize("resource", [False, True], ids=["ref", "resource"])
def test_a_single_gpu_model_is_left_alone(resource, tmp_path):
    """Case 7: one tower on /gpu:0: nothing to report, nothing to rewrite, exit 0. Before,
    a warning moved every weight to the CPU (a host-to-device copy each step)."""
    tf.io.write_graph(_towers([0], resource), str(tmp_path), "model.pb", as_text=False)
    path = tmp_path / "model.pb"
    assert oracle.place(oracle.graph_def_of(path)).places
    check = run_cli("check", path, "--only", "variables-to-cpu", "--format", "json",
                    check_exit=0)
    assert json.loads(check.stdout)["findings"] == []
    fixed = tmp_path / "fixed.pb"
    run_cli("fix", path, "--only", "variables-to-cpu", "-o", fixed, check_exit=0)
    assert fixed.read_bytes() == path.read_bytes()


@pytest.mark.parametrize("resource", [False, True], ids=["ref", "resource"])
def test_variables_towers_on_two_gpus_read_still_move(resource):
    """Case 7, the reason the warning exists: towers on /gpu:0 and /gpu:1 read tower 0's
    variables (through `read`, or each tower's own `ReadVariableOp`)."""
    before = _towers([0, 1], resource)
    [warning] = graphfix.check_graph(before, only=ONLY)
    assert warning.severity == "warning" and warning.fixable
    assert "towers on several GPUs read them; shared variables belong on the CPU" in \
        warning.message
    fixed, changes = graphfix.fix_graph(before, only=ONLY)
    assert {c.node for c in changes} >= {"model/weights", "model/bias"}
    devices = {n.name: n.device for n in fixed.node}
    assert devices["model/weights"] == devices["model/weights/Adam"] == "/device:CPU:0"
    assert devices["tower_1/MatMul"] == "/device:GPU:1", "compute stays on its GPU"
    assert oracle.place(fixed).places
    assert graphfix.check_graph(fixed, only=ONLY) == []


def test_two_towers_on_one_gpu_share_nothing_across_gpus():
    """Towers that all ask for /gpu:0 read the variables on one GPU: no finding; the
    explicit scope moves them, and the output places."""
    before = _towers([0, 0], resource=False)
    assert graphfix.check_graph(before, only=ONLY) == []
    [warning] = graphfix.check_graph(before, only=ONLY, settings=EVERY_GPU_VARIABLE)
    assert "scope every-gpu-variable puts every variable on the CPU" in warning.message
    fixed, changes = graphfix.fix_graph(before, only=ONLY, settings=EVERY_GPU_VARIABLE)
    assert changes and oracle.place(fixed).places
    assert all(n.device == "/device:CPU:0" for n in fixed.node if n.op == "VariableV2")
