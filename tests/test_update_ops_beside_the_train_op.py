"""update-ops on graphs whose script groups the update ops with the optimizer's op.

TF's optimizers put the op `apply_gradients` returns in the TRAIN_OP collection, whatever
the script then builds around it. A script that runs `tf.group(apply_op, *update_ops)`, or
slim model_deploy's `with_dependencies([tf.group(*update_ops, apply_op)], loss)`, runs the
update ops every step although the collection's op does not depend on them (issue 19: the
trace of fixtures update_ops/source/noop_group_update_ops and
noop_train_op_joins_the_update_list reported them). Each case is checked, then run: the
finding is there exactly when a step of what the script runs leaves the moving statistics
unchanged.
"""

from __future__ import annotations

import sys

import pytest

import graphfix

from conftest import FIXTURES

sys.path.insert(0, str(FIXTURES))
import models  # noqa: E402  (real tf-slim / tf.compat.v1.layers models)


def _with_the_scripts_train_step(tf, how: str):
    """The 2-tower slim graph (its collection names `train`, the optimizer's op) with the
    op the script runs, `train_step`, built on top of `train` as `how` says."""
    tf1 = tf.compat.v1
    graph = models.multi_tower("slim", towers=2)
    with graph.as_default():
        train = graph.get_operation_by_name("train")
        updates = tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)
        if how == "grouped with the update ops":
            tf.group(train, *updates, name="train_step")
        elif how == "a loss that runs both":
            loss = graph.get_tensor_by_name("tower_0/loss:0")
            with tf.control_dependencies([tf.group(*updates, train)]):
                tf.identity(loss, name="train_step")
        else:  # "grouped alone": the bug
            tf.group(train, name="train_step")
    meta = models.export(graph, meta=True)
    assert list(meta.collection_def["train_op"].node_list.value)[0] == "train"
    return meta


@pytest.mark.parametrize("how", ["grouped with the update ops", "a loss that runs both"])
def test_a_train_step_that_runs_the_update_ops_beside_the_collections_op_is_clean(tf, how):
    meta = _with_the_scripts_train_step(tf, how)
    assert graphfix.check_graph(meta, only=["update-ops"]) == []
    ran = graphfix.verify(meta, steps=1, fetches=["train_step"])
    checks = {c.name: c for c in ran.checks}
    assert checks["update ops"].passed, ran.to_lines()


def test_a_train_step_that_groups_the_optimizer_alone_is_found_and_fixed(tf):
    meta = _with_the_scripts_train_step(tf, "grouped alone")
    findings = graphfix.check_graph(meta, only=["update-ops"])
    assert [(f.node, f.fixable) for f in findings] == [("train", True)]
    assert "does not run 8 of 8 update op(s)" in findings[0].message
    ran = graphfix.verify(meta, steps=1, fetches=["train_step"])
    assert not {c.name: c for c in ran.checks}["update ops"].passed

    fixed, changes = graphfix.fix_graph(meta, only=["update-ops"])
    assert [c.node for c in changes] == ["train"]
    assert graphfix.check_graph(fixed, only=["update-ops"]) == []
    ran = graphfix.verify(fixed, steps=1, fetches=["train_step"])
    assert {c.name: c for c in ran.checks}["update ops"].passed, ran.to_lines()
