"""replica-placement, source surface: where its findings are, what they say, and the fixed
code built by real TF.

Its fixture cases, `fixtures/replica_placement/source/<case>/`, are run by
tests/test_source_fixtures.py; a finding's column is where the call it names starts.

Cases that define `build(cluster_spec, task_index)` are also built, before and after the
fix, by TensorFlow in one subprocess (graph mode, no servers started), for a cluster of two
ps tasks and worker task 1. Before, the bug shows: an op that is not a variable's on the ps,
a variable off it, or a worker's own variable (outside GLOBAL_VARIABLES) on it. After, every
global variable op is on `/job:ps/task:k`, over every ps task when there are enough of
them, and every worker's own one on worker task 1; no other op outside the variables'
colocation groups is on the ps, and those given a job are on worker task 1.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

import graphfix
from conftest import fixture_findings

NAME = "replica-placement"
SOURCE = Path(__file__).resolve().parent.parent / "fixtures" / "replica_placement" / "source"
CASES = sorted(p for p in SOURCE.iterdir() if (p / "before.py").is_file())
BUILDS = [c for c in CASES if re.search(r"^def build\(cluster_spec, task_index\)",
                                        (c / "before.py").read_text(), re.M)]
BUILT = [c for c in BUILDS if not c.name.startswith("noop_")]
BUILT_RIGHT = [c for c in BUILDS if c.name.startswith("noop_")]  # already right as written
VARIABLE_OPS = ("VariableV2", "VarHandleOp")
PS_TASKS, TASK_INDEX = 2, 1


def _at_call(code: str, finding) -> bool:
    """Whether the finding's column is where the call its message names starts."""
    line = code.splitlines()[finding.line - 1]
    return line[finding.col - 1:].startswith(finding.message.split()[0] + "(")


def test_every_fixture_finding_is_at_the_call_it_names():
    for case, code, findings in fixture_findings("replica_placement"):
        assert all(_at_call(code, f) for f in findings), [f.to_text() for f in findings]


def test_seed003_fix_uses_the_programs_cluster_and_task():
    """The seed's ps scope becomes the setter, with the ClusterSpec and the worker task that
    main() passes build(); the finding names the op on the ps."""
    before = (SOURCE / "seed003" / "before.py").read_text()
    fixed, (finding,) = graphfix.fix_source(before, only=[NAME])
    assert finding.message.startswith("tf.add runs on the parameter server (under "
                                      "tf.device('/job:ps/task:0'), line 18)")
    assert "with tf.device('/job:ps/task:0')" not in fixed
    assert ("with tf.device(tf.train.replica_device_setter(\n"
            "            worker_device='/job:worker/task:%d' % task_index, "
            "cluster=cluster_spec)):") in fixed

    left = (SOURCE / "ps_tasks_by_hand" / "before.py").read_text()
    (spread,) = graphfix.check_source(left, only=[NAME])
    assert "may move a variable to another task" in spread.message and not spread.fixable


def test_unplaced_variables_say_each_worker_trains_its_own_copy():
    for case in ("cluster_spec_unplaced", "worker_task_scopes", "unplaced_unclear"):
        code = (SOURCE / case / "before.py").read_text()
        for finding in graphfix.check_source(code, only=[NAME]):
            assert "each worker trains its own copy" in finding.message
            assert "replica_device_setter" in finding.message


