"""variables-to-cpu on model builders the towers reach in ways learned from the corpus's
misses (issue 36, session 22), fixed and built: each pattern of fixtures/real_code/patterns/
named below is copied twice, one copy fixed by `graphfix fix --in-place` as a user runs it,
and both are built into TF graphs in one subprocess (TF imported once, graph mode). What a
user sees: where each variable asks to be before and after the fix, the twin that places
them itself untouched, and the fixed copy checking clean.

- slim_net_built_in_gpu_towers: a tower function building tf-slim's resnet_v1_50 (a model
  function of slim's nets, a variable maker as a layer is);
"""

from __future__ import annotations

import pytest

from conftest import built_by_tf, pattern_copies, run_cli

SHAPES = ("slim_net_built_in_gpu_towers",)

# Builds each copy's graphs with the fixture's own code and prints
# {copy: {graph: {device: how many variables}}} as JSON.
_BUILD = r'''
import collections, importlib, json, sys
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()

def devices():
    return dict(collections.Counter(v.device for v in tf.global_variables()))

out = {}
for label, folder in json.loads(sys.argv[1]).items():
    shape = label.split(":")[0]
    sys.path.insert(0, folder)
    graphs = {}
    if shape == "slim_net_built_in_gpu_towers":
        for module, function in (("train", "train"), ("net_pinned", "pinned_train")):
            sys.modules.pop(module, None)
            with tf.Graph().as_default():
                images = [tf.zeros([2, 32, 32, 3])] * 2
                labels = [tf.zeros([2], tf.int64)] * 2
                getattr(importlib.import_module(module), function)(images, labels)
                graphs[module] = devices()
    sys.path.remove(folder)
    out[label] = graphs
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folders = pattern_copies(tmp_path_factory, SHAPES, "--only", "variables-to-cpu")
    return built_by_tf(_BUILD, folders), folders


def _checks_clean(folder: str) -> None:
    again = run_cli("check", "--no-cache", "--only", "variables-to-cpu", ".", cwd=folder)
    assert again.returncode == 0, again.stdout


def test_a_slim_net_built_in_gpu_towers_has_its_variables_moved(built):
    result, folders = built
    before = result["slim_net_built_in_gpu_towers:before"]
    after = result["slim_net_built_in_gpu_towers:after"]
    # Tower 0's resnet_v1_50 made all 108 weights and biases on GPU 0; tower 1 reused them.
    assert before["train"] == {"/device:GPU:0": 108}
    assert after["train"] == {"/device:CPU:0": 108}
    # The twin places them with slim's arg_scope(device=...): on the CPU, and not rewritten.
    assert before["net_pinned"] == after["net_pinned"] == {"/device:CPU:0": 108}
    with open(folders["slim_net_built_in_gpu_towers:before"] + "/net_pinned.py") as original, \
            open(folders["slim_net_built_in_gpu_towers:after"] + "/net_pinned.py") as fixed:
        assert fixed.read() == original.read()
    _checks_clean(folders["slim_net_built_in_gpu_towers:after"])
