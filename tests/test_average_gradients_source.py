"""average-gradients, source surface: what its findings say, and the fixed
`average_gradients` run by TensorFlow: it trains as one device does where the recipe
densified, crashed on None, or let a tuple pair two variables.

Its fixture cases, `fixtures/average_gradients/source/<case>/`, are run by
tests/test_source_fixtures.py.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import graphfix
from graphfix import registry
from graphfix.driver import Selected, run
from graphfix.source.project.facts import trainable_statistics
from graphfix.source.project.names import AstTfNames

from conftest import FIXTURES, fixture_findings

sys.path.insert(0, str(FIXTURES / "average_gradients"))
import recipes  # noqa: E402  (two-tower graphs averaged by a given function)

NAME = "average-gradients"
SOURCE = FIXTURES / "average_gradients" / "source"


def test_every_fixture_finding_says_the_recipe_breaks():
    for case, _, findings in fixture_findings("average_gradients"):
        assert all("averages the towers' gradients with the CIFAR-10 recipe, which breaks "
                   "for this model" in f.message for f in findings), case.name


def test_what_breaks_the_recipe_is_said():
    findings = graphfix.check_source((SOURCE / "seed003_embedding" / "before.py").read_text(),
                                     only=[NAME])
    assert "is an IndexedSlices" in findings[0].message
    assert "Converting sparse IndexedSlices to a dense Tensor" in findings[0].message
    findings = graphfix.check_source((SOURCE / "unshared_variable" / "before.py").read_text(),
                                     only=[NAME])
    assert "tf.Variable at <string>:13 is made anew in every tower" in findings[0].message
    assert "None values not supported" in findings[0].message


def test_an_embedding_in_an_imported_module_breaks_the_recipe_in_the_train_script_only():
    """The multi_file case (run with its model.py by tests/test_source_fixtures.py): alone,
    the train script shows no model that breaks the recipe."""
    alone = (SOURCE / "multi_file" / "before" / "train.py").read_text()
    assert graphfix.check_source(alone, only=[NAME]) == []


# -- the fixed function, run ----------------------------------------------------------------

DATA = recipes.batches()
TOWER_FEEDS = {name: value for i, (ids, targets) in enumerate(DATA)
               for name, value in ((f"tower_{i}/ids:0", ids), (f"tower_{i}/targets:0", targets))}
ONE_DEVICE_FEEDS = {"ids:0": np.concatenate([ids for ids, _ in DATA]),
                    "targets:0": np.concatenate([targets for _, targets in DATA])}


def _function(case: str, which: str):
    """`average_gradients` as the fixture's before.py or after.py defines it."""
    namespace: dict = {}
    exec(compile((SOURCE / case / f"{which}.py").read_text(), f"{case}/{which}.py", "exec"),
         namespace)
    return namespace["average_gradients"]


@pytest.fixture(scope="module")
def one_device():
    return {resource: recipes.run_step(recipes.one_device(use_resource=resource).as_graph_def(),
                                       ONE_DEVICE_FEEDS)
            for resource in (False, True)}


@pytest.mark.parametrize("resource", [False, True], ids=["ref", "resource"])
def test_fixed_average_keeps_the_embedding_sparse_and_trains_as_one_device(resource, one_device):
    fixed = _function("seed003_embedding", "after")
    graph_def = recipes.two_towers(fixed, use_resource=resource).as_graph_def()
    ops = {node.op for node in graph_def.node}
    assert "UnsortedSegmentSum" not in ops  # nothing densified
    got = recipes.run_step(graph_def, TOWER_FEEDS)
    for name in ("emb", "w"):
        np.testing.assert_allclose(got[name], one_device[resource][name], atol=1e-6)
    # The recipe densified each tower's gradient of the embedding.
    before = recipes.two_towers(_function("seed003_embedding", "before"), use_resource=resource)
    assert "UnsortedSegmentSum" in {node.op for node in before.as_graph_def().node}


def test_fixed_average_skips_none_gradients(one_device):
    # A variable no tower's loss reaches: the recipe fails with TF's own error.
    with pytest.raises(ValueError, match="None values not supported"):
        recipes.two_towers(_function("unshared_variable", "before"), unreached=True)
    fixed = recipes.two_towers(_function("unshared_variable", "after"), unreached=True)
    got = recipes.run_step(fixed.as_graph_def(), TOWER_FEEDS)
    for name in ("emb", "w"):
        np.testing.assert_allclose(got[name], one_device[False][name], atol=1e-6)


def test_fixed_average_refuses_tuples_of_different_variables():
    # Towers with a tf.Variable each: zip(*tower_grads) pairs tower 0's copy with tower 1's.
    # The recipe builds it; the graph surface sees each average mix two variables.
    before = recipes.two_towers(_function("unshared_variable", "before"), shared=False)
    mixed = graphfix.check_graph(before.as_graph_def(), only=[NAME])
    assert [f.fixable for f in mixed] == [False, False]
    assert all("mixes gradients of different variables" in f.message for f in mixed)
    with pytest.raises(ValueError, match="one tuple pairs gradients of different variables"):
        recipes.two_towers(_function("unshared_variable", "after"), shared=False)


# -- trainable moving statistics, run ------------------------------------------------------

