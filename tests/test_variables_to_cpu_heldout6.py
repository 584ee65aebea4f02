"""variables-to-cpu on held-out-6's misses and wrong finding (issue 36), built by TF: each
source fixture named below is built with its own code (graph mode, TF1 behaviour) as it is
and as graphfix fixed it, in one subprocess, and what a user sees is where each variable
asks to be.

- slim_arg_scope_on_variable_only (yeekit24/CapsNet-Tensorflow): towers under
  `slim.arg_scope([slim.variable], device='/cpu:0')`; slim's layers make their weights
  through slim.model_variable, which passes its own device to slim.variable, so the weights
  stay on GPU 0 until the fix; its twin names slim.model_variable too and is left alone.
- noop_branch_the_towers_argument_skips (binLearning/tensorflow_mnist): a weight helper
  whose `tf.Variable` arm only the single-device path takes; the towers pass
  multi_gpu=True down to it and get its CPU arm: no finding, nothing rewritten. Its twin
  (branch_the_towers_argument_takes) leaves the default, takes the tf.Variable arm on each
  tower's GPU, and is fixed; noop_branch_a_method_argument_skips passes the truth down
  through methods (`net.build(x, shared=True)`, then `self.weight('w', [4, 2], shared)`).
"""

from __future__ import annotations

import pytest

import graphfix
from conftest import FIXTURES, built_by_tf

CASES = FIXTURES / "variables_to_cpu" / "source"

# Builds each module's `build()` and prints {label: {variable: device}} as JSON.
_BUILD = r'''
import importlib.util, json, sys
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()

out = {}
for label, path in json.loads(sys.argv[1]).items():
    spec = importlib.util.spec_from_file_location(label.replace(":", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with tf.Graph().as_default():
        module.build()
        out[label] = {v.op.name: v.device for v in tf.global_variables()}
print(json.dumps(out))
'''

FILES = {
    "arg_scope_on_variable:before": "slim_arg_scope_on_variable_only/before.py",
    "arg_scope_on_variable:after": "slim_arg_scope_on_variable_only/after.py",
    "arg_scope_on_model_variable": "noop_slim_arg_scope_on_model_variable/before.py",
    "arm_skipped": "noop_branch_the_towers_argument_skips/before.py",
    "arm_taken:before": "branch_the_towers_argument_takes/before.py",
    "arm_taken:after": "branch_the_towers_argument_takes/after.py",
    "method_arm_skipped": "noop_branch_a_method_argument_skips/before.py",
}


@pytest.fixture(scope="module")
def built():
    return built_by_tf(_BUILD, {label: str(CASES / path) for label, path in FILES.items()})


def test_slim_weights_under_an_arg_scope_naming_slim_variable_only_are_moved(built):
    before, after = built["arg_scope_on_variable:before"], built["arg_scope_on_variable:after"]
    weights = {name for name in before if name != "model/step"}
    assert weights == {"model/conv1/weights", "model/conv1/biases", "model/logits/weights",
                       "model/logits/biases", "model/scores/weights", "model/scores/biases"}
    # The arg_scope places what slim.variable makes itself, not what the layers make.
    assert before["model/step"] == "/device:CPU:0"
    assert {before[name] for name in weights} == {"/device:GPU:0"}
    assert after == {name: "/device:CPU:0" for name in before}
    code = (CASES / "slim_arg_scope_on_variable_only" / "before.py").read_text()
    fixed, findings = graphfix.fix_source(code, only=["variables-to-cpu"])
    assert [f.line for f in findings] == [20, 22]  # tower(images), slim.fully_connected
    assert fixed == (CASES / "slim_arg_scope_on_variable_only" / "after.py").read_text()


def test_an_arg_scope_naming_slim_model_variable_places_every_weight(built):
    devices = built["arg_scope_on_model_variable"]
    assert len(devices) == 7 and set(devices.values()) == {"/device:CPU:0"}


@pytest.mark.parametrize("label, case", [
    ("arm_skipped", "noop_branch_the_towers_argument_skips"),
    ("method_arm_skipped", "noop_branch_a_method_argument_skips")])
def test_a_variable_in_an_arm_the_towers_argument_skips_is_no_finding(built, label, case):
    # The towers' argument takes the helper's get_variable arm, pinned on the CPU.
    assert built[label] == {"w": "/device:CPU:0"}
    code = (CASES / case / "before.py").read_text()
    assert graphfix.check_source(code, only=["variables-to-cpu"]) == []


def test_a_variable_in_the_arm_the_towers_take_is_moved(built):
    # The default multi_gpu=False: every tower makes its own tf.Variable on its GPU.
    assert built["arm_taken:before"] == {"w": "/device:GPU:0", "w_1": "/device:GPU:1"}
    assert built["arm_taken:after"] == {"w": "/device:CPU:0", "w_1": "/device:CPU:0"}
