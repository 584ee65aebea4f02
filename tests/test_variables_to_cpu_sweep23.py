"""Session 23's sweep of public repositories outside the corpus found variables-to-cpu
reporting correct code (fixtures/real_code/sweeps/session23.md, "variables-to-cpu"); each
shape is a pattern, fixtures/real_code/patterns/sweep23_variables_to_cpu_*, beside its bug
twin. TF builds each program (graph mode, TF1 behaviour) and tells which GPUs read each
variable: in the correct shapes no variable on a GPU is read on two GPUs, in each twin one
is, and graphfix reports that one alone; its fix moves it to the CPU.

- one_gpu_chosen_by_a_flag (`tf.device('/gpu:' + str(FLAGS.gpu))`, entered once) beside
  gpu_given_per_tower (the same string built from a tower function's parameter);
- per_tower_data_buffer (a `tf.Variable` made in every pass of the tower loop) beside
  weights_made_by_the_first_tower (one made in the first pass only, read by every tower).
"""

from __future__ import annotations

import pytest

from conftest import check_copy, pattern_copies_built

NAME = "variables-to-cpu"
PREFIX = "sweep23_variables_to_cpu_"
# Each correct shape -> its bug twin and the variable two of the twin's GPUs read.
TWINS = {
    "one_gpu_chosen_by_a_flag": ("gpu_given_per_tower", "model/weights"),
    "per_tower_data_buffer": ("weights_made_by_the_first_tower", "GPU0/weights"),
}

# Builds each copy's program with its own code and prints, per variable, where it asks to
# be and the GPUs of the ops reading it (through its `read` identity).
_READERS = r'''
import importlib, json, sys
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()
sys.modules["tensorflow"] = tf

folders = json.loads(sys.argv[1])
sys.argv = sys.argv[:1]  # (the flag-reading program parses the command line on import)


def next_batch():
    return tf.random.normal([4, 3]), tf.random.normal([4, 2])


from tf_steps import gpus_reading


out = {}
for label, folder in folders.items():
    sys.path.insert(0, folder)
    sys.modules.pop("train", None)
    train = importlib.import_module("train")
    with tf.Graph().as_default():
        if hasattr(train, "run_training"):
            train.run_training()
        elif "data_buffer" in label or "first_tower" in label:
            train.build(next_batch)
        else:
            train.build()
        out[label] = {v.op.name: [v.device, gpus_reading(v)] for v in tf.global_variables()}
    sys.path.remove(folder)
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    shapes = [PREFIX + name for pair in ((c, t) for c, (t, _) in TWINS.items()) for name in pair]
    return pattern_copies_built(tmp_path_factory, _READERS, shapes, "--only", NAME)


@pytest.mark.parametrize("correct", sorted(TWINS))
def test_no_gpu_variable_of_the_correct_shape_is_read_on_two_gpus_and_graphfix_agrees(
        built, correct):
    result, folders = built
    before = result[f"{PREFIX}{correct}:before"]
    assert before, "the program made no variable"
    assert all(len(gpus) <= 1 for device, gpus in before.values() if "GPU" in device), before
    assert result[f"{PREFIX}{correct}:after"] == before  # nothing rewritten
    checked = check_copy(folders[f"{PREFIX}{correct}:before"], NAME)
    assert checked.returncode == 0 and NAME not in checked.stdout, checked.stdout


@pytest.mark.parametrize("correct", sorted(TWINS))
def test_the_twin_shares_one_variable_across_gpus_graphfix_finds_and_moves_it(
        built, correct):
    result, folders = built
    twin, shared = TWINS[correct]
    before, after = result[f"{PREFIX}{twin}:before"], result[f"{PREFIX}{twin}:after"]
    assert [name for name, (device, gpus) in before.items()
            if "GPU" in device and len(gpus) > 1] == [shared]
    assert before[shared] == ["/device:GPU:0", [0, 1]]
    assert after[shared] == ["/device:CPU:0", [0, 1]]  # the towers still read it on their GPUs
    checked = check_copy(folders[f"{PREFIX}{twin}:before"], NAME)
    assert checked.stdout.count(f"{NAME}:") == 1, checked.stdout
    assert "a multi-GPU tower" in checked.stdout
