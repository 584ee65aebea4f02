"""Bad input: one line naming the file and the problem, exit 2, no traceback, nothing written."""

from __future__ import annotations

import os

import pytest

from conftest import FIXTURES, error_lines, run_cli

SEED = FIXTURES / "variables_to_cpu" / "seed000_ref" / "before.pbtxt"


def _seed_pb(tmp_path):
    from graphfix.graph import graphfile as graphio

    data = graphio.load(SEED).message.SerializeToString(deterministic=True)
    path = tmp_path / "seed.pb"
    path.write_bytes(data)
    return path, data


def _assert_one_line_error(result, path_text, problem):
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = error_lines(result.stderr)
    assert len(lines) == 1, lines
    assert "Traceback" not in result.stderr
    assert path_text in lines[0] and problem in lines[0], lines[0]


@pytest.mark.parametrize("command", ["check", "fix"])
def test_truncated_pb(tmp_path, command):
    path, data = _seed_pb(tmp_path)
    bad = tmp_path / "truncated.pb"
    bad.write_bytes(data[: len(data) // 2 + 3])
    out = tmp_path / "out.pb"
    result = run_cli(command, bad, *(["-o", out] if command == "fix" else []))
    _assert_one_line_error(result, "truncated.pb", "not a valid GraphDef")
    assert not out.exists()


def test_corrupt_pb(tmp_path):
    bad = tmp_path / "corrupt.pb"
    bad.write_bytes(os.urandom(64) + b"\xff\xff\xff")
    _assert_one_line_error(run_cli("check", bad), "corrupt.pb", "not a valid GraphDef")


def test_empty_pb(tmp_path):
    bad = tmp_path / "empty.pb"
    bad.write_bytes(b"")
    _assert_one_line_error(run_cli("check", bad), "empty.pb", "file is empty")


def test_malformed_pbtxt(tmp_path):
    bad = tmp_path / "bad.pbtxt"
    bad.write_text('node { name: "a" op: "Const" \n')
    _assert_one_line_error(run_cli("check", bad), "bad.pbtxt", "malformed GraphDef text")


def test_directory_without_saved_model(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "variables").mkdir()
    (folder / "variables" / "variables.index").write_bytes(b"x")
    _assert_one_line_error(run_cli("check", folder), "model", "no saved_model.pb")


def test_python_syntax_error_is_skipped_and_not_written(tmp_path):
    source = tmp_path / "broken.py"
    text = "import tensorflow as tf\nwith tf.device('/gpu:0'):\n    x = tf.Variable(1\n"
    source.write_text(text)
    result = run_cli("fix", source)
    assert "broken.py: skipped: syntax error at line" in result.stdout
    assert source.read_text() == text


def test_python2_file_is_skipped(tmp_path):
    source = tmp_path / "old.py"
    text = "import tensorflow as tf\nprint 'hello'\nwith tf.device('/gpu:0'):\n    v = tf.Variable(1)\n"
    source.write_text(text)
    result = run_cli("fix", source)
    assert "old.py: skipped: syntax error" in result.stdout and "Python 2" in result.stdout
    assert source.read_text() == text


def test_unwritable_output_writes_nothing(tmp_path):
    path, _ = _seed_pb(tmp_path)
    result = run_cli("fix", path, "-o", tmp_path / "missing" / "dir" / "out.pb")
    _assert_one_line_error(result, "out.pb", "cannot write")
    assert not (tmp_path / "missing").exists()


def test_read_only_output_directory(tmp_path):
    if os.geteuid() == 0:
        # root ignores directory permissions; a path under a regular file cannot be made.
        blocker = tmp_path / "file"
        blocker.write_text("x")
        target = blocker / "out.pb"
    else:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        target = locked / "out.pb"
    path, _ = _seed_pb(tmp_path)
    result = run_cli("fix", path, "-o", target)
    _assert_one_line_error(result, "out.pb", "cannot write")


def test_a_failing_input_stops_every_write(tmp_path):
    good = tmp_path / "good.py"
    good_text = "import tensorflow as tf\nwith tf.device('/gpu:0'):\n    v = tf.Variable(1)\n"
    good.write_text(good_text)
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"\xff\xff\xff\xff")
    result = run_cli("fix", good, bad, "--in-place")
    assert result.returncode == 2
    assert good.read_text() == good_text, "a failed run writes nothing"


def test_unknown_transform_lists_known_ones():
    result = run_cli("check", SEED, "--only", "no-such-thing")
    _assert_one_line_error(result, "no-such-thing", "known: ")
    assert "variables-to-cpu" in error_lines(result.stderr)[0]


def test_bad_setting():
    result = run_cli("check", SEED, "--set", "variables-to-cpu.scope=everything")
    _assert_one_line_error(result, "variables-to-cpu.scope", "must be one of all, every-gpu-variable, variables, no-kernel")


def test_missing_file():
    result = run_cli("check", "does-not-exist.pb")
    _assert_one_line_error(result, "does-not-exist.pb", "no such file")


def test_fix_graph_without_destination():
    result = run_cli("fix", SEED)
    _assert_one_line_error(result, "-o OUT", "--in-place")


def test_a_tensorflow_that_is_no_package_does_not_stop_a_graph_fix(tmp_path):
    # Graphs are read and written with graphfix's own messages (issue 34: no TensorFlow in
    # the base install): a `tensorflow` that is no package (here a module shadowing the
    # installed one) changes nothing; the fix is the one made beside a real TF.
    path, _ = _seed_pb(tmp_path)
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "tensorflow.py").write_text("")
    out, beside_tf = tmp_path / "out.pb", tmp_path / "beside_tf.pb"
    result = run_cli("fix", path, "-o", out, env={"PYTHONPATH": str(shadow)})
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert error_lines(result.stderr) == []
    run_cli("fix", path, "-o", beside_tf, check_exit=1)
    assert out.read_bytes() == beside_tf.read_bytes()
