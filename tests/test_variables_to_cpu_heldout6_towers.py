"""Held-out-6's variables-to-cpu misses whose towers make the shared variables in tower 0
(docs/benchmarks.md, Disagreements), each a pattern, fixtures/real_code/patterns/
heldout6_variables_to_cpu_*, beside a correct twin that pins its variables on the CPU. TF
builds each program (graph mode, TF1 behaviour) and tells which GPUs read each variable: in
each bug shape the variables tower 0 makes sit on GPU 0 and both GPUs read them, graphfix
reports the calls that make them and its fix moves them to the CPU; in each twin no
variable is on a GPU and graphfix reports nothing.

- model_function_auto_reused: a helper given the model function calls it in each tower
  under `reuse=tf.AUTO_REUSE` (PaParaZz1/vehicle-triplet-reid's make_parallel);
- tf_through_a_star_import: a class's tower loop in a module that has `tf` only from
  `from layers import *`, whose discriminator is called twice in a tower
  (taki0112/StyleGAN-Tensorflow).
"""

from __future__ import annotations

import pytest

from conftest import check_copy, pattern_copies_built

NAME = "variables-to-cpu"
PREFIX = "heldout6_variables_to_cpu_"
# Each bug shape -> the variables both GPUs read and the number of calls graphfix reports.
BUGS = {
    "model_function_auto_reused": (["model/weights"], 1),
    "tf_through_a_star_import": (["discriminator/logit/weights", "generator/fc/weights"], 2),
}

# Builds each copy's program with its own code and prints, per variable, where it asks to
# be and the GPUs of the ops reading it (through its `read` identity).
_READERS = r'''
import importlib, json, sys
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()
sys.modules["tensorflow"] = tf


from tf_steps import gpus_reading


out = {}
for label, folder in json.loads(sys.argv[1]).items():
    sys.path.insert(0, folder)
    for cached in ("train", "layers"):
        sys.modules.pop(cached, None)
    train = importlib.import_module("train")
    with tf.Graph().as_default():
        train.build()
        out[label] = {v.op.name: [v.device, gpus_reading(v)] for v in tf.global_variables()}
    sys.path.remove(folder)
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    shapes = [PREFIX + name + suffix for name in BUGS for suffix in ("", "_pinned")]
    return pattern_copies_built(tmp_path_factory, _READERS, shapes, "--only", NAME)


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_tower_0s_variables_are_read_on_both_gpus_graphfix_finds_and_moves_them(built, bug):
    result, folders = built
    shared, calls = BUGS[bug]
    before, after = result[f"{PREFIX}{bug}:before"], result[f"{PREFIX}{bug}:after"]
    assert sorted(before) == shared
    assert all(before[name] == ["/device:GPU:0", [0, 1]] for name in shared), before
    # The towers still read them on their GPUs, from the CPU now.
    assert all(after[name] == ["/device:CPU:0", [0, 1]] for name in shared), after
    checked = check_copy(folders[f"{PREFIX}{bug}:before"], NAME)
    assert checked.stdout.count(f"{NAME}:") == calls, checked.stdout
    assert "a multi-GPU tower" in checked.stdout
    again = check_copy(folders[f"{PREFIX}{bug}:after"], NAME)
    assert again.returncode == 0, again.stdout


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_the_twin_pinned_on_the_cpu_is_left_alone(built, bug):
    result, folders = built
    pinned = result[f"{PREFIX}{bug}_pinned:before"]
    assert pinned and all(device.lower() == "/cpu:0" for device, _ in pinned.values()), pinned
    assert result[f"{PREFIX}{bug}_pinned:after"] == pinned  # nothing rewritten
    checked = check_copy(folders[f"{PREFIX}{bug}_pinned:before"], NAME)
    assert checked.returncode == 0 and NAME not in checked.stdout, checked.stdout
