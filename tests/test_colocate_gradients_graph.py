"""colocate-gradients on graphs, held to TF itself: before the fix TF's placer (the oracle,
fixtures/real_models/oracle.py, on CPU stand-ins) puts the towers' backward pass on one
device; after it, tower k's gradient ops run on GPU k, and one step gives the variables the
original's step gives (`verify --compare`). The fixture pairs themselves (byte-identical
no-op cases included) run in test_graph_fixtures.py."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest

import graphfix
from graphfix.graph import graphfile

from conftest import FIXTURES

sys.path.insert(0, str(FIXTURES))

from real_models import oracle  # noqa: E402

NAME = "colocate-gradients"
CASES = FIXTURES / "colocate_gradients"
BUGGY = {"two_towers_minimize_outside": 2, "four_towers_embedding_gradients_outside": 4,
         "two_towers_rnn_while_loop_outside": 2}
_TOWER_GRADIENT = re.compile(r"^gradients/tower_(\d+)/(.+)_grad/")


def _feeds(graph_def) -> dict:
    names = {node.name for node in graph_def.node}
    feeds = {"y:0": np.linspace(-1, 1, 8, dtype=np.float32).reshape(8, 1)}
    if "ids" in names:
        feeds["ids:0"] = np.arange(8, dtype=np.int32) % 10
    else:
        feeds["x:0"] = np.linspace(0, 1, 32, dtype=np.float32).reshape(8, 4)
    return feeds


def _tower_backward(graph_def, placed: dict[str, str]) -> dict[int, list[str]]:
    """Tower k -> where TF placed the gradient ops of tower k's ops that TF placed on GPU k
    (those of ops it put elsewhere, an embedding's gather beside its table, are not
    tower k's to run)."""
    out: dict[int, list[str]] = {}
    for name, device in placed.items():
        match = _TOWER_GRADIENT.match(name)
        if match is None:
            continue
        tower, forward = int(match.group(1)), f"tower_{match.group(1)}/{match.group(2)}"
        if placed.get(forward, "").endswith(f"GPU:{tower}"):
            out.setdefault(tower, []).append(device)
    return out


@pytest.mark.parametrize("case", sorted(BUGGY))
def test_each_towers_backward_runs_on_its_gpu_after_the_fix(case):
    before = graphfile.load(CASES / case / "before.pbtxt").message
    fixed, changes = graphfix.fix_graph(before, only=[NAME])
    assert len(changes) == 1 and changes[0].details["moved_nodes"]

    placed_before = _tower_backward(before, oracle.placements(before, ["train"], _feeds(before)))
    placed_after = _tower_backward(fixed, oracle.placements(fixed, ["train"], _feeds(fixed)))
    towers = BUGGY[case]
    assert sorted(placed_after) == list(range(towers))
    for tower in range(towers):
        # Before: much of tower k's backward pass is off GPU k, on the placer's default
        # device (the rest follows its inputs by TF's heuristics); after: all of it on GPU k.
        off_before = [d for d in placed_before[tower] if not d.endswith(f"GPU:{tower}")]
        assert len(off_before) > len(placed_before[tower]) / 3
        assert all(d.endswith(f"GPU:{tower}") for d in placed_after[tower])
    assert oracle.place(fixed).places


def test_finding_names_the_towers_and_counts_their_gradient_ops():
    findings = graphfix.check_graph(str(CASES / "two_towers_minimize_outside" / "before.pbtxt"),
                                    only=[NAME])
    assert len(findings) == 1
    finding = findings[0]
    assert finding.severity == "warning" and finding.fixable
    assert finding.message.startswith(
        "110 gradient op(s) of 2 tower(s) are not on their tower's device "
        "(tower_0 (/device:GPU:0): 55, tower_1 (/device:GPU:1): 55)")
    assert "colocate_gradients_with_ops=True" in finding.message


def test_fixed_graph_places_what_colocate_gradients_with_ops_places():
    """The fix gives each gradient op the device TF's own flag gives it; only the sums of
    the towers' gradients (`gradients/AddN*`, no forward op's) differ: TF builds them
    beside the variable, the fix leaves them colocated with tower 0's gradient."""
    fixed, _ = graphfix.fix_graph(
        graphfile.load(CASES / "two_towers_minimize_outside" / "before.pbtxt").message,
        only=[NAME])
    by_tf = graphfile.load(CASES / "two_towers_colocated" / "before.pbtxt").message
    ours = {node.name: node.device for node in fixed.node}
    differ = {node.name for node in by_tf.node if ours[node.name] != node.device}
    assert differ == {"gradients/AddN", "gradients/AddN_1", "gradients/AddN_2",
                      "gradients/AddN_3"}


def test_verify_compare_one_step_gives_the_same_variables():
    before = graphfile.load(CASES / "four_towers_embedding_gradients_outside" / "before.pbtxt"
                            ).message
    fixed, _ = graphfix.fix_graph(before, only=[NAME])
    result = graphfix.verify(fixed, compare=before, steps=1)
    assert result.passed, "\n".join(result.to_lines()) + "\n".join(c.message for c in result.checks)
    compare = next(check for check in result.checks if check.name == "compare")
    assert compare.passed and "equal" in compare.detail
    # (the step trained: the variables it compared moved)
    assert {"variable:embed/table", "variable:hidden/kernel"} <= set(result.values)


def test_the_device_alone_places_where_tfs_own_flag_is_refused():
    """`tf.gather` of a CPU table in GPU towers: the gradient's `Shape` is built in
    `colocate_with(table)`. TF's flag also gives it the gather's `_class`, joining the
    table's group (CPU) to the gather's (GPU k): TF's placer refuses that graph. The fix
    copies devices only and leaves the Shape beside its table: TF places the graph, and the
    rest of tower k's backward pass runs on GPU k."""
    by_flag = graphfile.load(CASES / "two_towers_gather_cpu_table_colocated" / "before.pbtxt"
                             ).message
    refused = oracle.place(by_flag).failures
    assert {f.node for f in refused} == {"gradients/tower_0/GatherV2_grad/Shape",
                                         "gradients/tower_1/GatherV2_grad/Shape"}
    assert "Cannot merge devices with incompatible ids" in refused[0].reason
    assert graphfix.check_graph(by_flag, only=[NAME]) == []

    before = graphfile.load(CASES / "two_towers_gather_cpu_table" / "before.pbtxt").message
    fixed, _ = graphfix.fix_graph(before, only=[NAME])
    assert oracle.place(fixed).places
    placed = _tower_backward(fixed, oracle.placements(fixed, ["train"], _feeds(fixed)))
    for tower in (0, 1):
        shape = f"gradients/tower_{tower}/GatherV2_grad/Shape"
        assert [node.device for node in fixed.node if node.name == shape] == ["/device:CPU:0"]
        # (the step runs no Shape: TF folds the table's static shape into a constant)
        assert placed[tower] and all(d.endswith(f"GPU:{tower}") for d in placed[tower])


def test_a_group_that_would_span_two_towers_stays():
    """Do no harm: a gradient op colocated (`_class`) with another tower's gradient op
    cannot take its own tower's device without a conflict TF refuses: its group stays, the
    rest moves, and TF's placer places the result."""
    graph = graphfile.load(CASES / "two_towers_minimize_outside" / "before.pbtxt").message
    pinned = next(n for n in graph.node if n.name == "gradients/tower_1/Relu_grad/ReluGrad")
    pinned.attr["_class"].list.s.append(b"loc:@gradients/tower_0/Relu_grad/ReluGrad")
    fixed, changes = graphfix.fix_graph(graph, only=[NAME])
    devices = {node.name: node.device for node in fixed.node}
    # (with the gradients colocated with them: each `add_grad/tuple/control_dependency`)
    stayed = {name for name in changes[0].details["moved_nodes"]} ^ {
        name for name, device in devices.items() if device and _TOWER_GRADIENT.match(name)}
    assert stayed == set()
    group = ["gradients/tower_0/Relu_grad/ReluGrad", "gradients/tower_1/Relu_grad/ReluGrad",
             "gradients/tower_0/add_grad/tuple/control_dependency",
             "gradients/tower_1/add_grad/tuple/control_dependency"]
    assert [devices[name] for name in group] == ["", "", "", ""]
    assert devices["gradients/tower_1/MatMul_1_grad/MatMul"] == "/device:GPU:1"
    assert graphfix.check_graph(graph, only=[NAME])[0].message.startswith(
        "106 gradient op(s) of 2 tower(s)")
    assert oracle.place(fixed).places


def test_towers_differentiated_in_their_scopes_sharing_a_regularizer_are_left_alone():
    """The recipe that differentiates each tower's loss inside its own scope, where every
    tower's loss adds the regularizer tower 0 made with the shared variables (the benchmark's
    8-tower slim ResNet does): tower 1's gradient of tower 0's regularizer sits on GPU 1,
    where the user built it, not off its tower. No finding, the graph not rewritten."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [8, 4], name="x")
        opt = tf1.train.GradientDescentOptimizer(0.1)
        regularizer = None
        for i in range(2):
            with tf.device(f"/gpu:{i}"), tf.name_scope(f"tower_{i}"):
                with tf1.variable_scope("model", reuse=i > 0):
                    w = tf1.get_variable("w", [4, 1])
                    if regularizer is None:
                        regularizer = tf.nn.l2_loss(w)  # (made once, in tower 0)
                loss = tf.reduce_sum(tf.matmul(x, w)) + 0.01 * regularizer
                opt.compute_gradients(loss)
    graph_def = graph.as_graph_def()
    assert any(n.name.startswith("tower_1/gradients/tower_0/") and n.device.endswith("GPU:1")
               for n in graph_def.node), "the shape under test: tower 1's gradient of tower 0's op"
    assert graphfix.check_graph(graph_def, only=[NAME]) == []
    fixed, changes = graphfix.fix_graph(graph_def, only=[NAME])
    # (deterministic: unordered attr maps may serialize in either order)
    assert changes == [] and (fixed.SerializeToString(deterministic=True)
                              == graph_def.SerializeToString(deterministic=True))
