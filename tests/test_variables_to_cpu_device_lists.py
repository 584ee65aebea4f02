"""variables-to-cpu on towers whose devices come from a list (issue 36's held-out miss in
mozilla/DeepSpeech): `tf.device(available_devices[i])` over the local GPUs' names or a list
a function returns, and a variable helper whose `tf.device(worker_device)` names only the
job and task, which TF merges into the tower's GPU. The patterns of
fixtures/real_code/patterns/ named below are copied, one copy fixed by `graphfix fix
--in-place` as a user runs it, and both built into TF graphs in one subprocess (graph mode,
TF1 behaviour): where each variable asks to be, before and after the fix.

- worker_level_helper_in_local_gpu_towers: found; the fix moves the helper's variables to
  the CPU and keeps the tower's compute on its GPU;
- worker_level_helper_names_the_cpu: the helper's scope names the worker's CPU: clean;
- gpu_list_from_a_function: a plain variable in the tower is found, a `/cpu:0` helper's is
  not (pinned);
- tower_devices_listed_as_cpus: a list of CPUs is no GPU: clean.
"""

from __future__ import annotations

import pytest

import graphfix

from conftest import check_copy, tower_devices

NAME = "variables-to-cpu"
SHAPES = ("worker_level_helper_in_local_gpu_towers", "worker_level_helper_names_the_cpu",
          "gpu_list_from_a_function", "tower_devices_listed_as_cpus")

# How each copy's towers are built (`conftest.tower_devices`). A CPU-only test host lists
# no GPU, so the DeepSpeech-shaped copies are given the device list a two-GPU host gives
# (their own global, set as `initialize_globals` would set it there).
_DRIVE = '''\
        if shape.startswith("worker_level_helper"):
            train.initialize_globals()
            train.available_devices = [train.worker_device + "/device:GPU:%d" % i
                                       for i in range(2)]
            train.tower_losses(x)
        else:
            train.towers(x)
'''


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return tower_devices(tmp_path_factory, SHAPES, ('train', 'util', 'util.devices'), _DRIVE)


def test_a_worker_level_helper_in_gpu_towers_has_its_variables_moved(built):
    result, folders = built
    before = result["worker_level_helper_in_local_gpu_towers:before"]
    after = result["worker_level_helper_in_local_gpu_towers:after"]
    # '/job:localhost/task:0' merged into the tower's GPU: both weights on tower 0's GPU.
    assert {before["w"], before["b"]} == {"/job:localhost/task:0/device:GPU:0"}
    assert {after["w"], after["b"]} == {"/job:localhost/task:0/device:CPU:0"}
    # The towers' compute stays on their GPUs.
    matmuls = sorted(d for name, d in after.items() if "MatMul" in name)
    assert matmuls == [f"/job:localhost/task:0/device:GPU:{i}" for i in range(2)]
    assert "names no device type" in check_copy(
        folders["worker_level_helper_in_local_gpu_towers:before"], NAME).stdout
    clean = check_copy(folders["worker_level_helper_in_local_gpu_towers:after"], NAME)
    assert clean.returncode == 0, clean.stdout


def test_a_worker_level_helper_that_names_the_cpu_is_left_alone(built):
    result, folders = built
    before = result["worker_level_helper_names_the_cpu:before"]
    assert {before["w"], before["b"]} == {"/job:localhost/task:0/device:CPU:0"}
    assert result["worker_level_helper_names_the_cpu:after"] == before
    assert check_copy(folders["worker_level_helper_names_the_cpu:before"], NAME).returncode == 0


def test_a_gpu_list_a_function_returns_finds_the_plain_variable_only(built):
    result, folders = built
    before = result["gpu_list_from_a_function:before"]
    after = result["gpu_list_from_a_function:after"]
    assert before["w"] == "/device:CPU:0"  # the helper pins it
    assert before["scale"] == "/device:GPU:0"
    assert after["scale"] == "/device:CPU:0" and after["w"] == "/device:CPU:0"
    found = check_copy(folders["gpu_list_from_a_function:before"], NAME).stdout
    assert "train.py:32:" in found and "tf.get_variable creates a variable" in found
    assert found.count("variables-to-cpu") == 1


def test_towers_over_a_list_of_cpus_are_left_alone(built):
    result, folders = built
    before = result["tower_devices_listed_as_cpus:before"]
    assert {before["w_0"], before["w_1"]} == {"/device:CPU:0", "/device:CPU:1"}
    assert result["tower_devices_listed_as_cpus:after"] == before
    assert check_copy(folders["tower_devices_listed_as_cpus:before"], NAME).returncode == 0


_BRANCHES = '''\
import tensorflow.compat.v1 as tf

USE_GPU = True


def model(x):
    device = "/gpu:0" if USE_GPU else "/cpu:0"
    with tf.device(device):
        w = tf.get_variable("w", [4, 2])
        return tf.matmul(x, w)


def counter(on_gpu):
    if on_gpu:
        device = "/gpu:0"
    else:
        device = "/cpu:0"
    with tf.device(device):
        return tf.Variable(0, name="step")
'''


def test_a_device_chosen_by_a_branch_is_one_gpu_not_towers():
    """A name bound to a GPU in one branch and the CPU in the other is read as either: a
    single-GPU model's float weight stays (no towers share it), while the int32 counter is
    TF's own error on the GPU branch."""
    findings = graphfix.check_source(_BRANCHES, path="model.py", only=["variables-to-cpu"])
    step = _BRANCHES.splitlines().index('        return tf.Variable(0, name="step")') + 1
    assert [(f.line, f.severity) for f in findings] == [(step, "error")]
    assert "no supported kernel for GPU devices" in findings[0].message
