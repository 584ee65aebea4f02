"""A graph that calls Python functions (`tf.compat.v1.py_func`, `tf.numpy_function`) runs only
in the process that built it: `graphfix verify GRAPH` of it is one line, exit 2, pointing at
`graphfix verify SCRIPT.py`, which verifies it in the traced script's process, where the
functions are (`graphfix.trace.child`, `graphfix.verification.traced`). Real scripts traced
in real child processes, one trace per test."""

from __future__ import annotations

from conftest import FIXTURES, error_lines, run_cli

from graphfix.trace import trace

HERE = FIXTURES / "trace"
PY_FUNC_TOWERS = HERE / "py_func_towers.py"  # two GPU towers fed by a py_func
NUMPY_FUNCTION = HERE / "numpy_function_counter.py"  # numpy_function, int32 counter on GPU
PLAIN = """
import numpy as np
import tensorflow as tf

x = tf.placeholder(tf.float32, [None, 3], name="x")
w = tf.Variable(tf.ones([3, 1]), name="w")
train_op = tf.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(tf.matmul(x, w)))
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(train_op, {x: np.ones([2, 3], np.float32)})
"""
OPTIONS = {"label": "script", "steps": 1, "fetches": [], "target_devices": [],
           "op_libraries": []}


def test_verify_script_runs_its_py_func_graph_where_the_function_is(tmp_path):
    """On main: "FAIL run: ... Could not find callback with key=pyfunc_0 in the registry":
    the graph was run in graphfix's process, which has no such function."""
    meta = tmp_path / "towers.meta"  # (the script writes its graph there too)
    result = run_cli("verify", PY_FUNC_TOWERS, "--", meta, check_exit=0)
    lines = result.stdout.splitlines()
    assert lines[0] == (f"verify {PY_FUNC_TOWERS}: simulated on logical CPU devices "
                        "(/device:GPU:0 -> /device:CPU:1, /device:GPU:1 -> /device:CPU:2)")
    assert lines[1:3] == ["  pass  placement: every colocation group has a kernel on its device",
                          "  pass  run: initialized, then 1 step(s) ran"]
    assert lines[-1] == "verified"
    # The same graph from its file: the function is not there, so it is refused in one line.
    refused = run_cli("verify", meta, check_exit=2)
    assert refused.stdout == ""
    (line,) = error_lines(refused.stderr)
    assert line.startswith(f"graphfix: error: {meta}: 1 node(s) call Python functions "
                           "(py_func, numpy_function; 'augment' the first)")
    assert line.endswith("verify the script that builds it: graphfix verify SCRIPT.py")


def test_fix_verify_proves_the_fixed_numpy_function_script_in_its_process(tmp_path):
    """On main the fix is not written: "the fixed script's graph does not verify: run: ...
    Could not find callback with key=pyfunc_0 in the registry"."""
    copy = tmp_path / NUMPY_FUNCTION.name
    copy.write_bytes(NUMPY_FUNCTION.read_bytes())
    result = run_cli("fix", "--verify", copy, "--target-devices", "/gpu:0", check_exit=1)
    assert 'with tf.device("/cpu:0"):\n        counter = tf.Variable(0)' in copy.read_text()
    lines = result.stdout.splitlines()
    assert f"verify {copy} (fixed): simulated on logical CPU devices (/device:GPU:0 -> " \
           "/device:CPU:1)" in lines
    assert "  pass  run: initialized, then 1 step(s) ran" in lines
    assert "verified" in lines, result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == [copy.name]  # no copy left


def test_a_graph_without_python_functions_is_verified_by_the_caller(tmp_path):
    """The child verifies only a graph that calls Python functions; every other graph is
    left to the caller (`Trace.verified` is None), who verifies it from what was captured,
    apart from the script's process."""
    script = tmp_path / "plain.py"
    script.write_text(PLAIN)
    captured = trace(script, verify=OPTIONS)
    assert captured.verified is None
    assert len(captured.runs) == 2 and captured.runs[-1].train
