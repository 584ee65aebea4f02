"""variables-to-cpu on towers whose device template is a value (issue 36's held-out-3
misses): a template bound to a name and filled in at the scope (`device_string % i`,
`template.format(i)`, fangzhihan314/Densenet_multi_gpu_tfrecords), and towers over the GPU
names a function of another module returns, where tower 0 creates the weights because
reuse is turned on only `if i > 0` (juho-lee/wideresnet_tensorflow_multi_gpu's shape). The
patterns of fixtures/real_code/patterns/ named below are copied, one copy fixed by
`graphfix fix --in-place` as a user runs it, and both built into TF graphs in one
subprocess (graph mode, TF1 behaviour): where each variable asks to be, before and after.

- device_template_held_in_a_name: found at both tower calls; the fix puts the weights on
  the CPU and keeps the towers' compute on their GPUs;
- cpu_template_held_in_a_name: the template names the CPU: clean, untouched;
- first_tower_creates_after_conditional_reuse: found at tower 0's model call; fixed;
- model_pins_variables_under_conditional_reuse: the model pins its weights: clean.
"""

from __future__ import annotations

import pytest

from conftest import check_copy, tower_devices

NAME = "variables-to-cpu"
SHAPES = ("device_template_held_in_a_name", "cpu_template_held_in_a_name",
          "first_tower_creates_after_conditional_reuse",
          "model_pins_variables_under_conditional_reuse")

# How each copy's towers are built (`conftest.tower_devices`). A CPU-only test host lists
# no GPU: the copies that ask device_lib are given the list a two-GPU host gives (their
# module global).
_DRIVE = '''\
        if hasattr(train, "available_gpus"):
            train.available_gpus = ["/device:GPU:0", "/device:GPU:1"]
            train.n_gpus = 2
            train.towers([x, x])
        else:
            train.towers(x)
            if hasattr(train, "formatted_towers"):
                train.formatted_towers(x)
'''


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return tower_devices(tmp_path_factory, SHAPES, ('train', 'model', 'devices'), _DRIVE)


def _matmul_devices(found: dict) -> list[str]:
    return sorted(device for name, device in found.items() if "MatMul" in name)


def test_a_template_held_in_a_name_is_read_where_it_is_filled_in(built):
    result, folders = built
    before = result["device_template_held_in_a_name:before"]
    after = result["device_template_held_in_a_name:after"]
    # tower 0 made both weights on GPU 0; the later towers read them there
    assert (before["w"], before["formatted/v"]) == ("/device:GPU:0", "/device:GPU:0")
    assert (after["w"], after["formatted/v"]) == ("/device:CPU:0", "/device:CPU:0")
    assert _matmul_devices(after) == _matmul_devices(before) == [
        "/device:GPU:0", "/device:GPU:0", "/device:GPU:1", "/device:GPU:1"]
    found = check_copy(folders["device_template_held_in_a_name:before"], NAME).stdout
    assert "train.py:28:" in found and "tf.device(device_string % i)" in found
    assert "train.py:39:" in found and "tf.device(template.format(i))" in found
    clean = check_copy(folders["device_template_held_in_a_name:after"], NAME)
    assert clean.returncode == 0, clean.stdout


def test_a_template_naming_the_cpu_is_left_alone(built):
    result, folders = built
    before = result["cpu_template_held_in_a_name:before"]
    assert before["w"] == "/device:CPU:0"
    assert result["cpu_template_held_in_a_name:after"] == before
    assert check_copy(folders["cpu_template_held_in_a_name:before"], NAME).returncode == 0


def test_the_first_tower_creates_where_reuse_is_turned_on_only_after_it(built):
    result, folders = built
    before = result["first_tower_creates_after_conditional_reuse:before"]
    after = result["first_tower_creates_after_conditional_reuse:after"]
    assert list(before).count("fc/kernel") == 1 and before["fc/kernel"] == "/device:GPU:0"
    assert after["fc/kernel"] == "/device:CPU:0"
    assert _matmul_devices(after) == _matmul_devices(before) == [
        "/device:GPU:0", "/device:GPU:1"]
    found = check_copy(folders["first_tower_creates_after_conditional_reuse:before"], NAME).stdout
    assert "train.py:24:" in found and "tf.device(available_gpus[i])" in found
    assert found.count("variables-to-cpu") == 1


def test_a_model_that_pins_its_variables_is_left_alone(built):
    result, folders = built
    before = result["model_pins_variables_under_conditional_reuse:before"]
    assert before["fc/kernel"] == "/device:CPU:0"
    assert result["model_pins_variables_under_conditional_reuse:after"] == before
    pinned = check_copy(folders["model_pins_variables_under_conditional_reuse:before"], NAME)
    assert pinned.returncode == 0


_CPU_NAMES = '''\
import tensorflow.compat.v1 as tf
from tensorflow.python.client import device_lib


def cpu_devices():
    local = device_lib.list_local_devices()
    return [d.name for d in local if d.device_type == "CPU" and d.memory_limit > 0]


def towers_without_gpus(x):
    devices = cpu_devices()
    outputs = []
    with tf.variable_scope(tf.get_variable_scope()):
        for i in range(len(devices)):
            with tf.device(devices[i]):
                w = tf.get_variable("w", [4, 2])
                outputs.append(tf.matmul(x, w))
                tf.get_variable_scope().reuse_variables()
    return outputs
'''


def test_local_devices_kept_by_a_cpu_test_joined_with_and_are_no_gpus():
    """device_lib's names filtered with `device_type == "CPU" and` a memory test are CPUs
    only: towers over them hold no variable on a GPU, no finding (read as any local device
    before, a GPU among them)."""
    import graphfix

    assert graphfix.check_source(_CPU_NAMES, path="train.py", only=["variables-to-cpu"]) == []
