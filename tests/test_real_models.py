"""The real-model corpus against TF's own placer (issue 17, "Must show" part 1).

The oracle (fixtures/real_models/oracle.py) is TF's placer run on CPU stand-ins with TF's
C++ kernel lookup for the GPU. It is validated first: graphs that really run on the CPU
place, hand-made broken ones fail with TF's reason. Then graphfix is held to it. What is
right today is asserted; each known gap is the test that will hold once issue 17 is done,
marked `xfail(strict=True)` so that it flips when the fix lands. Only the corpus graphs
that build in well under a second are used here; the tf_keras and tf-slim networks take
tens of seconds each and are measured by fixtures/bench/real_models_bench.py.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from conftest import FIXTURES, run_cli
from proto_roundtrip import assert_same_as_tf

sys.path.insert(0, str(FIXTURES))

tf = pytest.importorskip("tensorflow")
from real_models import oracle  # noqa: E402
from real_models.oracle import graph_def_of  # noqa: E402

tf1 = tf.compat.v1
TARGETS = "/gpu:0,/gpu:1"
FAST = ["dtype_variables", "summaries_saver_gpu", "queue_on_gpu", "resource_edge_override",
        "tf2_savedmodel_while_print", "colocated_ops", "ps_worker_by_hand", "ps_worker_setter",
        "partitioned_variables", "queue_runners", "estimator_lstm"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Every fast corpus graph, built once: name -> path."""
    out = tmp_path_factory.mktemp("real_models")
    done = subprocess.run([sys.executable, str(FIXTURES / "real_models" / "corpus.py"), out,
                           "test", *FAST], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return dict(zip(FAST, map(pathlib.Path, done.stdout.split())))


@pytest.fixture(scope="module")
def verdicts(built):
    return {name: oracle.place(graph_def_of(path)) for name, path in built.items()}


def _cleared(graph_def):
    out = tf1.GraphDef()
    out.CopyFrom(graph_def)
    for node in [*out.node, *(n for f in out.library.function for n in f.node_def)]:
        node.device = ""
    return out


def _graph(build) -> tf1.GraphDef:
    graph = tf.Graph()
    with graph.as_default():
        build()
    return graph.as_graph_def()


# --- the oracle itself ---------------------------------------------------------------


@pytest.mark.parametrize("name", FAST)
def test_oracle_places_every_corpus_graph_with_devices_cleared(built, name):
    assert oracle.place(_cleared(graph_def_of(built[name]))).places


def test_oracle_fails_a_string_const_on_the_gpu_with_tfs_reason():
    def build():
        with tf.device("/gpu:0"):
            tf.constant("label", name="label")
        tf.constant(1.0, name="fine")

    verdict = oracle.place(_graph(build))
    assert [(f.node, f.kind) for f in verdict.failures] == [("label", "no-kernel")]
    assert verdict.failures[0].reason == (
        "Cannot assign a device for operation label: Could not satisfy explicit device "
        "specification '/device:GPU:0' because no supported kernel for GPU devices is "
        "available.")


def test_oracle_fails_tf_print_under_the_gpu():
    def build():
        with tf.device("/gpu:1"):
            tf.print("step", name="print")

    verdict = oracle.place(_graph(build))
    assert {f.node for f in verdict.failures} == {"print", "print_format"}
    assert all("'/device:GPU:1'" in f.reason for f in verdict.failures)


def test_oracle_lets_tf_override_a_consumer_across_a_resource_edge(verdicts):
    # A variable on /cpu:0, its assign_add under /gpu:1: TF moves the consumer, no error.
    assert verdicts["resource_edge_override"].places


def test_oracle_follows_a_string_const_only_where_its_group_asks_for_the_gpu():
    def build():
        with tf.device("/gpu:0"):
            name = tf.constant("a")
        tf.strings.length(name, name="length")  # no device: TF puts it where it has a kernel

    verdict = oracle.place(_graph(build))
    assert [f.node for f in verdict.failures] == ["Const"]


def test_oracle_checks_function_bodies_with_the_call_sites_device():
    def build():
        @tf.function
        def report(x):
            tf.print("x", x)
            return x + 1

        with tf.device("/gpu:0"):
            report(tf.constant(1.0))

    verdict = oracle.place(_graph(build))
    assert {f.node for f in verdict.failures} == {"StringFormat", "PrintV2"}
    assert all(f.function and f.function.startswith("__inference_report") for f in
               verdict.failures)


def test_oracle_places_function_call_ops_anywhere():
    def build():
        @tf.function
        def double(x):
            return x * 2

        with tf.device("/gpu:0"):
            double(tf.constant(1.0))

    assert oracle.place(_graph(build)).places


def test_oracle_reports_a_real_conflict_across_resource_edges():
    # Two resource handles with different devices into one op: TF overrides a consumer's
    # requested device, never a resource's, so this one it refuses.
    def build():
        with tf.device("/cpu:0"):
            var = tf.raw_ops.VarHandleOp(dtype=tf.float32, shape=[2], shared_name="var",
                                         name="var")
        with tf.device("/gpu:1"):
            accum = tf.raw_ops.VarHandleOp(dtype=tf.float32, shape=[2], shared_name="accum",
                                           name="accum")
        tf.raw_ops.ResourceApplyMomentum(var=var, accum=accum, lr=0.1, grad=[1.0, 1.0],
                                         momentum=0.9, name="apply")

    verdict = oracle.place(_graph(build))
    assert [f.kind for f in verdict.failures] == ["conflict"]
    assert "incompatible resource devices" in verdict.failures[0].reason
    assert "/device:GPU:1" in verdict.failures[0].reason


def _opaque_params(device: str):
    """cuDNN's canonical-to-opaque op (a GPU kernel only) initializing a variable, both
    under `device`: the op sits in the variable's colocation group."""
    def build():
        with tf.device(device):
            def init():
                return tf.raw_ops.CudnnRNNCanonicalToParams(
                    num_layers=1, num_units=2, input_size=2,
                    weights=[tf.zeros([2, 2])] * 8, biases=[tf.zeros([2])] * 8)
            tf1.Variable(init, validate_shape=False, name="opaque")
    return _graph(build)


def test_oracle_places_a_gpu_only_op_whose_group_asks_for_the_gpu():
    # No CPU kernel: on the CPU stand-ins TF itself would refuse it, a real GPU would not.
    assert oracle.place(_opaque_params("/gpu:0")).places
    assert oracle.place(_cleared(_opaque_params("/gpu:0"))).places


def test_oracle_fails_a_gpu_only_op_whose_group_asks_for_the_cpu():
    verdict = oracle.place(_opaque_params("/cpu:0"))
    assert [(f.node, f.kind) for f in verdict.failures] == [
        ("opaque/Initializer/CudnnRNNCanonicalToParams", "no-kernel")]
    assert "no supported kernel for CPU devices" in verdict.failures[0].reason


def test_oracle_places_a_ps_worker_graph_on_a_loopback_cluster(verdicts):
    assert verdicts["ps_worker_by_hand"].places and verdicts["ps_worker_setter"].places


def test_graphfix_reads_and_writes_every_corpus_graph_as_tf_does(built):
    """graphfix's own messages (issue 34) on each corpus graph TF wrote: the same bytes both
    ways as TF's classes, and the same text (tests/proto_roundtrip.py)."""
    canonical = [name for name, path in built.items() if assert_same_as_tf(path)]
    assert "tf2_savedmodel_while_print" in canonical, canonical


def test_oracle_on_the_corpus(verdicts):
    """What TF's placer says of the fast corpus graphs (the table in docs/real_models.md)."""
    failing = {name: sorted(f.where for f in v.failures) for name, v in verdicts.items()}
    assert failing["dtype_variables"] == sorted([
        "counter", "counter/Assign", "AssignAdd", "tag", "tag/Initializer/initial_value",
        "vocab", "vocab_lookup_table_export_values/LookupTableExportV2", "Reshape",
        "vocab_lookup_table_insert/LookupTableInsertV2"])
    assert len(failing["summaries_saver_gpu"]) == 9
    assert [w.split("/", 1)[1] for w in failing["tf2_savedmodel_while_print"]] == [
        "while/PrintV2", "while/StringFormat"]
    for name in ["queue_on_gpu", "resource_edge_override", "colocated_ops",
                 "ps_worker_by_hand", "ps_worker_setter", "partitioned_variables",
                 "queue_runners", "estimator_lstm"]:
        assert failing[name] == [], name


# --- graphfix against the oracle --------------------------------------------------------


def _errors(path, *extra) -> list[dict]:
    done = run_cli("check", "--target-devices", TARGETS, "--format", "json", *extra, path)
    return [f for f in json.loads(done.stdout)["findings"] if f["severity"] == "error"]


def _named(findings) -> set[str]:
    text = " ".join(f"{f['node']} {f['message']}" for f in findings)
    return {word.strip(";:(),") for word in text.split()}


def test_no_kernel_scope_finds_every_failing_main_graph_node(built, verdicts):
    for name in ["dtype_variables", "summaries_saver_gpu"]:
        found = _named(_errors(built[name], "--set", "variables-to-cpu.scope=no-kernel"))
        assert verdicts[name].failing_nodes(main_only=True) <= found, name


def test_no_false_error_on_graphs_tf_places(built, verdicts):
    for name in ["resource_edge_override", "ps_worker_by_hand", "ps_worker_setter",
                 "partitioned_variables", "queue_runners", "queue_on_gpu", "colocated_ops",
                 "estimator_lstm"]:
        assert verdicts[name].places
        assert _errors(built[name]) == [], name


def test_default_check_finds_what_tf_rejects_in_the_main_graph(built, verdicts):
    for name in ["dtype_variables", "summaries_saver_gpu"]:
        assert verdicts[name].failing_nodes(main_only=True) <= _named(_errors(built[name]))


def test_check_finds_a_print_in_a_while_body_on_the_gpu(built):
    errors = _errors(built["tf2_savedmodel_while_print"])
    assert any("PrintV2" in f["message"] for f in errors)


def _said_to_fail(errors) -> set[tuple[str | None, str]]:
    """(function or None, node) for each node graphfix's errors say TF's placer refuses: the
    members without a kernel, else the node TF names."""
    return {(f["details"].get("function"), node) for f in errors
            for node in (f["details"]["no_kernel"] or [f["details"]["node"]])}


@pytest.mark.parametrize("name", FAST)
def test_default_check_errors_are_exactly_the_nodes_tf_refuses(built, verdicts, name):
    expected = {(f.function, f.node) for f in verdicts[name].failures}
    assert _said_to_fail(_errors(built[name])) == expected


@pytest.mark.parametrize("name", FAST)
def test_after_the_default_fix_check_is_clean_and_tf_places_the_graph(built, tmp_path, name):
    fixed = tmp_path / f"fixed_{built[name].name}"
    run_cli("fix", "--target-devices", TARGETS, "-o", fixed, built[name])
    assert _errors(fixed) == []
    assert oracle.place(graph_def_of(fixed)).places


def test_default_fix_places_the_graphs_whose_failures_are_variable_groups(built, tmp_path):
    fixed = tmp_path / "fixed_colocated_ops.meta"
    run_cli("fix", "--target-devices", TARGETS, "-o", fixed, built["colocated_ops"])
    assert oracle.place(graph_def_of(fixed)).places


def test_verify_passes_a_valid_graph_tf_places(built):
    run_cli("verify", "--target-devices", TARGETS, built["partitioned_variables"],
            check_exit=0)


def test_verify_passes_a_queue_under_the_gpu_that_tf_places(built):
    run_cli("verify", "--target-devices", TARGETS, built["queue_on_gpu"], check_exit=0)


def test_verify_passes_a_graph_with_functional_control_flow(built):
    run_cli("verify", "--target-devices", TARGETS, built["colocated_ops"], check_exit=0)


LOCAL = [name for name in FAST if not name.startswith("ps_worker")]


@pytest.mark.parametrize("name", LOCAL)
def test_verify_passes_every_graph_tf_places_and_every_fixed_graph(built, verdicts, tmp_path,
                                                                   name):
    import graphfix

    if verdicts[name].places:
        result = graphfix.verify(built[name])
        assert result.passed, result.to_lines()
    fixed = tmp_path / f"fixed_{built[name].name}"
    run_cli("fix", "--target-devices", TARGETS, "-o", fixed, built[name])
    result = graphfix.verify(fixed, compare=built[name] if verdicts[name].places else None)
    assert result.passed, result.to_lines()
    if name == "queue_runners":  # its batches depend on the threads' timing: said, not compared
        [compare] = [c for c in result.checks if c.name == "compare"]
        assert compare.detail.startswith("not compared: queue runners fed the steps")


@pytest.mark.parametrize("name", ["ps_worker_by_hand", "ps_worker_setter"])
def test_verify_passes_the_ps_worker_graphs_on_a_local_cluster(built, tmp_path, name):
    run_cli("verify", "--cluster", "ps=2,worker=1", built[name], check_exit=0)
    fixed = tmp_path / f"fixed_{built[name].name}"
    run_cli("fix", "-o", fixed, built[name])
    run_cli("verify", "--cluster", "ps=2,worker=1", fixed, check_exit=0)
