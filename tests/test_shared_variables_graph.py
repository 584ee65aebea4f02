"""shared-variables on graphs: seed 003's towers that each make their own tf.Variable.

Proven by running: before the fix, one averaged training step moves tower 0's copy and
leaves tower 1's where it was (and the towers compute different losses on one batch); after
it, every tower reads one set of weights, before and after the step."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import graphfix
from graphfix.graph import graphfile as graphio

from conftest import FIXTURES

sys.path.insert(0, str(FIXTURES))
import models  # noqa: E402

IMAGES = np.random.RandomState(0).randn(8, 4).astype(np.float32)
LABELS = np.array([0, 1, 2, 0, 1, 2, 0, 1], np.int32)


@pytest.fixture(scope="module")
def ref_graph():
    return models.export(models.tower_copies(towers=2), meta=False)


@pytest.fixture(scope="module")
def resource_graph():
    return models.export(models.tower_copies(towers=2, use_resource=True), meta=False)


def _step(tf, graph_def):
    """(values before, values after) one train step of: each tower's loss and the variables
    tower_0/w and tower_1/w, on one batch fed to both towers."""
    fetches = ["tower_0/loss:0", "tower_1/loss:0"]
    with tf.Graph().as_default() as graph:
        tf.compat.v1.import_graph_def(graph_def, name="")
        weights = [graph.get_operation_by_name(n).outputs[0] for n in ("tower_0/w", "tower_1/w")]
        if weights[0].dtype == tf.resource:
            weights = [tf.raw_ops.ReadVariableOp(resource=w, dtype=tf.float32) for w in weights]
        config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
        with tf.compat.v1.Session(config=config) as sess:
            sess.run("init")
            feed = {"images:0": IMAGES, "labels:0": LABELS}
            before = sess.run(fetches + weights, feed)
            sess.run("train", feed)
            after = sess.run(fetches + weights, feed)
    return before, after


@pytest.mark.parametrize("which", ["ref_graph", "resource_graph"])
def test_two_tower_step_trains_one_set_of_weights_after_the_fix(tf, request, which):
    original = request.getfixturevalue(which)
    (finding,) = graphfix.check_graph(original, only=["shared-variables"])
    assert finding.severity == "error" and finding.node == "tower_1/w"
    assert ("tower tower_1 holds its own copy of 2 variable(s) of tower_0" in finding.message
            and "tower_1/w, tower_1/b" in finding.message)
    assert "mixes in tower_1's gradients" in finding.message
    assert "tower_1's copies never train" in finding.message

    # Before: the towers compute with different weights; the step moves tower 0's copy only.
    (loss0, loss1, w0, w1), (_, _, w0_after, w1_after) = _step(tf, original)
    assert loss0 != pytest.approx(loss1)
    assert not np.allclose(w0, w1)
    assert not np.allclose(w0_after, w0)
    np.testing.assert_array_equal(w1_after, w1)  # tower 1's copy never trains

    fixed, changes = graphfix.fix_graph(original, only=["shared-variables"])
    assert [c.node for c in changes] == ["tower_1/w"]
    assert changes[0].details["left_unused"] == ["tower_1/w", "tower_1/b"]
    # After: every tower computes with tower 0's weights, before the step and after it.
    (loss0, loss1, w0, _), (loss0_after, loss1_after, w0_after, _) = _step(tf, fixed)
    assert loss1 == pytest.approx(loss0)
    assert loss1_after == pytest.approx(loss0_after)
    assert not np.allclose(w0_after, w0)
    assert loss0_after < loss0

    # Fixed is a fixed point.
    assert graphfix.check_graph(fixed, only=["shared-variables"]) == []
    again, more = graphfix.fix_graph(fixed, only=["shared-variables"])
    assert more == [] and again == fixed


def test_get_variable_towers_share_already():
    graph_def = graphio.load(FIXTURES / "shared_variables" / "get_variable_towers"
                             / "before.pbtxt").message
    assert graphfix.check_graph(graph_def, only=["shared-variables"]) == []


def test_the_batch_norm_tower_recipe_has_no_copies():
    """slim layers make their variables with get_variable: towers share them; their own
    moving-average and optimizer slots are not copies."""
    graph_def = graphio.load(FIXTURES / "update_ops" / "two_tower_slim_bn"
                             / "before.pbtxt").message
    assert graphfix.check_graph(graph_def, only=["shared-variables"]) == []


def test_variables_outside_any_tower_are_not_copies(tf):
    """Two tf.Variable in one scope, and layers repeated in a chain, are a model's own."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        net = x
        for i in range(3):
            with tf.name_scope(f"layer_{i}"):
                net = tf.matmul(net, tf.Variable(tf.ones([3, 3]), name="w"))
    assert graphfix.check_graph(graph.as_graph_def(), only=["shared-variables"]) == []
