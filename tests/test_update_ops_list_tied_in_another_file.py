"""A variable manager appends the apply op (or a read that waits on it) to the list its
caller passes in, and the caller, in another file, groups that list with the update ops
(early tf_cnn_benchmarks: variable_mgr.py and tf_cnn_benchmarks.py, e-bug/
distributed-tensorflow-benchmarks). graphfix follows the list to the caller's group in the
other file: no finding there; where the caller groups the list alone both apply ops are
found, and fixed. TF, stepping each program once with each manager, agrees."""

from __future__ import annotations

import shutil

import pytest

from conftest import FIXTURES, built_by_tf, run_cli

PATTERNS = FIXTURES / "real_code" / "patterns"
CORRECT = PATTERNS / "update_ops_apply_op_appended_for_a_caller_in_another_file"
TWIN = PATTERNS / "update_ops_apply_op_appended_for_a_caller_in_another_file_grouped_alone"


def _lines(folder) -> list[str]:
    result = run_cli("check", "--only", "update-ops", "--no-cache", ".", cwd=folder)
    assert result.returncode in (0, 1), result.stderr
    return [line.split(": ")[0].rsplit(":", 1)[0] for line in result.stdout.splitlines()
            if ": error: update-ops:" in line]


def test_a_list_grouped_with_the_update_ops_by_a_caller_in_another_file_is_clean():
    assert _lines(CORRECT) == []


def test_the_same_list_grouped_alone_is_found_at_both_managers():
    assert _lines(TWIN) == ["variable_mgr.py:9", "variable_mgr.py:16"]


# One step of each program with each manager: how many update ops the graph collected and
# whether the moving mean moved.
_ONE_STEP = r'''
import importlib, json, sys
import tensorflow as tf
from tf_steps import moving_means_over_one_step

tf.compat.v1.disable_v2_behavior()
sys.modules["tensorflow"] = tf.compat.v1
out = {}
for label, folder in json.loads(sys.argv[1]):
    sys.path.insert(0, folder)
    for cached in ("train", "variable_mgr"):
        sys.modules.pop(cached, None)
    train = importlib.import_module("train")
    for replicated in (False, True):
        graph = tf.Graph()
        with graph.as_default():
            step = train.main(replicated)
        means = moving_means_over_one_step(graph, step)
        out[f"{label}:{replicated}"] = [means.update_ops, means.moved]
    sys.path.remove(folder)
print(json.dumps(out))
'''


@pytest.mark.needs_tf
def test_tf_agrees_the_caller_s_group_runs_the_updates_and_the_fixed_twin_too(tmp_path):
    fixed = tmp_path / "fixed"
    shutil.copytree(TWIN, fixed)
    result = run_cli("fix", "--only", "update-ops", "--no-cache", ".", cwd=fixed)
    assert result.returncode in (0, 1), result.stderr
    stepped = built_by_tf(_ONE_STEP, [["correct", str(CORRECT)], ["twin", str(TWIN)],
                                      ["fixed", str(fixed)]])
    for replicated in (False, True):
        assert stepped[f"correct:{replicated}"] == [2, True]
        assert stepped[f"twin:{replicated}"] == [2, False]
        assert stepped[f"fixed:{replicated}"] == [2, True]
