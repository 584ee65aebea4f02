"""Session 23's sweep of public repositories found update-ops reporting code whose batch norms
never train (fixtures/real_code/patterns/sweep23_update_ops_*): the DetectionTeamUCAS
detectors enter mobilenet's `training_scope` (batch norm on) and, inside it, a scope of
their own that sets slim.batch_norm's is_training=False (the innermost arg_scope wins);
alexchung16/Faster-RCNN builds slim's resnet_v1 (is_training defaulting to True) under an
arg_scope whose convolutions' normalizer_params say is_training=False (a keyword of the
layer's call of its batch norm, it beats every arg_scope default). Each beside its bug twin,
one setting away: graphfix reports the twin and not the frozen code, and TF, building and
stepping each program once, agrees: the frozen code has no update op, the twin's are not
run by its step, the twin fixed by graphfix runs them."""

from __future__ import annotations

import pytest

import graphfix

from conftest import FIXTURES, built_by_tf

NAME = "update-ops"
PATTERNS = FIXTURES / "real_code" / "patterns"
# Each frozen shape -> its bug twin, the line of the twin's train op, and what the finding
# says trains.
TWINS = {
    "sweep23_update_ops_frozen_bn_scope_over_training_scope":
        ("sweep23_update_ops_training_scope_entered_without_a_freeze", 47,
         "slim.batch_norm (line 19)"),
    "sweep23_update_ops_resnet_blocks_under_frozen_normalizer_params":
        ("sweep23_update_ops_resnet_blocks_under_normalizer_params_without_the_flag", 49,
         "resnet_v1.resnet_v1 (line 35)"),
}


def _code(pattern: str) -> str:
    return (PATTERNS / f"{pattern}.py").read_text()


@pytest.mark.parametrize("frozen", sorted(TWINS))
def test_the_frozen_shape_gives_no_finding_and_its_twin_one(frozen: str):
    assert graphfix.check_source(_code(frozen), path="train.py", only=[NAME]) == []
    twin, line, trains = TWINS[frozen]
    findings = graphfix.check_source(_code(twin), path="train.py", only=[NAME])
    assert [f.line for f in findings] == [line]
    assert f"does not run the update ops of {trains}" in findings[0].message


# The same shapes spelled as the repositories spell them, each beside a twin that trains.
_SCOPE_IN_ONE_WITH = (  # the freeze a later item of the `with` entering the training scope
    "    with slim.arg_scope(training_scope(is_training=is_training)):\n"
    "        with slim.arg_scope([slim.batch_norm], **frozen_batch_norm) as scope:\n"
    "            return scope\n",
    "    with slim.arg_scope(training_scope(is_training=is_training)), \\\n"
    "            slim.arg_scope([slim.batch_norm], **frozen_batch_norm) as scope:\n"
    "        return scope\n")
_SCOPE_THROUGH_A_WRAPPER = (  # mobilenet_v2's `training_scope(**kwargs)`, the one entered
    "def frozen_backbone_scope(",
    "def v2_training_scope(**kwargs):\n"
    "    return training_scope(**kwargs)\n\n\n"
    "def frozen_backbone_scope(",
    "slim.arg_scope(training_scope(is_training=is_training))",
    "slim.arg_scope(v2_training_scope(is_training=is_training))")
_SCOPE_ALSO_ENTERED_UNFROZEN = (  # a second backbone under the training scope alone
    "    return tf.reduce_mean(net, axis=[1, 2])\n",
    "    with slim.arg_scope(training_scope(is_training=is_training)):\n"
    "        net = slim.conv2d(net, 4, [3, 3], scope='conv3')\n"
    "    return tf.reduce_mean(net, axis=[1, 2])\n")
_RESNET_SCOPE_OF_A_CLASS = (  # alexchung16's `self.resnet_arg_scope(...)`
    "def resnet_arg_scope(is_training=True):\n",
    "class ResNet:\n"
    "  def resnet_arg_scope(self, is_training=True):\n",
    "def backbone(images, is_training=True):\n",
    "  def backbone(self, images, is_training=True):\n",
    "slim.arg_scope(resnet_arg_scope(is_training=is_training))",
    "slim.arg_scope(self.resnet_arg_scope(is_training=is_training))",
    "backbone(images, is_training=True)",
    "ResNet().backbone(images, is_training=True)")
