"""variables-to-cpu on shapes learned from the corpus's disagreements (issue 36), fixed and
built: each pattern of fixtures/real_code/patterns/ named below is copied twice, one copy
fixed by `graphfix fix --in-place` as a user runs it, and both are built into TF graphs in
one subprocess (TF imported once, graph mode, TF1 behaviour). What a user sees: where each
variable asks to be, before and after the fix, and that the fixed copy checks clean.

- model_object_passed_to_tower_function: a tower function given the model object
  (`tower_loss(..., net, ...)` calling `net.compute_loss`), and a validation net in the same
  tower that reuses the variables once a flag says so;
- fluent_network_built_by_base_init: a network whose base constructor calls the subclass's
  `setup`, which chains layer methods, built under `tf.DeviceSpec` towers;
- single_gpu_path_beside_towers: a single-GPU training function beside the towers of the
  same script: its variables stay on its GPU, untouched by the fix.
"""

from __future__ import annotations

import json

import pytest

from conftest import check_copy, FIXTURES, pattern_copies_built, run_cli

NAME = "variables-to-cpu"
PATTERNS = FIXTURES / "real_code" / "patterns"
SHAPES = ("model_object_passed_to_tower_function", "fluent_network_built_by_base_init",
          "single_gpu_path_beside_towers")

# Builds each copy's graph with the fixture's own code under tensorflow.compat.v1 and prints
# {copy: {graph: {variable: device}}} as JSON.
_BUILD = r'''
import importlib, json, sys
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()
sys.modules["tensorflow"] = tf

def devices():
    return {v.op.name: v.device for v in tf.global_variables()}

def inputs(n, labels):
    return ([tf.zeros([2, 4])] * n,
            [tf.zeros([2], tf.int32) if labels else tf.zeros([2, 1])] * n)

out = {}
for label, folder in json.loads(sys.argv[1]).items():
    shape = label.split(":")[0]
    sys.path.insert(0, folder)
    for cached in ("train", "model", "networks", "network_base"):
        sys.modules.pop(cached, None)
    train = importlib.import_module("train")
    graphs = {}
    if shape == "model_object_passed_to_tower_function":
        with tf.Graph().as_default():
            x, y = inputs(2, True)
            train.build(x, y, x, y, 2)
            graphs["towers"] = devices()
    elif shape == "fluent_network_built_by_base_init":
        with tf.Graph().as_default():
            x, y = inputs(2, False)
            train.build(x, y, 2)
            graphs["towers"] = devices()
    else:
        with tf.Graph().as_default():
            x, y = inputs(2, True)
            train.train(x[0], y[0], x[1], y[1])
            graphs["single"] = devices()
        with tf.Graph().as_default():
            x, y = inputs(2, True)
            train.train_multi_gpu(x, y, 2)
            graphs["towers"] = devices()
    sys.path.remove(folder)
    out[label] = graphs
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return pattern_copies_built(tmp_path_factory, _BUILD, SHAPES, "--only", NAME)


def test_a_model_object_passed_to_the_tower_function_has_its_variables_moved(built):
    result, folders = built
    before = result["model_object_passed_to_tower_function:before"]["towers"]
    after = result["model_object_passed_to_tower_function:after"]["towers"]
    # Tower 0's net.compute_loss made every variable on GPU 0; the validation net reused them.
    assert before == {name: "/device:GPU:0" for name in
                      ("net/hidden_w", "net/hidden_b", "net/logits_w", "net/logits_b")}
    assert after == {name: "/device:CPU:0" for name in before}
    again = check_copy(folders["model_object_passed_to_tower_function:after"], NAME)
    assert again.returncode == 0, again.stdout


def test_a_fluent_network_built_by_its_base_constructor_has_its_variables_moved(built):
    result, folders = built
    before = result["fluent_network_built_by_base_init:before"]["towers"]
    after = result["fluent_network_built_by_base_init:after"]["towers"]
    assert before == {name: "/device:GPU:0" for name in
                      ("fc1/weights", "fc1/biases", "fc2/weights", "fc2/biases")}
    assert after == {name: "/device:CPU:0" for name in before}
    again = check_copy(folders["fluent_network_built_by_base_init:after"], NAME)
    assert again.returncode == 0, again.stdout


def test_a_single_gpu_path_beside_the_towers_is_left_on_its_gpu(built):
    result, folders = built
    before = result["single_gpu_path_beside_towers:before"]
    after = result["single_gpu_path_beside_towers:after"]
    assert set(before["single"].values()) == {"/device:GPU:1"}
    assert after["single"] == before["single"]  # untouched by the fix
    assert set(before["towers"].values()) == {"/device:GPU:0"}
    assert set(after["towers"].values()) == {"/device:CPU:0"}
    with open(folders["single_gpu_path_beside_towers:after"] + "/train.py") as fixed, \
            open(PATTERNS / "single_gpu_path_beside_towers" / "train.py") as original:
        fixed_lines, original_lines = fixed.read().splitlines(), original.read().splitlines()
    # The single-GPU function (up to train_multi_gpu) is byte for byte what it was.
    end = original_lines.index("def train_multi_gpu(images, labels, num_gpus):")
    assert fixed_lines[:end] == original_lines[:end]
    again = check_copy(folders["single_gpu_path_beside_towers:after"], NAME)
    assert again.returncode == 0, again.stdout


_SINGLE_GPU_SCRIPT = '''\
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()


def train():
    images = tf.ones([2, 4])
    with tf.device("/gpu:1"):
        weights = tf.get_variable("weights", [4, 2])
        loss = tf.reduce_sum(tf.matmul(images, weights))
        global_step = tf.Variable(0, name="global_step", trainable=False)
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(
            loss, global_step=global_step)
    config = tf.ConfigProto(allow_soft_placement=True)
    with tf.Session(config=config) as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train_op)


def train_multi_gpu(num_gpus):
    losses = []
    for i in range(num_gpus):
        with tf.device("/gpu:%d" % i):
            with tf.variable_scope("tower", reuse=i > 0):
                losses.append(tf.reduce_sum(tf.get_variable("w", [4])))
    return tf.add_n(losses)


if __name__ == "__main__":
    train()
'''


def test_the_single_gpu_path_gets_what_its_traced_graph_gets(tmp_path):
    """The corpus's CRNN trainer's single-GPU path: a float variable and an int32 step under
    one fixed GPU, in a file whose sessions soft-place, beside a towers function. Traced,
    the graph surface reports the step (a warning: soft placement moves it to the CPU) and
    not the float variable; the source surface says the same of that function, and finds
    the towers' variable beside it."""
    script = tmp_path / "train.py"
    script.write_text(_SINGLE_GPU_SCRIPT)
    lines = _SINGLE_GPU_SCRIPT.splitlines()
    step = next(n for n, text in enumerate(lines, 1) if "global_step = tf.Variable" in text)
    tower = next(n for n, text in enumerate(lines, 1) if "losses.append" in text)
    traced = json.loads(run_cli("check", "--trace", "--no-cache", "--only", "variables-to-cpu",
                                "--format", "json", script).stdout)["findings"]
    read = json.loads(run_cli("check", "--no-cache", "--only", "variables-to-cpu",
                              "--format", "json", script).stdout)["findings"]
    assert [(f["line"], f["severity"]) for f in traced] == [(step, "warning")]
    assert "allow_soft_placement" in traced[0]["message"]
    assert [(f["line"], f["severity"]) for f in read] == [(step, "warning"), (tower, "warning")]
