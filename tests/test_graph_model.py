"""The shared graph model agrees with TF: device specs, op signatures, colocation groups."""

from __future__ import annotations

import pytest

from conftest import FIXTURES
from graphfix.graph.devices import DeviceSpec
from graphfix.graph.edges import parse_input
from graphfix.graph.index import GraphError, GraphIndex

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


def test_variable_groups_are_the_groups_that_hold_a_variable(tf):
    """`variable_groups` reads stars (a variable and what names it) without the generic
    lookup; every shape must come out as `colocation_groups` finds it node by node."""
    graph_def = tf.compat.v1.GraphDef()

    def add(name, op="NoOp", names=(), inputs=()):
        node = graph_def.node.add(name=name, op=op, input=list(inputs))
        if names:
            node.attr["_class"].list.s.extend(b"loc:@" + n.encode() for n in names)

    add("early", names=["star"])  # names the variable before it in graph order
    add("star", "VariableV2")
    add("late", names=["star"])
    add("alone", "VariableV2")
    add("slot", "VariableV2", names=["star"])  # a variable that names another
    add("left", "VariableV2")
    add("right", "VariableV2")
    add("both", names=["left", "right"])  # one node naming two variables joins them
    add("counter", "VariableV2")
    add("counter/Assign", "Assign", names=["counter"], inputs=["counter", "early"])
    add("bump", "AssignAdd", inputs=["counter", "early"])  # joined by its ref edge alone
    add("selfish", "VariableV2", names=["selfish"])
    index = GraphIndex(graph_def)
    every = index.colocation_groups()
    with_variable = {root: positions for root, positions in every.items()
                     if any(index.ops[p] == "VariableV2" for p in positions)}
    assert index.variable_groups() == with_variable
    names = {root: [index.names[p] for p in positions]
             for root, positions in index.variable_groups().items()}
    assert names[index.group_root("star")] == ["early", "star", "late", "slot"]
    assert names[index.group_root("left")] == ["left", "right", "both"]
    assert names[index.group_root("bump")] == ["counter", "counter/Assign", "bump"]
    assert names[index.group_root("alone")] == ["alone"]
    assert names[index.group_root("selfish")] == ["selfish"]


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


def _chain_graph(tf, *names):
    """a -> b -> c ... as NoOps, each running after the one before."""
    graph_def = tf.compat.v1.GraphDef()
    for k, name in enumerate(names):
        node = graph_def.node.add(name=name, op="NoOp")
        if k:
            node.input.append("^" + names[k - 1])
    return graph_def


@pytest.mark.parametrize("tables_read", [False, True])
def test_edits_keep_the_edge_tables_current(tf, tables_read):
    graph_def = _chain_graph(tf, "a", "b", "c", "d")
    index = GraphIndex(graph_def)
    if tables_read:  # edits after the walks have read every node's inputs
        index.descendants(["a"])
    barrier = tf.compat.v1.NodeDef(name="barrier", op="NoOp", input=["^a", "^b"])
    index.add_node(barrier)
    index.add_control_input(index.node("d"), "barrier")
    index.add_control_input(index.node("c"), "a")  # already implied: a real edge all the same
    index.check_changes()
    fresh = GraphIndex(graph_def)
    for name in ("a", "b", "c", "d", "barrier"):
        assert index.ancestors([name]) == fresh.ancestors([name]), name
        assert index.descendants([name]) == fresh.descendants([name]), name
        assert index.successors(name) == fresh.successors(name), name
    assert index.descendants(["barrier"]) == {"d"}
    assert index.descendants(iter(["barrier"])) == {"d"}, "any iterable of names"
    assert index.ancestors(["d"]) == {"a", "b", "c", "barrier"}



@pytest.mark.parametrize("case", ["two_tower_slim_bn", "two_tower_slim_bn_first_tower"])
@pytest.mark.parametrize("side", ["before", "after"])
def test_run_before_is_ancestors_among_the_names(case, side):
    # The walk that stops once it has met every name, and skips names no node reads,
    # finds what the whole ancestor set holds of them: for update ops (some run, some
    # not, depending on the fixture and side), and for every node as its own target.
    from graphfix.graph import graphfile as graphio
    from graphfix.graph import training

    index = GraphIndex(graphio.load(FIXTURES / "update_ops" / case / f"{side}.pbtxt").message)
    updates, _ = training.update_ops(index)
    (train,), _ = training.train_ops(index)
    for target in [train, *index.names[::7]]:
        ancestors = index.ancestors([target])
        for names in (updates, index.names[::3], sorted(ancestors), [target], []):
            assert index.run_before(names, target) == ancestors.intersection(names), target
    # After the fix the train op runs update ops (every tower's, or the first's); before
    # it, none.
    assert bool(index.run_before(updates, train)) == (side == "after")


