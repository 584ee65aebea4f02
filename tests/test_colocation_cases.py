"""Issue 32's colocation cases on small graphs built with real TensorFlow
(fixtures/colocation/build.py), each held to TF itself: its placer (the oracle of
fixtures/real_models/oracle.py) and its `import_meta_graph`.

- a group split across a function body (case 2): the optimizer step in a control-flow-v2
  `tf.cond` branch; `check` sees the groups TF's placer sees, and `fix` moves a group whole,
  its members in the branch body included;
- a conflict missed (case 3): a gradient colocated with tower 1's `ResourceGather`;
- an unreadable `.meta` (case 6): its `train_op` collection names an op of a branch body;
- every fixed graph is re-checked before it is written.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import FIXTURES, error_lines, run_cli

sys.path.insert(0, str(FIXTURES))

tf = pytest.importorskip("tensorflow")
from real_models import oracle  # noqa: E402

tf1 = tf.compat.v1


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Every graph of fixtures/colocation/build.py, built once: file name -> path."""
    out = tmp_path_factory.mktemp("colocation")
    done = subprocess.run([sys.executable, str(FIXTURES / "colocation" / "build.py"), out],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return {path.name: path for path in map(__import__("pathlib").Path, done.stdout.split())}


def _report(*args, exit_code=None) -> dict:
    done = run_cli(*args, "--format", "json", check_exit=exit_code)
    return json.loads(done.stdout)


def _errors(path) -> list[dict]:
    return [f for f in _report("check", path)["findings"] if f["severity"] == "error"]


# -- case 3: a conflict missed ------------------------------------------------------------

GATHER_GRAD = "tower_1/gradients/tower_1/bert/Gather_grad/Const"


def test_a_gradient_colocated_with_a_gather_on_another_gpu_is_tfs_conflict(built):
    path = built["bert_towers.pb"]
    refused = oracle.place(oracle.graph_def_of(path), with_functions=False).failures
    assert {f.node for f in refused} == {GATHER_GRAD}
    assert (f"Cannot colocate nodes {{{{colocation_node {GATHER_GRAD}}}}} and "
            "{{colocation_node tower_1/bert/Gather}}: Cannot merge devices with incompatible "
            "ids: '/device:GPU:0' and '/device:GPU:1'") in refused[0].reason
    [error] = _errors(path)
    assert error["message"].startswith(
        f"Cannot colocate nodes {GATHER_GRAD} and tower_1/bert/Gather: Cannot merge devices "
        "with incompatible ids: '/device:GPU:0' and '/device:GPU:1'")
    assert error["details"]["kind"] == "conflict" and error["details"]["node"] == GATHER_GRAD
    # (the towers' shared embedding: its whole group, the gradient pinned to tower 1's
    # gather included, moves to the CPU, where neither GPU's id matters)
    assert error["fixable"] and "fix moves it to /device:CPU:0" in error["message"]


def test_fix_moves_the_shared_group_whole_to_the_cpu_and_tf_places_it(built, tmp_path):
    path, fixed = built["bert_towers.pb"], tmp_path / "fixed.pb"
    report = _report("fix", path, "-o", fixed, exit_code=1)
    assert not report["failed"]
    [moved] = [c for c in report["changes"] if c["node"] == "bert/word_embeddings"]
    assert GATHER_GRAD in moved["nodes"] and moved["to"] == "/device:CPU:0"
    before = oracle.place(oracle.graph_def_of(path), with_functions=False)
    after = oracle.place(oracle.graph_def_of(fixed), with_functions=False)
    assert before.failing_nodes() == {GATHER_GRAD} and after.failing_nodes() == set()
    assert _errors(fixed) == []


# -- case 6: an unreadable .meta ----------------------------------------------------------

def test_a_meta_graph_whose_train_op_lives_in_a_branch_is_refused_at_read(built, tmp_path):
    path = built["cond_step.meta"]
    with tf.Graph().as_default():
        with pytest.raises(KeyError, match="'Momentum' refers to an Operation not in the graph"):
            tf1.train.import_meta_graph(str(path))
    out = tmp_path / "out.meta"
    for args in (("check", path), ("fix", path, "-o", out)):
        done = run_cli(*args)
        assert done.returncode == 2, (done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        [line] = error_lines(done.stderr)
        assert path.name in line and "collection 'train_op' names 'Momentum'" in line, line
        assert "only inside a function body" in line and "import_meta_graph" in line
    assert not out.exists()


# -- case 2: a group split across a function body -----------------------------------------

BRANCH = "apply_if_finite"  # the tf.cond whose true branch holds the Momentum step


def _index(path):
    from graphfix.graph import graphfile
    from graphfix.graph.index import index_for

    [(graph_def, meta)] = graphfile.load(path).graph_defs()
    return index_for(graph_def, meta)


def test_a_lowered_cond_joins_no_variables_and_its_branch_joins_each_ones_group(built):
    from graphfix.graph import placement

    graph = _index(built["cond_step.pb"])
    # TF lowers the If before placing: its resource inputs join no group of its own.
    step = {node.name for node in graph.group_of("global_step")}
    assert BRANCH not in step and not step & {"w", "b", "w/Momentum", "b/Momentum"}
    # In the branch, the step's AssignAddVariableOp reads the global step: with the Const
    # colocated with it (the name both list is the branch's placeholder, no node), it is
    # in the global step's group; each ResourceApplyMomentum in its variable's.
    bound = {frozenset(n.name for n in g.members): g.bound for g in placement.body_groups(graph)}
    assert bound[frozenset({"Momentum", "Momentum/Const"})] == {"global_step"}
    assert bound[frozenset({"Momentum/update_w/ResourceApplyMomentum"})] == {"w"}


def _moved_without_its_branch_members(source, out):
    """What graphfix 695d268's fix wrote: the global step's main-graph nodes on the CPU,
    its members in the branch body left on the GPU."""
    graph_def = tf1.GraphDef.FromString(source.read_bytes())
    for node in graph_def.node:
        if node.name.split("/")[0] == "global_step":
            node.device = "/device:CPU:0"
    out.write_bytes(graph_def.SerializeToString())
    return out


def test_check_sees_the_conflict_tf_meets_in_the_branch(built, tmp_path):
    split = _moved_without_its_branch_members(built["cond_step.pb"], tmp_path / "split.pb")
    [refused] = {f.reason.splitlines()[-2] for f in oracle.place(
        oracle.graph_def_of(split), with_functions=False).failures}
    assert (f"Cannot colocate nodes {{{{colocation_node {BRANCH}/then/_0/Momentum}}}} and "
            f"{{{{colocation_node {BRANCH}/then/_0/Momentum/Const}}}}") in refused
    [error] = _errors(split)
    assert error["message"].startswith("Cannot colocate nodes Momentum and Momentum/Const: "
                                       "Cannot merge devices with incompatible types: "
                                       "'/device:CPU:0' and '/device:GPU:0'")
    assert f"in the body of function {BRANCH}_true" in error["message"]


def test_fix_moves_a_group_whole_into_the_branch_and_tf_places_it(built, tmp_path):
    path, fixed = built["cond_step.pb"], tmp_path / "fixed.pb"
    assert oracle.place(oracle.graph_def_of(path), with_functions=False).places
    report = _report("fix", path, "-o", fixed, "--only", "variables-to-cpu", exit_code=1)
    assert not report["failed"] and report["changes"]
    assert oracle.place(oracle.graph_def_of(fixed), with_functions=False).places
    assert _errors(fixed) == []
    graph = _index(fixed)
    body = next(f for f in graph.graph_def.library.function
                if f.signature.name.startswith(f"{BRANCH}_true"))
    devices = {n.name: n.device for n in body.node_def}
    assert devices["Momentum"] == devices["Momentum/Const"] == graph.node("global_step").device


# -- every output re-checked --------------------------------------------------------------

# A third-party transform that moves each variable's main-graph group to the CPU and
# leaves its members in function bodies where they were: graphfix 695d268's bug, as a plugin.
HALF_MOVE = '''
from functools import partial

from graphfix.findings import Change, Finding
from graphfix.registry import Transform


def move(positions, path, graph):
    moved = graph.set_devices(positions, {d: "/device:CPU:0" for d in set(graph.devices)})
    return [Change(path, "variables-to-host", f"moved {len(moved)} node(s)",
                   node=graph.names[positions[0]])]


class VariablesToHost(Transform):
    name = "variables-to-host"
    summary = "move each variable's main-graph group to the CPU"

    def graph(self, graph, ctx):
        for root, positions in graph.variable_groups().items():
            yield Finding(ctx.path, self.name, "a variable", node=root,
                          edit=partial(move, positions, ctx.path))
'''


@pytest.fixture
def half_move(tmp_path):
    """A folder for PYTHONPATH holding the plugin above, installed as pip would."""
    site = tmp_path / "site"
    dist = site / "gfx_host-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: gfx_host\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[graphfix.transforms]\nvariables-to-host = gfx_host:VariablesToHost\n")
    (site / "gfx_host.py").write_text(HALF_MOVE)
    import os
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH"))
                                          if p)}


