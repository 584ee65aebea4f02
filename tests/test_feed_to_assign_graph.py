"""feed-to-assign on graphs: a fed variable becomes a feed point plus an assign (seed 003)."""

from __future__ import annotations

import numpy as np
import pytest

import graphfix
from graphfix.runtime import load_variable_feeds

VALUE = np.arange(15, dtype=np.float32).reshape(5, 3) / 10.0
IDS = np.array([0, 2, 4], dtype=np.int32)


def _build(tf, use_resource: bool):
    """An embedding model trained by Adam: the seed's `embeddings` variable."""
    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        ids = tf1.placeholder(tf.int32, [None], name="ids")
        embeddings = tf1.get_variable("embeddings", [5, 3], initializer=tf1.ones_initializer(),
                                      use_resource=use_resource)
        vectors = tf.nn.embedding_lookup(embeddings, ids)
        loss = tf.reduce_sum(tf.square(vectors), name="loss")
        train = tf1.train.AdamOptimizer(0.1).minimize(loss, name="train")
        tf1.global_variables_initializer()
    return graph, embeddings, train


def _expected_loss(value):
    return float(np.sum(np.square(value[IDS])))


def test_feeding_a_ref_variable_fails_as_in_the_seed(tf):
    graph, embeddings, train = _build(tf, use_resource=False)
    with tf.compat.v1.Session(graph=graph) as session:
        session.run("init")
        with pytest.raises(tf.errors.InvalidArgumentError, match="incompatible with expected float_ref"):
            session.run(train, feed_dict={embeddings: VALUE, "ids:0": IDS})


@pytest.mark.parametrize("use_resource", [False, True], ids=["ref", "resource"])
def test_fed_run_lands_the_value_unfed_run_is_unchanged(tf, use_resource):
    graph, _, _ = _build(tf, use_resource)
    original = graph.as_graph_def()
    findings = graphfix.check_graph(original, only=["feed-to-assign"],
                                    settings={"feed-to-assign": {"variables": ["embeddings"]}})
    assert [f.node for f in findings] == ["embeddings"]
    assert "incompatible with expected float_ref" in findings[0].message
    fixed, changes = graphfix.fix_graph(original, only=["feed-to-assign"],
                                        settings={"feed-to-assign": {"variables": ["embeddings"]}})
    assert changes.renames == {"embeddings:0": "embeddings/feed:0"}
    assert changes[0].details["assign_op"] == "embeddings/feed_assign"
    assert len(fixed.node) == len(original.node) + 3, "a constant number of nodes per variable"

    tf1 = tf.compat.v1
    run_graph = tf.Graph()
    with run_graph.as_default():
        tf1.import_graph_def(fixed, name="")
    read = "embeddings/read:0" if not use_resource else "embeddings/Read/ReadVariableOp:0"
    with tf1.Session(graph=run_graph) as session:
        session.run("init")
        fed = {"embeddings/feed:0": VALUE, "ids:0": IDS}
        assert session.run("loss:0", feed_dict=fed) == pytest.approx(_expected_loss(VALUE))
        assert np.allclose(session.run(read), VALUE), "the fed value stays in the variable"
        session.run("train", feed_dict=fed)  # the seed's failing call now trains
        after = session.run(read)
        assert not np.allclose(after, VALUE) and np.allclose(after[[1, 3]], VALUE[[1, 3]])
        nodes = len(run_graph.as_graph_def().node)
        for _ in range(3):
            session.run("train", feed_dict=fed)
        assert len(run_graph.as_graph_def().node) == nodes

    # Unfed, the fixed graph computes exactly what the original did.
    result = graphfix.verify(fixed, steps=2, fetches=["train", "loss:0"], compare=original,
                             feeds={"ids": IDS})
    assert result.passed, result.to_lines()

    again, more = graphfix.fix_graph(fixed, only=["feed-to-assign"],
                                     settings={"feed-to-assign": {"variables": ["embeddings"]}})
    assert list(more) == [] and again == fixed
    assert more.renames == {} and graphfix.check_graph(
        fixed, only=["feed-to-assign"],
        settings={"feed-to-assign": {"variables": ["embeddings"]}}) == []


def test_saved_model_signature_bound_to_a_variable(tf, tmp_path):
    tf1 = tf.compat.v1
    graph, embeddings, train = _build(tf, use_resource=False)
    export = tmp_path / "model"
    with graph.as_default(), tf1.Session(graph=graph) as session:
        session.run("init")
        info = tf1.saved_model.build_tensor_info
        signature = tf1.saved_model.signature_def_utils.build_signature_def(
            inputs={"embeddings": info(embeddings), "ids": info(graph.get_tensor_by_name("ids:0"))},
            outputs={"loss": info(graph.get_tensor_by_name("loss:0"))},
            method_name="train")
        builder = tf1.saved_model.Builder(str(export))
        builder.add_meta_graph_and_variables(session, ["train"], signature_def_map={"train": signature})
        builder.save()
    assert graphfix.check_graph(export, only=["feed-to-assign"])[0].node == "embeddings"

    fixed_dir = tmp_path / "fixed"
    written, changes = graphfix.fix_graph(export, only=["feed-to-assign"], out=fixed_dir)
    assert changes.renames == {"embeddings:0": "embeddings/feed:0"}
    assert any("signature 'train' input 'embeddings'" in c.description for c in changes)

    loaded_graph = tf.Graph()
    with tf1.Session(graph=loaded_graph) as session:
        meta = tf1.saved_model.loader.load(session, ["train"], str(written))
        sig = meta.signature_def["train"]
        assert sig.inputs["embeddings"].name == "embeddings/feed:0"
        feeds = {sig.inputs["embeddings"].name: VALUE, sig.inputs["ids"].name: IDS}
        loss = session.run(sig.outputs["loss"].name, feed_dict=feeds)
        assert loss == pytest.approx(_expected_loss(VALUE))
        assert np.allclose(session.run("embeddings/read:0"), VALUE)
        session.run("train", feed_dict=feeds)  # and a train step then runs


def test_runtime_helper_splits_variable_feeds(tf):
    graph, embeddings, train = _build(tf, use_resource=False)
    with tf.compat.v1.Session(graph=graph) as session:
        session.run("init")
        nodes = len(graph.as_graph_def().node)
        for _ in range(3):
            feeds = load_variable_feeds(session, {embeddings: VALUE, "ids:0": IDS})
            assert list(feeds) == ["ids:0"]
            assert session.run("loss:0", feed_dict=feeds) == pytest.approx(_expected_loss(VALUE))
            session.run(train, feed_dict=feeds)
        assert len(graph.as_graph_def().node) == nodes, "no op added per step"


def test_placeholder_and_non_variable_feeds_are_left_alone(tf):
    graph, _, _ = _build(tf, use_resource=False)
    graph_def = graph.as_graph_def()
    fixed, changes = graphfix.fix_graph(graph_def, only=["feed-to-assign"])
    assert list(changes) == [] and fixed == graph_def
    findings = graphfix.check_graph(graph_def, only=["feed-to-assign"],
                                    settings={"feed-to-assign": {"variables": ["ids"]}})
    assert len(findings) == 1 and not findings[0].fixable and "is not a variable" in findings[0].message
