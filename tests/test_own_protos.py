"""graphfix's own protobuf messages (issue 34): TF's wire format and names, read and written
as TF's own classes do on every graph at hand, unknown fields kept, and check and fix of
every graph format in a process where `import tensorflow` fails."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO
from graphfix.graph import graphfile as graphio
from graphfix.graph import proto
from proto_roundtrip import assert_same_as_tf, graph_files

TWO_TOWER = FIXTURES / "update_ops" / "two_tower_slim_bn"
# TF's top-level messages graphfix reads and writes, and all they hold.
ROOTS = ("tensorflow.GraphDef", "tensorflow.MetaGraphDef", "tensorflow.SavedModel",
         "tensorflow.VariableDef", "tensorflow.OpList")

# Graphs TF itself writes, of every kind: a TF1 training graph with a function library (a
# tf.function, a v2 while loop) as .pb and .pbtxt, its MetaGraphDef (collections: the
# VariableDefs, the train op, a saver), a TF1 SavedModel with a signature, and a TF2
# SavedModel (its object graph, structured signatures, a function's captured variable).
BUILD = textwrap.dedent("""
    import sys
    from pathlib import Path
    import tensorflow as tf

    out = Path(sys.argv[1])
    module = tf.Module()
    module.v = tf.Variable(2.0)
    module.f = tf.function(lambda x: x * module.v, input_signature=[tf.TensorSpec([None], tf.float32)])
    tf.saved_model.save(module, str(out / "tf2_saved"))

    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [None, 3], name="x")
        w = tf1.get_variable("w", [3, 1], use_resource=True)
        step = tf1.train.get_or_create_global_step()

        @tf.function
        def scaled(t):
            return tf.while_loop(lambda i, t: i < 2, lambda i, t: (i + 1, t * 0.5), (0, t))[1]

        loss = tf.reduce_mean(scaled(tf.matmul(x, w)))
        train = tf1.train.AdamOptimizer().minimize(loss, global_step=step, name="train")
        saver = tf1.train.Saver()
        tf1.add_to_collection("my_nodes", train)
        graph_def = graph.as_graph_def()
        (out / "train.pb").write_bytes(graph_def.SerializeToString(deterministic=True))
        tf.io.write_graph(graph_def, str(out), "train.pbtxt", as_text=True)
        tf1.train.export_meta_graph(str(out / "train.meta"), graph=graph, saver_def=saver.as_saver_def())
        with tf1.Session(graph=graph) as session:
            session.run(tf1.global_variables_initializer())
            builder = tf1.saved_model.Builder(str(out / "tf1_saved"))
            signature = tf1.saved_model.predict_signature_def({"x": x}, {"loss": loss})
            builder.add_meta_graph_and_variables(session, ["serve"], {"predict": signature})
            builder.save()
""")


@pytest.fixture(scope="module")
def tf_written(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tf_written")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-c", BUILD, str(out)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_committed_descriptors_match_the_proto_files():
    """tools/gen_protos.py's output, made again from graphfix/graph/protos/*.proto, is the
    committed graphfix/graph/protos/descriptors.py, byte for byte. (protoc runs in a process
    of its own: grpcio-tools' compiler beside TF's protobuf libraries in a test worker can
    crash the worker.)"""
    done = subprocess.run([sys.executable, str(REPO / "tools" / "gen_protos.py"), "--check"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def _reachable(roots) -> dict:
    """full name -> descriptor of every message and enum the `roots` hold."""
    seen, pending = {}, list(roots)
    while pending:
        descriptor = pending.pop()
        if descriptor.full_name in seen:
            continue
        seen[descriptor.full_name] = descriptor
        for field in getattr(descriptor, "fields", ()):
            pending.extend(t for t in (field.message_type, field.enum_type) if t is not None)
    return seen


def _field_facts(descriptor) -> dict:
    """name -> what decides a field's wire format and text: its DescriptorProto entry (number,
    type, label, type name, packed and deprecated options, oneof, proto3 optional) and its
    file's syntax (proto2 fields keep presence)."""
    from google.protobuf import descriptor_pb2

    message = descriptor_pb2.DescriptorProto()
    descriptor.CopyToProto(message)
    file = descriptor_pb2.FileDescriptorProto()
    descriptor.file.CopyToProto(file)
    facts = {}
    for field in message.field:
        field.ClearField("json_name")  # (not written by the protoc TF's modules come from)
        oneof = message.oneof_decl[field.oneof_index].name if field.HasField("oneof_index") else None
        field.ClearField("oneof_index")
        facts[field.name] = (field.SerializeToString(deterministic=True), oneof, file.syntax)
    return facts


