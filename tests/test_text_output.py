"""The text a person reads: each finding with its severity, in file order; each change a
fix makes shown once; a diff of several graphs naming each graph."""

from __future__ import annotations

from conftest import FIXTURES, run_cli

SEED = FIXTURES / "variables_to_cpu" / "seed000_ref" / "before.pbtxt"
# deprecated-initializers (a warning) at line 4 is found before variables-to-cpu (an error)
# at line 3 (transforms run in registry order)
SOURCE = ("import tensorflow as tf\nwith tf.device('/gpu:0'):\n    d = tf.Variable(2)\n"
          "init = tf.initialize_all_variables()\n")


def _finding_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith(("a.py", "b.py", "g.")) and ": placement: " not in line]


def test_check_shows_each_findings_severity_in_file_line_column_order(tmp_path):
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text(SOURCE)
    (tmp_path / "g.pbtxt").write_bytes(SEED.read_bytes())
    shown = run_cli("check", "--no-cache", "g.pbtxt", "b.py", "a.py", "--only",
                    "variables-to-cpu", "--only", "deprecated-initializers", cwd=tmp_path,
                    check_exit=1).stdout
    lines = _finding_lines(shown)
    assert [line.split(": ")[:3] for line in lines] == [
        ["a.py:3:9", "error", "variables-to-cpu"],
        ["a.py:4:8", "warning", "deprecated-initializers"],
        ["b.py:3:9", "error", "variables-to-cpu"],
        ["b.py:4:8", "warning", "deprecated-initializers"],
        ["g.pbtxt@d", "error", "variables-to-cpu"]]


def test_fix_shows_each_change_once(tmp_path):
    (tmp_path / "a.py").write_text(SOURCE)
    shown = run_cli("fix", "--no-cache", "a.py", "--dry-run", cwd=tmp_path,
                    check_exit=1).stdout.splitlines()
    about = {name: [line for line in shown if f": {name}: " in line]
             for name in ("variables-to-cpu", "deprecated-initializers")}
    assert [len(lines) for lines in about.values()] == [1, 1], shown
    assert about["variables-to-cpu"][0].startswith("a.py:3: variables-to-cpu: ")
    assert about["deprecated-initializers"][0].startswith("a.py:4: deprecated-initializers: ")
    assert shown[-1] == "2 change(s) in 1 file(s); 0 unchanged, 0 skipped, 0 failed"


def test_fix_diff_of_several_graphs_names_each(tmp_path):
    for name in ("one.pbtxt", "two.pbtxt"):
        (tmp_path / name).write_bytes(SEED.read_bytes())
    shown = run_cli("fix", "one.pbtxt", "two.pbtxt", "--diff", "--only", "variables-to-cpu",
                    cwd=tmp_path, check_exit=1).stdout.splitlines()
    moved = "~ d: device /device:GPU:0 -> /device:CPU:0"
    assert shown.count(moved) == 2
    first, second = (i for i, line in enumerate(shown) if line == moved)
    assert shown[:2] == ["--- a/one.pbtxt", "+++ b/one.pbtxt"]
    assert shown[second - 2:second] == ["--- a/two.pbtxt", "+++ b/two.pbtxt"]
    assert first == 2