_RESNET_SCOPE_FROM_ELSEWHERE = (  # slim's own resnet_arg_scope: its params train
    "    with slim.arg_scope(resnet_arg_scope(is_training=is_training)):\n",
    "    with slim.arg_scope(resnet_utils.resnet_arg_scope()):\n")


def _respelled(code: str, spelling: tuple[str, ...]) -> str:
    for written, rewritten in zip(spelling[::2], spelling[1::2]):
        assert written in code
        code = code.replace(written, rewritten)
    return code


@pytest.mark.parametrize("frozen, spelling", [
    ("sweep23_update_ops_frozen_bn_scope_over_training_scope", _SCOPE_IN_ONE_WITH),
    ("sweep23_update_ops_frozen_bn_scope_over_training_scope", _SCOPE_THROUGH_A_WRAPPER),
])
def test_other_spellings_of_the_frozen_scope_give_no_finding_and_their_twins_one(
        frozen: str, spelling: tuple[str, ...]):
    assert graphfix.check_source(_respelled(_code(frozen), spelling), path="train.py",
                                 only=[NAME]) == []
    twin = TWINS[frozen][0]
    findings = graphfix.check_source(_respelled(_code(twin), spelling), path="train.py",
                                     only=[NAME])
    assert len(findings) == 1


def test_a_resnet_scope_of_a_class_freezes_its_blocks_too():
    frozen = "sweep23_update_ops_resnet_blocks_under_frozen_normalizer_params"
    respelled = _respelled(_code(frozen), _RESNET_SCOPE_OF_A_CLASS)
    assert graphfix.check_source(respelled, path="train.py", only=[NAME]) == []
    twin = _respelled(_code(TWINS[frozen][0]), _RESNET_SCOPE_OF_A_CLASS)
    assert len(graphfix.check_source(twin, path="train.py", only=[NAME])) == 1


@pytest.mark.parametrize("frozen, spelling", [
    ("sweep23_update_ops_frozen_bn_scope_over_training_scope", _SCOPE_ALSO_ENTERED_UNFROZEN),
    ("sweep23_update_ops_resnet_blocks_under_frozen_normalizer_params",
     _RESNET_SCOPE_FROM_ELSEWHERE),
])
def test_a_batch_norm_that_trains_somewhere_stays_found(frozen: str,
                                                        spelling: tuple[str, ...]):
    findings = graphfix.check_source(_respelled(_code(frozen), spelling), path="train.py",
                                     only=[NAME])
    assert len(findings) == 1


# Builds each program's train op in a TF1 graph, runs one step, and says how many update
# ops UPDATE_OPS holds and whether the batch norms' moving means moved.
_ONE_STEP = r'''
import json, sys
import tensorflow as tf
from tf_steps import moving_means_over_one_step, program_at
from graphfix.trace.child import alias_legacy_tf_layers

tf.compat.v1.disable_v2_behavior()
alias_legacy_tf_layers()  # tf_slim's layers under TF 2.16+, as graphfix runs a user's script
out = {}
for name, path in json.loads(sys.argv[1]):
    train = program_at(path, "train_" + name.replace("-", "_"))
    graph = tf.Graph()
    with graph.as_default():
        step = train.train()
    means = moving_means_over_one_step(graph, step)
    out[name] = [means.update_ops, bool(means.count) and means.moved]
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def stepped(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("fixed")
    programs = []
    for frozen, (twin, line, _) in TWINS.items():
        fixed, findings = graphfix.fix_source(_code(twin), path="train.py", only=[NAME])
        assert [f.line for f in findings] == [line]
        (folder / f"{twin}.py").write_text(fixed)
        programs += [[frozen, str(PATTERNS / f"{frozen}.py")],
                     [twin, str(PATTERNS / f"{twin}.py")],
                     [f"{twin}-fixed", str(folder / f"{twin}.py")]]
    return built_by_tf(_ONE_STEP, programs)


@pytest.mark.needs_tf
@pytest.mark.parametrize("frozen", sorted(TWINS))
def test_tf_agrees_the_frozen_shape_has_no_update_op_and_the_fixed_twin_runs_its_own(
        frozen: str, stepped: dict):
    twin = TWINS[frozen][0]
    assert stepped[frozen] == [0, False]
    updates, moved = stepped[twin]
    assert updates > 0 and not moved
    assert stepped[f"{twin}-fixed"] == [updates, True]
