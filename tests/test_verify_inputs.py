"""verify runs what users run: tf.data iterators initialized, inputs synthesized from what
consumes them (images for decoders, Examples for parsers, shapes TF's shape functions accept,
ids in an embedding's range and different per tower), a py_func graph refused in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

import graphfix
from graphfix.verification import inputs

from conftest import error_lines, run_cli


def _meta(tf, graph, path):
    """`graph` written as a MetaGraphDef (its collections: variables, train_op) at `path`."""
    with graph.as_default():
        tf.compat.v1.train.export_meta_graph(filename=str(path), as_text=False)
    return path


def _run_checks(result) -> dict[str, str]:
    return {c.name: ("pass " if c.passed else "FAIL ") + c.detail for c in result.checks}


def test_initializable_iterator_is_initialized_with_its_placeholders_fed(tf):
    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        rows = tf1.placeholder(tf.float32, [None, 3], name="rows")  # a parameterized dataset
        size = tf1.placeholder(tf.int64, [], name="batch_size")  # (fed 0, batch() refuses)
        dataset = tf.data.Dataset.from_tensor_slices(rows).repeat().batch(size)
        iterator = tf1.data.make_initializable_iterator(dataset)
        w = tf1.get_variable("w", initializer=tf.ones([3, 1]))
        loss = tf.reduce_mean(tf.matmul(iterator.get_next(), w), name="loss")
        tf1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train")
        tf1.global_variables_initializer()
    # What a user's loop that forgets `iterator.initializer` gets from TF:
    with tf1.Session(graph=graph) as session:
        session.run("init")
        with pytest.raises(tf.errors.FailedPreconditionError, match="not been initialized"):
            session.run("train")
    result = graphfix.verify(graph, steps=2)
    assert _run_checks(result)["run"] == "pass initialized, then 2 step(s) ran"


def test_python_function_graph_is_one_line_exit_2_pointing_at_the_script(tf, tmp_path):
    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [None, 2], name="x")
        doubled = tf1.py_func(lambda a: a * 2, [x], tf.float32, name="double")
        halved = tf1.numpy_function(lambda a: a / 2, [doubled], tf.float32, name="halve")
        tf.reduce_sum(halved, name="total")
    path = _meta(tf, graph, tmp_path / "pyfunc.meta")
    result = run_cli("verify", path, check_exit=2)
    assert result.stdout == ""
    (line,) = error_lines(result.stderr)
    assert line.startswith(f"graphfix: error: {path}: 2 node(s) call Python functions")
    assert "'double' the first" in line
    assert line.endswith("verify the script that builds it: graphfix verify SCRIPT.py")
    # Not verify's FAIL: a compare against it is refused the same way.
    plain = tf.Graph()
    with plain.as_default():
        tf.reduce_sum(tf1.placeholder(tf.float32, [None, 2], name="x"), name="total")
    other = _meta(tf, plain, tmp_path / "plain.meta")
    compared = run_cli("verify", other, "--compare", path, check_exit=2)
    assert "call Python functions" in error_lines(compared.stderr)[0]


def _graph_scoring(tf, decode, size=(6, 6)):
    """A TF1 serving graph: a batch of strings, each decoded by `decode`, resized, scored."""
    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        images = tf1.placeholder(tf.string, [None], name="images")
        pixels = tf.map_fn(lambda data: tf.image.resize(tf.cast(decode(data), tf.float32), size),
                           images, fn_output_signature=tf.float32)
        w = tf1.get_variable("w", initializer=tf.ones([size[0] * size[1] * 3, 2]))
        tf.matmul(tf.reshape(pixels, [-1, size[0] * size[1] * 3]), w, name="scores")
        tf1.global_variables_initializer()
    return graph


DECODERS = {
    "DecodeJpeg": lambda tf, d: tf.io.decode_jpeg(d, channels=3),
    "DecodePng": lambda tf, d: tf.io.decode_png(d, channels=3),
    "DecodeImage": lambda tf, d: tf.io.decode_image(d, channels=3, expand_animations=False),
    "DecodeBmp": lambda tf, d: tf.io.decode_bmp(d, channels=3),
    "DecodeGif": lambda tf, d: tf.io.decode_gif(d)[0],
}


@pytest.mark.parametrize("op", sorted(DECODERS))
def test_string_input_of_an_image_decoder_is_fed_an_image(tf, op):
    graph = _graph_scoring(tf, lambda data: DECODERS[op](tf, data))
    assert op in {o.type for o in graph.get_operations()} | {
        n.op for f in graph.as_graph_def().library.function for n in f.node_def}
    result = graphfix.verify(graph.as_graph_def(), fetches=["scores:0"])
    assert result.passed, _run_checks(result)
    assert result.values["scores:0"].shape == (inputs.UNKNOWN_DIM, 2)


def test_serving_savedmodel_with_decode_jpeg_runs(tf, tmp_path):
    """A serving SavedModel whose string input goes to DecodeJpeg (inside map_fn's loop
    body, a function of the graph's library), by the CLI as a user runs it; on main:
    "Unknown image file format" from the bytes b"x"."""
    graph = _graph_scoring(tf, lambda data: tf.io.decode_jpeg(data, channels=3))
    with graph.as_default(), tf.compat.v1.Session(graph=graph) as session:
        session.run("init")
        tf.compat.v1.saved_model.simple_save(
            session, str(tmp_path / "served"),
            inputs={"images": graph.get_tensor_by_name("images:0")},
            outputs={"scores": graph.get_tensor_by_name("scores:0")})
    result = run_cli("verify", tmp_path / "served", "--fetch", "scores:0", "--format", "json",
                     check_exit=0)
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["run"]["passed"], checks["run"]


def test_parse_example_is_fed_examples_with_its_keys_dtypes_and_shapes(tf):
    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        batch = tf1.placeholder(tf.string, [None], name="examples")
        features = tf1.io.parse_example(batch, {
            "x": tf.io.FixedLenFeature([4], tf.float32),
            "label": tf.io.FixedLenFeature([], tf.int64),
            "image": tf.io.FixedLenFeature([], tf.string),
            "tags": tf.io.VarLenFeature(tf.string),
        })
        pixels = tf.map_fn(lambda d: tf.cast(tf.io.decode_jpeg(d, channels=1), tf.float32),
                           features["image"], fn_output_signature=tf.float32)
        one = tf1.placeholder(tf.string, [], name="one")
        (single,) = tf.raw_ops.ParseSingleExample(
            serialized=one, dense_defaults=[tf.zeros([2, 3])], num_sparse=0, sparse_keys=[],
            dense_keys=["y"], sparse_types=[], dense_shapes=[[2, 3]]).dense_values
        old = tf.raw_ops.ParseExample(  # (TF 1's op: a Const input for each key)
            serialized=tf1.placeholder(tf.string, [None], name="old"), names=[],
            sparse_keys=[], dense_keys=[tf.constant("z")], dense_defaults=[tf.zeros([1])],
            sparse_types=[], dense_shapes=[[1]]).dense_values[0]
        w = tf1.get_variable("w", initializer=tf.ones([4, 1]))
        tf.identity(tf.matmul(features["x"], w)
                    + tf.cast(tf.reshape(features["label"], [-1, 1]), tf.float32)
                    + tf.reduce_mean(pixels) + tf.reduce_sum(single) + tf.reduce_sum(old)
                    + tf.cast(tf.size(features["tags"].values), tf.float32), name="out")
        tf1.global_variables_initializer()
    ops = {o.type for o in graph.get_operations()} | {
        n.op for f in graph.as_graph_def().library.function for n in f.node_def}
    assert {"ParseExampleV2", "ParseExample", "ParseSingleExample", "DecodeJpeg"} <= ops
    result = graphfix.verify(graph.as_graph_def(), fetches=["out:0"])
    assert result.passed, _run_checks(result)
    assert result.values["out:0"].shape == (inputs.UNKNOWN_DIM, 1)


@pytest.mark.parametrize("kind", ["DecodeRaw", "DecodeCSV", "StringToNumber"])
def test_other_string_readers(tf, kind):
    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        text = tf1.placeholder(tf.string, [None], name="text")
        if kind == "DecodeRaw":
            values = tf.reshape(tf.io.decode_raw(text, tf.float32), [-1, 3, 2])
        elif kind == "DecodeCSV":
            a, _, c = tf.io.decode_csv(text, [[0.0], ["?"], [0]], field_delim=";")
            values = a + tf.cast(c, tf.float32)
        else:
            values = tf.strings.to_number(text)
        tf.reduce_sum(values, name="total")
    result = graphfix.verify(graph.as_graph_def(), fetches=["total:0"])
    assert result.passed, _run_checks(result)


@pytest.mark.parametrize("loss, target_shape", [
    ("sparse_categorical_crossentropy", [2, 1]), ("categorical_crossentropy", [2, 3])])
def test_keras_fit_graph_targets_take_the_shape_the_loss_needs(tf, loss, target_shape):
    """tf_keras `compile` + the training function, in graph mode: the target is a
    `[None, None]` float placeholder. A sparse one fed [2, 2] flattens to 4 labels for 2 rows
    of logits (TF: "logits and labels must have the same first dimension"), and fed normal
    floats its labels are negative; fed [2, 1] of classes it trains. A one-hot one fed
    [2, 2] does not multiply with [2, 3] probabilities."""
    import tf_keras as keras

    graph = tf.Graph()
    with graph.as_default():
        model = keras.Sequential([keras.layers.Dense(3, input_shape=(4,))])
        model.compile(optimizer=keras.optimizers.legacy.SGD(0.1), loss=loss)
        model._make_train_function()
        tf.compat.v1.add_to_collection("train_op", model.train_function.updates_op)
        (target,) = model._feed_targets
    assert target.shape.as_list() == [None, None]
    result = graphfix.verify(graph, steps=2)
    assert result.passed, _run_checks(result)
    fed = inputs.feed_values(graph, graph.as_graph_def(), {})
    assert list(fed[target].shape) == target_shape


def _split_towers(tf, recipe: str):
    """Two towers on /gpu:0 and /gpu:1 that split one batch of ids (and targets) between
    them, look the ids up in a shared embedding and average their gradients with `recipe`
    (fixtures/average_gradients/recipes.py)."""
    from fixtures.average_gradients.recipes import EMB_INIT, RECIPES, W_INIT

    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        ids = tf1.placeholder(tf.int32, [None], name="ids")
        targets = tf1.placeholder(tf.float32, [None], name="targets")
        optimizer = tf1.train.GradientDescentOptimizer(0.5)
        tower_grads = []
        for i, (tower_ids, tower_targets) in enumerate(zip(tf.split(ids, 2),
                                                           tf.split(targets, 2))):
            with tf.device(f"/gpu:{i}"), tf.name_scope(f"tower_{i}"), \
                    tf1.variable_scope("", reuse=i > 0):
                emb = tf1.get_variable("emb", initializer=EMB_INIT)
                w = tf1.get_variable("w", initializer=W_INIT)
                scores = tf.squeeze(tf.matmul(tf.nn.embedding_lookup(emb, tower_ids), w), 1)
                loss = tf.reduce_mean(tf.square(scores - tower_targets), name="loss")
                tower_grads.append(optimizer.compute_gradients(loss, [emb, w]))
        optimizer.apply_gradients(RECIPES[recipe](tower_grads), name="train")
        tf1.global_variables_initializer()
    return graph


def test_towers_that_split_a_batch_see_different_ids_in_the_embeddings_range(tf):
    """The average that keeps tower 0's indices equals the correct one only where both
    towers look up the same ids; on main both towers got the same id and compare passed."""
    from fixtures.average_gradients.recipes import VOCAB

    kept = _split_towers(tf, "tower0_indices")
    correct = _split_towers(tf, "concat_indices")
    result = graphfix.verify(correct, compare=kept)
    assert _run_checks(result)["compare"] == "FAIL differs from the original: variable emb"
    fed = {t.op.name: v for t, v in inputs.feed_values(kept, kept.as_graph_def(), {}).items()}
    ids = fed["ids"]
    assert len(ids) % 2 == 0 and ids.min() >= 0 and ids.max() < VOCAB
    assert set(ids[:len(ids) // 2]).isdisjoint(ids[len(ids) // 2:])  # each tower its own
    same = graphfix.verify(correct, compare=correct)
    assert same.passed, _run_checks(same)


def test_feeds_are_per_placeholder_and_the_same_in_both_graphs_of_a_compare(tf):
    """Seeded by name: two towers' own placeholders differ, and one name gets one value
    whatever else the graph holds (the original and the fixed graph are fed alike)."""
    tf1 = tf.compat.v1
    graphs = []
    for extra in (False, True):
        graph = tf.Graph()
        with graph.as_default():
            if extra:
                tf1.placeholder(tf.float32, [3], name="another")
            for i in range(2):
                tf1.placeholder(tf.float32, [None, 4], name=f"tower_{i}/x")
        graphs.append({t.op.name: v for t, v in
                       inputs.feed_values(graph, graph.as_graph_def(), {}).items()})
    assert not np.array_equal(graphs[0]["tower_0/x"], graphs[0]["tower_1/x"])
    assert np.array_equal(graphs[0]["tower_1/x"], graphs[1]["tower_1/x"])


def test_a_sparse_placeholder_is_fed_a_valid_row_ordered_sparse_tensor(tf):
    """`sparse_placeholder`'s indices, values and shape placeholders are fed together as
    one valid SparseTensor: indices in row order within the shape, one id per batch row,
    ids in the embedding's range. On main they were fed apart (random 0/1 indices) and
    `embedding_lookup_sparse` refused them: "segment ids are not increasing"."""
    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        ids = tf1.sparse_placeholder(tf.int64, [None, None], name="feature_ids")
        weights = tf1.sparse_placeholder(tf.float32, None, name="weights")  # shape fed too
        labels = tf1.placeholder(tf.float32, [None], name="labels")
        with tf1.variable_scope("wide", partitioner=tf1.fixed_size_partitioner(3)):
            table = tf1.get_variable("embedding", [40, 4])
        rows = tf.nn.embedding_lookup_sparse(table, ids, None, combiner="mean")
        dense = tf.sparse.to_dense(weights, validate_indices=True)
        loss = tf.reduce_mean(tf.square(tf.reduce_sum(rows, 1) - labels), name="loss")
        loss += tf.reduce_sum(dense)
        tf1.train.FtrlOptimizer(0.1).minimize(loss, name="train")
        tf1.global_variables_initializer()
    fed = {t.op.name: v for t, v in inputs.feed_values(graph, graph.as_graph_def(), {}).items()}
    for prefix in ("feature_ids", "weights"):
        indices = fed[f"{prefix}/indices"]
        assert len(indices) == len(fed[f"{prefix}/values"]) == len(fed["labels"])
        assert [tuple(i) for i in indices] == sorted(tuple(i) for i in indices)
        assert len({tuple(i) for i in indices}) == len(indices)
    assert fed["feature_ids/values"].min() >= 0 and fed["feature_ids/values"].max() < 40
    shape = fed["weights/shape"]
    assert len(shape) == fed["weights/indices"].shape[1]
    assert (fed["weights/indices"] < shape).all()
    result = graphfix.verify(graph, steps=1)
    assert _run_checks(result)["run"] == "pass initialized, then 1 step(s) ran", (
        _run_checks(result))
