"""graphfix verify: static placement, a seeded run, feeds, reports, device choice."""

from __future__ import annotations

import json

import numpy as np

import graphfix
from graphfix.graph import graphfile as graphio
from graphfix.graph.index import index_for
from graphfix.verification.run import plan_devices

from conftest import FIXTURES, error_lines, run_cli

SEED_REF = FIXTURES / "variables_to_cpu" / "seed000_ref"
ADAM = FIXTURES / "variables_to_cpu" / "adam_ref"


def test_unplaceable_graph_fails_with_the_placers_message(tmp_path):
    result = run_cli("verify", SEED_REF / "before.pbtxt", "--report", tmp_path / "r.json",
                     check_exit=1)
    assert "FAIL  placement: Cannot assign a device for operation d: Could not satisfy " \
           "explicit device specification '/device:GPU:0' because no supported kernel for " \
           "GPU devices is available." in result.stdout
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["passed"] is False and doc["checks"][0]["name"] == "placement"


def test_fixed_graph_runs_simulated(tmp_path):
    result = run_cli("verify", SEED_REF / "after.pbtxt", "--steps", "2", "--format", "json",
                     check_exit=0)
    doc = json.loads(result.stdout)
    assert doc["passed"] and doc["simulated"]
    assert doc["devices"] == ["/device:GPU:0 -> /device:CPU:1"]
    assert [c["name"] for c in doc["checks"]] == ["placement", "run"]


def test_runs_are_seeded_and_agree():
    graph = graphio.load(ADAM / "after.pbtxt").message
    first = graphfix.verify(graph, steps=2, fetches=["loss:0"])
    second = graphfix.verify(graph, steps=2, fetches=["loss:0"])
    assert first.passed and second.passed
    assert first.values["loss:0"] == second.values["loss:0"]
    assert np.array_equal(first.values["variable:w"], second.values["variable:w"])


def test_feeds_from_npy_files(tmp_path, tf):
    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [None, 2], name="x")
        tf.reduce_sum(x * 3.0, name="total")
    path = tmp_path / "g.pb"
    path.write_bytes(graph.as_graph_def().SerializeToString(deterministic=True))
    np.save(tmp_path / "x.npy", np.ones([4, 2], np.float32))
    ok = run_cli("verify", path, "--fetch", "total:0", "--feed", f"x={tmp_path / 'x.npy'}",
                 "--format", "json", check_exit=0)
    assert json.loads(ok.stdout)["passed"]
    result = graphfix.verify(graph.as_graph_def(), fetches=["total:0"],
                             feeds={"x": np.ones([4, 2], np.float32)})
    assert result.values["total:0"] == 24.0

    (tmp_path / "bad.npy").write_text("not numpy")
    np.save(tmp_path / "wrong.npy", np.ones([3], np.float32))
    for args, problem in [
        (["--feed", f"x={tmp_path / 'bad.npy'}"], "not a .npy array"),
        (["--feed", f"x={tmp_path / 'missing.npy'}"], "no such file"),
        (["--feed", f"y={tmp_path / 'x.npy'}"], "no placeholder of that name"),
        (["--feed", f"x={tmp_path / 'wrong.npy'}"], "does not fit the placeholder"),
        (["--feed", "x"], "NAME=FILE.npy"),
    ]:
        bad = run_cli("verify", path, "--fetch", "total:0", *args)
        assert bad.returncode == 2, (args, bad.stdout, bad.stderr)
        lines = error_lines(bad.stderr)
        assert len(lines) == 1 and problem in lines[0], (args, lines)


def test_real_gpus_are_used_when_the_process_sees_them():
    index = index_for(graphio.load(SEED_REF / "after.pbtxt").message)
    assert plan_devices(index, []) == ({"0": "CPU:1"}, True, 2)
    mapping, simulated, _ = plan_devices(index, ["/device:GPU:0"])
    assert mapping == {} and simulated is False
    # With a GPU injected, verify places on it as it is (here that device does not exist,
    # so TF's own placer refuses: the run happened on the "real" device list, unsimulated).
    result = graphfix.verify(SEED_REF / "after.pbtxt", available_devices=["/device:GPU:0"])
    assert result.simulated is False
    assert result.devices == ["/device:GPU:0"]
    assert "on real devices" in result.to_lines()[0]


def test_unreadable_graph_is_exit_2(tmp_path):
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"\x0a\xff")
    result = run_cli("verify", bad)
    assert result.returncode == 2
    assert "bad.pb" in error_lines(result.stderr)[0]


def test_a_graph_with_gpu_only_ops_is_exit_2_saying_it_needs_a_gpu(tmp_path, tf):
    """cuDNN's ops have a GPU kernel and no CPU one: the CPU devices standing in for the GPUs
    cannot run them. Verify says so in one line (exit 2), not a FAIL that reads as if the
    graph were wrong; the placement check, which needs no GPU, still judges it first."""
    graph = tf.Graph()
    with graph.as_default(), tf.device("/gpu:0"):
        size = tf.raw_ops.CudnnRNNParamsSize(
            num_layers=tf.constant(1), num_units=tf.constant(4), input_size=tf.constant(3),
            T=tf.float32, S=tf.int32, rnn_mode="lstm", name="params_size")
        tf.identity(size, name="out")
    path = tmp_path / "cudnn.pbtxt"
    path.write_text(str(graph.as_graph_def()))
    result = run_cli("verify", path, "--fetch", "out")
    lines = error_lines(result.stderr)
    assert result.returncode == 2, result.stdout + result.stderr
    assert len(lines) == 1 and "GPU kernel and no CPU one" in lines[0]
    assert "'CudnnRNNParamsSize' 'params_size'" in lines[0] and "cudnn.pbtxt" in lines[0]


def test_compare_on_a_cluster_is_refused_not_passed_unread(tmp_path):
    """A cluster run compares with nothing: given --compare too, verify says so in one line
    (exit 2) rather than passing as if the graphs had been compared."""
    graph = tmp_path / "ps.pbtxt"
    graph.write_bytes((FIXTURES / "replica_placement" / "already_replicated" / "before.pbtxt")
                      .read_bytes())
    result = run_cli("verify", graph, "--cluster", "ps=2,worker=2", "--compare", graph)
    lines = error_lines(result.stderr)
    assert result.returncode == 2 and len(lines) == 1, result.stdout + result.stderr
    assert "--compare with --cluster" in lines[0] and "ps.pbtxt" in lines[0]
