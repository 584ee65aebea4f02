"""GraphIndex's edit helpers on graphs TF builds: an op-type pattern found through Identity
and Reshape, what else reads the nodes it met, `replace_input` of one output, and `prune` of
what an edit left dead; TF imports and runs every edited graph."""

from __future__ import annotations

import numpy as np

from graphfix.graph.index import GraphIndex, index_for
from graphfix.graph.pattern import Op


def _softmax_graph(tf, *, shared_reshape: bool = False):
    """x -> Reshape -> Identity `logits` -> Softmax `probs` -> Log -> Neg -> Mean `loss`;
    with `shared_reshape`, a Square reads the Reshape too."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 3], name="x")
        reshaped = tf.reshape(x, [2, 3], name="reshaped")
        logits = tf.identity(reshaped, name="logits")
        probs = tf.nn.softmax(logits, name="probs")
        tf.reduce_mean(-tf.math.log(probs), name="loss")
        if shared_reshape:
            tf.square(reshaped, name="squared")
    return graph.as_graph_def()


def _run(tf, graph_def, fetch: str, feeds: dict):
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(graph_def, name="")
    with tf.compat.v1.Session(graph=graph) as session:
        return session.run(fetch, feeds)


FED = {"x:0": np.array([[1.0, 2.0, 3.0], [0.5, 0.5, 4.0]], np.float32)}
# -log(softmax(z)) fed to a mean: the shape a softmax-cross-entropy rewrite looks for.
NEG_LOG_SOFTMAX = Op("Neg", Op("Log", Op("Softmax", Op("Placeholder", name="input",
                                                     through=("Identity", "Reshape")),
                                         name="softmax")))


def test_a_pattern_looks_through_identity_and_reshape_where_asked(tf):
    index = GraphIndex(_softmax_graph(tf))
    [negated] = [index.names[p] for p in index.positions_of({"Neg"})]
    found = index.match(NEG_LOG_SOFTMAX, negated)
    assert found is not None
    assert found["softmax"].name == "probs"
    assert found["input"].name == "x"
    assert found["input"].passed == ["logits", "reshaped"]
    assert found.names() == [negated, found.inputs[0].name, "probs", "x", "logits", "reshaped"]
    # Without `through` the Identity is the Softmax's input: no match.
    strict = Op("Neg", Op("Log", Op("Softmax", Op("Placeholder"))))
    assert index.match(strict, negated) is None
    # `matches` finds every one in graph order; an op-type mismatch anywhere is no match.
    assert [m.name for m in index.matches(NEG_LOG_SOFTMAX)] == [negated]
    assert index.matches(Op("Neg", Op("Log", Op("Sigmoid", ...)))) == []


def test_read_elsewhere_names_what_a_replacement_must_keep(tf):
    alone = GraphIndex(_softmax_graph(tf))
    found = alone.matches(NEG_LOG_SOFTMAX)[0]
    assert found.read_elsewhere() == set()  # only the match reads its inner nodes
    shared = GraphIndex(_softmax_graph(tf, shared_reshape=True))
    found = shared.matches(NEG_LOG_SOFTMAX)[0]
    assert found.read_elsewhere() == {"reshaped"}  # `squared` reads it too
    assert shared.read_elsewhere(["reshaped"], besides={"logits", "squared"}) == set()


def test_replace_input_of_one_output_leaves_the_other(tf):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 2], name="x")
        left, right = tf.split(x, 2, axis=1, name="split")
        tf.add(left, right, name="total")
        tf.negative(right, name="flipped")
    index = GraphIndex(graph.as_graph_def())
    # A pattern may ask which output its reader reads.
    assert index.match(Op("Split", output=1), "split:1").tensor == "split:1"
    assert index.match(Op("Split", output=1), "split") is None
    before = _run(tf, index.graph_def, "total:0", FED_2x2)
    assert index.replace_input("total", "split:1", "flipped") == 1
    assert list(index.node("total").input) == ["split", "flipped"]
    index.check_changes()
    after = _run(tf, index.graph_def, "total:0", FED_2x2)
    np.testing.assert_allclose(before, [[3.0], [7.0]])
    np.testing.assert_allclose(after, [[-1.0], [-1.0]])  # left - right now
    # An output for an output: `split:1` read as `split:0`.
    index.replace_input("flipped", "split:1", "split:0")
    assert list(index.node("flipped").input) == ["split"]
    # A node's name alone still means all its outputs, each kept.
    index.replace_input("total", "split", "split")
    assert list(index.node("total").input) == ["split", "flipped"]


FED_2x2 = {"x:0": np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)}


def test_prune_drops_what_the_rewire_left_dead_and_tf_runs_the_rest(tf):
    index = GraphIndex(_softmax_graph(tf, shared_reshape=True))
    found = index.matches(NEG_LOG_SOFTMAX)[0]
    [loss] = [index.names[p] for p in index.positions_of({"Mean"})]
    # The loss reads the squared reshape now: the Neg-Log-Softmax chain is dead.
    assert index.replace_input(loss, found.name, "squared") == 1
    removed = index.prune([found.name])
    assert set(removed) == {found.name, found.inputs[0].name, "probs", "logits"}
    # The Placeholder is a feed, `reshaped` still read by `squared`: both stay.
    assert "x" in index and "reshaped" in index and "probs" not in index
    index.check_structure()
    assert index.kept_positions == [p for p, n in enumerate(_names(tf)) if n not in removed]
    np.testing.assert_allclose(_run(tf, index.graph_def, f"{loss}:0", FED),
                               np.mean(FED["x:0"] ** 2), rtol=1e-6)


def _names(tf) -> list[str]:
    return [n.name for n in _softmax_graph(tf, shared_reshape=True).node]


def test_prune_keeps_what_the_meta_graph_or_a_stateful_op_holds(tf):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
        kept = tf.square(x, name="kept_in_a_collection")
        tf.compat.v1.add_to_collection("outputs", kept)
        tf.random.uniform([2], name="random")  # stateful: a draw is a side effect
        tf.abs(x, name="dead")
        anchor = tf.abs(x, name="anchor")
        with tf.compat.v1.colocate_with(anchor):
            tf.negative(x, name="follower")  # its `_class` names the anchor
        meta = tf.compat.v1.train.export_meta_graph(graph=graph)
    index = index_for(meta.graph_def, meta)
    assert index.read_elsewhere(["anchor", "dead", "kept_in_a_collection"]) == {
        "anchor", "kept_in_a_collection"}
    assert index.prune(["kept_in_a_collection", "random/RandomUniform", "dead", "x",
                        "anchor"]) == ["dead"]
    assert "kept_in_a_collection" in index and "random/RandomUniform" in index
    index.check_structure()


def test_a_fix_that_prunes_is_placed_again_and_written(tf):
    """A transform whose edit rewires and prunes runs through the driver's fix: the index
    renumbered, the placement re-check reads the kept nodes where they stand."""
    from graphfix.driver import Selected, apply_to_graph
    from graphfix.findings import Change, Finding
    from graphfix.registry import Transform

    class DropSoftmax(Transform):
        name = "drop-softmax-test"
        summary = "test: the loss reads its input squared, the softmax chain goes"

        def graph(self, graph, ctx):
            for found in graph.matches(NEG_LOG_SOFTMAX):
                yield Finding(ctx.path, self.name, "softmax", node=found.name,
                              edit=lambda g, found=found: self._edit(g, found.name, ctx))

        def _edit(self, graph, negated, ctx):
            [loss] = [graph.names[p] for p in graph.positions_of({"Mean"})]
            graph.replace_input(loss, negated, "squared")
            return [Change(ctx.path, self.name, "pruned", node=negated,
                           details={"removed": graph.prune([negated])})]

    graph_def = _softmax_graph(tf, shared_reshape=True)
    for node in graph_def.node:
        node.device = "/device:CPU:0"
    findings, changes, index = apply_to_graph(graph_def, None, "g.pb",
                                              Selected([(DropSoftmax, {})]), fix=True)
    assert len(changes) == 1 and "probs" in changes[0].details["removed"]
    assert "probs" not in [n.name for n in graph_def.node]
    assert index.kept_positions is not None

