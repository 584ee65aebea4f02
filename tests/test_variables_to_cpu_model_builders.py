"""variables-to-cpu on model builders the towers reach in ways learned from the corpus's
misses (issue 36, session 22), fixed and built: each pattern of fixtures/real_code/patterns/
named below is copied twice, one copy fixed by `graphfix fix --in-place` as a user runs it,
and both are built into TF graphs in one subprocess (TF imported once, graph mode). What a
user sees: where each variable asks to be before and after the fix, the twin that places
them itself untouched, and the fixed copy checking clean.

- slim_net_built_in_gpu_towers: a tower function building tf-slim's resnet_v1_50 (a model
  function of slim's nets, a variable maker as a layer is);
- model_functions_unpacked_from_a_factory: `Generator, Discriminator = factory()`, called in
  towers whose device a loop over `enumerate(zip(DEVICES, inputs))` gives, their variables
  made at the first request of each name (a cache): found at the first calls only.

variable_helper_in_a_python2_module (a helper module Python 3 cannot import) is checked by
tests/test_real_code.py's run over the patterns, and here by how the project model reads it.
"""

from __future__ import annotations

import pytest

from conftest import check_copy, FIXTURES, pattern_copies_built
from graphfix.source.project import Project, part_of_code

NAME = "variables-to-cpu"
PATTERNS = FIXTURES / "real_code" / "patterns"

SHAPES = ("slim_net_built_in_gpu_towers", "model_functions_unpacked_from_a_factory")

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
    else:  # (the scripts build their graphs at import; each asks the cache afresh)
        for module in ("train", "train_initialized_on_cpu"):
            for cached in (module, "paramlib", "paramlib.linear"):
                sys.modules.pop(cached, None)
            with tf.Graph().as_default():
                importlib.import_module(module)
                graphs[module] = devices()
    sys.path.remove(folder)
    out[label] = graphs
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return pattern_copies_built(tmp_path_factory, _BUILD, SHAPES, "--only", NAME)


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
    again = check_copy(folders["slim_net_built_in_gpu_towers:after"], NAME)
    assert again.returncode == 0, again.stdout


def test_model_functions_from_a_factory_have_their_first_calls_moved(built):
    result, folders = built
    before = result["model_functions_unpacked_from_a_factory:before"]
    after = result["model_functions_unpacked_from_a_factory:after"]
    # Tower 0's first Generator and Discriminator calls made the four variables on GPU 0;
    # the second Discriminator call and tower 1 were given them back (no other variable).
    assert before["train"] == {"/device:GPU:0": 4}
    assert after["train"] == {"/device:CPU:0": 4}
    # The twin makes them on the CPU before the towers: there, and not rewritten.
    assert before["train_initialized_on_cpu"] == {"/device:CPU:0": 4}
    assert after["train_initialized_on_cpu"] == before["train_initialized_on_cpu"]
    folder = folders["model_functions_unpacked_from_a_factory:after"]
    with open(folder + "/train.py") as fixed:
        lines = fixed.read().splitlines()
    wrapped = [n for n, text in enumerate(lines) if "op.type in" in text]
    # One block: the two first calls; the second Discriminator call is left as it was.
    assert len(wrapped) == 1
    assert [text.strip() for text in lines[wrapped[0] + 1:wrapped[0] + 4]] == [
        "fake = Generator(4)", "disc_real = Discriminator(real)",
        "disc_fake = Discriminator(fake)"]
    again = check_copy(folder, NAME)
    assert again.returncode == 0, again.stdout


def test_a_python2_helper_module_is_read_for_what_it_defines():
    """Python 3 cannot parse helpers.py (its print statements); the project model reads it
    with them as `pass`, lines kept, so the variable its `weight` makes is seen at its line.
    A module broken otherwise stays unread."""
    folder = PATTERNS / "variable_helper_in_a_python2_module"
    code = (folder / "helpers.py").read_text()
    with pytest.raises(SyntaxError):
        compile(code, "helpers.py", "exec")
    part = part_of_code(code)
    assert part["units"]["weight"]["variables"] == [["get_variable", 7, None, False]]
    assert part_of_code(code.replace("def weight(name, shape):", "def weight(name, shape)")) is None
    files = {name: (folder / name).read_text() for name in ("train.py", "helpers.py")}
    project = Project({name: part_of_code(text) for name, text in files.items()}, files.get)
    assert project.view("train.py").variables_created_by("model", line=19) == (
        "helpers.py", "get_variable", 7, None)
