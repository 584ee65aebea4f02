"""shared-variables and average-gradients on a shape learned from held-out-4
(irmowan/Face-Recognition at afa82cab): the tower function is given the model object
(`tower_loss(scope, vgg)`, `vgg = VGG16(...)` made once before the tower loop) and calls
`vgg.inference`, whose layers make every weight with `tf.Variable` in one helper
(`get_var`); the gradients are averaged by the CIFAR-10 recipe that skips None.

Each pattern of fixtures/real_code/patterns/ named below is copied twice, one copy fixed by
`graphfix fix --in-place --only shared-variables` as a user runs it, and every copy's two
towers are built with its own code in one subprocess (TF imported once, graph mode, TF1
behaviour). What a user sees: before the fix each tower makes its own weights, tower 1's
gradient list holds tower 0's with None gradients before its own, and the average updates
tower 0's copies alone; after it, as in the get_variable twin, both towers share one set.
"""

from __future__ import annotations

import json

import pytest

from conftest import built_by_tf, pattern_copies, run_cli

BUG = "model_object_makes_tf_variables_in_a_helper"
TWIN = "model_object_makes_get_variables_in_a_helper"

# Builds each copy's two towers and prints, per copy, the trainable variables' count, each
# tower's gradient list's length and None gradients (the lists the recipe is given), and
# the trainable variables no update of the step writes, as JSON.
_BUILD = r'''
import importlib, json, sys
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()
sys.modules["tensorflow"] = tf

out = {}
for label, folder in json.loads(sys.argv[1]).items():
    sys.path.insert(0, folder)
    for cached in ("multi_gpu_train", "vgg_model"):
        sys.modules.pop(cached, None)
    train = importlib.import_module("multi_gpu_train")
    seen = []
    recipe = train.average_gradients

    def watched(tower_grads, recipe=recipe, seen=seen):
        seen.extend(tower_grads)
        return recipe(tower_grads)

    train.average_gradients = watched
    with tf.Graph().as_default() as graph:
        batch = (tf.zeros([2, 8, 8, 3]), tf.zeros([2], tf.int32))
        train.train([batch, batch], 2)
        updated = {op.inputs[0].op.name for op in graph.get_operations()
                   if op.type == "ApplyGradientDescent"}
        variables = tf.trainable_variables()
        out[label] = {
            "trainable": len(variables),
            "listed": [len(grads) for grads in seen],
            "none": [sum(g is None for g, _ in grads) for grads in seen],
            "untrained": sorted(v.op.name for v in variables if v.op.name not in updated),
        }
    sys.path.remove(folder)
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folders = pattern_copies(tmp_path_factory, (BUG, TWIN), "--only", "shared-variables")
    return built_by_tf(_BUILD, folders), folders


def test_each_tower_makes_its_own_weights_and_tower_0s_train_alone(built):
    """Before the fix: four weights per tower, eight in all; tower 1's list names tower 0's
    four (None: its loss does not reach them) before its own, the recipe skips the Nones
    and zip(*...) stops at four, so the step updates tower 0's copies with tower 0's
    gradient alone and never writes tower 1's."""
    got, _ = built
    before = got[f"{BUG}:before"]
    assert before["trainable"] == 8
    assert before["listed"] == [4, 8]
    assert before["none"] == [0, 4]
    assert len(before["untrained"]) == 4
    assert all(name.startswith("tower_1/") for name in before["untrained"])


def test_the_fix_shares_the_weights_as_the_get_variable_twin_does(built):
    """After shared-variables' fix (get_var's tf.Variable as get_variable), as in the twin
    written with get_variable: one set of four weights, both towers' lists name it, every
    gradient reaches it and the step writes every weight."""
    got, _ = built
    for copy in (f"{BUG}:after", f"{TWIN}:before", f"{TWIN}:after"):
        assert got[copy] == {"trainable": 4, "listed": [4, 4], "none": [0, 0],
                             "untrained": []}, copy


def test_found_where_the_weights_are_made_and_where_they_are_averaged(built):
    """The user's check: shared-variables at get_var's tf.Variable (fixed), average-gradients
    at the recipe (reported, not rewritten: with the weights shared its lists match); the
    fixed copy and the twin check clean for both."""
    _, folders = built
    only = ("--only", "shared-variables", "--only", "average-gradients")

    def findings(copy):
        done = run_cli("check", "--no-cache", "--format", "json", *only, ".",
                       cwd=folders[copy])
        assert done.returncode in (0, 1), done.stderr
        return sorted((f["path"].rsplit("/", 1)[-1], f["line"], f["transform"], f["fixable"])
                      for f in json.loads(done.stdout)["findings"])

    assert findings(f"{BUG}:before") == [
        ("multi_gpu_train.py", 21, "average-gradients", False),
        ("vgg_model.py", 38, "shared-variables", True)]
    fixed = (folders[f"{BUG}:after"] + "/vgg_model.py")
    assert "var = tf.compat.v1.get_variable(var_name, initializer=value)" in open(fixed).read()
    for copy in (f"{BUG}:after", f"{TWIN}:before"):
        assert findings(copy) == [], copy
