"""optimize_loss runs the UPDATE_OPS collection unless its `update_ops=` argument names the
update ops to run instead; a literal list holding none of them (`update_ops=[]`,
ikostrikov/TensorFlow-VAE-GAN-DRAW) runs none (fixtures/real_code/patterns/
update_ops_optimize_loss_*). graphfix reports that call, without a fix: the argument is
what to change; and TF, stepping each program once, agrees."""

from __future__ import annotations

import pytest

import graphfix

from conftest import FIXTURES, built_by_tf

NAME = "update-ops"
PATTERNS = FIXTURES / "real_code" / "patterns"
CORRECT = PATTERNS / "update_ops_optimize_loss_runs_the_collection.py"
BUG = PATTERNS / "update_ops_optimize_loss_given_no_update_ops.py"


def _findings(code: str) -> list:
    return graphfix.check_source(code, path="train.py", only=[NAME])


def test_an_empty_update_ops_argument_is_found_and_left_for_the_author():
    findings = _findings(BUG.read_text())
    assert [(f.line, f.fixable) for f in findings] == [(14, False)]
    assert "optimize_loss(...) does not run the update ops of layers.batch_normalization" in (
        findings[0].message)
    assert "its update_ops= argument names none of them" in findings[0].message
    fixed, _ = graphfix.fix_source(BUG.read_text(), path="train.py", only=[NAME])
    assert fixed == BUG.read_text()


@pytest.mark.parametrize("update_ops", [
    "None",
    "tf.get_collection(tf.GraphKeys.UPDATE_OPS)",
    "[*tf.get_collection(tf.GraphKeys.UPDATE_OPS)]",
    "list(updates)",  # a list the code made: not read here
])
def test_an_argument_that_may_hold_the_update_ops_gives_no_finding(update_ops: str):
    assert _findings(CORRECT.read_text()) == []
    code = BUG.read_text().replace("update_ops=[]", f"update_ops={update_ops}")
    assert _findings(code) == []


def test_an_empty_argument_under_a_block_over_the_update_ops_gives_no_finding():
    code = BUG.read_text().replace(
        '    return optimize_loss(loss, step, 0.1, "SGD", update_ops=[])\n',
        "    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):\n"
        '        return optimize_loss(loss, step, 0.1, "SGD", update_ops=[])\n')
    assert _findings(code) == []


_ONE_STEP = r'''
import json, sys
import tensorflow as tf

from tensorflow.python.framework import ops
from tf_steps import moving_means_over_one_step, program_at

tf.compat.v1.disable_v2_behavior()
# tf_slim's optimize_loss reads `ops.Tensor` and `ops.IndexedSlices`, aliases TF 2.21 no
# longer has: restored so the library's own code runs.
ops.Tensor = getattr(ops, "Tensor", tf.Tensor)
ops.IndexedSlices = getattr(ops, "IndexedSlices", tf.IndexedSlices)
v1 = tf.compat.v1
out = {}
for name, path in json.loads(sys.argv[1]):
    train = program_at(path, "train_" + name)
    graph = tf.Graph()
    with graph.as_default():
        images = v1.random_normal([2, 8, 8, 3], seed=1)
        step = train.train_op(images, tf.constant([0, 1]))
    means = moving_means_over_one_step(graph, step)
    out[name] = bool(means.count) and means.moved
print(json.dumps(out))
'''


@pytest.mark.needs_tf
def test_tf_agrees_the_empty_argument_leaves_the_moving_mean_and_the_default_moves_it():
    moved = built_by_tf(_ONE_STEP, [["correct", str(CORRECT)], ["bug", str(BUG)]])
    assert moved == {"correct": True, "bug": False}
