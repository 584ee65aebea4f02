"""variables-to-cpu on graphs: before/after fixture pairs, seed 000 end to end, Adam slots."""

from __future__ import annotations

import json

import numpy as np
import pytest

import graphfix
from graphfix.graph import graphfile as graphio

from conftest import FIXTURES, run_cli

def test_float_variable_left_alone_by_no_kernel_scope():
    case = FIXTURES / "variables_to_cpu" / "float_gpu_no_kernel_scope"
    assert (case / "before.pbtxt").read_bytes() == (case / "after.pbtxt").read_bytes()
    graph = graphio.load(case / "before.pbtxt").message
    assert any(n.device == "/device:GPU:0" and n.op == "VariableV2" for n in graph.node)


def _devices(graph_def):
    return {n.name: n.device for n in graph_def.node}


@pytest.mark.parametrize("form", ["ref", "resource"])
def test_seed000_check_fix_run(form, tmp_path, tf):
    before = FIXTURES / "variables_to_cpu" / f"seed000_{form}" / "before.pbtxt"
    result = run_cli("check", before, "--target-devices", "/gpu:0", check_exit=1)
    assert "Could not satisfy explicit device specification '/device:GPU:0' because no " \
           "supported kernel for GPU devices is available" in result.stdout
    assert "@d: error: variables-to-cpu: Cannot assign a device for operation d" in result.stdout
    assert "DT_INT32" in result.stdout and "(fixable)" in result.stdout

    fixed = tmp_path / "fixed.pbtxt"
    run_cli("fix", before, "-o", fixed, check_exit=1)
    clean = run_cli("check", fixed, "--target-devices", "/gpu:0", check_exit=0)
    assert "0 finding(s)" in clean.stdout

    # The fixed graph imports and runs (init, then its output) with the original's values.
    graph_def = graphio.load(fixed).message
    variables = [n for n in graph_def.node if n.op in ("VariableV2", "VarHandleOp")]
    assert _devices(graph_def)["d"] == "/device:CPU:0"
    assert _devices(graph_def)["c"] == "/device:CPU:0"
    assert _devices(graph_def)["b"] == "/device:GPU:0", "compute stays on the GPU"
    assert {v.name for v in variables} == {"a", "c", "d"}
    outcome = graphfix.verify(fixed)
    assert outcome.passed, outcome.to_lines()
    assert outcome.simulated
    assert outcome.values["output:0"] == 2
    # The unfixed graph cannot place: verify says so with TF's message.
    failed = graphfix.verify(before)
    assert not failed.passed
    assert "no supported kernel for GPU devices" in failed.checks[0].detail


@pytest.mark.parametrize("form", ["ref", "resource"])
def test_adam_single_gpu_only_the_int32_step_moves(form):
    """One tower on /gpu:0: the float weights and their Adam slots stay on the GPU (no copy
    of every weight each step); the int32 step, which has no GPU kernel, moves."""
    case = FIXTURES / "variables_to_cpu" / f"adam_{form}"
    before = graphio.load(case / "before.pbtxt").message
    fixed, changes = graphfix.fix_graph(before, only=["variables-to-cpu"])
    assert {c.node for c in changes} == {"global_step"}
    devices = _devices(fixed)
    assert devices["global_step"] == "/device:CPU:0"
    for name in ("w", "b", "w/Adam", "w/Adam_1", "b/Adam", "b/Adam_1"):
        assert devices[name] == "/device:GPU:0", name


@pytest.mark.parametrize("form", ["ref", "resource"])
def test_adam_slots_move_and_training_matches(form, tf):
    """scope every-gpu-variable: every variable group on the GPU moves, slots with it."""
    case = FIXTURES / "variables_to_cpu" / f"adam_{form}"
    before = graphio.load(case / "before.pbtxt").message
    fixed, changes = graphfix.fix_graph(before, only=["variables-to-cpu"], settings={
        "variables-to-cpu": {"scope": "every-gpu-variable"}})
    devices = _devices(fixed)
    variable_ops = ("VariableV2", "VarHandleOp")
    moved = {c.node for c in changes}
    assert {"global_step", "w", "b"} <= moved
    for node in fixed.node:
        if node.op in variable_ops:  # weights, Adam's m and v slots, beta powers, step
            assert node.device == "/device:CPU:0", node.name
    for slot in ("w/Adam", "w/Adam_1", "b/Adam", "b/Adam_1"):
        assert devices[slot] == "/device:CPU:0"
    assert devices["loss"] == "/device:GPU:0", "compute stays on the GPU"
    apply_ops = [n for n in fixed.node if n.op in ("ApplyAdam", "ResourceApplyAdam")]
    assert apply_ops and all(n.device == "/device:CPU:0" for n in apply_ops)

    # Two steps of the fixed graph (strict placement, GPUs simulated) equal the unfixed
    # graph's steps run with soft placement.
    outcome = graphfix.verify(fixed, steps=2, compare=before, fetches=["train", "loss:0"])
    assert outcome.passed, outcome.to_lines()
    w = outcome.values["variable:w"]
    assert not np.allclose(w, 0.5), "the step trained w"
    assert outcome.values["variable:global_step"] == 2


def test_check_json_fields(tmp_path):
    before = FIXTURES / "variables_to_cpu" / "seed000_ref" / "before.pbtxt"
    result = run_cli("check", before, "--format", "json", "--report", tmp_path / "r.json")
    doc = json.loads(result.stdout)
    assert result.returncode == 1
    assert set(doc) >= {"findings", "changes", "skipped", "failed", "summary"}
    finding = doc["findings"][0]
    assert set(finding) >= {"path", "line", "col", "node", "transform", "message", "fixable"}
    assert finding["path"] == str(before) and finding["node"] == "d" and finding["line"] is None
    assert json.loads((tmp_path / "r.json").read_text()) == doc
