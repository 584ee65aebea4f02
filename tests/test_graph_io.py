"""Graph I/O: every format round-trips in its own format, deterministically, without TF."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import graphfix
from graphfix.graph import graphfile as graphio
from graphfix.graph import proto

from conftest import FIXTURES, REPO, run_cli

SEED = FIXTURES / "variables_to_cpu" / "seed000_ref"


def _seed_graph_def():
    return graphio.load(SEED / "before.pbtxt").message


@pytest.mark.both_installs  # (where TF is installed, a graph fix still leaves it unimported)
def test_a_graph_fix_loads_neither_tf_nor_the_source_tooling(tmp_path):
    """`graphfix fix GRAPH`: no TF runtime, no libcst, none of graphfix's own source
    parsing (the transforms' pre-checks load it on first use), and no typer or rich (the
    graph path's command line is `graphfix.cli.graphpath`)."""
    script = textwrap.dedent(
        f"""
        import sys
        from graphfix.cli.main import main
        try:
            main(["fix", {str(SEED / 'before.pbtxt')!r}, "-o", {str(tmp_path / 'out.pbtxt')!r}])
        except SystemExit as stop:
            assert stop.code == 1, stop.code
        print(sorted(m for m in sys.modules if m.startswith(("tensorflow.python", "libcst",
                     "graphfix.source.syntax", "graphfix.transforms.feed_to_assign.prechecks",
                     "graphfix.source.cache", "typer", "rich", "click"))))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines()[-1] == "[]"


def test_proto_loading_does_not_import_tf_and_tf_still_imports_after():
    script = textwrap.dedent(
        f"""
        import sys, time
        import graphfix
        from graphfix.graph import graphfile as graphio
        start = time.perf_counter()
        graph = graphio.load({str(SEED / 'before.pbtxt')!r})
        fixed, changes = graphfix.fix_graph(graph.message)
        assert changes, "the seed graph has a variable to move"
        assert "tensorflow.python" not in sys.modules, sorted(m for m in sys.modules if m.startswith("tensorflow"))[:5]
        assert "tensorflow" not in sys.modules
        print("graph path seconds", round(time.perf_counter() - start, 3))
        import tensorflow as tf
        from graphfix.graph import proto
        assert tf.compat.v1.GraphDef is not type(fixed), "graphfix's own GraphDef, not TF's"
        tf_fixed = proto.to_tf(fixed)
        assert type(tf_fixed) is tf.compat.v1.GraphDef
        assert (tf_fixed.SerializeToString(deterministic=True)
                == fixed.SerializeToString(deterministic=True))
        graph = tf.Graph()
        with graph.as_default():
            tf.compat.v1.import_graph_def(tf_fixed, name="")
        with tf.compat.v1.Session(graph=graph, config=tf.compat.v1.ConfigProto(allow_soft_placement=True)) as s:
            s.run("init")
            print("output", s.run("output:0"))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=REPO / "tests", timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "output 2" in result.stdout


def _write_formats(tmp_path, tf):
    """The seed graph as .pb, .pbtxt, .meta and a SavedModel with variables/ and assets/."""
    tf1 = tf.compat.v1
    graph_def = _seed_graph_def()
    (tmp_path / "g.pb").write_bytes(graph_def.SerializeToString(deterministic=True))
    (tmp_path / "g.pbtxt").write_bytes(graphio.serialize(graph_def, text=True))
    graph = tf.Graph()
    with graph.as_default():
        tf1.import_graph_def(proto.to_tf(graph_def), name="")
        meta = tf1.train.export_meta_graph(graph=graph, clear_devices=False)
        meta.collection_def["my_collection"].node_list.value.append("output")
    (tmp_path / "g.meta").write_bytes(meta.SerializeToString(deterministic=True))
    saved = tmp_path / "saved"
    graph = tf.Graph()  # the seed's variables, built on the CPU: export must run here
    with graph.as_default():
        tf1.Variable(1, name="a", use_resource=False)
        tf1.Variable(2, name="c", use_resource=False)
        tf1.Variable(2, name="d", use_resource=False)
        init = tf1.global_variables_initializer()
        with tf1.Session(graph=graph) as session:
            session.run(init)
            builder = tf1.saved_model.Builder(str(saved))
            builder.add_meta_graph_and_variables(session, ["serve"])
            builder.save()
    sm = graphio.load(saved)
    # Put the GPU pins back into the SavedModel's graph, as the exporting machine had them.
    pinned = {n.name: n.device for n in graph_def.node}
    for node in sm.message.meta_graphs[0].graph_def.node:
        node.device = pinned.get(node.name, node.device)
    graphio.save(sm)
    (saved / "assets").mkdir(exist_ok=True)
    (saved / "assets" / "vocab.txt").write_text("hello\n")
    return saved


def test_each_format_is_written_in_the_format_read(tmp_path, tf):
    saved = _write_formats(tmp_path, tf)
    for name in ("g.pb", "g.pbtxt", "g.meta"):
        out = tmp_path / f"fixed_{name}"
        run_cli("fix", tmp_path / name, "-o", out, check_exit=1)
        loaded = graphio.load(out)
        assert loaded.text == name.endswith(".pbtxt")
        assert loaded.kind == ("metagraph" if name.endswith(".meta") else "graphdef")
        graph_def = loaded.graph_defs()[0][0]
        assert {n.name: n.device for n in graph_def.node}["d"] == "/device:CPU:0"
        if name.endswith(".meta"):  # collections kept
            assert list(loaded.message.collection_def["my_collection"].node_list.value) == ["output"]
    out = tmp_path / "fixed_saved"
    run_cli("fix", saved, "-o", out, check_exit=1)
    assert (out / "saved_model.pb").exists()
    assert (out / "assets" / "vocab.txt").read_text() == "hello\n"
    for entry in (saved / "variables").iterdir():
        assert (out / "variables" / entry.name).read_bytes() == entry.read_bytes()
    fixed = graphio.load(out)
    assert {n.name: n.device for n in fixed.graph_defs()[0][0].node}["d"] == "/device:CPU:0"
    # The fixed SavedModel loads and runs with TF's own loader.
    tf1 = tf.compat.v1
    graph = tf.Graph()
    with tf1.Session(graph=graph, config=tf1.ConfigProto(allow_soft_placement=True)) as session:
        tf1.saved_model.loader.load(session, ["serve"], str(out))
        assert session.run("d:0") == 2


def test_unchanged_graph_is_unchanged_byte_for_byte(tmp_path):
    after = FIXTURES / "variables_to_cpu" / "seed000_ref" / "after.pbtxt"
    graph_def = graphio.load(after).message
    binary = tmp_path / "g.pb"
    binary.write_bytes(graph_def.SerializeToString(deterministic=True))
    original = binary.read_bytes()
    result = run_cli("fix", binary, "--in-place", check_exit=0)
    assert "0 change(s)" in result.stdout
    assert binary.read_bytes() == original
    out = tmp_path / "copy.pb"
    run_cli("fix", binary, "-o", out, check_exit=0)
    assert out.read_bytes() == original


def test_in_place_is_atomic_and_keeps_mode(tmp_path):
    target = tmp_path / "g.pbtxt"
    target.write_bytes((SEED / "before.pbtxt").read_bytes())
    target.chmod(0o640)
    run_cli("fix", target, "--in-place", check_exit=1)
    assert oct(target.stat().st_mode & 0o777) == "0o640"
    assert [p.name for p in tmp_path.iterdir()] == ["g.pbtxt"], "no temporary file left"
    assert graphio.load(target).message != _seed_graph_def()


def test_api_returns_the_kind_it_was_given(tmp_path, tf):
    graph_def = _seed_graph_def()
    fixed, changes = graphfix.fix_graph(graph_def)
    assert type(fixed) is type(graph_def) and fixed is not graph_def and changes
    data, _ = graphfix.fix_graph(graph_def.SerializeToString())
    assert isinstance(data, bytes)
    assert data == fixed.SerializeToString(deterministic=True)
    tf_fixed, _ = graphfix.fix_graph(proto.to_tf(graph_def))  # TF's message: TF's back
    assert type(tf_fixed) is tf.compat.v1.GraphDef and proto.from_tf(tf_fixed) == fixed
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(proto.to_tf(graph_def), name="")
    fixed_graph, changes = graphfix.fix_graph(graph)
    assert isinstance(fixed_graph, tf.Graph) and changes
    assert fixed_graph.get_operation_by_name("d").device == "/device:CPU:0"
    assert graph.get_operation_by_name("d").device == "/device:GPU:0", "input graph untouched"
    path_result, _ = graphfix.fix_graph(SEED / "before.pbtxt")
    assert type(path_result) is type(graph_def)
    written, _ = graphfix.fix_graph(SEED / "before.pbtxt", out=tmp_path / "o.pbtxt")
    assert graphio.load(written).message == path_result
    findings = graphfix.check_graph(graph_def, target_devices=["/gpu:0"])
    assert [f.node for f in findings] == ["d"] and findings[0].severity == "error"


def _graph_of_large_nodes():
    """The seed graph plus nodes of ~2 KB and one of ~20 KB (a Const holding a tensor,
    several attrs in its map), a function library, versions and debug info: every field a
    GraphDef can hold."""
    graph_def = _seed_graph_def()
    for k in range(40):
        node = graph_def.node.add(name=f"big_{k}", op="Const", device="/device:GPU:0")
        node.attr["dtype"].type = 1
        node.attr["value"].tensor.dtype = 1
        size = 500 if k else 5000  # one node over 16 KiB: a three-byte length
        node.attr["value"].tensor.tensor_shape.dim.add(size=size)
        node.attr["value"].tensor.tensor_content = bytes(range(250)) * (size * 4 // 250)
        node.attr["_output_shapes"].list.shape.add().dim.add(size=500)
        node.attr["zz_note"].s = b"maps serialize sorted by key"
    graph_def.library.function.add().signature.name = "a_function"
    graph_def.versions.producer = 1087
    graph_def.debug_info.files.append("model.py")
    return graph_def


def test_large_nodes_stream_the_bytes_a_whole_serialization_gives(tmp_path):
    graph_def = _graph_of_large_nodes()
    whole = graph_def.SerializeToString(deterministic=True)
    assert b"".join(graphio.graph_def_chunks(graph_def)) == whole
    source = tmp_path / "g.pb"
    source.write_bytes(whole)
    loaded = graphio.load(source)
    assert not isinstance(loaded.chunks(), list), "nodes of ~2 KB are written one by one"
    out = tmp_path / "fixed.pb"
    run_cli("fix", source, "-o", out, check_exit=1)
    fixed = graphio.load(out).message
    assert out.read_bytes() == fixed.SerializeToString(deterministic=True)
    assert {n.name: n.device for n in fixed.node}["d"] == "/device:CPU:0"
    assert fixed.library == graph_def.library and fixed.debug_info == graph_def.debug_info
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fixed.pb", "g.pb"], "no temporary file left"


def test_many_nodes_stream_in_batches_of_about_a_mebibyte():
    graph_def = _graph_of_large_nodes()
    for k in range(30000):  # small nodes, then large ones right after them
        graph_def.node.add(name=f"small_{k}", op="NoOp", input=[f"^small_{k - 1}"] if k else [])
    for k in range(8):
        node = graph_def.node.add(name=f"huge_{k}", op="Const")
        node.attr["value"].tensor.tensor_content = bytes(256 * 1024)
    chunks = list(graphio.graph_def_chunks(graph_def))
    assert b"".join(chunks) == graph_def.SerializeToString(deterministic=True)
    assert len(chunks) > 3
    assert max(map(len, chunks[:-2])) < 3 << 20


def test_a_write_that_fails_midway_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "g.pb"
    target.write_bytes(b"old")

    def pieces():
        yield b"new, part one"
        raise RuntimeError("serialization failed")

    try:
        graphio.write_output(target, pieces())
    except RuntimeError:
        pass
    else:
        raise AssertionError("the failure reaches the caller")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["g.pb"]


def _large_graph_def():
    """A GraphDef of 12,002 nodes with what an index has to read right: `_class` naming one
    node, several, or none in the `loc:@` form; inputs naming an output, a control input,
    a read of a later node; fields besides the nodes; float32 variables. (It is a valid graph: an input from
    no node, or a read that closes a cycle, makes a graph graphfix refuses.)"""
    graph_def = proto.GraphDef()
    count = 12_001
    for k in range(count):
        node = graph_def.node.add()
        node.name = f"layer_{k // 3}/n{k}"
        node.op = ("VariableV2", "Identity", "Assign")[k % 3]
        # (float32 attrs: a group moves only where TF has a kernel for every member)
        node.attr["dtype" if k % 3 == 0 else "T"].type = 1
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
    late = graph_def.node.add(name="late", op="NoOp")
    graph_def.node[200].input.append("^" + late.name)
    graph_def.versions.producer = 1234
    graph_def.library.function.add().signature.name = "f"
    return graph_def


def test_the_command_writes_a_large_graph_as_the_api_does_for_any_jobs(tmp_path):
    graph_def = _large_graph_def()
    (tmp_path / "big.pb").write_bytes(graph_def.SerializeToString())
    meta = proto.MetaGraphDef()
    meta.graph_def.CopyFrom(graph_def)
    (tmp_path / "big.meta").write_bytes(meta.SerializeToString())
    fixed, changes = graphfix.fix_graph(graph_def, only=["variables-to-cpu"])
    assert changes
    fixed_meta, _ = graphfix.fix_graph(meta, only=["variables-to-cpu"])
    expected = {"big.pb": fixed.SerializeToString(deterministic=True),
                "big.meta": fixed_meta.SerializeToString(deterministic=True)}
    for name, data in expected.items():
        for jobs in ("1", "2"):
            out = tmp_path / f"out{jobs}-{name}"
            run_cli("fix", tmp_path / name, "-o", out, "--only", "variables-to-cpu",
                    "--jobs", jobs, check_exit=1)
            assert out.read_bytes() == data, (name, jobs)
