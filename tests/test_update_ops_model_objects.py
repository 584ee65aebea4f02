"""Models written as objects whose `__call__` builds the batch norms (sugyan/tf-dcgan's
Generator and Discriminator): the training flag defaults to False and the loss calls the
instances with training=True. graphfix reads the calls of the instances as the calls of
`__call__`: those train ops are found, and the same models called only with the default,
or trained under a control dependency on UPDATE_OPS, are not. TF, stepping each program
once, agrees."""

from __future__ import annotations

import pytest

import graphfix

from conftest import FIXTURES, built_by_tf
from test_update_ops_sweep21 import _ONE_STEP

NAME = "update-ops"
PATTERNS = FIXTURES / "real_code" / "patterns"
FOUND = "update_ops_model_objects_called_training"
CLEAN = ("update_ops_model_objects_called_training_under_updates",
         "update_ops_model_objects_never_called_training")


def _code(pattern: str) -> str:
    return (PATTERNS / pattern / "train.py").read_text()


def _lines(code: str) -> list[int]:
    return [f.line for f in graphfix.check_source(code, path="train.py", only=[NAME])]


def test_both_minimize_calls_of_models_called_training_are_found():
    findings = graphfix.check_source(_code(FOUND), path="train.py", only=[NAME])
    assert [f.line for f in findings] == [32, 33]
    assert all("does not run the update ops of layers.batch_normalization (line 12)"
               in f.message for f in findings)


@pytest.mark.parametrize("pattern", CLEAN)
def test_models_trained_under_the_update_ops_or_never_training_give_no_finding(pattern):
    assert _lines(_code(pattern)) == []


_MODEL = '''\
import tensorflow as tf


class Net(object):
    def __call__(self, inputs, training=False):
        return tf.layers.batch_normalization(inputs, training=training)


'''


@pytest.mark.parametrize("use, found", [
    # made and called at once
    ("loss = tf.reduce_sum(Net()(x, training=True))", True),
    ("loss = tf.reduce_sum(Net()(x))", False),
    # a local instance, the flag given by position (self is not passed)
    ("net = Net()\nloss = tf.reduce_sum(net(x, True))", True),
    ("net = Net()\nloss = tf.reduce_sum(net(x, False))", False),
    # a subclass's instance runs the base's __call__
    ("loss = tf.reduce_sum(Wide()(x, training=True))", True),
    # handed on to code whose calls of it are not seen
    ("net = Net()\nloss = tf.reduce_sum(apply(net, x))", True),
])
def test_the_calls_of_the_instances_decide(use: str, found: bool):
    body = "".join(f"    {line}\n" for line in use.splitlines())
    code = _MODEL + (
        "class Wide(Net):\n    pass\n\n\n"
        "def apply(model, x):\n    return model(x, training=is_training())\n\n\n"
        f"def fit(x):\n{body}    return tf.train.AdamOptimizer().minimize(loss)\n")
    assert _lines(code) == ([len(code.splitlines())] if found else [])


@pytest.fixture(scope="module")
def stepped(tmp_path_factory) -> dict:
    fixed, findings = graphfix.fix_source(_code(FOUND), path="train.py", only=[NAME])
    assert len(findings) == 2
    path = tmp_path_factory.mktemp("fixed") / "train.py"
    path.write_text(fixed)
    programs = [[p, str(PATTERNS / p / "train.py")] for p in (FOUND, *CLEAN)]
    return built_by_tf(_ONE_STEP, programs + [[f"{FOUND}-fixed", str(path)]])


@pytest.mark.needs_tf
def test_tf_agrees_the_found_step_leaves_the_moving_statistics_and_the_fixed_one_moves_them(
        stepped: dict):
    updates, moved = stepped[FOUND]
    assert updates > 0 and not moved
    assert stepped[f"{FOUND}-fixed"] == [updates, True]
    assert stepped[CLEAN[0]] == [updates, True]
    assert stepped[CLEAN[1]] == [0, False]  # no update ops: nothing to run