def test_a_worker_partition_named_after_its_task_is_left_alone():
    """Do no harm (wuzl/WarpMF's shape): a variable made under a worker's task scope and
    named after that task is each worker's own on purpose; TF gives each worker a variable
    of another name, on that worker. Its twin, one name for every worker, is found and
    fixed (the fixture case worker_variable_with_a_fixed_name, built below)."""
    import tensorflow as tf

    code = (SOURCE / "noop_worker_partition_named_per_task" / "before.py").read_text()
    assert graphfix.check_source(code, only=[NAME]) == []
    twin = (SOURCE / "worker_variable_with_a_fixed_name" / "before.py").read_text()
    (finding,) = graphfix.check_source(twin, only=[NAME])
    assert "each worker trains its own copy" in finding.message and finding.fixable

    namespace: dict = {"__name__": "partition"}
    exec(compile(code, "before.py", "exec"), namespace)
    cluster = tf.train.ClusterSpec({"ps": ["ps0:2222", "ps1:2222"],
                                    "worker": ["w0:2222", "w1:2222"]})
    own = {}
    for task in (0, 1):
        with tf.Graph().as_default() as graph:
            namespace["build_worker"](cluster, task, n_users=10)
        own[task] = {n.name: n.device for n in graph.as_graph_def().node
                     if n.op in VARIABLE_OPS and n.name.endswith("user_embeddings")}
    assert own == {0: {"worker_0_user_embeddings": "/job:worker/task:0"},
                   1: {"worker_1_user_embeddings": "/job:worker/task:1"}}


def test_worker_own_variables_under_the_setter_say_every_worker_shares_them():
    """A variable outside GLOBAL_VARIABLES made under replica_device_setter lands on the ps:
    the finding says so, and the fix moves it under the setter's worker device."""
    code = (SOURCE / "setter_over_worker_local_variables" / "before.py").read_text()
    fixed, findings = graphfix.fix_source(code, only=[NAME])
    assert [f.line for f in findings] == [14, 15, 17]
    for finding in findings:
        assert "under replica_device_setter (line 12)" in finding.message
        assert "every worker shares this one" in finding.message
    assert ("        with tf.device('/job:worker/task:%d' % task_index):\n"
            "            local_a = tf.Variable(") in fixed


def test_ps_scope_given_by_a_tuple_element_is_read():
    """A script's ps scope given `devices[0]`, a tuple of device strings named once: its
    placeholders are found, and the fix names the worker task the Server gives and the ps
    count of the cluster literal, not the cluster's name, which the script binds only after
    the scope (it would not be defined there)."""
    code = (SOURCE / "ps_scope_from_device_tuple_script" / "before.py").read_text()
    fixed, findings = graphfix.fix_source(code, only=[NAME])
    assert [f.line for f in findings] == [35, 36]
    assert findings[0].message.startswith(
        "tf.placeholder runs on the parameter server (under tf.device(devices[0]), line 34)")
    assert ("with tf.device(tf.train.replica_device_setter(\n"
            "        ps_tasks=1, worker_device='/job:worker/task:%d' % FLAGS.task_index)):\n"
            "    X = tf.placeholder") in fixed
    assert "cluster=cluster_spec" not in fixed


def test_global_step_beside_the_setter_says_what_breaks():
    """A global step made before its function's setter scope: each worker keeps its own;
    with SyncReplicasOptimizer in the file, the finding says that each worker's token
    queue is its own, which only the chief fills."""
    code = (SOURCE / "global_step_beside_setter_sync" / "before.py").read_text()
    (finding,) = graphfix.check_source(code, only=[NAME])
    assert finding.message.startswith(
        "tf.get_variable creates the global step outside the replica_device_setter scope "
        "of line 28, under no device scope: each worker keeps its own step")
    assert ("SyncReplicasOptimizer builds its token queue (shared_name 'sync_token_q') on "
            "the global step's device, so each worker gets its own, which only the chief "
            "fills") in finding.message
    assert finding.message.endswith("fix: the statement moves into the setter's scope (line 28)")
    plain = (SOURCE / "global_step_beside_setter" / "before.py").read_text()
    (finding,) = graphfix.check_source(plain, only=[NAME])
    assert "each worker keeps its own step" in finding.message
    assert "sync_token_q" not in finding.message


