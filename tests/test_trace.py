"""`graphfix trace`: a script run in a child process until it trains, the graph it built,
the graph transforms' findings at the lines that made the ops; scripts that give no graph
say why in one line. Real TF in real child processes: each trace costs a TF import, so the
traces are made once for the module, several at a time."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import FIXTURES, REPO, error_lines, run_cli

import graphfix
from graphfix import registry
from graphfix.driver import Selected
from graphfix.trace import TraceError, trace
from graphfix.trace.at_sites import check_trace

HERE = FIXTURES / "trace"
SEED000 = HERE / "seed000.py"
SLIM_TOWERS = HERE / "slim_towers_bn.py"
FEED_VARIABLE = HERE / "feed_variable.py"
TOWERS_ARGS = HERE / "towers_args.py"
MONITORED = HERE / "monitored_session.py"
TRAIN_GRADS = HERE / "slim_towers_create_train_grads.py"
MISSES_ONE = HERE / "codemod_misses_one.py"
FED_PATH = HERE / "fed_file_path.py"
BAD = HERE / "bad"
SYNTAX_ERROR = "import tensorflow as tf\n\nx = tf.constant(1))\n"

# name -> (script, args, options); traced together, before the module's first test
TRACES = {
    # (first: it waits out its timeout beside the others; long enough for TF to load)
    "runs_forever": (BAD / "runs_forever.py", (), {"timeout": 45}),
    "seed000": (SEED000, (), {}),
    "slim_towers": (SLIM_TOWERS, (), {}),
    "feed_variable": (FEED_VARIABLE, (), {}),
    "fed_path": (FED_PATH, (), {}),
    "monitored": (MONITORED, (), {}),
    "train_grads": (TRAIN_GRADS, (), {}),
    "towers_runs": (TOWERS_ARGS, ("--towers", "2"), {"runs": 2}),
    "towers_until": (TOWERS_ARGS, ("--towers", "3"), {"until": "towers_args.py:17"}),
    "missing_data": (BAD / "missing_data.py", (), {}),
    "import_error": (BAD / "import_error.py", (), {}),
    "removed_symbol": (BAD / "removed_symbol.py", (), {}),
    "no_session": (BAD / "no_session.py", (), {}),
    "run_fails": (BAD / "run_fails.py", (), {}),
}


def line_of(path, text: str) -> int:
    """The line of `path` that holds `text` (a fixture's line, found, not counted)."""
    lines = path.read_text().splitlines()
    (number,) = [i for i, line in enumerate(lines, 1) if text in line]
    return number


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """name -> the Trace (or the TraceError) of each of TRACES."""
    syntax = tmp_path_factory.mktemp("syntax") / "syntax_error.py"
    syntax.write_text(SYNTAX_ERROR)
    every = {**TRACES, "syntax_error": (syntax, (), {})}

    def one(item):
        script, args, options = item
        try:
            return trace(script, args, **options)
        except TraceError as exc:
            return exc

    with ThreadPoolExecutor(4) as pool:
        return dict(zip(every, pool.map(one, every.values())))


def findings_of(captured, only=None):
    selected = Selected.build(registry.select(only), {}, ())
    findings, _ = check_trace(captured, selected)
    return findings


def test_seed000_runs_as_written_and_trace_finds_d_under_gpu_at_its_line(traces):
    captured = traces["seed000"]
    assert [run.executed for run in captured.runs] == [True] * 4  # four sessions, all run
    assert captured.stopped == "the script ended"
    (found,) = findings_of(captured)
    assert (found.path, found.line, found.col) == (str(SEED000),
                                                   line_of(SEED000, "d = tf.Variable(2)"), 13)
    assert found.transform == "variables-to-cpu" and found.severity == "error"
    assert ("Could not satisfy explicit device specification '/device:GPU:0' because no "
            "supported kernel for GPU devices is available") in found.message
    variable = found.details["nodes"][0]
    assert captured.sites[variable].function == "main"
    (evidence,) = found.details["graph_findings"]
    assert evidence["details"]["device"] == "/device:GPU:0"
    assert evidence["details"]["no_kernel"] == [variable, f"{variable}/Assign"]


def test_every_node_the_script_made_has_its_line_and_each_run_its_fetches(traces):
    captured = traces["seed000"]
    nodes = {n.name for n in captured.meta_graph.graph_def.node}
    assert set(captured.sites) == nodes
    init_d = line_of(SEED000, "init_d = tf.initialize_all_variables()")
    assert {s.line for n, s in captured.sites.items() if n.startswith("init_3")} == {init_d}
    assert [r.site.line for r in captured.runs] == [line_of(SEED000, f"sess.run(init_{v})")
                                                   for v in "abcd"]
    assert [r.fetches for r in captured.runs] == [["init"], ["init_1"], ["init_2"], ["init_3"]]
    devices = {n.name: n.device for n in captured.meta_graph.graph_def.node}
    assert devices["Variable_2"] == "/device:GPU:0"  # as asked: the runs were on the CPU
    assert "variables" in captured.meta_graph.collection_def


def test_slim_towers_stop_at_the_train_op_and_the_missing_updates_are_found_at_apply(traces):
    captured = traces["slim_towers"]
    init, train = captured.runs
    assert init.executed and not train.executed and train.train  # never trained
    assert train.site.line == line_of(SLIM_TOWERS, "sess.run(train_op, feed_dict=feed)")
    assert captured.stopped == "the first run of a train op (not run)"
    by_transform = {f.transform: f for f in findings_of(captured)}
    updates = by_transform["update-ops"]
    assert updates.line == line_of(SLIM_TOWERS, "train_op = opt.apply_gradients(")
    assert "does not run 4 of 4 update op(s)" in updates.message
    assert by_transform["variables-to-cpu"].line == line_of(SLIM_TOWERS, "net = slim.conv2d(")


def test_the_create_train_grads_variant_imports_slim_by_name_and_still_misses_the_updates(
        traces):
    captured = traces["train_grads"]
    assert captured.runs[-1].train and not captured.runs[-1].executed
    updates = [f for f in findings_of(captured, ["update-ops"])]
    assert [f.line for f in updates] == [
        line_of(TRAIN_GRADS, "grad_updates = opt.apply_gradients(grads)"),
        line_of(TRAIN_GRADS, "train_op = control_flow_ops.with_dependencies(")]
    assert all("does not run 4 of 4 update op(s)" in f.message for f in updates)


def test_a_monitored_session_is_traced_to_its_first_train_op_run_never_run(traces):
    captured = traces["monitored"]
    *before, train = captured.runs
    assert before and all(r.executed and not r.train for r in before)  # its own set-up runs
    assert train.train and not train.executed
    assert train.site.line == line_of(MONITORED, "sess.run(train_op)")
    assert "Momentum" in train.fetches


def test_a_variable_fed_in_the_train_run_is_found_at_its_line_with_the_feeding_run(traces):
    captured = traces["feed_variable"]
    (found,) = findings_of(captured, ["feed-to-assign"])
    assert found.line == line_of(FEED_VARIABLE, "embeddings = tf.Variable(")
    run_line = line_of(FEED_VARIABLE, "sess.run(train_op, feed_dict=")
    assert [s["line"] for s in found.details["fed_at"]] == [run_line]
    assert f"the Session.run at {FEED_VARIABLE}:{run_line} feeds it" in found.message
    assert "feed-to-assign.variables" not in found.message


def test_a_layer_made_in_a_loop_is_one_finding_and_the_script_gets_its_arguments(traces):
    runs = traces["towers_runs"]
    assert len(runs.runs) == 2 and runs.stopped == "after 2 run(s) (--runs)"
    (found,) = findings_of(runs, ["variables-to-cpu"])
    assert found.details["nodes"] == ["counter_0", "counter_1"]
    assert "(and 1 more node(s) made here: counter_1)" in found.message


def test_until_stops_before_the_line_with_the_graph_built_so_far(traces):
    captured = traces["towers_until"]
    assert captured.runs == [] and captured.stopped == "reached towers_args.py:17"
    assert {n.name for n in captured.meta_graph.graph_def.node if n.op == "VariableV2"} == {
        "counter_0", "counter_1", "counter_2"}
    assert not any(n.op == "AssignAdd" for n in captured.meta_graph.graph_def.node)


@pytest.mark.parametrize("name,said", [
    ("missing_data", f"{BAD / 'missing_data.py'}:5: FileNotFoundError: [Errno 2] No such file "
                     "or directory: 'train_images.npy'"),
    ("import_error", f"{BAD / 'import_error.py'}:3: ModuleNotFoundError: No module named "
                     "'cifar10_input_that_is_not_here'"),
    ("removed_symbol", f"{BAD / 'removed_symbol.py'}:5: AttributeError: tf.contrib.learn was "
                       "removed in TensorFlow 2"),
    ("syntax_error", ":3: SyntaxError: unmatched ')'"),
    ("no_session", f"{BAD / 'no_session.py'}: the script never ran a session"),
    # TF's own first line, "Graph execution error:", says nothing: what failed, and where
    ("run_fails", f"{BAD / 'run_fails.py'}:8: InvalidArgumentError: images over zero : Tensor "
                  "had Inf values (node CheckNumerics)"),
    ("runs_forever", f"{BAD / 'runs_forever.py'}: still running after 45 s (--timeout), "
                     f"stopped at {BAD / 'runs_forever.py'}:9 in wait_for_data"),
])
def test_a_script_that_gives_no_graph_says_why_in_one_line(traces, name, said):
    error = traces[name]
    assert isinstance(error, TraceError), error
    assert said in str(error) and "\n" not in str(error)


def test_trace_writes_the_graph_and_sites_and_a_bad_script_writes_nothing(tmp_path):
    out = tmp_path / "seed.trace"
    shown = run_cli("trace", SEED000, "-o", out, check_exit=0).stdout
    assert shown.startswith(f"{SEED000}: traced 22 node(s)") and shown.endswith(f"-> {out}\n")
    doc = json.loads((out / "trace.json").read_text())
    assert doc["sites"]["Variable_2"][1] == line_of(SEED000, "d = tf.Variable(2)")
    shown = run_cli("check", out / "graph.meta", check_exit=1).stdout  # a graph like any
    assert "graph.meta@Variable_2: error: variables-to-cpu:" in shown

    failed = run_cli("trace", BAD / "missing_data.py", "-o", tmp_path / "bad.trace",
                     check_exit=2)
    assert error_lines(failed.stderr) == [
        f"graphfix: error: {BAD / 'missing_data.py'}:5: FileNotFoundError: [Errno 2] No such "
        "file or directory: 'train_images.npy' (raised by the traced script; nothing written)"]
    assert not (tmp_path / "bad.trace").exists()


def test_check_trace_at_the_lines_with_the_codemods_disagreement_and_fix_trace_writes_a_clean_graph(
        tmp_path):
    shown = json.loads(run_cli("check", "--trace", MISSES_ONE, "--format", "json",
                               check_exit=1).stdout)
    steps, epochs = (line_of(MISSES_ONE, f'name="{name}"') for name in ("steps", "epochs"))
    assert [(f["path"], f["line"], f["col"], f["transform"], f["details"]["nodes"])
            for f in shown["findings"]] == [
        (str(MISSES_ONE), steps, 13, "variables-to-cpu", ["steps"]),
        (str(MISSES_ONE), epochs, 14, "variables-to-cpu", ["epochs"])]
    assert f"{MISSES_ONE}: variables-to-cpu: the codemod finds line(s) {steps}; the trace " \
           f"finds line(s) {steps}, {epochs}" in shown["notes"]

    fixed = tmp_path / "fixed.meta"
    shown = run_cli("fix", "--trace", TOWERS_ARGS, "-o", fixed, "--", "--towers", "2",
                    check_exit=1).stdout
    line = line_of(TOWERS_ARGS, 'counters.append(tf.Variable(0, name="counter_%d" % i))')
    assert f"{TOWERS_ARGS}:{line}: variables-to-cpu: moved" in shown
    run_cli("check", fixed, check_exit=0)


def test_fix_trace_into_a_folder_writes_the_graph_named_for_the_script(tmp_path):
    """`fix --trace SCRIPT -o DIR`: the fixed graph is DIR/SCRIPT_STEM.meta, not a file
    named like the folder inside it."""
    run_cli("fix", "--trace", TOWERS_ARGS, "-o", tmp_path, "--", "--towers", "2",
            check_exit=1)
    assert [p.name for p in tmp_path.iterdir()] == [f"{TOWERS_ARGS.stem}.meta"]
    run_cli("check", tmp_path / f"{TOWERS_ARGS.stem}.meta", check_exit=0)


def test_a_source_only_rule_is_no_disagreement_with_the_trace():
    """deprecated-initializers finds seed 000's four initialize_all_variables() calls; it has
    no graph surface, so the trace saying nothing of them is no disagreement."""
    static = json.loads(run_cli("check", SEED000, "--format", "json", "--no-cache",
                                check_exit=1).stdout)
    assert {f["transform"] for f in static["findings"]} >= {"deprecated-initializers"}
    shown = json.loads(run_cli("check", "--trace", SEED000, "--format", "json",
                               check_exit=1).stdout)
    assert [n for n in shown["notes"] if "finds" in n] == []


def test_a_suppression_at_the_line_that_made_a_node_covers_the_traced_finding():
    """`# graphfix: ignore[variables-to-cpu]` on the line of one of two int32 counters under
    a GPU scope: the trace reports the other one only, as the codemod does (no disagreement)."""
    script = HERE / "suppressed.py"
    shown = json.loads(run_cli("check", "--trace", script, "--format", "json",
                               check_exit=1).stdout)
    epochs = line_of(script, 'name="epochs"')
    assert [(f["line"], f["transform"], f["details"]["nodes"]) for f in shown["findings"]] == [
        (epochs, "variables-to-cpu", ["epochs"])]
    assert [n for n in shown["notes"] if "finds" in n] == []


def test_contrib_layers_and_rnn_are_found_where_they_went_and_the_script_runs():
    """tf.contrib.layers (layers, xavier_initializer, l2_regularizer) from tf_slim and
    tf.contrib.rnn's cell from compat.v1's nn: the script is traced to its train run and its
    int32 counter under the GPU scope is found at its line with TF's message."""
    script = HERE / "contrib_layers.py"
    shown = json.loads(run_cli("check", "--trace", script, "--format", "json",
                               check_exit=1).stdout)
    step = line_of(script, 'name="step"')
    found = {f["line"]: f for f in shown["findings"]}
    assert "Cannot assign a device for operation step" in found[step]["message"]
    assert any("stopped: the first run of a train op" in n for n in shown["notes"])


def test_the_parent_never_imports_the_tf_runtime_and_graphfix_trace_is_callable():
    code = ("import sys, graphfix; captured = graphfix.trace(sys.argv[1]); "
            "from graphfix.trace.at_sites import findings_at_sites; "
            "print(len(captured.runs), 'tensorflow.python' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code, str(SEED000)], capture_output=True,
                            text=True, cwd=REPO, timeout=300)
    assert result.stdout.split() == ["4", "False"], result.stderr[-2000:]


@pytest.mark.parametrize("script,written", [(SEED000, True), (MISSES_ONE, False)])
def test_fix_verify_writes_the_fix_only_if_the_fixed_script_graph_checks_clean_and_runs(
        tmp_path, script, written):
    copy = tmp_path / script.name
    copy.write_bytes(script.read_bytes())
    result = run_cli("fix", "--verify", copy, "--target-devices", "/gpu:0",
                     check_exit=1 if written else 2)
    if written:
        assert "with tf.device(\"/cpu:0\"):\n            d = tf.Variable(2)" in copy.read_text()
        assert "  pass  placement: every colocation group has a kernel on its device" in \
            result.stdout.splitlines()
        assert "verified" in result.stdout.splitlines()
    else:
        assert copy.read_bytes() == script.read_bytes()  # nothing written
        (said,) = error_lines(result.stderr)
        line = line_of(script, 'name="epochs"') + 1  # (in the fixed script: one line above)
        assert said.startswith(f"graphfix: error: {copy}: not written: the fixed script's graph "
                               f"still has 1 finding(s), the first: {copy}:{line}:")
        assert said.endswith("(a line of the fixed script)")
    assert sorted(p.name for p in tmp_path.iterdir()) == [script.name]  # no copy left


def test_verify_script_verifies_the_graph_the_script_builds():
    result = run_cli("verify", SEED000, check_exit=1)
    assert result.stdout.startswith(f"verify {SEED000}: ")
    assert any(line.startswith("  FAIL  placement: Cannot assign a device for operation "
                               "Variable_2") for line in result.stdout.splitlines())


def test_verify_script_passes_the_arguments_after_the_double_dash():
    result = run_cli("verify", TOWERS_ARGS, "--", "--towers", "3", check_exit=1)
    failed = [line for line in result.stdout.splitlines() if line.startswith("  FAIL  placement")]
    # counter_2 exists only when the script was given --towers 3
    assert any("counter_2" in line for line in failed), result.stdout
    graph = FIXTURES / "variables_to_cpu" / "seed000_ref" / "before.pbtxt"
    bad = run_cli("verify", graph, "--", "--towers", "3", check_exit=2)
    assert error_lines(bad.stderr) == [
        "graphfix: error: verify: unrecognized arguments: --towers 3 (see graphfix verify "
        "--help)"]


def test_verify_script_feeds_what_the_script_fed(traces):
    captured = traces["fed_path"]
    data = str(HERE / "fed_file_path.csv")
    assert {name: value.tolist() for name, value in captured.feeds.items()} == {
        "path:0": data.encode()}
    assert "feeds.npz" in captured.files()
    # The graph alone gets a made-up string for the path, which names no file ...
    alone = graphfix.verify(captured.meta_graph)
    (run,) = [c for c in alone.checks if c.name == "run"]
    assert not run.passed and "No such file or directory" in run.detail
    # ... fed what the script fed, it runs; `verify SCRIPT` does so.
    assert graphfix.verify(captured.meta_graph, feeds=captured.feeds).passed
    result = run_cli("verify", FED_PATH, check_exit=0)
    assert "  pass  run: initialized, then 1 step(s) ran" in result.stdout.splitlines()


PS_SERVER = """
import sys
import tensorflow as tf
ps, worker = sys.argv[1:]
cluster = tf.train.ClusterSpec({"ps": ["localhost:" + ps], "worker": ["localhost:" + worker]})
tf.compat.v1.train.Server(cluster, job_name="ps", task_index=0).join()
"""


def test_ps_worker_script_found_at_its_line_fixed_and_verified_on_a_local_cluster(tmp_path):
    from graphfix.verification.cluster import free_ports

    ps_port, worker_port = free_ports(2)
    ports = ["--", "--ps_port", str(ps_port), "--worker_port", str(worker_port)]
    # The script's ps task, as TF runs one; the traced worker connects to it.
    ps = subprocess.Popen([sys.executable, "-c", PS_SERVER, str(ps_port), str(worker_port)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        script = HERE / "seed003_ps_worker.py"
        checked = run_cli("check", "--trace", script, "--runs", "2", *ports, check_exit=1)
        line = line_of(script, "res = tf.add(c, 1)")
        assert checked.stdout.startswith(f"{script}:{line}:"), checked.stdout
        assert "replica-placement" in checked.stdout.splitlines()[0]
        assert "runs on the parameter server" in checked.stdout.splitlines()[0]

        copy = tmp_path / script.name
        copy.write_bytes(script.read_bytes())
        fixed = run_cli("fix", "--verify", copy, "--runs", "2", *ports, check_exit=1)
        lines = fixed.stdout.splitlines()
        assert "replica_device_setter" in copy.read_text()
        assert "  pass  run: initialized, then 1 step(s) ran from /job:worker/task:0" in lines
        assert any(line.startswith("  pass  variables: myc on /job:ps/") for line in lines)
        assert "verified" in lines, fixed.stdout
    finally:
        ps.kill()
        ps.wait()
