"""variables-to-cpu's source rule on tower code whose devices come from elsewhere (issue 36's
shapes from rafaljozefowicz/lm and allenai/bi-att-flow): a device function imported from
another module, a tower's own recurrent state, a soft-placing script that imports the
model. What TF builds is read in one subprocess (graph mode, TF1 behaviour): where the
variables land, and what the graph surface says of the same towers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import graphfix
from conftest import FIXTURES, run_cli

NAME = "variables-to-cpu"
SOURCE = FIXTURES / "variables_to_cpu" / "source"

# Two towers, each with a recurrent state of its own (rafaljozefowicz/lm's language_model.py
# shape) and the weights they share through reuse.
TOWER_STATE = textwrap.dedent('''\
    import tensorflow.compat.v1 as tf


    def towers(num_gpus):
        outputs = []
        for gpu in range(num_gpus):
            with tf.device("/gpu:%d" % gpu), tf.variable_scope("model", reuse=gpu > 0):
                state = tf.Variable(tf.zeros([2, 4]), trainable=False,
                                    collections=[tf.GraphKeys.LOCAL_VARIABLES],
                                    name="state_%d" % gpu)
                w = tf.get_variable("w", [4, 4])
                outputs.append(tf.matmul(state, w))
        return outputs
    ''')

_BUILD = r'''
import json, sys
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()
import graphfix

folder, tower_state = sys.argv[1], sys.argv[2]
out = {}
sys.path.insert(0, folder)
import towers
with tf.Graph().as_default() as graph:
    towers.towers([tf.zeros([2, 4]), tf.zeros([2, 4])])
    towers.towers_pinned([tf.zeros([2, 4]), tf.zeros([2, 4])])
    out["imported"] = {v.op.name: v.device for v in tf.global_variables()}
namespace = {}
exec(compile(tower_state, "tower_state.py", "exec"), namespace)
with tf.Graph().as_default() as graph:
    namespace["towers"](2)
    out["state_devices"] = {v.op.name: v.device
                            for v in tf.global_variables() + tf.local_variables()}
    findings = graphfix.check_graph(graph.as_graph_def(), only=["variables-to-cpu"])
    out["graph_findings"] = [(f.severity, f.message) for f in findings]
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folder = tmp_path_factory.mktemp("device_function_imported")
    shutil.copytree(SOURCE / "device_function_imported" / "before", folder, dirs_exist_ok=True)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    done = subprocess.run([sys.executable, "-c", _BUILD, str(folder), TOWER_STATE],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.splitlines()[-1]), folder


def test_an_imported_device_function_that_pins_only_variable_leaves_the_towers_on_gpu(built):
    result, folder = built
    # TF 1.x makes VariableV2: placement.assign_to_gpu gives it the first tower's GPU;
    # pin_variables, whose list names VariableV2, puts it on the CPU.
    assert result["imported"] == {"model/w": "/gpu:0", "pinned/w": "/cpu:0"}
    report = json.loads(run_cli("check", "--format", "json", "--no-cache", "--only", NAME,
                                ".", cwd=folder).stdout)
    [finding] = report["findings"]
    assert (finding["path"].removeprefix("./"), finding["line"]) == ("towers.py", 19)
    assert "assign_to_gpu (placement.py:8) pins only op type \"Variable\"" in finding["message"]
    assert "not fixed" in finding["message"] and not finding["fixable"]
    # Nothing is rewritten: the test to widen is placement.py's.
    run_cli("fix", "--in-place", "--no-cache", "--only", NAME, ".", cwd=folder)
    for path in (SOURCE / "device_function_imported" / "before").glob("*.py"):
        assert (folder / path.name).read_text() == path.read_text()


def test_a_towers_own_state_is_no_finding_on_either_surface(built):
    result, _ = built
    devices = result["state_devices"]
    assert devices["model/state_0"].endswith("GPU:0")
    assert devices["model_1/state_1"].endswith("GPU:1")
    # The graph surface warns on the variable both towers read, not on a tower's own state.
    warnings = [message for severity, message in result["graph_findings"]]
    assert len(warnings) == 1 and "model/w" in warnings[0], warnings
    assert not [m for m in warnings if "state_" in m]
    # The source rule agrees: only the shared weights, at their line.
    findings = graphfix.check_source(TOWER_STATE, only=[NAME])
    assert [(f.line, f.severity) for f in findings] == [(11, "warning")]


def test_a_soft_placing_importer_is_named_in_the_finding(tmp_path):
    """allenai/bi-att-flow: basic/model.py's int32 global step under a tower's GPU, run by
    basic/main.py's sessions with allow_soft_placement=True: TF moves it to the CPU, it does
    not fail; the finding names the script and is a warning."""
    shutil.copytree(SOURCE / "soft_placing_importer" / "before", tmp_path, dirs_exist_ok=True)
    report = json.loads(run_cli("check", "--format", "json", "--no-cache", "--only", NAME,
                                ".", cwd=tmp_path).stdout)
    by_file = {f["path"].removeprefix("./"): f for f in report["findings"]}
    model, other = by_file["model.py"], by_file["eval_model.py"]
    assert model["severity"] == "warning"
    assert "the sessions of train.py, which imports it, set allow_soft_placement=True" in (
        model["message"])
    assert "TF fails with" not in model["message"].split("(without it")[0]
    assert other["severity"] == "error" and "TF fails with" in other["message"]


def test_a_device_type_read_from_a_flag_says_the_default_it_was_read_with(tmp_path):
    """allenai/bi-att-flow: `"/{}:{}".format(config.device_type, gpu_idx)`, the flag
    defaulting to "gpu" in the script: the finding says which GPU and which flag."""
    shutil.copytree(SOURCE / "flag_default_device" / "before", tmp_path, dirs_exist_ok=True)
    report = json.loads(run_cli("check", "--format", "json", "--no-cache", "--only", NAME,
                                ".", cwd=tmp_path).stdout)
    messages = {f["line"]: f["message"] for f in report["findings"]}
    assert sorted(messages) == [11, 18]
    assert ("that is /device:GPU:N, flag device_type's default 'gpu' at cli.py:8"
            in messages[11])
    assert "flag worker_device_type's default 'gpu' at launch.py:7" in messages[18]


def test_a_parameter_named_like_the_training_function_calls_nothing(tmp_path):
    """normanheckscher/mnist-multi-gpu's `def inputs(train, ...)` beside `def train()`: the
    towers read the parameter, they do not run `train`, so the loss average `train` keeps
    under tf.device('/gpu:0') after the tower loop is read on one GPU. graphfix at main took
    the parameter for the function and reported it as a tower's shared variable."""
    pattern = FIXTURES / "real_code" / "patterns" / "parameter_named_like_the_training_function"
    code = (pattern / "train.py").read_text()
    assert graphfix.check_source(code, only=[NAME]) == []
    build = ("import sys, json\nimport tensorflow.compat.v1 as tf\ntf.disable_v2_behavior()\n"
             "import graphfix\nsys.path.insert(0, sys.argv[1])\nimport train\n"
             "update = train.train()\n"
             "config = tf.ConfigProto(allow_soft_placement=True)\n"
             "with tf.Session(config=config) as session:\n"
             "    session.run(tf.global_variables_initializer())\n"
             "    value = float(session.run(update))\n"
             "graph = tf.get_default_graph()\n"
             "print(json.dumps({'value': value, 'device': graph.get_operation_by_name("
             "'loss_average').device, 'findings': [f.message for f in graphfix.check_graph("
             "graph.as_graph_def(), only=['variables-to-cpu'])]}))\n")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    done = subprocess.run([sys.executable, "-c", build, str(pattern)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["device"] == "/device:GPU:0" and result["value"] != 0.0  # it ran
    assert result["findings"] == []  # the graph surface: one GPU reads it


_PATCHED_GETTERS = r'''
import json, sys
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()
import graphfix
out = {}
for case in sys.argv[1:]:
    namespace = {}
    exec(compile(open(case).read(), case, "exec"), namespace)
    with tf.Graph().as_default() as graph:
        batches = [tf.ones([2, 4]), tf.ones([2, 4])]
        namespace["train"](["gpu:0", "gpu:1"], batches)
        findings = graphfix.check_graph(graph.as_graph_def(), only=["variables-to-cpu"])
        out[case] = {"variables": {v.op.name: v.device for v in tf.global_variables()},
                     "tower_1": sorted({op.device for op in graph.get_operations()
                                        if op.name.startswith("device_1/")}),
                     "graph_findings": [f.message for f in findings]}
print(json.dumps(out))
'''


def test_a_getter_patched_onto_gpu_0_puts_every_towers_variables_there(tmp_path):
    """brain-research/self-attention-gan's `ops.variables_on_gpu0()`: TF builds tower 1 on
    GPU 1 and every variable on GPU 0, as the source finding says, and the graph surface
    warns of the same variables; under the twin that rebinds the getter onto the CPU, the
    variables are on the CPU and neither surface finds anything."""
    gpu0 = SOURCE / "getter_patched_onto_gpu0_in_towers" / "before.py"
    cpu = SOURCE / "noop_getter_patched_onto_cpu_in_towers" / "before.py"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    done = subprocess.run([sys.executable, "-c", _PATCHED_GETTERS, str(gpu0), str(cpu)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    built = json.loads(done.stdout.splitlines()[-1])
    on_gpu0, on_cpu = built[str(gpu0)], built[str(cpu)]
    assert set(on_gpu0["variables"].values()) == {"/device:GPU:0"}
    assert on_gpu0["tower_1"] == ["/device:GPU:1"]
    assert on_gpu0["graph_findings"]
    assert all("towers on several GPUs read them" in m for m in on_gpu0["graph_findings"])
    assert set(on_cpu["variables"].values()) == {"/device:CPU:0"}
    assert on_cpu["graph_findings"] == []

    (finding,) = graphfix.check_source(gpu0.read_text(), only=[NAME])
    assert (finding.line, finding.severity, finding.fixable) == (42, "warning", False)
    assert "on /device:GPU:0, in a multi-GPU tower" in finding.message
    assert "make variables_on_gpu0() pin \"/cpu:0\"" in finding.message
    assert graphfix.check_source(cpu.read_text(), only=[NAME]) == []
