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

from conftest import pattern_copies_built, run_cli

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
    return pattern_copies_built(tmp_path_factory, _BUILD, (BUG, TWIN), "--only",
                                "shared-variables")


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


# -- the project model: what a tower function runs on the object it is given ----------------

_ONE_FILE = '''\
import tensorflow as tf


class Net(object):
    def __init__(self, width):
        self.width = width

    def inference(self, x):
        return tf.matmul(x, self.weight(x.shape[-1], "w"))

    def summary(self, x):
        return tf.Variable(tf.zeros([1]), name="unused")

    def weight(self, rows, name):
        return tf.Variable(tf.zeros([rows, self.width]), name=name)


def tower_loss(net, x):
    return tf.reduce_sum(net.inference(x))


def train(xs, num_gpus):
    net = Net(4)
    losses = []
    with tf.variable_scope(tf.get_variable_scope()):
        for i in range(num_gpus):
            with tf.device("/gpu:%d" % i):
                losses.append(tower_loss(net, xs[i]))
                tf.get_variable_scope().reuse_variables()
    return losses
'''


def test_a_tower_function_runs_the_methods_it_calls_on_the_object_it_is_given():
    """`tower_loss(net, x)` in the tower loop, `net = Net(4)` made once before it: the
    towers run `net.inference` and the helper it calls (its tf.Variable is found, once per
    tower under reuse), not `summary`, which the tower function does not call."""
    import graphfix
    from graphfix.source.project import Project

    view = Project.of_code("one.py", _ONE_FILE).view("one.py")
    towers = view.tower_code_through_objects()
    regions = view.reusing_regions_through_objects()
    for line, runs in ((9, True), (15, True), (12, False)):
        assert any(a <= line <= b for a, b in towers) is runs, line
        assert any(a <= line <= b for a, b, *_ in regions) is runs, line
    assert not any(a <= 9 <= b for a, b in view.tower_code())  # (the parameter stops it)
    found = graphfix.check_source(_ONE_FILE, only=["shared-variables"])
    assert [(f.line, f.fixable) for f in found] == [(15, True)]
    assert "called at <string>:28 under after reuse_variables() at line 29" in found[0].message
    shared = _ONE_FILE.replace('tf.Variable(tf.zeros([rows, self.width]), name=name)',
                               'tf.get_variable(name, [rows, self.width])')
    assert graphfix.check_source(shared, only=["shared-variables"]) == []
    # The object made inside the tower function, as the project model read it before.
    inside = _ONE_FILE.replace("def tower_loss(net, x):", "def tower_loss(width, x):\n"
                               "    net = Net(width)").replace("tower_loss(net, xs[i])",
                                                              "tower_loss(4, xs[i])")
    assert [f.line for f in graphfix.check_source(inside, only=["shared-variables"])] == [15]


_SKIPPING_RECIPE = '''

def average_gradients(tower_grads):
    average_grads = []
    for grad_and_vars in zip(*tower_grads):
        grads = [tf.expand_dims(g, 0) for g, _ in grad_and_vars if g is not None]
        if grads:
            grad = tf.reduce_mean(tf.concat(axis=0, values=grads), 0)
            average_grads.append((grad, grad_and_vars[0][1]))
    return average_grads
'''


def test_a_recipe_skipping_none_over_unshared_towers_is_reported_not_rewritten():
    """The recipe that skips None over towers that each make their weights: only tower 0's
    batch trains, and a rewrite that checks the lists would raise on them; reported, not
    fixed (shared-variables' fix is the cure). The weights made with get_variable: nothing."""
    import graphfix

    code = _ONE_FILE + _SKIPPING_RECIPE
    found = graphfix.check_source(code, only=["average-gradients"])
    assert [(f.line, f.fixable) for f in found] == [(33, False)]
    assert ("the tf.Variable at <string>:15 is made anew in every tower" in found[0].message
            and "averages each variable over tower 0 alone" in found[0].message
            and "only tower 0's batch trains" in found[0].message)
    shared = code.replace('tf.Variable(tf.zeros([rows, self.width]), name=name)',
                          'tf.get_variable(name, [rows, self.width])')
    assert graphfix.check_source(shared, only=["average-gradients"]) == []


@pytest.mark.parametrize("guard", ["self.weights.get(name) is None", "name not in self.weights",
                                   "not hasattr(self, 'made_' + name)"])
def test_an_object_made_once_that_keeps_its_weights_shares_them(guard):
    """An object made once before the towers that makes a weight only while it holds none
    (a cache on `self`) gives the next tower the first tower's: not found. The same object
    made anew in each tower makes new weights: found."""
    import graphfix

    cached = _ONE_FILE.replace(
        '        return tf.Variable(tf.zeros([rows, self.width]), name=name)\n',
        f'        if {guard}:\n'
        '            self.weights[name] = tf.Variable(tf.zeros([rows, self.width]), name=name)\n'
        '        return self.weights[name]\n').replace(
        "        self.width = width\n", "        self.width = width\n        self.weights = {}\n")
    assert graphfix.check_source(cached, only=["shared-variables"]) == []
    per_tower = cached.replace("def tower_loss(net, x):", "def tower_loss(width, x):\n"
                               "    net = Net(width)").replace("tower_loss(net, xs[i])",
                                                              "tower_loss(4, xs[i])")
    assert [f.line for f in graphfix.check_source(per_tower, only=["shared-variables"])] == [17]