# The trainable_moving_statistics case's model.py and train.py, before and after the fix,
# built under tensorflow.compat.v1 (one TF import for both) and trained one step.
_BUILD_AND_STEP = r'''
import importlib, json, sys
import numpy as np
import tensorflow as tf

tf.compat.v1.disable_v2_behavior()
sys.path.insert(0, sys.argv[1])
import tfslim_compat

tfslim_compat.install()
from tensorflow.python.framework import ops, tensor

if not hasattr(ops, "Tensor"):  # tf_slim's updates_collections=None path reads ops.Tensor,
    ops.Tensor = tensor.Tensor  # which TF 2.21 keeps in framework.tensor only
out = {}
for folder in sys.argv[2:]:
    sys.path.insert(0, folder)
    for name in ("model", "train"):
        sys.modules.pop(name, None)
    train = importlib.import_module("train")
    sys.path.remove(folder)
    graph = tf.Graph()
    with graph.as_default():
        try:
            train_op = train.build()
        except ValueError as error:
            out[folder] = str(error)
            continue
        trainable = [v.op.name for v in tf.compat.v1.trainable_variables()]
        weights = [v for v in tf.compat.v1.trainable_variables() if "weights" in v.op.name]
        init = tf.compat.v1.global_variables_initializer()
    config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
    with tf.compat.v1.Session(graph=graph, config=config) as sess:
        sess.run(init)
        start = sess.run(weights)
        sess.run(train_op)
        moved = any(not np.array_equal(a, b) for a, b in zip(start, sess.run(weights)))
    out[folder] = {"moving_mean_trainable": any("moving_mean" in n for n in trainable),
                   "weights_moved": moved}
print(json.dumps(out))
'''


@pytest.mark.needs_tf
def test_trainable_moving_statistics_break_the_recipe_and_the_fix_trains():
    """facenet's batch-norm settings (`variables_collections=[TRAINABLE_VARIABLES]`, in an
    arg scope a function returns) make the moving mean and variance trainable: the finding
    says so; the recipe fails with TF's own "None values not supported", the fixed one skips
    their None gradients and a training step moves the weights."""
    case = SOURCE / "trainable_moving_statistics"
    report, _ = run([str(case / "before")], Selected.build(registry.select([NAME]), {}),
                    fix=False)
    [finding] = report.findings
    assert "the batch norm settings at " in finding.message
    assert "model.py:18 put its moving mean and variance in TRAINABLE_VARIABLES" in finding.message
    assert "None values not supported" in finding.message
    folders = [str(case / "before"), str(case / "after")]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_USE_LEGACY_KERAS="1")
    done = subprocess.run([sys.executable, "-c", _BUILD_AND_STEP, str(FIXTURES), *folders],
                          capture_output=True, text=True, env=env, timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]
    got = json.loads(done.stdout.splitlines()[-1])
    assert "None values not supported" in got[folders[0]]
    assert got[folders[1]] == {"moving_mean_trainable": True, "weights_moved": True}


@pytest.mark.parametrize("code, lines", [
    ("p = {'variables_collections': [tf.GraphKeys.TRAINABLE_VARIABLES]}\n"
     "with slim.arg_scope([slim.batch_norm], **p):\n    pass", [4]),
    ("slim.batch_norm(x, variables_collections=['trainable_variables'])", [3]),
    ("slim.conv2d(x, 8, 3, normalizer_fn=slim.batch_norm,\n"
     "            normalizer_params={'variables_collections': {\n"
     "                'moving_mean': [tf.GraphKeys.TRAINABLE_VARIABLES]}})", [3]),
    # only beta and gamma, trainable anyway; another collection; a conv's own variables
    ("slim.batch_norm(x, variables_collections={'beta': [tf.GraphKeys.TRAINABLE_VARIABLES]})",
     []),
    ("slim.batch_norm(x, variables_collections=['bn_variables'])", []),
    ("slim.conv2d(x, 8, 3, variables_collections=[tf.GraphKeys.TRAINABLE_VARIABLES])", []),
])
def test_batch_norm_settings_that_make_the_moving_statistics_trainable(code, lines):
    tree = ast.parse("import tensorflow.compat.v1 as tf\nimport tf_slim as slim\n" + code)
    assert trainable_statistics(tree, AstTfNames(tree)) == lines


# -- the recipe's loop written inline in a training script, run ----------------------------

def _script_step(case: str, which: str) -> tuple[set[str], dict[str, np.ndarray]]:
    """The case's script (before.py or after.py) run in a graph of its own: the op types it
    builds, and its variables after one training step on both towers' batches."""
    tf = recipes.tf
    graph = tf.Graph()
    namespace: dict = {"__name__": "script"}
    with graph.as_default():
        exec(compile((SOURCE / case / f"{which}.py").read_text(), f"{case}/{which}.py",
                     "exec"), namespace)
        init = recipes.tf1.global_variables_initializer()
    ids, targets = (np.concatenate(parts) for parts in zip(*DATA))
    with recipes.tf1.Session(graph=graph) as sess:
        sess.run(init)
        sess.run(namespace["train_op"], {"ids:0": ids, "targets:0": targets})
        trained = {v.op.name: sess.run(v) for v in recipes.tf1.global_variables()}
    return {node.op for node in graph.as_graph_def().node}, trained


def test_inline_script_average_over_an_embedding_is_found_and_fixed_sparse():
    """A script that averages at its top level (no function zips its parameter): found at
    the loop, rewritten to keep the embedding's gradient sparse, and the step is the same."""
    code = (SOURCE / "inline_script_embedding" / "before.py").read_text()
    [finding] = graphfix.check_source(code, only=[NAME])
    assert finding.fixable
    assert "the loop over zip(*tower_grads), written inline" in finding.message
    assert "is an IndexedSlices" in finding.message
    ops_before, before = _script_step("inline_script_embedding", "before")
    ops_after, after = _script_step("inline_script_embedding", "after")
    assert "UnsortedSegmentSum" in ops_before  # each tower's gradient densified
    assert "UnsortedSegmentSum" not in ops_after
    assert before.keys() == after.keys() == {"model/emb", "model/w"}
    for name in before:
        np.testing.assert_allclose(after[name], before[name], atol=1e-6)
