"""graphfix.graph.towers: which sibling scopes of a graph are towers (replicas of one model)."""

from __future__ import annotations

import sys

import pytest

from graphfix.graph.index import index_for
from graphfix.graph.towers import find_towers, tower_of

from conftest import FIXTURES

sys.path.insert(0, str(FIXTURES))
import models  # noqa: E402


def _towers(graph):
    return find_towers(index_for(graph.as_graph_def()))


def test_tower_of_reads_the_scope():
    assert tower_of("tower_1/conv/w") == 1
    assert tower_of("model/clone_0/loss") == 0
    assert tower_of("conv1/weights") is None


def test_recipe_towers_are_found_with_their_devices():
    (found,) = _towers(models.tower_copies())
    assert [(t.index, t.scope, t.device) for t in found.towers] == [
        (0, "tower_0", "/device:GPU:0"), (1, "tower_1", "/device:GPU:1")]
    assert found.relative("tower_1/w/read") == "w/read"
    assert found.counterpart("tower_1/w", found.first) == "tower_0/w"
    assert found.tower_holding("train") is None


def test_chained_and_same_device_scopes_are_not_towers(tf):
    """A repeated layer reads the one before it (a chain); parallel heads that are neither
    named nor placed as replicas are a model's own parts."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        net = x
        for i in range(3):
            with tf.name_scope(f"layer_{i}"):
                net = tf.matmul(net, tf.Variable(tf.ones([3, 3]), name="w"))
        for i in range(2):
            with tf.name_scope(f"head_{i}"):
                tf.matmul(net, tf.Variable(tf.ones([3, 1]), name="w"))
    assert _towers(graph) == []


def test_unnumbered_first_member_and_placement_make_replicas(tf):
    """TF names a re-entered scope `model`, `model_1`: under two devices, two towers."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        for i in range(2):
            with tf.device(f"/gpu:{i}"), tf.name_scope("model"):
                tf.matmul(x, tf.Variable(tf.ones([3, 1]), name="w"))
    (found,) = _towers(graph)
    assert [t.scope for t in found.towers] == ["model", "model_1"]


def test_towers_that_read_tower_0s_regularizers_are_towers(tf):
    """slim builds a variable's regularization loss where the variable is made, in tower 0;
    every tower's total loss reads it. Towers all the same; a chain of them is not."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        with tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope()):
            for i in range(3):
                with tf.name_scope(f"tower_{i}"):
                    w = tf.compat.v1.get_variable("w", [3, 1])
                    if i == 0:
                        penalty = tf.reduce_sum(w * w, name="l2")
                    tf.add(tf.reduce_sum(tf.matmul(x, w)), penalty, name="total_loss")
                    tf.compat.v1.get_variable_scope().reuse_variables()
    (found,) = _towers(graph)
    assert [t.scope for t in found.towers] == ["tower_0", "tower_1", "tower_2"]
