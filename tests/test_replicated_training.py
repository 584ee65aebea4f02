"""Replicated training is right: every rule leaves it alone.

Each tower keeps its own copy of the variables on its own device and every copy's update
applies the same all-reduced sum of all the copies' gradients (tf.distribute's mirrored
variables, tf_cnn_benchmarks' `--variable_update=replicated`, the sweep's
allreduce_local_sync.py): the copies start equal and stay equal. Its twins are bugs and stay
found: a copy trained on its own tower's gradient alone, an average applied to tower 0's copy.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import graphfix
from graphfix.graph import graphfile, training
from graphfix.graph.index import index_for

from conftest import FIXTURES, run_cli

sys.path.insert(0, str(FIXTURES / "replicated"))
import towers  # noqa: E402  (replicated towers built by hand, and their twins that are bugs)

SWEEP = FIXTURES / "real_code" / "patterns" / "sweep21_replicated_variables_synced_by_all_reduce.py"


def _check_and_fix_change_nothing(path, *options):
    """`check` finds nothing in the graph file at `path`, and `fix -o` writes its bytes."""
    checked = run_cli("check", path, *options)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "0 finding(s)" in checked.stdout
    out = path.parent / f"fixed-{path.name}"
    run_cli("fix", path, "-o", out, *options, check_exit=0)
    assert out.read_bytes() == path.read_bytes()


def test_the_sweeps_all_reduced_copies_are_not_reported(tmp_path):
    # simtony/tf_multigpu's allreduce_local_sync.py, as the sweep wrote it down: graphfix
    # at main gave average-gradients four errors and shared-variables one.
    spec = importlib.util.spec_from_file_location("sweep_replicated", SWEEP)
    sweep = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sweep)
    graph = tf.Graph()
    with graph.as_default():
        sweep.build()
        path = tmp_path / "replicated.meta"
        tf.compat.v1.train.export_meta_graph(str(path), graph=graph)
    _check_and_fix_change_nothing(path, "--target-devices", "/cpu:0,/gpu:0,/gpu:1")


def test_tf_cnn_benchmarks_replicated_copies_are_not_reported_and_stay_equal():
    graph = towers.build("all_reduce")
    assert graphfix.check_graph(graph.as_graph_def()) == []
    initial, after = towers.copies_after_a_step(graph)
    for name in ("dense/w", "out/w"):
        assert not np.array_equal(after[f"v0/{name}"], initial[f"v0/{name}"])  # it trained
        np.testing.assert_array_equal(after[f"v1/{name}"], after[f"v0/{name}"])


@pytest.mark.parametrize("how", ["nccl", "collective"])
def test_copies_all_reduced_by_nccl_or_collective_ops_are_not_reported(how):
    # Each tower's all-reduce member reads its own tower's gradient only: its peers (one
    # NCCL `shared_name`, one collective group and instance) give it the others'.
    graph = towers.build(how)
    assert graphfix.check_graph(graph.as_graph_def()) == []


def test_copies_that_train_on_their_own_gradients_stay_found():
    graph = towers.build("own")
    findings = graphfix.check_graph(graph.as_graph_def())
    assert [(f.transform, f.node, f.severity) for f in findings] == [
        ("shared-variables", "v1/dense/w", "warning")]
    assert "each copy trains on v1's gradients alone" in findings[0].message
    _, after = towers.copies_after_a_step(graph)
    assert not np.array_equal(after["v1/dense/w"], after["v0/dense/w"])  # the towers part


def test_an_average_applied_to_the_first_towers_copy_stays_found():
    findings = graphfix.check_graph(towers.build("first").as_graph_def())
    assert [(f.transform, f.node, f.severity) for f in findings] == [
        ("average-gradients", "tower_0/Mean", "error"),
        ("average-gradients", "tower_0/Mean_1", "error"),
        ("shared-variables", "v1/dense/w", "error")]
    assert "mixes gradients of different variables (v0/dense/w, v1/dense/w)" in findings[0].message


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory):
    """MirroredStrategy's graphs (fixtures/replicated/mirrored.py), built in a process of
    their own: the two logical CPUs must be made before TF's runtime starts."""
    folder = tmp_path_factory.mktemp("mirrored")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_USE_LEGACY_KERAS="1",
               CUDA_VISIBLE_DEVICES="", PYTHONWARNINGS="ignore")
    done = subprocess.run([sys.executable, str(FIXTURES / "replicated" / "mirrored.py"),
                           str(folder)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return folder, json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("model", ["layers_sgd", "keras_adam"])
def test_mirrored_strategys_graph_is_left_alone(mirrored, model):
    folder, built = mirrored
    assert built[model]["trained"] and built[model]["equal"]  # TF kept its copies equal
    path = folder / f"{model}.meta"
    _check_and_fix_change_nothing(path)
    # What keeps it so: every trainable copy is a replica of its primary.
    index = index_for(graphfile.load(path).message.graph_def)
    replicas = training.Replicas(index)
    copies = [name for name in built[model]["mirrored"] if not name.startswith("Adam/")]
    assert len(copies) == (2 if model == "layers_sgd" else 4)
    for copy in copies:
        assert replicas.replicated({copy, copy.split("/replica_")[0]}), copy


def test_the_sweeps_per_tower_scopes_are_no_variables_to_cpu_finding_in_source():
    # Each tower makes its copy in `tf.variable_scope("tower_%d" % index)`, never reused,
    # and tower 0 alone makes the global step: graphfix at main reported `build_tower(...)`
    # and `get_or_create_global_step()` ("shared variables belong on the CPU").
    code = SWEEP.read_text()
    assert graphfix.check_source(code, only=["variables-to-cpu"]) == []
    # What TF builds: each copy on its own tower's GPU, the step in tower 0's scope.
    graph = tf.Graph()
    with graph.as_default():
        spec = importlib.util.spec_from_file_location("sweep_source", SWEEP)
        sweep = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sweep)
        sweep.build()
        devices = {v.op.name: v.device for v in tf.compat.v1.global_variables()
                   if "Adam" not in v.op.name and "power" not in v.op.name}
    assert devices == {"tower_0/matrix": "/device:GPU:0", "tower_0/out_matrix": "/device:GPU:0",
                       "tower_1/matrix": "/device:GPU:1", "tower_1/out_matrix": "/device:GPU:1",
                       "tower_0/global_step": "/device:GPU:0"}


def test_one_scope_reused_by_every_tower_stays_a_variables_to_cpu_finding():
    # The classic bug: tower 0 makes the variables on GPU 0, every later tower reuses them.
    code = SWEEP.read_text().replace(
        'with tf.variable_scope("tower_%d" % index) as scope, tf.device(',
        'with tf.variable_scope("model", reuse=index > 0) as scope, tf.device(')
    findings = graphfix.check_source(code, only=["variables-to-cpu"])
    assert [(f.line, f.severity) for f in findings] == [(39, "warning")]
    assert "build_tower creates variables" in findings[0].message


def test_a_global_step_every_tower_gets_or_creates_stays_a_variables_to_cpu_finding():
    # Without `if index == 0`, tower 1's call gets tower 0's step back: both GPUs read it.
    code = SWEEP.read_text().replace(
        "            if index == 0:\n                step = ", "            step = ")
    assert code != SWEEP.read_text()
    findings = graphfix.check_source(code, only=["variables-to-cpu"])
    assert [(f.line, f.severity) for f in findings] == [(50, "warning")]
    assert "get_or_create_global_step" in findings[0].message
