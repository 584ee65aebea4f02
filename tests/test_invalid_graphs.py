"""Invalid graphs, and bad options to verify: one line naming the file (or option) and the
problem, exit 2, no traceback, and every file under the test folder as it was, in check, fix,
fix --in-place and verify. The graphs are made here from a real fixture, one fault each."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from conftest import FIXTURES, error_lines, run_cli
from graphfix.graph import graphfile as graphio
from graphfix.graph import proto

SEED = FIXTURES / "variables_to_cpu" / "seed000_ref" / "before.pbtxt"
FIXED_SEED = FIXTURES / "variables_to_cpu" / "seed000_ref" / "after.pbtxt"


def snapshot(folder: Path) -> dict:
    """Every path under `folder` with its mode and, for a file, the hash of its bytes."""
    out = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        out[str(path.relative_to(folder))] = (info.st_mode, digest)
    return out


def assert_refused(result, names: str, problem: str, before: dict, folder: Path) -> None:
    """Exit 2, one stderr line holding `names` and `problem`, no traceback, `folder` as it was."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = error_lines(result.stderr)
    assert len(lines) == 1, lines
    assert names in lines[0] and problem in lines[0], lines[0]
    assert snapshot(folder) == before


def _seed():
    return graphio.load(SEED).message


def _node(graph_def, name):
    return next(n for n in graph_def.node if n.name == name)


def _with(edit):
    def make():
        graph_def = _seed()
        edit(graph_def)
        return graph_def
    return make


def _input(text):
    return _with(lambda g: _node(g, "output").input.append(text))


def _rename(old, new):
    return _with(lambda g: setattr(_node(g, old), "name", new))


def _cycle(g):
    # The variable's initial value now reads its own Assign: a/Assign -> a/initial_value -> a/Assign.
    _node(g, "a/initial_value").input.append("^a/Assign")


def _class_to_nowhere(g):
    _node(g, "a/read").attr["_class"].list.s[:] = [b"loc:@ghost"]


def _function_reading_nothing(g):
    function = g.library.function.add()
    function.signature.name = "f"
    node = function.node_def.add(name="out", op="Identity")
    node.input.append("missing:output:0")


# case -> (the graph, what the error line says)
GRAPHS = {
    "dangling_input": (_input("ghost"), "has input 'ghost' from no node"),
    "dangling_control_input": (_input("^ghost"), "has input '^ghost' from no node"),
    "input_without_port": (_input("a:"), "malformed input 'a:'"),
    "lone_caret": (_input("^"), "malformed input '^'"),
    "empty_input": (_input(""), "malformed input ''"),
    "port_not_a_number": (_input("a:x"), "malformed input 'a:x'"),
    "control_input_with_port": (_input("^a:1"), "malformed input '^a:1'"),
    "cycle": (_with(_cycle), "cycle through"),
    "self_loop": (_with(lambda g: _node(g, "a/read").input.append("^a/read")), "cycle through"),
    "duplicate_name": (_rename("a/read", "a"), "two nodes are named 'a'"),
    "empty_name": (_rename("output", ""), "has an empty name"),
    "class_to_missing_node": (_with(_class_to_nowhere), "unknown node 'ghost'"),
    "function_reading_no_node": (_with(_function_reading_nothing),
                                 "function 'f': node 'out' has input 'missing:output:0'"),
}


def _write(folder: Path, case: str, suffix: str) -> Path:
    make, _ = GRAPHS[case]
    path = folder / f"{case}{suffix}"
    path.write_bytes(graphio.serialize(make(), text=suffix == ".pbtxt"))
    return path


@pytest.mark.parametrize("case", sorted(GRAPHS))
@pytest.mark.parametrize("command", ["check", "fix", "fix --in-place"])
def test_an_invalid_graph_is_refused_and_nothing_is_written(tmp_path, case, command):
    path = _write(tmp_path, case, ".pb")
    words = command.split()
    if words == ["fix"]:
        words += ["-o", tmp_path / "out.pb"]
    before = snapshot(tmp_path)
    assert_refused(run_cli(*words, path), path.name, GRAPHS[case][1], before, tmp_path)


@pytest.mark.parametrize("case", ["dangling_input", "cycle", "duplicate_name",
                                  "class_to_missing_node", "input_without_port"])
def test_verify_refuses_an_invalid_graph(tmp_path, case):
    path = _write(tmp_path, case, ".pbtxt")
    before = snapshot(tmp_path)
    assert_refused(run_cli("verify", path), path.name, GRAPHS[case][1], before, tmp_path)


def test_an_invalid_graph_in_a_meta_graph_and_a_saved_model(tmp_path):
    graph_def = GRAPHS["dangling_input"][0]()
    meta = proto.MetaGraphDef()
    meta.graph_def.CopyFrom(graph_def)
    (tmp_path / "model.meta").write_bytes(meta.SerializeToString())
    saved = proto.SavedModel()
    saved.meta_graphs.add().CopyFrom(meta)
    (tmp_path / "sm").mkdir()
    (tmp_path / "sm" / "saved_model.pb").write_bytes(saved.SerializeToString())
    before = snapshot(tmp_path)
    for path, out in ((tmp_path / "model.meta", tmp_path / "out.meta"),
                      (tmp_path / "sm", tmp_path / "out_sm")):
        assert_refused(run_cli("fix", path, "-o", out), path.name, "from no node", before,
                       tmp_path)


