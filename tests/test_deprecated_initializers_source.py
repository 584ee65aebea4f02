"""deprecated-initializers (source only): what its findings say, seed 000's script fixed at
its lines, and the renamed code run by TensorFlow: what it prints is unchanged, the
deprecation warnings TF logs for the old names are gone.

Its fixture cases, `fixtures/deprecated_initializers/source/<case>/`, are run by
tests/test_source_fixtures.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import graphfix
from graphfix import registry

from conftest import FIXTURES, fixture_findings, run_cli

NAME = "deprecated-initializers"
SOURCE = FIXTURES / "deprecated_initializers" / "source"
SEED000 = FIXTURES / "trace" / "seed000.py"


def test_every_fixture_finding_names_the_new_name():
    for case, _, findings in fixture_findings("deprecated_initializers"):
        assert all(" is deprecated: use " in f.message for f in findings), case.name


def test_source_only_transform():
    transform = registry.get_transform(NAME)
    assert transform.surfaces() == ["source"]
    # seed 000's graph, built by tf.initialize_all_variables(): it holds the ops the old name
    # built, not the name, so there is nothing to find there (other transforms find its bug)
    graph = FIXTURES / "variables_to_cpu" / "seed000_ref" / "before.pbtxt"
    assert graphfix.check_graph(str(graph), only=[NAME]) == []
    assert graphfix.check_graph(str(graph), only=["variables-to-cpu"])


def test_seed000_script_is_fixed_at_its_lines():
    code = SEED000.read_text()
    old_lines = [n for n, line in enumerate(code.splitlines(), 1)
                 if "tf.initialize_all_variables()" in line]
    assert len(old_lines) == 4  # init_a .. init_d
    fixed, findings = graphfix.fix_source(code, only=[NAME])
    assert [f.line for f in findings] == old_lines
    assert findings[0].message.startswith(
        "tf.initialize_all_variables is deprecated: use tf.global_variables_initializer")
    assert fixed == code.replace("tf.initialize_all_variables()",
                                 "tf.global_variables_initializer()")


def test_cli_check_and_fix_the_seed(tmp_path: Path):
    script = tmp_path / "seed000.py"
    shutil.copy(SEED000, script)
    doc = json.loads(run_cli("check", script, "--only", NAME, "--format", "json").stdout)
    assert [(f["line"], f["severity"]) for f in doc["findings"]] == [
        (5, "warning"), (11, "warning"), (17, "warning"), (23, "warning")]
    run_cli("fix", script, "--only", NAME, "--in-place")
    assert script.read_text() == SEED000.read_text().replace(
        "tf.initialize_all_variables()", "tf.global_variables_initializer()")


_RUNNER = """
import contextlib, io, json, logging, sys
import tensorflow as tf
records = []
handler = logging.Handler()
handler.emit = lambda record: records.append(record.getMessage())
logger = tf.get_logger()
logger.addHandler(handler)
logger.setLevel(logging.WARNING)
out = io.StringIO()
with tf.Graph().as_default(), contextlib.redirect_stdout(out):
    exec(compile(sys.stdin.read(), "<fixture>", "exec"), {"__name__": "__main__"})
print(json.dumps([out.getvalue(), records]))
"""


def _run_script(code: str, tf) -> tuple[str, list[str]]:
    """What `code` prints and the deprecation warnings TF logs, run in a graph of its own in
    a process of its own: TF warns once per function and process, and a test earlier in
    this process may have used the old names, or quieted TF's logger."""
    done = subprocess.run([sys.executable, "-c", _RUNNER], input=code, capture_output=True,
                          text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 0, done.stderr[-3000:]
    printed, records = json.loads(done.stdout.splitlines()[-1])
    return printed, [r for r in records if "is deprecated" in r]


def test_renamed_code_runs_the_same_without_deprecation_warnings(tf):
    case = SOURCE / "compat_v1_alias"
    # the old names first: TF warns once per function and process
    printed_before, warned_before = _run_script((case / "before.py").read_text(), tf)
    printed_after, warned_after = _run_script((case / "after.py").read_text(), tf)
    assert printed_after == printed_before and "1" in printed_before  # the table was initialized
    for old in ("all_variables", "initialize_variables", "initialize_local_variables",
                "initialize_all_tables"):
        assert any(w.startswith(f"From ") and f": {old} (from tensorflow" in w
                   for w in warned_before), (old, warned_before)
    assert warned_after == []


def test_an_import_another_file_reads_is_found_but_not_renamed(tmp_path: Path):
    """compat.py imports an old name it never uses; train.py imports it from compat.py.
    Renaming compat.py's import would break train.py's: the finding has no fix."""
    (tmp_path / "compat.py").write_text("from tensorflow import initialize_all_variables\n")
    (tmp_path / "train.py").write_text(
        "import tensorflow as tf\nfrom compat import initialize_all_variables\n\n"
        "v = tf.Variable(1.0)\ninit = initialize_all_variables()\n")
    before = {p.name: p.read_text() for p in tmp_path.iterdir()}
    doc = json.loads(run_cli("check", ".", "--only", NAME, "--format", "json", "--no-cache",
                             cwd=tmp_path, check_exit=1).stdout)
    assert [(f["path"], f["line"], f["fixable"]) for f in doc["findings"]] == [
        ("compat.py", 1, False)]
    run_cli("fix", ".", "--only", NAME, "--no-cache", cwd=tmp_path, check_exit=0)
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == before
    # alone, the same import is an unused one: renamed
    fixed, findings = graphfix.fix_source(before["compat.py"], only=[NAME])
    assert fixed == "from tensorflow import global_variables_initializer\n"
    assert [f.fixable for f in findings] == [True]


def test_the_message_names_the_new_name_as_the_file_spells_the_old():
    findings = graphfix.check_source(
        (SOURCE / "parenthesised" / "before.py").read_text(), only=[NAME])
    assert [f.message.split(", its current name")[0] for f in findings] == [
        "(tf.initialize_all_variables) is deprecated: use (tf.global_variables_initializer)"]
