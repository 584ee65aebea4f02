"""shared-variables, source surface: what its findings say, what reuses, and the seed's
experiment run by TensorFlow before and after the fix.

Its fixture cases, `fixtures/shared_variables/source/<case>/`, are run by
tests/test_source_fixtures.py (multi_file: a tower loop in train.py makes model.py's
tf.Variable a finding).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import graphfix

from conftest import FIXTURES, fixture_findings

NAME = "shared-variables"
SOURCE = FIXTURES / "shared_variables" / "source"
MESSAGE = "tf.Variable under a reusing variable scope ("


def test_every_fixture_finding_names_the_reusing_scope():
    for case, _, findings in fixture_findings("shared_variables"):
        assert all(f.message.startswith(MESSAGE) for f in findings), case.name


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
    """Which scopes the project model says reuse (`FileView.reusing_regions`)."""
    code = f"import tensorflow as tf\n\n\ndef f(i):\n    {scope}\n        w = tf.Variable(1.0)\n"
    findings = graphfix.check_source(code, only=[NAME])
    assert [f.line for f in findings] == ([6] if reuses else [])


def test_strict_reuse_is_reported_not_fixed():
    """Under reuse=True, or after reuse_variables() in the first pass, get_variable finds
    only what was made before: a tf.Variable made nowhere before cannot become one."""
    code = ("import tensorflow.compat.v1 as tf\n"
            "with tf.variable_scope('s', reuse=True):\n"
            "    b = tf.Variable([0.5], name='bias')\n"
            "with tf.variable_scope('t') as scope:\n"
            "    w = tf.Variable(1.0)\n"
            "    scope.reuse_variables()\n"
            "    u = tf.Variable(2.0)\n")
    fixed, findings = graphfix.fix_source(code, only=[NAME])
    assert [(f.line, f.fixable) for f in findings] == [(3, False), (7, False)]
    assert all("get_variable would find no variable to reuse" in f.message for f in findings)
    assert fixed == code


def test_spellings_follow_the_file():
    """The fix reaches compat.v1 as the file does; a name= given is kept as written."""
    for header, spelled in [("import tensorflow as tf\n", "tf.compat.v1.get_variable"),
                            ("import tensorflow.compat.v1 as tf\n", "tf.get_variable"),
                            ("from tensorflow.compat import v1 as tf1\n", "tf1.get_variable")]:
        alias = spelled.split(".")[0]
        code = (header + f"with {alias}.variable_scope('s', reuse={alias}.AUTO_REUSE):\n"
                f"    k = {alias}.Variable({alias}.zeros([2]), name=prefix + '_k')\n")
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