def test_global_step_under_a_gpu_scope_beside_the_setter_leaves_that_scope():
    """A global step made under a device scope that names a GPU and no job (a DeviceSpec
    a helper returns), beside the towers' setter: the finding names that scope, and the
    fix takes the step's statement out of it into the setter (nested, the ps task would
    keep the GPU type); a ps-named DeviceSpec, or a single machine's setter onto its CPU,
    is left alone."""
    code = (SOURCE / "global_step_under_gpu_spec" / "before.py").read_text()
    fixed, (finding,) = graphfix.fix_source(code, only=[NAME])
    assert finding.message.startswith(
        "tf.train.get_or_create_global_step creates the global step outside the "
        "replica_device_setter scope of line 25, under tf.device(gpu(0)) (line 32), which "
        "names no job, so on the worker: each worker keeps its own step")
    assert "fix: the statement moves out of that scope, under tf.device(" in finding.message
    assert ("    with tf.device(tf.train.replica_device_setter(\n"
            "            worker_device='/job:worker/task:%d' % task_index, "
            "cluster=cluster_spec)):\n"
            "        global_step = tf.train.get_or_create_global_step()  # expect: warning\n"
            "    with tf.device(gpu(0)):\n"
            "        learning_rate = ") in fixed
    for case in ("noop_global_step_on_ps_spec", "noop_global_step_single_machine_setter"):
        assert graphfix.check_source((SOURCE / case / "before.py").read_text(),
                                     only=[NAME]) == []


STEP_READ_BEFORE_THE_SETTER = """\
import tensorflow.compat.v1 as tf


def train(cluster, task, make_loss):
    step = tf.train.get_or_create_global_step()
    tf.summary.scalar('step', step)
    with tf.device(tf.train.replica_device_setter(
            worker_device='/job:worker/task:%d' % task, cluster=cluster)):
        return tf.train.AdamOptimizer().minimize(make_loss(), global_step=step)
"""


def test_global_step_read_before_the_setter_is_wrapped_in_the_same_setter():
    """A statement between reads the step, so it cannot move into the scope: the step's
    statement goes under the same setter, spelled as the scope spells it; where the
    setter reads a name bound only after the step, it is reported, not fixed."""
    fixed, (finding,) = graphfix.fix_source(STEP_READ_BEFORE_THE_SETTER, only=[NAME])
    assert finding.line == 5 and finding.fixable
    assert ("    with tf.device(tf.train.replica_device_setter(\n"
            "            worker_device='/job:worker/task:%d' % task, cluster=cluster)):\n"
            "        step = tf.train.get_or_create_global_step()\n"
            "    tf.summary.scalar('step', step)\n") in fixed
    late = STEP_READ_BEFORE_THE_SETTER.replace(
        "    tf.summary.scalar('step', step)\n",
        "    tf.summary.scalar('step', step)\n    cluster = cluster.as_cluster_def()\n")
    fixed, (finding,) = graphfix.fix_source(late, only=[NAME])
    assert not finding.fixable and fixed == late
    assert "not fixed: the setter's arguments are not bound where the step is made" in \
        finding.message


# -- built by TensorFlow ----------------------------------------------------------------------

# conftest.py runs this file as a script (`_worker`) in a subprocess that starts before the
# first test, so TensorFlow builds the cases while the libcst tests run; `built` is what it
# printed: each case's ops before and after the fix.
BACKGROUND_SCRIPT = [__file__, *(str(c) for c in BUILDS)]


def _job_task(device: str) -> tuple[str | None, str | None]:
    job = re.search(r"/job:([^/]+)", device)
    task = re.search(r"/task:(\d+)", device)
    return (job.group(1) if job else None), (task.group(1) if task else None)


def _variable_groups(nodes: dict) -> set[str]:
    """The variables and every op colocated with one (`_class: loc:@var`)."""
    variables = {n for n, node in nodes.items() if node["op"] in VARIABLE_OPS}
    return variables | {n for n, node in nodes.items()
                        if any(c.removeprefix("loc:@") in variables for c in node["colocate"])}