def test_descendants_agree_in_graph_order_and_out_of_it(tf):
    with tf.Graph().as_default() as graph:
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        w = tf.compat.v1.get_variable("w", [3, 1])
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w)), name="loss")
        step = tf.compat.v1.train.get_or_create_global_step()
        tf.compat.v1.train.AdamOptimizer().minimize(loss, global_step=step, name="train")
        tf.compat.v1.disable_control_flow_v2()
        try:  # a loop: its back edge runs up the graph
            tf.compat.v1.while_loop(lambda i: i < 3, lambda i: i + 1, [tf.constant(0)])
        finally:
            tf.compat.v1.enable_control_flow_v2()
    in_order = graph.as_graph_def()
    shuffled = tf.compat.v1.GraphDef()
    shuffled.node.extend(reversed(in_order.node))  # TF reads a graph in any order
    names = [n.name for n in in_order.node]
    with_table = GraphIndex(in_order)
    with_table.successors("w")  # every node's consumers read first
    for name in names:
        expected = with_table.descendants([name])
        assert GraphIndex(in_order).descendants([name]) == expected, name
        assert GraphIndex(shuffled).descendants([name]) == expected, name
    index = GraphIndex(in_order)
    assert "train" in index.descendants(["w"]) and "x" not in index.descendants(["w"])

@pytest.mark.parametrize("tables_read", [False, True])
def test_check_changes_blames_only_what_an_edit_added(tf, tables_read):
    graph_def = _chain_graph(tf, "a", "b", "c")
    graph_def.node.add(name="stray", op="NoOp", input=["^ghost"])  # the graph came so
    index = GraphIndex(graph_def)
    if tables_read:
        index.ancestors(["c"])
    index.add_control_input(index.node("c"), "stray")
    index.check_changes()  # the stray input was there before: not this edit's fault
    index.add_control_input(index.node("a"), "c")
    with pytest.raises(GraphError, match="cycle through a"):
        index.check_changes()

    index = GraphIndex(_chain_graph(tf, "a", "b"))
    index.add_node(tf.compat.v1.NodeDef(name="late", op="NoOp", input=["^nowhere"]))
    with pytest.raises(GraphError, match="'late' has input '\\^nowhere' from no node"):
        index.check_changes()

    index = GraphIndex(_chain_graph(tf, "a", "b"))
    orphan = tf.compat.v1.NodeDef(name="orphan", op="NoOp")
    orphan.attr["_class"].list.s.append(b"loc:@gone")
    index.add_node(orphan)
    with pytest.raises(GraphError, match="'orphan' expects to be colocated with unknown node 'gone'"):
        index.check_changes()



def test_check_changes_past_many_readers_checks_the_whole_graph(tf):
    names = [f"n{k}" for k in range(80)]
    index = GraphIndex(_chain_graph(tf, "root", *names))
    for name in names[1:]:  # more readers of new edges than are walked one by one
        index.add_control_input(index.node(name), "root")
    index.check_changes()
    for name in names[1:]:
        index.add_control_input(index.node(name), "n0")
    index.add_control_input(index.node("root"), names[-1])
    with pytest.raises(GraphError, match="cycle"):
        index.check_changes()

def test_check_changes_does_not_cross_a_loops_back_edge(tf):
    with tf.Graph().as_default() as graph:
        tf.compat.v1.disable_control_flow_v2()
        try:
            tf.compat.v1.while_loop(lambda i: i < 3, lambda i: i + 1, [tf.constant(0)])
        finally:
            tf.compat.v1.enable_control_flow_v2()
    graph_def = graph.as_graph_def()
    index = GraphIndex(graph_def)
    merge = next(n.name for n in graph_def.node if n.op == "Merge")
    body = next(n.name for n in graph_def.node if n.op == "Identity" and "while" in n.name)
    # The body already runs after the Merge; the only way back is the NextIteration edge.
    index.add_control_input(index.node(body), merge)
    index.check_changes()
    index.add_control_input(index.node(merge), body)  # body -> Merge without NextIteration
    with pytest.raises(GraphError, match="cycle"):
        index.check_changes()
