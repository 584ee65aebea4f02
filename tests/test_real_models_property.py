"""First, do no harm, over the real-model corpus (issue 32, "Must show"): `graphfix fix` never
turns a graph TF places into one it does not, and a graph with nothing wrong gives `check`
exit 0 and is left byte-identical by `fix`.

The oracle is TF's own placer on CPU stand-ins (fixtures/real_models/oracle.py), run on each
graph before and after the default `fix` (`--target-devices` one GPU per tower: as many GPUs
as the graph names, at least one). The graphs are every corpus graph that builds in seconds
at test size: the eleven of tests/test_real_models.py and all of issue 32's
(fixtures/real_models/training.py, input_serving.py); the tf_keras and tf-slim networks and
the frozen MobileNetV2 take tens of seconds each and are measured by
fixtures/bench/real_models_bench.py instead. All are built in one process of their own
(tf.compat.v1.layers needs TF_USE_LEGACY_KERAS before TF loads; seq2seq_cf_v1 turns control
flow v2 off and back on), and `fix` runs once per target-device list over all the graphs that
share it, so the file costs about as much as two builds and two fixes of the whole set.

Where today's code breaks a graph the marks say which issue 32 case will mend it
(`xfail(strict=True)`: the lead removes a mark when its fix lands).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from conftest import FIXTURES, run_cli

sys.path.insert(0, str(FIXTURES))

tf = pytest.importorskip("tensorflow")
from real_models import oracle  # noqa: E402
from real_models.oracle import graph_def_of  # noqa: E402

EARLIER = ["dtype_variables", "summaries_saver_gpu", "queue_on_gpu", "resource_edge_override",
           "tf2_savedmodel_while_print", "colocated_ops", "ps_worker_by_hand",
           "ps_worker_setter", "partitioned_variables", "queue_runners", "estimator_lstm"]
ISSUE_32 = ["cudnn_rnn", "mixed_precision_cond", "bert_two_towers", "sync_replicas",
            "sparse_embedding_towers", "gan_batch_norm", "single_gpu_correct", "tf_keras_fit",
            "seq2seq_cf_v1", "ssd_detection_head", "estimator_summaries",
            "partitioned_sparse_embedding", "tfdata_initializable_iterator", "py_func_input",
            "serving_decode_jpeg", "serving_parse_example", "frozen_detector"]
GRAPHS = EARLIER + ISSUE_32

# Graphs with nothing wrong: TF places and runs them as they are, and nothing in them is a
# bug graphfix fixes (one device, or variables already where the towers share them).
CORRECT = ["single_gpu_correct", "cudnn_rnn", "tf_keras_fit", "py_func_input",
           "serving_decode_jpeg", "serving_parse_example", "frozen_detector",
           "resource_edge_override"]

# Where today's default fix breaks a graph TF places (issue 32's numbered cases).
BROKEN_TODAY = {
    "cudnn_rnn": "issue 32 case 1: variables-to-cpu moves the opaque-params variable's group, "
                 "cuDNN ops included, to the CPU (v2c)",
}
# Correct graphs today's code warns about or rewrites (issue 32 case 7, v2c).
NOT_LEFT_ALONE_TODAY = {
    "single_gpu_correct": "issue 32 case 7: single-GPU float variables are warned about and "
                          "moved to the CPU (v2c)",
    "cudnn_rnn": "issue 32 case 1 and 7: the single-GPU opaque-params variable is warned about "
                 "and its group moved (v2c)",
    **{name: "issue 32 case 7: a single-GPU model's variables are warned about and moved to "
             "the CPU (v2c)"
       for name in ["tf_keras_fit", "py_func_input", "serving_decode_jpeg",
                    "serving_parse_example"]},
}


def _said(failure) -> str:
    """TF's reason in one line: its "Cannot ..." line where it has one."""
    lines = failure.reason.splitlines()
    return next((line for line in lines if line.startswith("Cannot")), lines[0])


def _xfail(name: str, reasons: dict[str, str]):
    marks = [pytest.mark.xfail(strict=True, reason=reasons[name])] if name in reasons else []
    return pytest.param(name, marks=marks, id=name)


