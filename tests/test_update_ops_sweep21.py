"""Session 21's sweep of public repositories outside the corpus found update-ops reporting
correct code (fixtures/real_code/sweeps/session21.md, "update-ops"); each shape is a
pattern, fixtures/real_code/patterns/sweep21_update_ops_*, beside its bug twin. graphfix
reports the twin and not the correct code; TF, stepping each program once, agrees: the
correct code runs its batch norms' updates (or makes none), the twin does not run them,
and the twin fixed by graphfix does."""

from __future__ import annotations

import pytest

import graphfix

from conftest import FIXTURES, built_by_tf

NAME = "update-ops"
PATTERNS = FIXTURES / "real_code" / "patterns"
# Each correct shape -> its bug twin and the line of the twin's train op.
TWINS = {
    "sweep21_update_ops_train_list_extended_by_update_ops":
        ("sweep21_update_ops_train_list_extended_by_other_ops", 23),
    "sweep21_update_ops_apply_inline_in_group":
        ("sweep21_update_ops_apply_inline_in_group_without_updates", 11),
    "sweep21_update_ops_apply_op_appended_by_helper":
        ("sweep21_update_ops_apply_op_appended_by_helper_grouped_alone", 8),
    "sweep21_update_ops_helper_flag_passed_false":
        ("sweep21_update_ops_helper_flag_passed_true_once", 13),
    "sweep21_update_ops_model_built_for_eval_only":
        ("sweep21_update_ops_model_built_for_training_by_default", 30),
    "sweep21_update_ops_bn_params_from_helper":
        ("sweep21_update_ops_bn_params_from_helper_kept_in_update_ops", 24),
}


def _code(pattern: str) -> str:
    return (PATTERNS / pattern / "train.py").read_text()


@pytest.mark.parametrize("correct", sorted(TWINS))
def test_the_correct_shape_gives_no_finding_and_its_twin_one(correct: str):
    assert graphfix.check_source(_code(correct), path="train.py", only=[NAME]) == []
    twin, line = TWINS[correct]
    [finding] = graphfix.check_source(_code(twin), path="train.py", only=[NAME])
    assert finding.line == line
    assert "does not run the update ops of" in finding.message


# Builds each program's train op in a TF1 graph (the fixtures spell TF1's `tf`), runs one
# step, and says how many update ops the graph collected and whether the moving means
# moved. tf.contrib.slim is gone from TF 2, so the slim shape is not stepped.
_ONE_STEP = r'''
import json, sys
import numpy as np
import tensorflow as tf
from tf_steps import moving_means_over_one_step, program_at

tf.compat.v1.disable_v2_behavior()
sys.modules["tensorflow"] = tf.compat.v1
v1 = tf.compat.v1
out = {}
for name, path in json.loads(sys.argv[1]):
    train = program_at(path, "train_" + name)
    graph = tf.Graph()
    with graph.as_default():
        images = v1.random_normal([2, 8, 8, 3], seed=1)
        if hasattr(train, "main"):
            step = train.main()
        elif hasattr(train, "Model"):
            step = train.Model().fit(images)
        elif hasattr(train, "predict"):
            train.predict(images)
            step = (train.fit(images, tf.constant([0, 1])) if hasattr(train, "fit")
                    else train.fit_line())
        elif hasattr(train, "fit"):
            step = train.fit(images)
        elif "images_per_gpu" in open(path).read():
            step = train.build_train_op([images, images])
        else:
            step = train.build_train_op(images)
    feed = {op.outputs[0]: np.ones([2, 1], np.float32)
            for op in graph.get_operations() if op.type == "Placeholder"}
    means = moving_means_over_one_step(graph, step, feed)
    out[name] = [means.update_ops, means.moved]
print(json.dumps(out))
'''
_STEPPED = [c for c in sorted(TWINS) if "bn_params" not in c]


@pytest.fixture(scope="module")
def stepped(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("fixed")
    programs = []
    for correct in _STEPPED:
        twin = TWINS[correct][0]
        fixed, findings = graphfix.fix_source(_code(twin), path="train.py", only=[NAME])
        assert len(findings) == 1
        (folder / f"{twin}.py").write_text(fixed)
        programs += [[correct, str(PATTERNS / correct / "train.py")],
                     [twin, str(PATTERNS / twin / "train.py")],
                     [f"{twin}-fixed", str(folder / f"{twin}.py")]]
    return built_by_tf(_ONE_STEP, programs)


@pytest.mark.needs_tf
@pytest.mark.parametrize("correct", _STEPPED)
def test_tf_agrees_the_correct_shape_runs_its_updates_and_the_fixed_twin_too(
        correct: str, stepped: dict):
    updates, moved = stepped[correct]
    assert moved or updates == 0  # it runs its updates, or its batch norms make none
    twin = TWINS[correct][0]
    assert stepped[twin][0] > 0 and stepped[twin] == [stepped[twin][0], False]
    assert stepped[f"{twin}-fixed"] == [stepped[twin][0], True]
