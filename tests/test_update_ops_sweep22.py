"""Session 22's sweep of public repositories found update-ops reporting correct code in
NVIDIA/OpenSeq2Seq (fixtures/real_code/patterns/sweep22_update_ops_*): an accumulated apply
in a nested function whose enclosing `optimize_loss` returns the loss made to wait on the
update ops, and optimizer classes whose own `apply_gradients` delegates to another
optimizer's. Each beside its bug twin: graphfix reports the twin and not the correct code,
and TF, stepping each program once, agrees: the correct code moves the batch norm's moving
mean, the twin does not, the twin fixed by graphfix does."""

from __future__ import annotations

import pytest

import graphfix

from conftest import FIXTURES, built_by_tf

NAME = "update-ops"
PATTERNS = FIXTURES / "real_code" / "patterns"
# Each correct shape -> its bug twin, the lines of the twin's train ops, and the arguments
# after (images, labels) its `train_op` takes for one step.
TWINS = {
    "sweep22_update_ops_loss_carries_update_ops_accumulated_apply":
        ("sweep22_update_ops_loss_carries_update_ops_accumulated_apply_returns_the_apply",
         [34, 41], "tf.constant(False)"),
    "sweep22_update_ops_optimizer_wrapper_apply_gradients":
        ("sweep22_update_ops_optimizer_wrapper_apply_gradients_caller_without_updates",
         [47], "True"),
}


def _code(pattern: str) -> str:
    return (PATTERNS / f"{pattern}.py").read_text()


@pytest.mark.parametrize("correct", sorted(TWINS))
def test_the_correct_shape_gives_no_finding_and_its_twin_one_per_train_op(correct: str):
    assert graphfix.check_source(_code(correct), path="train.py", only=[NAME]) == []
    twin, lines, _ = TWINS[correct]
    findings = graphfix.check_source(_code(twin), path="train.py", only=[NAME])
    assert [f.line for f in findings] == lines
    assert all("does not run the update ops of layers.batch_normalization" in f.message
               for f in findings)


def test_the_optimizer_classes_own_apply_gradients_is_not_their_callers_train_op():
    findings = graphfix.check_source(
        _code("sweep22_update_ops_optimizer_wrapper_apply_gradients_caller_without_updates"),
        path="train.py", only=[NAME])
    assert [f.message.split(": ")[2].split("(")[0] for f in findings] == [
        "optimizer.apply_gradients"]


# Builds each program's train op in a TF1 graph, runs one step, and says whether the batch
# norm's moving mean moved.
_ONE_STEP = r'''
import json, sys
import tensorflow as tf
from tf_steps import moving_means_over_one_step, program_at

tf.compat.v1.disable_v2_behavior()
v1 = tf.compat.v1
out = {}
for name, path, extra in json.loads(sys.argv[1]):
    train = program_at(path, "train_" + name.replace("-", "_"))
    graph = tf.Graph()
    with graph.as_default():
        images = v1.random_normal([2, 8, 8, 3], seed=1)
        step = train.train_op(images, tf.constant([0, 1]), eval(extra))
    means = moving_means_over_one_step(graph, step)
    out[name] = bool(means.count) and means.moved
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def stepped(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("fixed")
    programs = []
    for correct, (twin, lines, extra) in TWINS.items():
        fixed, findings = graphfix.fix_source(_code(twin), path="train.py", only=[NAME])
        assert [f.line for f in findings] == lines
        (folder / f"{twin}.py").write_text(fixed)
        programs += [[correct, str(PATTERNS / f"{correct}.py"), extra],
                     [twin, str(PATTERNS / f"{twin}.py"), extra],
                     [f"{twin}-fixed", str(folder / f"{twin}.py"), extra]]
    return built_by_tf(_ONE_STEP, programs)


@pytest.mark.needs_tf
@pytest.mark.parametrize("correct", sorted(TWINS))
def test_tf_agrees_the_correct_shape_runs_its_updates_and_the_fixed_twin_too(
        correct: str, stepped: dict):
    twin = TWINS[correct][0]
    assert (stepped[correct], stepped[twin], stepped[f"{twin}-fixed"]) == (True, False, True)


# OpenSeq2Seq's own spellings of the two shapes: the accumulators made in a `for` loop over
# the gradients (optimizers.py), and the delegation built in a function nested in the
# wrapper's `apply_gradients` (mp_wrapper.py's `apply_ops_wrapper`, handed to `tf.cond`).
_ACCUMULATED_IN_A_LOOP = (
    "        accum_vars = [tf.Variable(tf.zeros_like(v), trainable=False) for _, v in grads_and_vars]\n"
    "        accum_op = tf.group([tf.compat.v1.assign_add(a, g / iter_size)\n"
    "                             for a, (g, _) in zip(accum_vars, grads_and_vars)])\n",
    "        accum_vars, accum_ops, accumulated = [], [], []\n"
    "        for grad, var in grads_and_vars:\n"
    "            accum = tf.Variable(tf.zeros_like(var), trainable=False)\n"
    "            accum_ops.append(tf.compat.v1.assign_add(accum, grad / iter_size))\n"
    "            accum_vars.append(accum)\n"
    "            accumulated.append((accum, var))\n"
    "        accum_op = tf.group(accum_ops)\n",
    "                [(a, v) for a, (_, v) in zip(accum_vars, grads_and_vars)], global_step=step)\n",
    "                accumulated, global_step=step)\n")
_DELEGATED_IN_A_NESTED_FUNCTION = (
    "        return self._optimizer.apply_gradients(grads_and_vars, global_step, name)\n",
    "        def apply_and_count():\n"
    "            return self._optimizer.apply_gradients(grads_and_vars, global_step, name)\n"
    "        return tf.cond(tf.constant(True), apply_and_count, tf.no_op)\n")

# The loss made to wait on them by `tf.identity` under a block over them (slim's form).
_WAITING_BY_IDENTITY = (
    "    loss = control_flow_ops.with_dependencies(update_ops, loss)\n",
    "    with tf.control_dependencies(update_ops):\n"
    "        loss = tf.identity(loss)\n")


@pytest.mark.parametrize("correct, spelling", [
    ("sweep22_update_ops_loss_carries_update_ops_accumulated_apply", _WAITING_BY_IDENTITY),
    ("sweep22_update_ops_loss_carries_update_ops_accumulated_apply", _ACCUMULATED_IN_A_LOOP),
    ("sweep22_update_ops_optimizer_wrapper_apply_gradients", _DELEGATED_IN_A_NESTED_FUNCTION),
])
def test_other_spellings_of_the_shapes_give_no_finding_and_their_twins_stay_found(
        correct: str, spelling: tuple[str, ...]):
    def respelled(code: str) -> str:
        for written, rewritten in zip(spelling[::2], spelling[1::2]):
            assert written in code
            code = code.replace(written, rewritten)
        return code

    assert graphfix.check_source(respelled(_code(correct)), path="train.py", only=[NAME]) == []
    twin, lines, _ = TWINS[correct]
    findings = graphfix.check_source(respelled(_code(twin)), path="train.py", only=[NAME])
    assert len(findings) == len(lines)
