"""ruff's habits, as its users expect them of graphfix: `check --fix`, `--select` and
`--ignore` beside `--only`, `--statistics`, completion of option values, and `graphfix`
alone a usage error."""

from __future__ import annotations

import json
import shutil

from conftest import FIXTURES, run_cli

SEED = FIXTURES / "variables_to_cpu" / "seed000_ref" / "before.pbtxt"
SOURCE = ("import tensorflow as tf\nwith tf.device('/gpu:0'):\n    d = tf.Variable(2)\n"
          "init = tf.initialize_all_variables()\n")
FIXED = ('import tensorflow as tf\nwith tf.device(\'/gpu:0\'):\n    with tf.device("/cpu:0"):\n'
         "        d = tf.Variable(2)\ninit = tf.global_variables_initializer()\n")
# two findings graphfix reports and cannot fix (warnings: no ps placement, setter named)
UNFIXABLE = FIXTURES / "replica_placement" / "source" / "unplaced_unclear" / "before.py"


def test_check_fix_fixes_what_it_can_reports_the_rest_and_exits_by_that(tmp_path):
    (tmp_path / "train.py").write_text(SOURCE)
    shutil.copy(UNFIXABLE, tmp_path / "ps.py")
    (tmp_path / "model.pbtxt").write_bytes(SEED.read_bytes())
    done = run_cli("check", "--no-cache", "--fix", ".", "model.pbtxt", cwd=tmp_path,
                   check_exit=1)
    lines = done.stdout.splitlines()
    assert (tmp_path / "train.py").read_text() == FIXED
    assert (tmp_path / "ps.py").read_bytes() == UNFIXABLE.read_bytes()
    # each change once, then what remains: ps.py's two findings, which no fix makes
    assert [line.split(": ")[:2] for line in lines[:3]] == [
        ["model.pbtxt@d", "variables-to-cpu"], ["train.py:3", "variables-to-cpu"],
        ["train.py:4", "deprecated-initializers"]]
    remaining = [line for line in lines if line.startswith("ps.py:")]
    assert [line.split(": ")[1:3] for line in remaining] == [
        ["warning", "replica-placement"]] * 2
    assert lines[-1] == ("fixed 3 change(s) in 2 file(s); left 2 finding(s) (0 fixable) in "
                         "1 file(s); 2 clean, 0 skipped, 0 failed")
    # the graph was fixed in place: checked again, it is clean
    run_cli("check", "model.pbtxt", cwd=tmp_path, check_exit=0)
    # nothing fixable left: nothing changes, the rest is still reported
    again = run_cli("check", "--no-cache", "--fix", ".", "--format", "json", cwd=tmp_path,
                    check_exit=1)
    doc = json.loads(again.stdout)
    assert doc["changes"] == [] and len(doc["findings"]) == 2
    # where everything could be fixed, the run exits 0
    (tmp_path / "train.py").write_text(SOURCE)
    clean = run_cli("check", "--no-cache", "--fix", "train.py", cwd=tmp_path, check_exit=0)
    assert clean.stdout.splitlines()[-1].startswith("fixed 2 change(s) in 1 file(s); left 0 ")


def _transforms_found(*args, cwd) -> set[str]:
    doc = json.loads(run_cli("check", "--no-cache", "train.py", "--format", "json", *args,
                             cwd=cwd).stdout)
    return {f["transform"] for f in doc["findings"]}