def _op_list_bytes() -> bytes:
    ops = proto.OpList()
    op = ops.op.add(name="Foo")
    op.input_arg.add(name="x", type=1)
    return ops.SerializeToString()


# file name -> (its bytes, what the error line says): files that are no graph at all
NOT_GRAPHS = {
    "op_list.pb": (_op_list_bytes(), "not a GraphDef"),
    "bad_escape.pbtxt": (b'node { name: "a" op: "NoOp" attr { key: "s" value { s: "\\q" } } }\n',
                         "unknown escape '\\\\q' at line 1"),
    "nul_byte.pbtxt": (b'node { name: "a" op: "NoOp" }\nnode { name: "b\0" op: "NoOp" }\n',
                       "a NUL byte at line 2"),
    "deep.pbtxt": (b'node { name: "a" op: "NoOp" attr { key: "f" value { func { name: "f" '
                   + b'attr { key: "k" value { func { name: "f" ' * 20_000
                   + b"} } } " * 20_000 + b"} } } }\n", "nested too deeply"),
}


@pytest.mark.parametrize("name", sorted(NOT_GRAPHS))
@pytest.mark.parametrize("command", ["check", "fix --in-place", "verify"])
def test_a_file_that_is_no_graph_is_refused(tmp_path, name, command):
    data, problem = NOT_GRAPHS[name]
    path = tmp_path / name
    path.write_bytes(data)
    before = snapshot(tmp_path)
    assert_refused(run_cli(*command.split(), path), name, problem, before, tmp_path)


@pytest.mark.parametrize("command", ["check", "fix --in-place", "verify"])
def test_a_directory_named_like_a_graph_is_refused(tmp_path, command):
    folder = tmp_path / "x.pb"
    folder.mkdir()
    (folder / "notes.py").write_text("x = 1\n")
    before = snapshot(tmp_path)
    assert_refused(run_cli(*command.split(), folder), "x.pb", "is a directory", before, tmp_path)


def test_the_api_refuses_an_invalid_graph_message():
    import graphfix

    graph_def = GRAPHS["cycle"][0]()
    with pytest.raises(ValueError, match="cycle through"):
        graphfix.fix_graph(graph_def)
    with pytest.raises(ValueError, match="cycle through"):
        graphfix.check_graph(graph_def.SerializeToString())


# verify's options: each a usage error, said before TensorFlow is imported
VERIFY_OPTIONS = {
    "negative_steps": (["--steps", "-1"], "--steps must be at least 1"),
    "zero_steps": (["--steps", "0"], "--steps must be at least 1"),
    "steps_not_a_number": (["--steps", "many"], "not a number: 'many'"),
    "fetch_missing_node": (["--fetch", "ghost"], "has no node named 'ghost'"),
    "fetch_bad_port": (["--fetch", "a:x"], "'x' is not an output number"),
    "fetch_port_out_of_range": (["--fetch", "a/read:7"], "has 1 output(s)"),
    "fetch_garbage": (["--fetch", ":::"], "has no node named ''"),
    "huge_cluster": (["--cluster", "ps=100000000,worker=1"], "at most 64"),
    "cluster_garbage": (["--cluster", "ps=two"], "--cluster takes JOB=TASKS"),
    "cluster_job_twice": (["--cluster", "worker=1,worker=2"], "names job 'worker' twice"),
}


@pytest.mark.parametrize("case", sorted(VERIFY_OPTIONS))
def test_a_bad_verify_option_is_a_usage_error(tmp_path, case):
    graph = tmp_path / "fixed.pbtxt"
    graph.write_bytes(FIXED_SEED.read_bytes())
    words, problem = VERIFY_OPTIONS[case]
    before = snapshot(tmp_path)
    result = run_cli("verify", graph, *words)
    assert_refused(result, words[0], problem, before, tmp_path)


def test_a_huge_ps_tasks_costs_what_a_small_one_does(tmp_path):
    graph = tmp_path / "seed.pbtxt"
    graph.write_bytes(SEED.read_bytes())
    result = run_cli("check", graph, "--only", "replica-placement",
                     "--set", "replica-placement.ps_tasks=1000000000")
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert "/job:ps/task:0" in result.stdout


def test_no_graph_the_fixtures_hold_is_refused():
    # The rule must not refuse a real graph: every fixture graph (TF1 graphs, tf_keras and
    # TF2 SavedModels among them) is indexed, with its function library, as read.
    from graphfix.graph.index import index_for

    paths = [p for p in FIXTURES.rglob("*") if p.suffix in (".pb", ".pbtxt", ".meta")]
    assert len(paths) > 20
    for path in paths:
        graph_file = graphio.load(path.parent if path.stem == "saved_model" else path)
        for graph_def, meta in graph_file.graph_defs():
            index_for(graph_def, meta)
