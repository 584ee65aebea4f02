"""Issue 36's shapes from real code, fixed and run: each pattern of fixtures/real_code/
patterns/ named below is copied twice, one copy fixed by `graphfix fix --in-place` as a user
runs it, and both are built into TF graphs in one subprocess (TF imported once): what the
user gets before the fix (a variable on a GPU, the embedding's gradient densified per
tower) and after it (the variable on the CPU, the gradient an IndexedSlices, the train op
still applied), and a training step of the fixed graph runs."""

from __future__ import annotations

import pytest

from conftest import pattern_copies_built, run_cli

SHAPES = ("towers_on_device_specs", "device_function_pins_old_variable_op",
          "inline_tower_average_over_embedding")

# Builds each copy's graph with the fixture's own code under tensorflow.compat.v1 (TF 1.x
# graph mode: VariableV2) and prints what a user would see, as JSON.
_BUILD = r'''
import importlib.util, json, sys
import numpy as np
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()
sys.modules["tensorflow"] = tf

def load(folder, name):
    sys.path.insert(0, folder)
    for cached in [m for m in sys.modules if m in ("train", "multi_gpu", "trainer",
                                                   "text_model")]:
        del sys.modules[cached]
    try:
        spec = importlib.util.spec_from_file_location(name, f"{folder}/{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(folder)

def devices():
    return {v.op.name: v.device for v in tf.global_variables()}

out = {}
for label, folder in json.loads(sys.argv[1]).items():
    shape, version = label.split(":")
    with tf.Graph().as_default():
        if shape == "towers_on_device_specs":
            train = load(folder, "train")
            train.build(tf.zeros([4, 4]), tf.zeros([4, 1]))
            out[label] = devices()
        elif shape == "device_function_pins_old_variable_op":
            multi_gpu = load(folder, "multi_gpu")
            multi_gpu.towers([tf.zeros([2, 4]), tf.zeros([2, 4])])
            multi_gpu.towers_v1([tf.zeros([2, 4]), tf.zeros([2, 4])])
            out[label] = devices()
        else:
            trainer = load(folder, "trainer")
            ids = tf.constant([[1, 2], [3, 4], [5, 6], [7, 8]])
            labels = tf.constant([0, 1, 0, 1])
            trainers = [trainer.Trainer(ids, labels), trainer.ApplyingTrainer(ids, labels)]
            # How each train op updates the embedding: ScatterSub for a sparse gradient (the
            # looked-up rows), ApplyGradientDescent for a dense one (a whole [vocab, dim]).
            updates = sorted(op.type for op in tf.get_default_graph().get_operations()
                             if op.type in ("ScatterSub", "ApplyGradientDescent")
                             and op.inputs[0].op.name == "model/embedding")
            with tf.Session() as sess:
                sess.run(tf.global_variables_initializer())
                before = sess.run("model/embedding:0")
                for t in trainers:
                    sess.run(t.train_op)
                after = sess.run("model/embedding:0")
            out[label] = {
                "embedding_updates": updates,
                "train_ops": [type(t.train_op).__name__ for t in trainers],
                "rows_changed": int(np.sum(np.any(before != after, axis=1))),
            }
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return pattern_copies_built(tmp_path_factory, _BUILD, SHAPES)


def test_towers_on_device_specs_put_their_variables_on_the_cpu_once_fixed(built):
    result, _ = built
    before = result["towers_on_device_specs:before"]
    after = result["towers_on_device_specs:after"]
    # The tower's tf.DeviceSpec(device_type="GPU", device_index=0) reaches the layers through
    # the inner spec that names only a job; the CPU spec's counter stays where it was.
    assert before["hidden/kernel"].endswith("device:GPU:0")
    assert "CPU" in before["batches_seen"]
    assert all("CPU" in device for device in after.values()), after
    assert set(after) == set(before)


def test_a_device_function_pinning_only_variable_is_widened(built):
    result, folders = built
    before = result["device_function_pins_old_variable_op:before"]
    after = result["device_function_pins_old_variable_op:after"]
    assert before == {"net/w": "/gpu:0", "net_v1/w": "/cpu:0"}
    assert after == {"net/w": "/cpu:0", "net_v1/w": "/cpu:0"}
    fixed = (folders["device_function_pins_old_variable_op:after"] + "/multi_gpu.py")
    with open(fixed) as file:
        assert 'PS_OPS = ["Variable", "VariableV2", "VarHandleOp"]' in file.read()
    # The fixed file is clean: no finding on a second check.
    again = run_cli("check", "--no-cache", ".",
                    cwd=folders["device_function_pins_old_variable_op:after"])
    assert again.returncode == 0, again.stdout


def test_an_inline_tower_average_keeps_the_embedding_gradient_sparse(built):
    result, _ = built
    before = result["inline_tower_average_over_embedding:before"]
    after = result["inline_tower_average_over_embedding:after"]
    assert before["embedding_updates"] == ["ApplyGradientDescent", "ApplyGradientDescent"]
    assert after["embedding_updates"] == ["ScatterSub", "ScatterSub"]
    # Both trainers still apply the average (the method that applied it keeps doing so),
    # and a step trains only the embedding rows the batch looked up.
    assert after["train_ops"] == ["Operation", "Operation"]
    assert 0 < after["rows_changed"] <= 8
