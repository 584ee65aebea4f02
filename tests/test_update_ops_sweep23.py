"""Session 23's sweep of public repositories found update-ops reporting train ops that do run
the update ops, through code in other files (fixtures/real_code/patterns/sweep23_update_ops_*):
tf_cnn_benchmarks' variable manager returns its apply from a callback that a util module
puts into the caller's list, which the caller groups with the first tower's UPDATE_OPS (the
rewrite there would run every tower's); yyht/deepspeech's optimizer helper is called, in
every training script, inside `with tf.control_dependencies(update_ops):`; tensorpack's
default callbacks hook the session with RunUpdateOps, which fetches UPDATE_OPS beside every
step. Each beside its bug twin (the list grouped alone; the helper called outside any block;
the hook class never made): graphfix reports the twin and not the correct code, and TF,
stepping each program once, agrees: the correct code moves the batch norm's moving mean, the
twin does not, the twin fixed by graphfix does."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import FIXTURES, built_by_tf, run_cli

PATTERNS = FIXTURES / "real_code" / "patterns"
# Each correct shape -> its bug twin, the twin's finding (file:line) and the function of its
# train.py that builds the train op from a batch of features.
TWINS = {
    "sweep23_update_ops_apply_appended_through_a_callback":
        ("sweep23_update_ops_apply_appended_through_a_callback_grouped_alone",
         "variable_mgr.py:12", "build"),
    "sweep23_update_ops_helper_apply_under_callers_update_ops":
        ("sweep23_update_ops_helper_apply_called_bare", "optimizer_utils.py:12", "model_fn"),
    "sweep23_update_ops_run_by_a_session_hook":
        ("sweep23_update_ops_session_hook_never_made", "train.py:36", "train"),
}


def _findings(folder) -> list[tuple[str, str]]:
    result = run_cli("check", "--only", "update-ops", "--format", "json", "--no-cache", ".",
                     cwd=folder)
    assert result.returncode in (0, 1), result.stderr
    return [(f"{f['path'].removeprefix('./')}:{f['line']}", f["message"])
            for f in json.loads(result.stdout)["findings"]]


@pytest.mark.parametrize("correct", sorted(TWINS))
def test_the_correct_shape_gives_no_finding_and_its_twin_one(correct: str):
    assert _findings(PATTERNS / correct) == []
    twin, at, _ = TWINS[correct]
    (found,) = _findings(PATTERNS / twin)
    assert found[0] == at
    assert "does not run the update ops of layers.batch_normalization" in found[1]


def test_a_callback_handed_to_a_function_that_never_fills_the_list_is_still_found(tmp_path):
    """The callback's ops reach the caller's list only if the function it is handed to both
    calls it and adds to that list: a util that only calls it (a dry run, a log) ties
    nothing."""
    folder = tmp_path / "copy"
    shutil.copytree(PATTERNS / "sweep23_update_ops_apply_appended_through_a_callback", folder)
    util = folder / "variable_mgr_util.py"
    util.write_text(util.read_text().replace(
        "training_ops.extend(get_apply_gradients_ops_func())",
        "print(get_apply_gradients_ops_func())"))
    assert [at for at, _ in _findings(folder)] == ["variable_mgr.py:12"]


def test_a_helper_one_caller_calls_outside_the_block_is_still_found(tmp_path):
    """Every call elsewhere must be under a block over the update ops: one bare call builds
    a train op that runs none of them."""
    folder = tmp_path / "copy"
    shutil.copytree(PATTERNS / "sweep23_update_ops_helper_apply_under_callers_update_ops",
                    folder)
    (folder / "eval_train.py").write_text(
        (PATTERNS / "sweep23_update_ops_helper_apply_called_bare" / "train.py").read_text())
    assert [at for at, _ in _findings(folder)] == ["optimizer_utils.py:12"]


# One step of each program: whether its batch norm's moving mean moved.
_ONE_STEP = r'''
import importlib, json, sys
import numpy as np
import tensorflow as tf
from tf_steps import moving_means_over_one_step

tf.compat.v1.disable_v2_behavior()
out = {}
for label, folder, function in json.loads(sys.argv[1]):
    sys.path.insert(0, folder)
    for cached in ("train", "variable_mgr", "variable_mgr_util", "optimizer_utils"):
        sys.modules.pop(cached, None)
    train = importlib.import_module("train")
    graph = tf.Graph()
    with graph.as_default():
        if function == "train":  # steps its own session (hooked or not)
            before, after = train.train()
            out[label] = not np.allclose(before, after)
        else:
            step = getattr(train, function)(
                tf.constant(np.arange(12, dtype=np.float32).reshape(4, 3)))
    if function != "train":
        means = moving_means_over_one_step(graph, step)
        out[label] = bool(means.count) and means.moved
    sys.path.remove(folder)
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def stepped(tmp_path_factory) -> dict:
    programs = []
    for correct, (twin, _, function) in TWINS.items():
        fixed = tmp_path_factory.mktemp("fixed") / twin
        shutil.copytree(PATTERNS / twin, fixed)
        result = run_cli("fix", "--only", "update-ops", "--no-cache", ".", cwd=fixed)
        assert result.returncode in (0, 1), result.stderr
        programs += [[correct, str(PATTERNS / correct), function],
                     [twin, str(PATTERNS / twin), function],
                     [f"{twin}-fixed", str(fixed), function]]
    return built_by_tf(_ONE_STEP, programs)


@pytest.mark.needs_tf
@pytest.mark.parametrize("correct", sorted(TWINS))
def test_tf_agrees_the_correct_shape_runs_its_updates_and_the_fixed_twin_too(
        correct: str, stepped: dict):
    twin = TWINS[correct][0]
    assert (stepped[correct], stepped[twin], stepped[f"{twin}-fixed"]) == (True, False, True)