@pytest.mark.parametrize("case", BUILT, ids=lambda p: p.name)
def test_fixed_graph_places_variables_on_ps(case: Path, built: dict):
    # tf.group's NoOps (one per device of their inputs, a ps task among them under
    # replica_device_setter too) compute nothing: left out.
    before, after = ({n: v for n, v in built[case.name][which].items() if v["op"] != "NoOp"}
                     for which in ("before", "after"))
    assert set(before) == set(after), "the fix must not add, drop or rename ops"
    groups = _variable_groups(after)
    shared = set(built[case.name]["global"])
    variables = [n for n, node in after.items() if node["op"] in VARIABLE_OPS and n in shared]
    own = [n for n, node in after.items() if node["op"] in VARIABLE_OPS and n not in shared]
    assert variables

    def pipeline_on_ps(nodes):
        return [n for n, node in nodes.items()
                if n not in groups and _job_task(node["device"])[0] == "ps"]

    variables_off_ps = [n for n in variables if _job_task(before[n]["device"])[0] != "ps"]
    own_on_ps = [n for n in own if _job_task(before[n]["device"])[0] == "ps"]
    assert pipeline_on_ps(before) or variables_off_ps or own_on_ps, "the case must show the bug"

    tasks = set()
    for name in variables:
        job, task = _job_task(after[name]["device"])
        assert job == "ps" and task is not None, (name, after[name]["device"])
        tasks.add(task)
    if len(variables) >= PS_TASKS:  # round-robin over the cluster's ps tasks
        assert tasks == {str(k) for k in range(PS_TASKS)}
    assert pipeline_on_ps(after) == []
    assert [_job_task(after[n]["device"]) for n in own] == [("worker", str(TASK_INDEX))] * len(own)
    for name, node in after.items():
        job, task = _job_task(node["device"])
        if name not in groups and job is not None:
            assert (job, task) == ("worker", str(TASK_INDEX)), (name, node["device"])


@pytest.mark.parametrize("case", BUILT_RIGHT, ids=lambda p: p.name)
def test_right_graph_already_places_variables_on_ps(case: Path, built: dict):
    # what no finding claims: every global variable is made once, on a ps task
    before = built[case.name]["before"]
    shared = set(built[case.name]["global"])
    variables = [n for n, node in before.items() if node["op"] in VARIABLE_OPS]
    assert variables and set(variables) == shared
    assert all(_job_task(before[n]["device"])[0] == "ps" for n in variables), \
        {n: before[n]["device"] for n in variables}


def test_seed003_add_moves_from_ps_to_worker(built: dict):
    seed = built["seed003"]
    assert seed["before"]["Add"]["device"] == "/job:ps/task:0"
    assert seed["after"]["Add"]["device"] == f"/job:worker/task:{TASK_INDEX}"
    assert seed["after"]["myc"]["device"] == "/job:ps/task:0"


# -- the subprocess ---------------------------------------------------------------------------


def _worker(case_dirs: list[str]) -> dict:
    import tensorflow as tf

    tf.compat.v1.disable_v2_behavior()  # TF1 graphs: ref variables, as in the seeds
    out = {}
    for case_dir in map(Path, case_dirs):
        result = out[case_dir.name] = {"global": []}
        for which in ("before", "after"):
            path = case_dir / f"{which}.py"
            namespace = {"__name__": f"fixture_{case_dir.name}_{which}", "__file__": str(path)}
            exec(compile(path.read_text(), str(path), "exec"), namespace)
            cluster = tf.train.ClusterSpec({
                "ps": [f"localhost:{2220 + k}" for k in range(PS_TASKS)],
                "worker": ["localhost:2230", "localhost:2231"],
            })
            graph = tf.Graph()
            with graph.as_default():
                namespace["build"](cluster, TASK_INDEX)
                shared = {v.op.name for v in tf.compat.v1.global_variables()}
            result["global"] = sorted(set(result["global"]) | shared)
            result[which] = {
                n.name: {"op": n.op, "device": n.device,
                         "colocate": [c.decode() for c in n.attr["_class"].list.s]}
                for n in graph.as_graph_def().node
            }
    return out


if __name__ == "__main__":
    print(json.dumps(_worker(sys.argv[1:])))