def test_select_and_ignore_beside_only(tmp_path):
    (tmp_path / "train.py").write_text(SOURCE)
    both = {"variables-to-cpu", "deprecated-initializers"}
    assert _transforms_found(cwd=tmp_path) == both
    assert _transforms_found("--select", "variables-to-cpu,deprecated-initializers",
                             cwd=tmp_path) == both
    assert _transforms_found("--only", "variables-to-cpu", "--select",
                             "deprecated-initializers", cwd=tmp_path) == both
    assert _transforms_found("--ignore", "deprecated-initializers",
                             cwd=tmp_path) == {"variables-to-cpu"}
    assert _transforms_found("--select", "variables-to-cpu", "--ignore", "variables-to-cpu",
                             cwd=tmp_path) == set()
    # --ignore takes from what the configuration chose too
    (tmp_path / "pyproject.toml").write_text(
        '[tool.graphfix]\nonly = ["variables-to-cpu", "deprecated-initializers"]\n')
    assert _transforms_found("--ignore", "variables-to-cpu",
                             cwd=tmp_path) == {"deprecated-initializers"}
    bad = run_cli("check", "train.py", "--ignore", "nope", cwd=tmp_path, check_exit=2)
    assert bad.stderr.startswith("graphfix: error: unknown transform 'nope'")


def test_statistics_count_findings_per_transform(tmp_path):
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text(SOURCE)
    (tmp_path / "c.py").write_text("import tensorflow as tf\ntf.initialize_all_variables()\n")
    text = run_cli("check", "--no-cache", ".", "--statistics", cwd=tmp_path, check_exit=1)
    assert text.stdout.splitlines() == [
        "3  deprecated-initializers  (3 fixable)",
        "2  variables-to-cpu  (2 fixable)",
        "5 finding(s) (5 fixable) in 3 file(s); 0 clean, 0 skipped, 0 failed"]
    doc = json.loads(run_cli("check", "--no-cache", ".", "--statistics", "--format", "json",
                             cwd=tmp_path, check_exit=1).stdout)
    assert doc["statistics"] == [
        {"transform": "deprecated-initializers", "count": 3, "fixable": 3},
        {"transform": "variables-to-cpu", "count": 2, "fixable": 2}]
    assert doc["summary"]["findings"] == 5
    refused = run_cli("check", ".", "--statistics", "--format", "sarif", cwd=tmp_path,
                      check_exit=2)
    assert refused.stderr == "graphfix: error: --statistics prints text or json, not sarif\n"


def _completed(words: str) -> list[str]:
    """What bash's completion offers for the last word of `words`."""
    parts = words.split(" ")
    shown = run_cli(env={"_GRAPHFIX_COMPLETE": "complete_bash", "COMP_WORDS": words,
                         "COMP_CWORD": str(len(parts) - 1)}, check_exit=0)
    return shown.stdout.split()


def test_shell_completion_offers_option_values():
    assert _completed("graphfix check x.py --only variables") == ["variables-to-cpu"]
    assert _completed("graphfix check x.py --ignore up") == ["update-ops"]
    assert "deprecated-initializers" in _completed("graphfix fix x.py --select ")
    assert _completed("graphfix check x.py --select update-ops,var") == [
        "update-ops,variables-to-cpu"]
    assert _completed("graphfix check x.py --format ") == [
        "text", "json", "sarif", "github", "junit"]
    assert _completed("graphfix fix x.py --format ") == ["text", "json", "github"]
    assert _completed("graphfix check x.py --severity w") == ["warning"]
    assert _completed("graphfix check x.py --severity ") == ["error", "warning", "info"]


def test_graphfix_alone_is_a_usage_error_showing_its_usage():
    alone = run_cli(check_exit=2)
    assert alone.stdout == ""
    assert alone.stderr.startswith("usage: graphfix ")
    assert "check" in alone.stderr and "fix" in alone.stderr


def test_check_fix_writes_nothing_where_an_input_cannot_be_fixed(tmp_path):
    (tmp_path / "train.py").write_text(SOURCE)
    (tmp_path / "broken.pbtxt").write_text("node { name: ")
    done = run_cli("check", "--no-cache", "--fix", "train.py", "broken.pbtxt", cwd=tmp_path,
                   check_exit=2)
    assert "graphfix: error: broken.pbtxt: " in done.stderr
    assert (tmp_path / "train.py").read_text() == SOURCE  # all or nothing
