"""update-ops on graphs: seed 003's multi-tower batch norm, whose statistics never train."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import graphfix
from graphfix.graph import graphfile as graphio
from graphfix.graph import training
from graphfix.graph.towers import tower_of
from graphfix.graph.index import index_for

from conftest import FIXTURES

sys.path.insert(0, str(FIXTURES))
import models  # noqa: E402  (real tf-slim / tf.compat.v1.layers models)


def _update_ops_and_train(fixed):
    graph_def = fixed.graph_def if hasattr(fixed, "graph_def") else fixed
    meta = fixed if hasattr(fixed, "graph_def") else None
    index = index_for(graph_def, meta)
    updates = training.detect_update_ops(index)
    return index, updates


def _assert_train_runs_every_update(fixed, train="train"):
    index, updates = _update_ops_and_train(fixed)
    assert updates
    ancestors = index.ancestors([train])
    assert set(updates) <= ancestors, sorted(set(updates) - ancestors)[:5]
    return updates


@pytest.fixture(scope="module")
def resnet_v2_graph():
    """A 2-tower, averaged-gradient tf-slim ResNet v2 (slim.batch_norm) training graph."""
    return models.multi_tower("resnet_v2", towers=2, use_resource=False, image_size=16)


@pytest.mark.parametrize("meta", [True, False], ids=["meta_with_collections", "bare_graphdef"])
def test_seed003_resnet_v2_update_ops_run_and_train(resnet_v2_graph, meta):
    original = models.export(resnet_v2_graph, meta=meta)
    findings = graphfix.check_graph(original, only=["update-ops"])
    assert len(findings) == 1 and findings[0].node == "train"
    assert "does not run 52 of 52 update op(s)" in findings[0].message

    fixed, changes = graphfix.fix_graph(original, only=["update-ops"])
    updates = _assert_train_runs_every_update(fixed)
    assert len(updates) == 52  # 13 batch norms x 2 statistics x 2 towers
    towers = {tower_of(n.name) for n in (fixed.graph_def if meta else fixed).node if n.name in updates}
    assert towers == {0, 1}
    assert [c.node for c in changes] == ["train"]
    assert graphfix.check_graph(fixed, only=["update-ops"]) == []
    again, more = graphfix.fix_graph(fixed, only=["update-ops"])
    assert more == [] and again == fixed

    # One verified step changes every moving mean and variance; outputs equal the unfixed
    # graph's (loss is computed before the step; update ops do not change it).
    before = graphfix.verify(original, steps=1, fetches=["tower_0/loss:0"])
    assert not before.passed
    assert any(c.name == "update ops" and not c.passed and "never changed" in c.detail
               for c in before.checks)
    after = graphfix.verify(fixed, steps=1, fetches=["train", "tower_0/loss:0", "tower_1/loss:0"],
                            compare=original)
    by_name = {c.name: c for c in after.checks}
    assert by_name["update ops"].passed, after.to_lines()
    assert "all 26 update-op variable(s) changed" in by_name["update ops"].detail
    assert after.values["tower_0/loss:0"] == pytest.approx(before.values["tower_0/loss:0"])
    # Outputs and trained weights equal the unfixed graph's (moving statistics aside).
    assert by_name["compare"].passed, after.to_lines()


@pytest.mark.parametrize("kind,resource", [("layers", False), ("layers", True), ("slim", True)])
def test_layers_and_resource_variables(kind, resource):
    graph = models.multi_tower(kind, towers=2, use_resource=resource)
    original = models.export(graph, meta=False)
    fixed, changes = graphfix.fix_graph(original, only=["update-ops"])
    updates = _assert_train_runs_every_update(fixed)
    ops = {n.op for n in fixed.node if n.name in updates}
    assert ops == ({"AssignSubVariableOp"} if resource else {"AssignSub"})
    result = graphfix.verify(fixed, steps=1, fetches=["train"])
    assert result.passed, result.to_lines()


def test_towers_first_runs_only_the_first_towers_updates():
    original = models.export(models.multi_tower("slim", towers=2), meta=True)
    fixed, changes = graphfix.fix_graph(original, only=["update-ops"],
                                        settings={"update-ops": {"towers": "first"}})
    index, updates = _update_ops_and_train(fixed)
    ancestors = index.ancestors(["train"])
    first = [u for u in updates if u.startswith("tower_0/")]
    second = [u for u in updates if u.startswith("tower_1/")]
    assert first and second
    assert set(first) <= ancestors and not set(second) & ancestors


def test_already_correct_graph_is_left_alone():
    original = models.export(models.multi_tower("slim", towers=2, with_update_ops=True), meta=True)
    assert graphfix.check_graph(original, only=["update-ops"]) == []
    fixed, changes = graphfix.fix_graph(original, only=["update-ops"])
    assert changes == [] and fixed == original


def test_undecidable_train_op_is_a_finding_naming_the_parameter(tf):
    graph = models.multi_tower("slim", towers=1)
    with graph.as_default():  # a second optimizer step: two candidate train ops
        loss = tf.reduce_sum(tf.compat.v1.trainable_variables()[0])
        tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, name="other_train")
    graph_def = models.export(graph, meta=False)
    findings = graphfix.check_graph(graph_def, only=["update-ops"])
    assert len(findings) == 1 and not findings[0].fixable
    assert "several candidate train ops" in findings[0].message
    assert "--set update-ops.train_op=NAME" in findings[0].message
    fixed, changes = graphfix.fix_graph(graph_def, only=["update-ops"],
                                        settings={"update-ops": {"train_op": ["train"]}})
    _assert_train_runs_every_update(fixed)


def test_a_first_tower_only_graph_is_the_authors_choice():
    """slim's model_deploy runs the first clone's update ops only: that is not the bug."""
    first = FIXTURES / "update_ops" / "two_tower_slim_bn_first_tower" / "after.pbtxt"
    graph_def = graphio.load(first).message
    assert graphfix.check_graph(graph_def, only=["update-ops"]) == []
    fixed, changes = graphfix.fix_graph(graph_def, only=["update-ops"])
    assert list(changes) == [] and fixed == graph_def


def test_keras_graph_mode_model_gets_only_its_training_pass_updates(tf):
    """The construction call of a Keras functional model builds update ops on the model's
    own `Input`: running them would need that placeholder, which no train step feeds."""
    original = models.export(models.keras_towers(towers=2), meta=True)
    findings = graphfix.check_graph(original, only=["update-ops"])
    assert [f.node for f in findings] == ["train_op"]
    assert "does not run 4 of 4 update op(s)" in findings[0].message
    fixed, _ = graphfix.fix_graph(original, only=["update-ops"])

    from tf_steps import moving_means_over_one_step

    def step(meta_graph):
        """Moving means before and after one train step fed only images and labels."""
        graph = tf.Graph()
        with graph.as_default():
            tf.compat.v1.train.import_meta_graph(meta_graph)
        means = moving_means_over_one_step(
            graph, "train_op", {"images:0": np.ones((4, 8, 8, 3), np.float32),
                                "labels:0": np.array([0, 1, 0, 1], np.int32)})
        return means.before, means.after

    before, after = step(original)
    assert all((b == a).all() for b, a in zip(before, after)), "the bug: statistics stay"
    before, after = step(fixed)
    assert before and all((b != a).any() for b, a in zip(before, after))
    assert graphfix.check_graph(fixed, only=["update-ops"]) == []
