"""The shared graph model agrees with TF: device specs, op signatures, colocation groups."""

from __future__ import annotations

import json

import pytest

from graphfix.devices import DeviceSpec
from graphfix.graph import GraphError, GraphIndex, parse_input

DEVICE_STRINGS = [
    "/gpu:0",
    "/cpu:*",
    "/GPU:1",
    "/job:ps/task:3",
    "/job:worker/replica:1/task:2/device:GPU:3",
    "/job:worker/device:CPU:0",
    "/device:GPU:*",
    "CPU:0",
    "",
]


@pytest.mark.parametrize("text", DEVICE_STRINGS)
def test_device_spec_parses_like_tf(text, tf):
    ours = DeviceSpec.parse(text)
    theirs = tf.DeviceSpec.from_string(text)
    assert ours.to_string() == theirs.to_string()
    assert (ours.job, ours.replica, ours.task, ours.device_type, ours.device_index) == (
        theirs.job, theirs.replica, theirs.task, theirs.device_type, theirs.device_index)


@pytest.mark.parametrize("a", DEVICE_STRINGS[:6])
@pytest.mark.parametrize("b", DEVICE_STRINGS[:6])
def test_device_merge_like_tf(a, b, tf):
    merged = tf.DeviceSpec.from_string(a).make_merged_spec(tf.DeviceSpec.from_string(b))
    assert DeviceSpec.parse(a).merge(DeviceSpec.parse(b)).to_string() == merged.to_string()


def test_bad_device_string():
    with pytest.raises(ValueError, match="unknown part 'bogus:1'"):
        DeviceSpec.parse("/bogus:1")


def test_op_signature_snapshot_matches_installed_tensorflow(tf):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    from gen_op_signatures import current_signatures

    from importlib import resources

    shipped = json.loads(resources.files("graphfix").joinpath("op_signatures.json").read_text())
    live = current_signatures()
    common = set(shipped["ops"]) & set(live)
    assert len(common) > 1500
    changed = sorted(op for op in common if shipped["ops"][op] != live[op])
    assert changed == [], f"regenerate with tools/gen_op_signatures.py: {changed[:10]}"


def test_parse_input():
    assert parse_input("a/b:2") == ("a/b", 2)
    assert parse_input("^init") == ("init", -1)
    assert parse_input("x") == ("x", 0)


def _groups_by_member(index):
    return {n.name: index.group_root(n.name) for n in index}


def test_colocation_groups_follow_ref_resource_and_class(tf):
    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        ref = tf1.Variable(1.0, name="ref", use_resource=False)
        res = tf1.Variable(1.0, name="res", use_resource=True)
        tf1.assign_add(ref, 1.0, name="bump_ref")
        tf1.assign_add(res, 1.0)  # a resource update is named AssignAddVariableOp
        plain = tf.identity(ref, name="plain_read")  # a value read: not colocated
        with tf1.colocate_with(res.op):
            tf.add(plain, 1.0, name="pinned_by_class")
        tf.add(plain, 2.0, name="free")
        # A handle passed through Identity (T=resource) stays a handle: its reader joins.
        handle = tf.identity(res.handle, name="handle_copy")
        tf1.raw_ops.ReadVariableOp(resource=handle, dtype=tf.float32, name="read_via_copy")
    index = GraphIndex(graph.as_graph_def())
    root = index.group_root
    assert root("bump_ref") == root("ref") == root("ref/Assign")
    assert root("AssignAddVariableOp") == root("res") == root("pinned_by_class")
    assert root("res/Read/ReadVariableOp") == root("res")
    assert root("ref/read") == root("ref"), "the variable's own read is colocated by _class"
    assert root("plain_read") != root("ref"), "an Identity takes a value, not a ref"
    assert root("free") not in (root("ref"), root("res"))
    assert root("handle_copy") == root("read_via_copy") == root("res")
    assert root("ref") != root("res")
    with pytest.raises(GraphError, match="no node named 'ghost'"):
        root("ghost")


def test_structure_check_finds_dangling_input_and_cycle(tf):
    graph_def = tf.compat.v1.GraphDef()
    a = graph_def.node.add(name="a", op="NoOp")
    b = graph_def.node.add(name="b", op="NoOp")
    b.input.append("^a")
    GraphIndex(graph_def).check_structure()
    a.input.append("^b")
    with pytest.raises(GraphError, match="cycle"):
        GraphIndex(graph_def).check_structure()
    del a.input[:]
    b.input.append("^ghost")
    with pytest.raises(GraphError, match="'b' has input '\\^ghost' from no node"):
        GraphIndex(graph_def).check_structure()