def test_messages_have_tensorflows_wire_format(tf):
    """Every message and enum the installed TF's graph formats hold is graphfix's too, under
    the same full name, and each field and enum value TF has, graphfix has as TF has it
    (graphfix may know fields of a newer TF); nothing TF's files define is left unknown."""
    tf_types = _reachable(proto.tf_class(name).DESCRIPTOR for name in ROOTS)
    ours = _reachable(proto.message_class(name).DESCRIPTOR for name in ROOTS)
    assert set(tf_types) <= set(ours), sorted(set(tf_types) - set(ours))
    assert len(tf_types) > 80
    for full_name, theirs in tf_types.items():
        mine = ours[full_name]
        if hasattr(theirs, "values_by_name"):  # an enum
            missing = {v.name: v.number for v in theirs.values
                       if v.name not in mine.values_by_name
                       or mine.values_by_name[v.name].number != v.number}
            assert not missing, (full_name, missing)
            continue
        their_facts, my_facts = _field_facts(theirs), _field_facts(mine)
        for name, facts in their_facts.items():
            assert my_facts.get(name) == facts, (full_name, name)
        assert mine.GetOptions().map_entry == theirs.GetOptions().map_entry, full_name


def test_every_graph_reads_and_writes_as_tf_does(tf_written):
    """Each fixture graph, and the graphs TF writes above (.pb, .pbtxt, .meta, TF1 and TF2
    SavedModels), read with graphfix's classes and TF's: the same serialization both ways,
    the same text (graphfix's `fix` writes what TF would). The real-model corpus graphs
    are compared where their tests build them (test_real_models*.py)."""
    files = graph_files(FIXTURES) + graph_files(tf_written)
    kinds = {p.suffix or "saved_model" for p in files}
    assert kinds == {".pb", ".pbtxt", ".meta", "saved_model"}, kinds
    canonical = [p.name for p in files if assert_same_as_tf(p)]
    assert len(files) > 60 and {"train.pb", "train.meta", "tf2_saved", "tf1_saved"} <= set(
        canonical), canonical
    saved = proto.SavedModel.FromString((tf_written / "tf2_saved" / "saved_model.pb").read_bytes())
    assert saved.meta_graphs[0].object_graph_def.nodes, "TF2's object graph read as fields"


def test_a_text_saved_model_with_any_fields_reads_as_tf_reads_it(tmp_path, tf):
    """A saved_model.pbtxt whose `Any` fields (the MetaInfoDef's, an `any_list` collection's)
    TF's text format writes expanded, `[type.googleapis.com/tensorflow.VariableDef] {...}`:
    graphfix reads it as TF does and writes the same text back (a fix of it, unchanged)."""
    from google.protobuf import text_format

    saved = proto.tf_class("tensorflow.SavedModel")(saved_model_schema_version=1)
    meta = saved.meta_graphs.add()
    meta.graph_def.CopyFrom(proto.to_tf(graphio.load(TWO_TOWER / "before.pbtxt").message))
    variable = proto.tf_class("tensorflow.VariableDef")(variable_name="w:0", trainable=True)
    meta.meta_info_def.any_info.Pack(variable)
    meta.collection_def["extras"].any_list.value.add().Pack(variable)
    text = text_format.MessageToString(saved)
    assert "[type.googleapis.com/tensorflow.VariableDef] {" in text
    (tmp_path / "sm").mkdir()
    (tmp_path / "sm" / "saved_model.pbtxt").write_text(text)
    assert_same_as_tf(tmp_path / "sm")
    loaded = graphio.load(tmp_path / "sm")
    assert loaded.serialize() == text.encode()
    unpacked = proto.VariableDef()
    assert loaded.message.meta_graphs[0].meta_info_def.any_info.Unpack(unpacked)
    assert unpacked.variable_name == "w:0"