def test_a_fix_tf_would_refuse_is_not_written(built, tmp_path, half_move):
    path = built["cond_step.pb"]
    out = tmp_path / "fixed.pb"
    done = run_cli("fix", "--only", "variables-to-host", path, "-o", out, env=half_move)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    [line] = error_lines(done.stderr)
    assert path.name in line and f"TF refuses at {BRANCH}_true" in line, line
    assert "Cannot colocate nodes Momentum and Momentum/Const" in line
    assert not out.exists()
    copy = tmp_path / "in_place.pb"
    copy.write_bytes(path.read_bytes())
    assert run_cli("fix", "--only", "variables-to-host", "--in-place", copy,
                   env=half_move).returncode == 2
    assert copy.read_bytes() == path.read_bytes()


def test_the_api_refuses_the_same_fix(built, half_move):
    import os
    code = ("import graphfix, sys\n"
            "try:\n"
            "    graphfix.fix_graph(sys.argv[1], only=['variables-to-host'])\n"
            "except ValueError as exc:\n"
            "    print('refused:', exc)\n")
    done = subprocess.run([sys.executable, "-c", code, str(built["cond_step.pb"])],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, **half_move, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert done.returncode == 0, done.stderr
    [line] = [ln for ln in done.stdout.splitlines() if ln]
    assert line.startswith("refused: ") and f"TF refuses at {BRANCH}_true" in line, line


def test_soft_placement_places_the_towers_gather_gradient(built):
    """With `allow_soft_placement` TF's placer leaves a `_class` colocation out where the
    devices differ in type or id: the BERT towers run (a traced script's session)."""
    from graphfix.graph import placement

    path = built["bert_towers.pb"]
    graph_def = oracle.graph_def_of(path)
    for node in graph_def.node:
        node.device = oracle.standin_device(node.device)
    graph = tf.Graph()
    with graph.as_default():
        tf1.import_graph_def(graph_def, name="")
        target = tf.no_op()
    config = tf1.ConfigProto(device_count={"CPU": 3}, allow_soft_placement=True)
    with tf1.Session(graph=graph, config=config) as session:
        session.run(target)
    index = _index(path)
    assert any(p.kind == "conflict" for p in placement.problems(index))
    assert not any(p.kind == "conflict" for p in placement.problems(index, soft_placement=True))
