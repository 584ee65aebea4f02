"""Held-out-6's update-ops misses (session 24), each as a fixture of its shape beside a
correct twin: update ops bound to None unless a flag that is off by default asks for them
(hellochick/PSPNet-tensorflow's `--update-mean-var`: `control_dependencies(None)` waits on
nothing), and a model handed to the train step's function, the class its file imports
batch-normalizing in training mode (hanna-xu/FusionDN's `train_task(model, ...)`).
graphfix reports the bug and not the twin, and TF, stepping each program once, agrees: the
moving mean stays put in the bug, moves in the fixed code and in the twin."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import FIXTURES, built_by_tf, run_cli

SOURCE = FIXTURES / "update_ops" / "source"
FLAG_OFF = SOURCE / "update_ops_none_by_flag_default"
FLAG_ON = SOURCE / "noop_update_ops_none_unless_flag_default_on"
MODEL_GIVEN = SOURCE / "model_given_to_the_train_function"
FROZEN = FIXTURES / "real_code" / "patterns" / "session24_update_ops_model_given_batch_norm_frozen"


def _findings(folder) -> list[str]:
    result = run_cli("check", "--only", "update-ops", "--format", "json", "--no-cache", ".",
                     cwd=folder)
    assert result.returncode in (0, 1), result.stderr
    return [f"{f['path'].removeprefix('./')}:{f['line']}"
            for f in json.loads(result.stdout)["findings"]]


def test_a_model_given_whose_class_trains_a_batch_norm_is_found_and_a_frozen_one_is_not():
    assert _findings(MODEL_GIVEN / "before") == ["train_task.py:15"]
    assert _findings(FROZEN) == []


def test_a_model_given_is_judged_only_when_one_imported_class_fits(tmp_path):
    """The function must read of its parameter only what the imported class binds: one
    that reads an attribute the class does not have is given something else."""
    folder = tmp_path / "copy"
    shutil.copytree(MODEL_GIVEN / "before", folder)
    task = folder / "train_task.py"
    task.write_text(task.read_text().replace("model.restore(sess)", "model.load(sess)"))
    assert _findings(folder) == []


# One step of each program: whether its batch norm's moving mean moved.
_ONE_STEP = r'''
import importlib, json, sys
import numpy as np
import tensorflow as tf
from tf_steps import moving_means_over_one_step

tf.compat.v1.disable_v2_behavior()
out = {}
for label, folder, module in json.loads(sys.argv[1]):
    sys.path.insert(0, folder)
    for cached in ("model", "train_task", "before", "after"):
        sys.modules.pop(cached, None)
    graph = tf.Graph()
    with graph.as_default():
        if module == "train_task":  # the caller the project does not show: build, hand in
            model = importlib.import_module("model")
            images = tf.constant(np.arange(96, dtype=np.float32).reshape(2, 4, 4, 3))
            step = importlib.import_module("train_task").train_task(
                model.Model(images, tf.constant([0, 1])))
        else:
            step = importlib.import_module(module).build()
    means = moving_means_over_one_step(graph, step)
    out[label] = bool(means.count) and means.moved
    sys.path.remove(folder)
print(json.dumps(out))
'''


@pytest.mark.needs_tf
def test_tf_agrees_the_bugs_run_no_update_and_the_fixed_code_and_the_twins_do():
    stepped = built_by_tf(_ONE_STEP, [
        ["flag-off", str(FLAG_OFF), "before"], ["flag-off-fixed", str(FLAG_OFF), "after"],
        ["flag-on", str(FLAG_ON), "before"],
        ["given", str(MODEL_GIVEN / "before"), "train_task"],
        ["given-fixed", str(MODEL_GIVEN / "after"), "train_task"],
    ])
    assert stepped == {"flag-off": False, "flag-off-fixed": True, "flag-on": True,
                       "given": False, "given-fixed": True}


def test_the_finding_says_the_block_it_sits_in_waits_on_nothing():
    import graphfix

    _, findings = graphfix.fix_source((FLAG_OFF / "before.py").read_text(),
                                      only=["update-ops"])
    assert [f.line for f in findings] == [35, 36]
    assert all("control_dependencies(update_ops) (line 31) waits on nothing: update_ops is "
               "None with the script's flag defaults" in f.message for f in findings)