def _with_unknown_fields(message, varint_number: int, bytes_number: int):
    """`message` with two fields no .proto defines: a varint and a length-delimited one."""
    def tag(number, wire):
        return graphio._varint(number << 3 | wire)

    message.MergeFromString(tag(varint_number, 0) + b"\x07" + tag(bytes_number, 2) + b"\x03abc")
    return message


def test_unknown_fields_survive_a_round_trip_and_a_fix(tmp_path, tf):
    """A NodeDef and a MetaGraphDef's MetaInfoDef holding fields of a newer TF (unknown to
    both graphfix and TF): kept by a read and write, by an unchanged graph's fix (the
    same bytes) and by a fix that rewrites the graph; TF reads them the same."""
    graph_def = graphio.load(TWO_TOWER / "before.pbtxt").message
    _with_unknown_fields(graph_def.node[0], 99, 100)
    meta = proto.MetaGraphDef()
    meta.graph_def.CopyFrom(graph_def)
    meta.meta_info_def.tags.append("train")
    _with_unknown_fields(meta.meta_info_def, 41, 42)
    data = meta.SerializeToString(deterministic=True)
    assert proto.MetaGraphDef.FromString(data).SerializeToString(deterministic=True) == data
    theirs = proto.tf_class("tensorflow.MetaGraphDef").FromString(data)
    assert theirs.SerializeToString(deterministic=True) == data
    assert proto.unknown_field_count(theirs.meta_info_def) == 2
    assert proto.unknown_field_count(theirs.graph_def.node[0]) == 2

    path = tmp_path / "model.meta"
    path.write_bytes(data)
    unchanged = tmp_path / "unchanged.meta"
    graphio.save(graphio.load(path), unchanged)
    assert unchanged.read_bytes() == data
    fixed = tmp_path / "fixed.meta"
    done = subprocess.run([sys.executable, "-m", "graphfix", "fix", "--only", "update-ops",
                           str(path), "-o", str(fixed)], capture_output=True, text=True,
                          cwd=REPO, timeout=300)
    assert done.returncode == 1 and "1 change(s)" in done.stdout, done.stderr[-2000:]
    assert fixed.read_bytes() != data
    after = proto.MetaGraphDef.FromString(fixed.read_bytes())
    assert proto.unknown_field_count(after.meta_info_def) == 2
    node = next(n for n in after.graph_def.node if n.name == graph_def.node[0].name)
    assert proto.unknown_field_count(node) == 2


# `python -m graphfix ARGS` in a process where any import of `tensorflow` fails.
WITHOUT_TF = textwrap.dedent("""
    import runpy, sys

    class NoTensorFlow:
        def find_spec(self, name, path=None, target=None):
            if name == "tensorflow" or name.startswith("tensorflow."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    sys.meta_path.insert(0, NoTensorFlow())
    sys.argv = ["graphfix", *sys.argv[1:]]
    runpy.run_module("graphfix", run_name="__main__")
""")


