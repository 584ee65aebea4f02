"""Reading a large graph in halves (graphfix.graph.halves): a forked child reads the second half of
the nodes while the command reads the first, and the index is the one a whole read makes.

The pytest process has TensorFlow's threads, where graphfix never forks: each check runs
in a fresh process, as the command does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import run_cli

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or len(os.sched_getaffinity(0)) < 2,
    reason="graphfix forks only on Linux with two CPUs or more")

# A graph past the size from which the index reads in halves, with what each column has to
# carry across: `_class` naming one node, several, or none in the `loc:@` form; inputs
# naming an output, a control input, an input from no node, a read of a later node (so
# the halves read each other's names).
_MAKE_GRAPH = """
from graphfix.graph.proto import pb
graph_def = pb().graph_pb2.GraphDef()
count = 12_001
for k in range(count):
    node = graph_def.node.add()
    node.name = f"layer_{k // 3}/n{k}"
    node.op = ("VariableV2", "Identity", "Assign")[k % 3]
    node.device = f"/device:GPU:{k // 3 % 4}" if k % 5 else ""
    if k:
        node.input.append(graph_def.node[k - 1].name)
    if k % 7 == 0 and k > 7:
        node.input.append(graph_def.node[k - 7].name + ":1")
        node.input.append("^" + graph_def.node[k // 2].name)
    if k % 3:
        entries = [b"loc:@" + graph_def.node[k - k % 3].name.encode()]
        if k % 11 == 0:
            entries.append(b"loc:@" + graph_def.node[k // 2].name.encode())
        if k % 13 == 0:
            entries = [b"plain"]
        node.attr["_class"].list.s.extend(entries)
graph_def.node[100].input.append("nowhere:0")
graph_def.node[200].input.append(graph_def.node[count - 1].name)
graph_def.versions.producer = 1234
graph_def.library.function.add().signature.name = "f"
"""

# Each fork counted; forking allowed, as the command allows it.
_COUNTING_FORKS = """
import json, os
from graphfix.graph import halves as aside
forks = []
real_fork = os.fork
def counted_fork():
    forks.append(1)
    return real_fork()
os.fork = counted_fork
aside.allow()
"""

_COMPARE = _MAKE_GRAPH + """
from graphfix.graph.index import GraphIndex

def state(index):
    flat, offsets = index._edge_table()
    return [index.names, index.ops, index.devices, sorted(index._points_to.items()),
            sorted(index._classes.items()), list(flat), list(offsets)]

whole = state(GraphIndex(graph_def))
""" + _COUNTING_FORKS + """
# setup
halves = state(GraphIndex(graph_def))
print(json.dumps({"forks": len(forks), "equal": halves == whole,
                  "differ": [k for k, (a, b) in enumerate(zip(whole, halves)) if a != b]}))
"""


def _run(code: str) -> dict:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_an_index_read_in_halves_is_the_index_read_whole():
    outcome = _run(_COMPARE)
    # The columns and the edge table, each read in halves by a forked child.
    assert outcome["forks"] == 2
    assert outcome["equal"], outcome["differ"]


def test_a_child_that_fails_leaves_its_half_to_the_parent():
    # A child that dies reading its half: the parent reads that half itself.
    setup = textwrap.dedent("""
        from graphfix.graph import index as graph
        real_read = graph._Columns.read
        def read(self, node_defs, position):
            if position and os.getpid() != parent:
                os._exit(3)
            return real_read(self, node_defs, position)
        parent = os.getpid()
        graph._Columns.read = read
    """)
    outcome = _run(_COMPARE.replace("# setup", setup))
    assert outcome["forks"] == 2
    assert outcome["equal"], outcome["differ"]


def test_children_reaped_by_the_system_are_no_error():
    # Started by a process that ignores SIGCHLD (inherited across exec), this one's children
    # are reaped by the kernel: waiting for them finds none.
    ignored = "import signal\nsignal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"
    assert _run(_COMPARE.replace("# setup", ignored))["equal"]
    dying = ignored + textwrap.dedent("""
        from graphfix.graph import index as graph
        real_read = graph._Columns.read
        parent = os.getpid()
        def read(self, node_defs, position):
            if position and os.getpid() != parent:
                os._exit(3)
            return real_read(self, node_defs, position)
        graph._Columns.read = read
    """)
    assert _run(_COMPARE.replace("# setup", dying))["equal"]
    assert _run(_SERIALIZE.replace("# setup", ignored))["forks"] == 4


def test_no_fork_with_another_thread_running_nor_outside_the_command():
    setup = textwrap.dedent("""
        import threading
        stop = threading.Event()
        threading.Thread(target=stop.wait, daemon=True).start()
    """)
    assert _run(_COMPARE.replace("# setup", setup))["forks"] == 0
    # A library does not fork its host's process: without `allow()`, no fork.
    assert _run(_COMPARE.replace("aside.allow()", "aside.allow(False)"))["forks"] == 0


def test_an_interrupted_parent_leaves_no_child_behind():
    code = textwrap.dedent("""
        import os, time
        from graphfix.graph import halves as aside
        aside.allow()
        def read(start, stop):
            if start:  # the child's half: it would run on for a minute
                time.sleep(60)
            raise KeyboardInterrupt
        try:
            aside.in_halves(10, read, bytes, bytes)
        except KeyboardInterrupt:
            pass
        # Every child of this process has been waited for: none is left.
        try:
            os.waitpid(-1, os.WNOHANG)
            print("child left")
        except ChildProcessError:
            print("none left")
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=30)
    assert result.stdout.strip() == "none left", result.stderr


_SERIALIZE = _MAKE_GRAPH + _COUNTING_FORKS + """
from graphfix.graph import graphfile as graphio
# setup
whole = graph_def.SerializeToString(deterministic=True)
for source_size in (0, len(whole)):  # serialized whole, and node by node
    graph_file = graphio.GraphFile(path=None, kind="graphdef", text=False,
                                   message=graph_def, source_size=source_size)
    assert b"".join(graph_file.chunks()) == whole, source_size
print(json.dumps({"forks": len(forks)}))
"""

_DIES = """
real_part = graphio._serialized_part
def part(graph_def, start, stop):
    if DYING:
        os._exit(3)
    return real_part(graph_def, start, stop)
graphio._serialized_part = part
"""


def test_a_graph_serialized_in_halves_is_the_graph_serialized_whole():
    # Two children serialize half the nodes each, the other fields (versions, library)
    # after the last node.
    assert _run(_SERIALIZE)["forks"] == 4
    # A child that dies: its part is made here.
    for dying in ("start == 0", "stop is None", "True"):
        setup = _DIES.replace("DYING", dying)
        assert _run(_SERIALIZE.replace("# setup", setup))["forks"] == 4
    # Top-level fields this protobuf does not know stay where whole serialization puts
    # them: such a graph is serialized here.
    setup = "graph_def.ParseFromString(graph_def.SerializeToString() + b'\\xf8\\x07\\x05')"
    assert _run(_SERIALIZE.replace("# setup", setup))["forks"] == 0


def _write_big_graph(path) -> None:
    code = _MAKE_GRAPH + f"open({str(path)!r}, 'wb').write(graph_def.SerializeToString())"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def test_the_command_writes_what_a_whole_read_writes(tmp_path):
    # `graphfix fix` reads a large graph in halves; the API, in the pytest process, whole.
    _write_big_graph(tmp_path / "big.pb")
    from graphfix import api
    from graphfix.graph import graphfile as graphio

    run_cli("fix", tmp_path / "big.pb", "-o", tmp_path / "cli.pb", "--only", "variables-to-cpu")
    fixed, changes = api.fix_graph(graphio.load(tmp_path / "big.pb").message,
                                   only=["variables-to-cpu"])
    assert changes
    assert (tmp_path / "cli.pb").read_bytes() == fixed.SerializeToString(deterministic=True)


def test_jobs_1_keeps_the_command_in_one_process(tmp_path):
    _write_big_graph(tmp_path / "big.pb")
    from graphfix.graph import graphfile as graphio
    from graphfix.graph.proto import pb

    meta = pb().meta_graph_pb2.MetaGraphDef()
    meta.graph_def.CopyFrom(graphio.load(tmp_path / "big.pb").message)
    (tmp_path / "big.meta").write_bytes(meta.SerializeToString())
    # The command as `graphfix` runs it, each fork said on stderr.
    command = textwrap.dedent("""
        import os, sys
        real_fork = os.fork
        def said_fork():
            pid = real_fork()
            if pid:
                print("fork", file=sys.stderr, flush=True)
            return pid
        os.fork = said_fork
        from graphfix.cli.main import main
        main()
    """)
    forks = {}
    for name in ("big.pb", "big.meta"):
        for jobs in ("1", "2"):
            result = subprocess.run(
                [sys.executable, "-c", command, "fix", str(tmp_path / name), "-o",
                 str(tmp_path / f"out{jobs}-{name}"), "--only", "variables-to-cpu",
                 "--jobs", jobs],
                capture_output=True, text=True, timeout=300)
            assert result.returncode == 1, result.stderr
            forks[name, jobs] = result.stderr.count("fork")
        out1, out2 = (tmp_path / f"out{jobs}-{name}" for jobs in ("1", "2"))
        assert out1.read_bytes() == out2.read_bytes()
    # From 2 jobs, two processes: the index's columns read in halves, a GraphDef written
    # in halves (a MetaGraphDef is written whole).
    assert forks == {("big.pb", "1"): 0, ("big.pb", "2"): 3,
                     ("big.meta", "1"): 0, ("big.meta", "2"): 1}
