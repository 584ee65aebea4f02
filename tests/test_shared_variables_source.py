"""shared-variables, source surface: what its findings say, what reuses, and the seed's
experiment run by TensorFlow before and after the fix.

Its fixture cases, `fixtures/shared_variables/source/<case>/`, are run by
tests/test_source_fixtures.py (multi_file: a tower loop in train.py makes model.py's
tf.Variable a finding).
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest

import graphfix

from conftest import FIXTURES, fixture_findings, run_cli

NAME = "shared-variables"
SOURCE = FIXTURES / "shared_variables" / "source"
MESSAGE = "tf.Variable under a reusing variable scope ("
MODULE = re.compile(r"^snt\.\w+\(\.\.\.\) is constructed anew in ")


def test_every_fixture_finding_names_the_reusing_scope():
    """A `tf.Variable` finding names the reusing scope; a library module's (Sonnet), the
    tower code that constructs it anew."""
    for case, _, findings in fixture_findings("shared_variables"):
        assert all(f.message.startswith(MESSAGE) or MODULE.search(f.message)
                   for f in findings), case.name


def test_sonnet_module_constructed_per_tower_is_reported():
    """A Sonnet module constructed in the function each tower calls, or in the tower loop,
    is a new module per tower (its own variable scope): reported where it is constructed,
    not fixed; those its build function constructs, and a module built once before the
    towers and called in each, are not."""
    code = (SOURCE / "sonnet_module_per_tower" / "before.py").read_text()
    fixed, findings = graphfix.fix_source(code, only=[NAME])
    assert fixed == code
    assert [(f.line, f.fixable) for f in findings] == [(24, False), (35, False)]
    assert findings[0].message.startswith(
        "snt.Module(...) is constructed anew in tower_loss, which each tower calls: each "
        "module instance gets a variable scope of its own, so each tower trains its own "
        "weights")
    assert findings[1].message.startswith("snt.Linear(...) is constructed anew in the tower loop")
    assert "construct the module once, before the towers" in findings[1].message
    once = (SOURCE / "noop_sonnet_module_built_once" / "before.py").read_text()
    assert graphfix.check_source(once, only=[NAME]) == []
    without_reuse = code.replace("snt.Module(custom_build, name='simple_net')",
                                 "build_once(custom_build)")
    assert [f.line for f in graphfix.check_source(without_reuse, only=[NAME])] == [35]


def test_alone_the_model_reuses_nothing():
    """The multi_file case (run with its train.py by tests/test_source_fixtures.py): alone,
    model.py reuses nothing: the towers that call it are in train.py."""
    model = (SOURCE / "multi_file" / "before" / "model.py").read_text()
    assert graphfix.check_source(model, only=[NAME]) == []


@pytest.mark.parametrize("scope, reuses", [
    ("with tf.variable_scope('s', reuse=True):", True),
    ("with tf.variable_scope('s', reuse=tf.AUTO_REUSE):", True),
    ("with tf.compat.v1.variable_scope('s', reuse=tf.compat.v1.AUTO_REUSE):", True),
    ("with tf.variable_scope('s', reuse=i > 0):", True),
    ("with tf.variable_scope('s', reuse=False):", False),
    ("with tf.variable_scope('s', reuse=None):", False),
    ("with tf.variable_scope('s'):", False),
    ("with tf.name_scope('s'):", False),
])
def test_what_reuses(scope: str, reuses: bool):
    """Which scopes the project model says reuse (`FileView.reusing_regions`), in a tower
    function given its GPU; in a function with no towers, none is a finding."""
    tower = ("import tensorflow as tf\n\n\ndef f(i):\n    with tf.device('/gpu:%d' % i):\n"
             f"        {scope}\n            w = tf.Variable(1.0)\n")
    assert [f.line for f in graphfix.check_source(tower, only=[NAME])] == (
        [7] if reuses else [])
    alone = f"import tensorflow as tf\n\n\ndef f(i):\n    {scope}\n        w = tf.Variable(1.0)\n"
    assert graphfix.check_source(alone, only=[NAME]) == []


@pytest.mark.parametrize("towers, found", [
    # a loop whose passes each enter a device chosen at run time
    ("for i in range(n):\n    with tf.device('/gpu:%d' % i):\n        W", True),
    ("for device in devices:\n    with tf.device(device):\n        W", True),
    ("for i in range(n):\n    with tf.device(assign_to_device('/gpu:{}'.format(i), '/cpu:0')):"
     "\n        W", True),
    # seed 003: replicas in name scopes, the next pass reusing
    ("for i in range(n):\n    with tf.name_scope('my_%d' % i):\n        W\n"
     "        tf.get_variable_scope().reuse_variables()", True),
    # a tower function given its GPU; towers written out on two GPUs
    ("def tower(gpu):\n    with tf.device(gpu):\n        W", True),
    ("with tf.device('/gpu:0'):\n    W\nwith tf.device('/gpu:1'):\n    W", True),
    # no towers: one fixed GPU, a replica setter, a loop of layers reading tied weights
    ("with tf.device('/gpu:0'):\n    W", False),
    ("with tf.device(tf.train.replica_device_setter(ps_tasks=2)):\n    W", False),
    ("with tf.device(tf.train.replica_device_setter(\n"
     "        worker_device='/job:worker/task:%d' % n)):\n    W", False),
    ("for layer in layers:\n    with tf.variable_scope(layer, reuse=True):\n        W", False),
])
def test_what_builds_towers(towers: str, found: bool):
    """Which code runs once per tower (`FileView.tower_code`): a tf.Variable of a reusing
    scope there is a copy per tower; elsewhere it is made as often as the code runs."""
    body = "".join(f"        {line}\n" for line in towers.splitlines())
    code = ("import tensorflow.compat.v1 as tf\n\n\ndef build(n, devices, layers):\n"
            "    with tf.variable_scope('m', reuse=tf.AUTO_REUSE):\n"
            + body.replace("W\n", "w = tf.Variable(tf.zeros([2]), name='w')\n"))
    findings = graphfix.check_source(code, only=[NAME])
    assert bool(findings) == found, code


def test_tied_weights_need_towers_to_be_copies(tf, tmp_path):
    """A tied-weights autoencoder (noop_tied_weights: the decoder's `reuse=True` reads the
    encoder's kernel back, a tf.Variable makes the decoder's own bias) is built once: TF
    builds and trains it as written, and it is no finding. The same decoder built once per
    GPU by a tower loop in another file makes its bias once per tower: found, in the
    layer's file."""
    (tmp_path / "layers.py").write_text((SOURCE / "noop_tied_weights" / "before.py").read_text())
    layers = _load(tmp_path / "layers.py", "tied_layers")
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [2, 8, 8, 3])
        train = layers.build(images)
        biases = [v.name for v in tf.compat.v1.trainable_variables() if "k_" not in v.name]
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(train, {images: np.ones([2, 8, 8, 3], np.float32)})
    assert len(biases) == 4  # each layer's encoder bias and decoder bias, as meant
    assert _found(tmp_path) == []
    (tmp_path / "towers.py").write_text(
        "import tensorflow.compat.v1 as tf\n\nfrom layers import TiedConv\n\n\n"
        "def towers(images, num_gpus):\n"
        "    layer = TiedConv('c1', 3, 8)\n"
        "    code = layer.encode(images)\n"
        "    outputs = []\n"
        "    for i in range(num_gpus):\n"
        "        with tf.device('/gpu:%d' % i):\n"
        "            outputs.append(layer.decode(code))\n"
        "    return outputs\n")
    assert _found(tmp_path) == [("layers.py", 28)]