def _graphfix(*args, tf_importable: bool):
    command = ([sys.executable, "-c", WITHOUT_TF] if not tf_importable
               else [sys.executable, "-m", "graphfix"])
    return subprocess.run([*command, *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=300)


def test_check_and_fix_every_format_without_tensorflow(tmp_path):
    """`graphfix check` and `fix --only update-ops` on a .pb, a .pbtxt, a .meta and a
    SavedModel, binary and text (an `Any` in its expanded text form), where `import tensorflow` fails: the finding, and a fixed graph byte for
    byte what a process with TF writes. (update-ops needs no kernel answers; placement's
    own check without TF is the kernel tables' matter.)"""
    graph_def = graphio.load(TWO_TOWER / "before.pbtxt").message
    meta = proto.MetaGraphDef()
    meta.graph_def.CopyFrom(graph_def)
    meta.meta_info_def.tags.append("serve")
    saved = proto.SavedModel(saved_model_schema_version=1)
    saved.meta_graphs.add().CopyFrom(meta)
    saved.meta_graphs[0].meta_info_def.any_info.Pack(proto.VariableDef(variable_name="w:0"))
    inputs = {"model.pbtxt": (TWO_TOWER / "before.pbtxt").read_bytes(),
              "model.pb": graph_def.SerializeToString(deterministic=True),
              "model.meta": meta.SerializeToString(deterministic=True),
              "saved/saved_model.pb": saved.SerializeToString(deterministic=True),
              "text_saved/saved_model.pbtxt": graphio.serialize(saved, text=True)}
    for name, data in inputs.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(data)
    for name in inputs:
        source = tmp_path / name.partition("/saved_model.")[0]
        check = _graphfix("check", "--only", "update-ops", source, tf_importable=False)
        assert check.returncode == 1, check.stderr[-2000:]
        assert "@train: error: update-ops: train op train does not run" in check.stdout
        assert "1 finding(s) (1 fixable)" in check.stdout
        outputs = []
        for tf_importable in (False, True):
            out = tmp_path / f"fixed_{tf_importable}_{source.name}"
            fix = _graphfix("fix", "--only", "update-ops", source, "-o", out,
                            tf_importable=tf_importable)
            assert fix.returncode == 1 and "1 change(s)" in fix.stdout, fix.stderr[-2000:]
            outputs.append((out / Path(name).name if out.is_dir() else out).read_bytes())
        assert outputs[0] == outputs[1], f"{name}: fixed otherwise without TF"
    fixed_text = (tmp_path / "fixed_False_model.pbtxt").read_bytes()
    assert fixed_text == (TWO_TOWER / "after.pbtxt").read_bytes()


@pytest.mark.both_installs  # (where TF is installed, a graph fix still leaves it unimported)
def test_a_graphdef_read_builds_only_its_own_files():
    """Reading a GraphDef builds graph.proto and what it imports, not the MetaGraphDef's
    files (nor any of TF)."""
    script = textwrap.dedent(f"""
        import sys
        from graphfix.graph import graphfile, proto
        graphfile.load({str(TWO_TOWER / 'before.pbtxt')!r})
        built = {{name.rpartition("/")[2] for name in proto.built_files()}}
        assert "graph.proto" in built and "node_def.proto" in built, built
        assert not built & {{"meta_graph.proto", "saved_model.proto", "struct.proto"}}, built
        assert not [m for m in sys.modules if m.split(".")[0] == "tensorflow"]
        print(len(built))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_graphfix_messages_live_beside_tfs(tf):
    """With TF imported, TF's GraphDef and graphfix's are two classes of one full name in
    two pools: TF's pool still finds TF's own; TF's runtime takes graphfix's messages once
    `to_tf` has made them TF's; and the API gives back the class it was given."""
    from google.protobuf import descriptor_pool

    import graphfix

    ours, theirs = proto.GraphDef, tf.compat.v1.GraphDef
    assert ours is not theirs and ours.DESCRIPTOR.full_name == theirs.DESCRIPTOR.full_name
    default = descriptor_pool.Default().FindMessageTypeByName("tensorflow.GraphDef")
    assert default is theirs.DESCRIPTOR and proto.is_own(ours()) and not proto.is_own(theirs())
    graph_def = graphio.load(TWO_TOWER / "before.pbtxt").message
    with pytest.raises(TypeError):
        theirs().CopyFrom(graph_def)  # (why the boundary converts)
    with tf.Graph().as_default() as graph:
        tf.compat.v1.import_graph_def(proto.to_tf(graph_def), name="")
    assert len(graph.get_operations()) == len(graph_def.node)
    fixed, changes = graphfix.fix_graph(proto.to_tf(graph_def), only=["update-ops"])
    assert type(fixed) is theirs and changes
    fixed_own, _ = graphfix.fix_graph(graph_def, only=["update-ops"])
    assert type(fixed_own) is ours and proto.to_tf(fixed_own) == fixed