def target_devices(graph_def) -> str:
    """One GPU per tower: `/gpu:0,...,/gpu:(n-1)` for the n GPUs the graph names, at least
    one."""
    highest = 0
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    for node in nodes:
        if node.device:
            spec = tf.DeviceSpec.from_string(node.device)
            if (spec.device_type or "").upper() == "GPU":
                highest = max(highest, spec.device_index or 0)
    return ",".join(f"/gpu:{i}" for i in range(highest + 1))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Every graph, built once in a process of its own: name -> path."""
    out = tmp_path_factory.mktemp("corpus")
    done = subprocess.run([sys.executable, str(FIXTURES / "real_models" / "corpus.py"), out,
                           "test", *GRAPHS], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(zip(GRAPHS, map(pathlib.Path, done.stdout.split())))


@pytest.fixture(scope="module")
def targets(built):
    return {name: target_devices(graph_def_of(path)) for name, path in built.items()}


@pytest.fixture(scope="module")
def before(built):
    """The oracle's verdict on every original graph."""
    return {name: oracle.place(graph_def_of(path)) for name, path in built.items()}


@pytest.fixture(scope="module")
def fixed(built, targets, tmp_path_factory):
    """The default `graphfix fix` of every graph TF places, one run per target-device list
    (its output folder keeps each graph's file name): name -> fixed path, and the runs."""
    out, runs = {}, {}
    for devices in sorted(set(targets.values())):
        names = [name for name in GRAPHS if targets[name] == devices]
        folder = tmp_path_factory.mktemp("fixed")
        runs[devices] = run_cli("fix", "--target-devices", devices, "--format", "json",
                                "-o", folder, *(built[name] for name in names))
        assert runs[devices].returncode in (0, 1), runs[devices].stderr[-3000:]
        for name in names:
            out[name] = folder / built[name].name
    return out


@pytest.mark.parametrize("name", [_xfail(name, BROKEN_TODAY) for name in GRAPHS])
def test_fix_never_turns_a_graph_tf_places_into_one_it_does_not(built, before, fixed, name):
    if not before[name].places:
        pytest.skip(f"TF's placer refuses the original: {_said(before[name].failures[0])}")
    # A graph fix had nothing to change may be left unwritten; the original then stands.
    result = fixed[name] if fixed[name].exists() else built[name]
    after = oracle.place(graph_def_of(result))
    assert after.places, [f"{f.where}: {_said(f)}" for f in after.failures]


def _cleared(graph_def):
    out = tf.compat.v1.GraphDef()
    out.CopyFrom(graph_def)
    for node in [*out.node, *(n for f in out.library.function for n in f.node_def)]:
        node.device = ""
    return out


def test_the_oracle_places_every_new_graph_with_its_devices_cleared(built):
    """The oracle's own check on issue 32's graphs: with no device asked for, TF places every
    one (GPU-only cuDNN ops included: with a GPU, TF would put them there)."""
    refused = {name: [f.where for f in oracle.place(_cleared(graph_def_of(built[name]))).failures]
               for name in ISSUE_32}
    assert {name: where for name, where in refused.items() if where} == {}


def test_the_property_covers_graphs_of_every_kind(before):
    """The property must hold on a real spread: most of the corpus places before the fix
    (the graphs TF refuses are the bugs the other tests find)."""
    placing = [name for name in GRAPHS if before[name].places]
    assert len(placing) >= 20, placing
    for name in ["cudnn_rnn", "mixed_precision_cond", "single_gpu_correct", "tf_keras_fit",
                 "serving_decode_jpeg", "serving_parse_example", "frozen_detector",
                 "gan_batch_norm", "sparse_embedding_towers", "py_func_input",
                 "tfdata_initializable_iterator", "ssd_detection_head"]:
        assert name in placing, name
    # and TF's refusals that issue 32 names are there too
    assert not before["bert_two_towers"].places
    assert any("Gather_grad/Const" in f.node for f in before["bert_two_towers"].failures)


@pytest.mark.parametrize("name", [_xfail(name, NOT_LEFT_ALONE_TODAY) for name in CORRECT])
def test_a_graph_with_nothing_wrong_checks_clean_and_is_not_rewritten(built, before, targets,
                                                                      fixed, name):
    assert before[name].places
    check = run_cli("check", "--target-devices", targets[name], "--format", "json",
                    built[name])
    findings = json.loads(check.stdout)["findings"]
    assert (check.returncode, findings) == (0, []), check.stderr[-2000:]
    if fixed[name].exists():  # (fix may also leave an unchanged graph unwritten)
        assert _files(fixed[name]) == _files(built[name])


def _files(path: pathlib.Path) -> dict[str, bytes]:
    """A graph file's bytes, or every file of a SavedModel folder by its relative path."""
    if path.is_file():
        return {"": path.read_bytes()}
    return {str(f.relative_to(path)): f.read_bytes() for f in sorted(path.rglob("*"))
            if f.is_file()}