def _found(folder: Path) -> list[tuple[str, int]]:
    """(file, line) of each shared-variables finding of `graphfix check` over a folder."""
    done = run_cli("check", "--select", NAME, "--format", "json", "--no-cache", str(folder))
    return sorted((Path(f["path"]).name, f["line"]) for f in json.loads(done.stdout)["findings"])


def test_strict_reuse_is_reported_not_fixed():
    """Under reuse=True, or after reuse_variables() in the first pass, get_variable finds
    only what was made before: a tf.Variable made nowhere before cannot become one."""
    code = ("import tensorflow.compat.v1 as tf\n"
            "for gpu in range(2):\n"
            "    with tf.device('/gpu:%d' % gpu):\n"
            "        with tf.variable_scope('s', reuse=True):\n"
            "            b = tf.Variable([0.5], name='bias')\n"
            "        with tf.variable_scope('t') as scope:\n"
            "            scope.reuse_variables()\n"
            "            u = tf.Variable(2.0)\n")
    fixed, findings = graphfix.fix_source(code, only=[NAME])
    assert [(f.line, f.fixable) for f in findings] == [(5, False), (8, False)]
    assert all("get_variable would find no variable to reuse" in f.message for f in findings)
    assert fixed == code


def test_spellings_follow_the_file():
    """The fix reaches compat.v1 as the file does; a name= given is kept as written."""
    for header, spelled in [("import tensorflow as tf\n", "tf.compat.v1.get_variable"),
                            ("import tensorflow.compat.v1 as tf\n", "tf.get_variable"),
                            ("from tensorflow.compat import v1 as tf1\n", "tf1.get_variable")]:
        alias = spelled.split(".")[0]
        code = (header + f"for gpu in range(2):\n    with {alias}.device(devices[gpu]), "
                f"{alias}.variable_scope('s', reuse={alias}.AUTO_REUSE):\n"
                f"        k = {alias}.Variable({alias}.zeros([2]), name=prefix + '_k')\n")
        fixed, findings = graphfix.fix_source(code, only=[NAME])
        assert len(findings) == 1 and findings[0].fixable, header
        assert f"k = {spelled}(prefix + '_k', initializer={alias}.zeros([2]))" in fixed, fixed


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_seed003_experiment_shares_after_the_fix(tf):
    """The seed's experiment, run by TF: three tf.Variable made in three name scopes of a
    reusing variable scope are three variables (a value given to the first is not the
    others'); after the fix, one variable: three equal values."""
    case = SOURCE / "seed003_experiment"
    a, b = _load(case / "before.py", "seed003_before").experiment()
    np.testing.assert_allclose(a[0], [0.1] * 3)
    assert not np.allclose(a[1], a[0]) and not np.allclose(a[2], a[0])
    a, b = _load(case / "after.py", "seed003_after").experiment()
    np.testing.assert_allclose(a, [[0.1] * 3] * 3)
    np.testing.assert_allclose(b, [[0.2] * 3] * 3)


def test_a_method_nothing_calls_makes_nothing_in_the_towers(tf):
    """Two towers build the model object (noop_method_nothing_calls): TF makes one shared
    weight and no global step, since nothing calls the method that would make it; no
    finding. Its twin (method_called_by_build), whose `build` calls the method, makes one
    `scale` per tower as written and one shared after the fix: found and fixed."""
    def build(path: Path, name: str) -> list[str]:
        module = _load(path, name)
        with tf.Graph().as_default():
            batches = [tf.compat.v1.placeholder(tf.float32, [2, 4]) for _ in range(2)]
            module.towers(batches)
            return sorted(v.op.name for v in tf.compat.v1.global_variables())

    noop, twin = SOURCE / "noop_method_nothing_calls", SOURCE / "method_called_by_build"
    assert build(noop / "before.py", "uncalled_method") == ["w"]
    assert graphfix.check_source((noop / "before.py").read_text(), only=[NAME]) == []
    assert build(twin / "before.py", "called_method") == ["tower_0/scale", "tower_1/scale", "w"]
    assert build(twin / "after.py", "called_method_fixed") == ["scale", "w"]
    assert [f.line for f in graphfix.check_source((twin / "before.py").read_text(),
                                                  only=[NAME])] == [14]
