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
share it (each graph alone where that run refuses a file: one refused graph hides nothing of
the others), so the file costs about as much as two builds and two fixes of the whole set.

A file TF itself cannot load is no graph to place: mixed_precision_cond_unreadable (its
TRAIN_OP collection names an op of a cond branch's body, as `export_meta_graph` writes it)
must be refused at read, exit 2, nothing written; mixed_precision_cond, the same model with
the collection a user who fixed the export has, goes through the property.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from conftest import FIXTURES, run_cli
from graphfix.graph.graphfile import OUTPUT_MARKER

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
# TF's import_meta_graph refuses these files (issue 32 case 6).
UNREADABLE = ["mixed_precision_cond_unreadable"]

# Graphs with nothing wrong: TF places and runs them as they are, and nothing in them is a
# bug graphfix fixes (one device, variables already where the towers share them, or on the
# ps tasks of a ps/worker graph).
CORRECT = ["single_gpu_correct", "cudnn_rnn", "tf_keras_fit", "py_func_input",
           "serving_decode_jpeg", "serving_parse_example", "frozen_detector",
           "resource_edge_override", "ps_worker_by_hand", "ps_worker_setter"]
def _said(failure) -> str:
    """TF's reason in one line: its "Cannot ..." line where it has one."""
    lines = failure.reason.splitlines()
    return next((line for line in lines if line.startswith("Cannot")), lines[0])


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
    """Every graph (the unreadable ones too), built once in a process of its own:
    name -> path."""
    out = tmp_path_factory.mktemp("corpus")
    names = GRAPHS + UNREADABLE
    done = subprocess.run([sys.executable, str(FIXTURES / "real_models" / "corpus.py"), out,
                           "test", *names], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(zip(names, map(pathlib.Path, done.stdout.split())))


@pytest.fixture(scope="module")
def targets(built):
    return {name: target_devices(graph_def_of(built[name])) for name in GRAPHS}


@pytest.fixture(scope="module")
def before(built):
    """The oracle's verdict on every original graph."""
    return {name: oracle.place(graph_def_of(built[name])) for name in GRAPHS}


@pytest.fixture(scope="module")
def fixed(built, targets, tmp_path_factory):
    """The default `graphfix fix` of every graph: name -> (the fixed path, absent when fix
    wrote nothing; fix's error, None when it exited 0 or 1). One run per target-device list
    over the graphs that share it (its output folder keeps each graph's file name); where
    that run refuses a file (exit 2), each of its graphs is fixed alone, so one refused
    graph fails its own test and hides nothing of the others."""
    out = {}
    for devices in sorted(set(targets.values())):
        names = [name for name in GRAPHS if targets[name] == devices]
        folder = tmp_path_factory.mktemp("fixed")
        run = run_cli("fix", "--target-devices", devices, "--format", "json", "-o", folder,
                      *(built[name] for name in names))
        if run.returncode in (0, 1):
            out.update({name: (folder / built[name].name, None) for name in names})
            continue
        for name in names:
            alone = tmp_path_factory.mktemp(f"fixed_{name}")
            run = run_cli("fix", "--target-devices", devices, "--format", "json", "-o", alone,
                          built[name])
            out[name] = (alone / built[name].name,
                         None if run.returncode in (0, 1) else
                         f"fix exit {run.returncode}: {run.stderr[-2000:]}")
    return out


@pytest.mark.parametrize("name", GRAPHS)
def test_fix_never_turns_a_graph_tf_places_into_one_it_does_not(built, before, fixed, name):
    if not before[name].places:
        pytest.skip(f"TF's placer refuses the original: {_said(before[name].failures[0])}")
    path, error = fixed[name]
    assert error is None, error
    # A graph fix had nothing to change may be left unwritten; the original then stands.
    result = path if path.exists() else built[name]
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


@pytest.mark.parametrize("name", CORRECT)
def test_a_graph_with_nothing_wrong_checks_clean_and_is_not_rewritten(built, before, targets,
                                                                      fixed, name):
    assert before[name].places
    check = run_cli("check", "--target-devices", targets[name], "--format", "json",
                    built[name])
    findings = json.loads(check.stdout)["findings"]
    assert (check.returncode, findings) == (0, []), check.stderr[-2000:]
    path, error = fixed[name]
    assert error is None, error
    if path.exists():  # (fix may also leave an unchanged graph unwritten)
        assert _files(path) == _files(built[name])


def _files(path: pathlib.Path) -> dict[str, bytes]:
    """A graph file's bytes, or every file of a SavedModel folder by its relative path but
    graphfix's mark of a folder it wrote (`-o DIR` with several inputs copies an unchanged
    SavedModel there; TF ignores the mark, docs/guide.md)."""
    if path.is_file():
        return {"": path.read_bytes()}
    return {str(f.relative_to(path)): f.read_bytes() for f in sorted(path.rglob("*"))
            if f.is_file() and f.name != OUTPUT_MARKER}


@pytest.mark.parametrize("name", UNREADABLE)
def test_a_file_tf_cannot_read_is_refused_at_read_and_nothing_is_written(built, tmp_path,
                                                                          name):
    """TF's own import_meta_graph refuses the file; graphfix says so before anything else:
    check and fix exit 2 with one line naming the collection and the body-only node, and
    fix writes nothing."""
    with tf.Graph().as_default(), pytest.raises(KeyError, match="train-wrapped"):
        tf.compat.v1.train.import_meta_graph(str(built[name]))
    check = run_cli("check", "--target-devices", "/gpu:0,/gpu:1", built[name])
    fix = run_cli("fix", "--target-devices", "/gpu:0,/gpu:1", "-o", tmp_path / "out",
                  built[name])
    for run in (check, fix):
        assert run.returncode == 2, (run.stdout, run.stderr)
        said = run.stderr.strip().splitlines()
        assert len(said) == 1 and "'train-wrapped'" in said[0], said
        assert "only inside a function body" in said[0] and "import_meta_graph" in said[0]
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_the_readable_form_is_the_same_model_tf_loads(built):
    """mixed_precision_cond differs from the unreadable file only in its TRAIN_OP
    collection, and TF loads it: case 2's graph stays in the property."""
    from tensorflow.core.protobuf import meta_graph_pb2

    readable, unreadable = (meta_graph_pb2.MetaGraphDef.FromString(built[name].read_bytes())
                            for name in ("mixed_precision_cond",
                                         "mixed_precision_cond_unreadable"))
    assert ({n.name: n.op for n in readable.graph_def.node}
            == {n.name: n.op for n in unreadable.graph_def.node})
    assert readable.collection_def.keys() == unreadable.collection_def.keys()
    assert list(unreadable.collection_def["train_op"].node_list.value) == ["train-wrapped",
                                                                           "train"]
    assert list(readable.collection_def["train_op"].node_list.value) == ["train"]
    with tf.Graph().as_default():
        tf.compat.v1.train.import_meta_graph(str(built["mixed_precision_cond"]))
