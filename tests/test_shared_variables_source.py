"""shared-variables, source surface: fixture pairs, one run over several files, and the
seed's experiment run by TensorFlow before and after the fix.

Each `fixtures/shared_variables/source/<case>/` holds before.py and after.py (identical for
`noop_*` cases), or before/ and after/ folders fixed together as one run (a tower loop in
train.py makes model.py's tf.Variable a finding). A line marked `# expect: error` (plus
`unfixable` when it is reported but not fixed) is where a finding must be.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import graphfix
from graphfix import registry
from graphfix.driver import Selected, run

from conftest import FIXTURES, expected_findings, run_cli

NAME = "shared-variables"
SOURCE = FIXTURES / "shared_variables" / "source"
CASES = sorted(p for p in SOURCE.iterdir()
               if (p / "before.py").is_file() or (p / "before").is_dir())
MESSAGE = "tf.Variable under a reusing variable scope ("


def expected(code: str) -> list[tuple[int, bool]]:
    marks = expected_findings(code)
    assert all(e.severity == "error" for e in marks)
    return [(e.line, e.fixable) for e in marks]


def _check_run(paths: list[str]) -> list[tuple[str, int, bool]]:
    report, _ = run(paths, Selected.build(registry.select([NAME]), {}), fix=False)
    assert not report.failed and not report.skipped
    return sorted((Path(f.path).name, f.line, f.fixable) for f in report.findings)


def _case_single(case: Path) -> None:
    before = (case / "before.py").read_text()
    after = (case / "after.py").read_text()
    fixed, findings = graphfix.fix_source(before, only=[NAME])
    assert fixed == after
    assert [(f.line, f.fixable) for f in findings] == expected(before)
    assert all(f.severity == "error" and f.message.startswith(MESSAGE) for f in findings)
    assert graphfix.check_source(before, only=[NAME]) == findings
    refixed, left = graphfix.fix_source(after, only=[NAME])
    assert refixed == after  # idempotent: get_variable is what reuse shares
    assert [(f.line, f.fixable) for f in left] == [e for e in expected(after) if not e[1]]
    if case.name.startswith("noop_"):
        assert after == before and not expected(before)


def _case_run(case: Path, tmp_path: Path) -> None:
    """The files of before/ fixed together by `python -m graphfix fix DIR`."""
    work = tmp_path / case.name
    shutil.copytree(case / "before", work)
    names = sorted(p.name for p in work.glob("*.py"))
    marked = sorted((name, line, fixable) for name in names
                    for line, fixable in expected((work / name).read_text()))
    assert marked and _check_run([str(work)]) == marked
    # Alone, model.py reuses nothing: the towers that call it are in train.py.
    assert _check_run([str(work / "model.py")]) == []
    result = run_cli("fix", work, "--only", NAME, "--format", "json", check_exit=1)
    report = json.loads(result.stdout)
    assert report["summary"]["files_changed"] == len({n for n, _, fixable in marked if fixable})
    for name in names:
        assert (work / name).read_text() == (case / "after" / name).read_text(), name
    again, outputs = run([str(work)], Selected.build(registry.select([NAME]), {}), fix=True)
    assert outputs == [] and again.changes == []


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_source_case(case: Path, tmp_path: Path):
    if (case / "before").is_dir():
        _case_run(case, tmp_path)
    else:
        _case_single(case)


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
