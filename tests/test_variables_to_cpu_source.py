"""variables-to-cpu, source surface: what its findings say, and the fixed code built by
real TF.

Its fixture cases, `fixtures/variables_to_cpu/source/<case>/`, are run by
tests/test_source_fixtures.py.

Cases that define `build()` are also built, before and after the fix, by TensorFlow in one
subprocess (graph mode, TF1 behaviour): after the fix no variable op asks for a GPU, and
every op that is not part of a variable (its colocation group, its name scope, or an
initial value only it consumes) keeps its device, so the compute stays on the GPU. This machine may have no GPU, so nothing is run;
placement is judged on the built graph and by graphfix's own check against TF's kernels.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

import graphfix
from conftest import expected_findings, run_cli

NAME = "variables-to-cpu"
SOURCE = Path(__file__).resolve().parent.parent / "fixtures" / "variables_to_cpu" / "source"
CASES = sorted(p for p in SOURCE.iterdir() if (p / "before.py").is_file())
BUILT = [c for c in CASES if re.search(r"^def build\(", (c / "before.py").read_text(), re.M)]
VARIABLE_OPS = ("VariableV2", "VarHandleOp")


def expected(code: str) -> list[tuple[int, str, bool]]:
    """(line, severity, fixable) of every `# expect:` marker."""
    return [(e.line, e.severity, e.fixable) for e in expected_findings(code)]


def test_check_finds_what_fix_fixes():
    code = (SOURCE / "seed000" / "before.py").read_text()
    (finding,) = graphfix.check_source(code, only=[NAME])
    assert (finding.line, finding.severity, finding.fixable) == expected(code)[0]
    assert ("Could not satisfy explicit device specification '/device:GPU:0' because no "
            "supported kernel for GPU devices is available") in finding.message
    assert "VariableV2 has no GPU kernel for int32" in finding.message
    assert graphfix.fix_source(code, only=[NAME])[1] == [finding]

    towers = graphfix.check_source((SOURCE / "cifar10_towers" / "before.py").read_text(),
                                   only=[NAME])
    assert len(towers) == 2
    assert all("multi-GPU tower: shared variables belong on the CPU" in f.message
               for f in towers)


def test_a_correct_single_gpu_script_is_no_finding_and_is_left_byte_for_byte(tmp_path):
    """Issue 32, case 7: a single-GPU tf.compat.v1 script (float variables and a layer under
    one tf.device('/gpu:0'), Adam, a session) is right as written: `check` exits 0, `fix`
    leaves it byte for byte, and `check --trace` of it agrees (no finding, no note that the
    codemod finds lines the trace does not). Moving them stays an explicit choice: with
    scope every-gpu-variable the three statements that make them are found and moved."""
    script = tmp_path / "train.py"
    shutil.copyfile(SOURCE / "noop_single_gpu_model" / "before.py", script)
    original = script.read_bytes()
    check = run_cli("check", script, "--no-cache", "--format", "json", check_exit=0)
    assert json.loads(check.stdout)["findings"] == []
    run_cli("fix", script, "--no-cache", check_exit=0)
    assert script.read_bytes() == original
    traced = json.loads(run_cli("check", "--trace", script, "--format", "json",
                                check_exit=0).stdout)
    assert traced["findings"] == []
    assert [n for n in traced["notes"] if "finds" in n] == []

    code = original.decode()
    made = [i for i, line in enumerate(code.splitlines(), 1) if line.lstrip().startswith(
        ("weights =", "biases =", "logits ="))]
    explicit = {NAME: {"scope": "every-gpu-variable"}}
    fixed, found = graphfix.fix_source(code, only=[NAME], settings=explicit)
    assert [(f.line, f.severity) for f in found] == [(n, "warning") for n in made]
    assert all("scope every-gpu-variable puts every variable on the CPU" in f.message
               for f in found)
    assert fixed.count('with tf.device("/cpu:0"):') == 1  # weights, biases
    assert graphfix.check_source(fixed, only=[NAME], settings=explicit) == []


def _traced(script: Path) -> dict:
    """`check --trace` of a script that runs no session: the graph it has built by its last
    line, checked by the graph surface, as JSON."""
    last = len(script.read_text().splitlines())
    return json.loads(run_cli("check", "--trace", "--until", f"{script}:{last}", script,
                              "--no-cache", "--only", NAME, "--format", "json").stdout)


@pytest.mark.parametrize("case", ["noop_template_made_before_towers",
                                  "noop_gathered_on_one_gpu"])
def test_pixel_cnn_towers_are_no_finding_and_the_trace_agrees(tmp_path, case):
    """openai/pixel-cnn's train.py, its two shapes: a template whose first call, outside
    every device scope, makes the variables the towers' calls then reuse; and the optimizer's
    moments made on the one GPU where the towers' gradients are gathered, read by no tower.
    No variable is made in a tower, none is shared by towers on two GPUs: the source check
    finds nothing, and the graph TF builds from the script, checked by the graph surface,
    agrees (no note that the codemod finds lines the trace does not)."""
    script = tmp_path / "train.py"
    shutil.copyfile(SOURCE / case / "before.py", script)
    assert graphfix.check_source(script.read_text(), only=[NAME]) == []
    traced = _traced(script)
    assert traced["findings"] == []
    assert [n for n in traced["notes"] if "finds" in n] == []


@pytest.mark.parametrize("case, says", [
    ("template_first_call_in_tower", "model creates variables (get_variable "
     "at line 10) under tf.device(\"/gpu:%d\" % i), a multi-GPU tower"),
    ("gathered_read_by_towers", "tf.Variable creates a variable under "
     "tf.device(\"/gpu:0\"), a multi-GPU tower"),
])
def test_pixel_cnn_twins_made_on_a_gpu_the_towers_share_are_found(tmp_path, case, says):
    """The positive twins: the template's first call in tower 0 makes its variables on
    GPU 0, and a variable made on GPU 0 after the towers that a later tower loop reads: each
    is found once, where it is made, and the graph TF builds has it on GPU 0, read by towers
    on two GPUs."""
    script = tmp_path / "train.py"
    shutil.copyfile(SOURCE / case / "before.py", script)
    code = script.read_text()
    (finding,) = graphfix.check_source(code, only=[NAME])
    assert [(finding.line, finding.severity, finding.fixable)] == expected(code)
    assert says in finding.message
    (traced,) = _traced(script)["findings"]
    assert "towers on several GPUs read them" in traced["message"]
    assert "/device:GPU:0" in traced["message"]


# -- built by TensorFlow ----------------------------------------------------------------------

# conftest.py runs this file as a script (`_worker`) in a subprocess that starts before the
# first test, so TensorFlow builds the cases while the libcst tests run; `built` is what it
# printed: each case's ops before and after the fix.
BACKGROUND_SCRIPT = [__file__, *(str(c) for c in BUILT)]


def _moves_with_variables(nodes: dict) -> set[str]:
    """Ops a variable-placing fix may move: the variables, what is colocated with them or in
    their name scope, and what only feeds those (an initial value: `tf.Variable(tf.zeros(..))`).
    `tf.group`'s NoOps (one per device of its inputs) follow their inputs, so they are left
    out of every comparison."""
    variables = {name for name, node in nodes.items() if node["op"] in VARIABLE_OPS}
    moving = {
        name for name, node in nodes.items()
        if name in variables
        or any(c.removeprefix("loc:@") in variables for c in node["colocate"])
        or any(name.startswith(v + "/") for v in variables)
    }
    consumers: dict[str, set[str]] = {name: set() for name in nodes}
    for name, node in nodes.items():
        for source in node["inputs"]:
            consumers[source.lstrip("^").split(":")[0]].add(name)
    grew = True
    while grew:
        feeding = {n for n, c in consumers.items() if n not in moving and c and c <= moving}
        moving |= feeding
        grew = bool(feeding)
    return moving


def _on_gpu(device: str) -> bool:
    return "GPU" in device.upper()


@pytest.mark.parametrize("case", BUILT, ids=lambda p: p.name)
def test_fixed_graph_places_variables_on_cpu(case: Path, built: dict):
    graphs = built["cases"][case.name]
    before = {n: v for n, v in graphs["before"].items() if v["op"] != "NoOp"}
    after = {n: v for n, v in graphs["after"].items() if v["op"] != "NoOp"}
    assert set(before) == set(after), "the fix must not add, drop or rename ops"

    variables = [n for n, node in after.items() if node["op"] in VARIABLE_OPS]
    assert variables
    assert not [n for n in variables if _on_gpu(after[n]["device"])], "a variable is on a GPU"
    moving = _moves_with_variables(graphs["after"])
    for name, node in after.items():
        if name not in moving:
            assert node["device"] == before[name]["device"], f"{name} ({node['op']}) moved"

    changed = (case / "before.py").read_text() != (case / "after.py").read_text()
    assert changed == any(_on_gpu(before[n]["device"]) for n in variables)
    if changed:  # the case computes on a GPU, before and after the fix
        assert any(_on_gpu(after[n]["device"]) for n in after if n not in moving)


def test_seed000_fixed_graph_places(built: dict):
    """Seed 000 fixed: `d` on the CPU, `b` and `init_d` still on the GPU, and graphfix's
    placement check (TF's kernel registry, target /gpu:0) finds no error left."""
    seed = built["cases"]["seed000"]
    after = seed["after"]
    d = after["Variable_2"]  # a, c, d: Variable, Variable_1, Variable_2
    assert d["op"] in VARIABLE_OPS and d["device"] == "/device:CPU:0"
    assert seed["before"]["Variable_2"]["device"] == "/device:GPU:0"
    assert after["Const"]["device"] == "/device:GPU:0"  # b = tf.constant(2)
    assert after["init_3"]["device"] == "/device:GPU:0"  # init_d

    assert any(severity == "error" and "no supported kernel for GPU devices" in message
               for severity, message in seed["check_before"])
    assert [f for f in seed["check_after"] if f[0] == "error"] == []


def test_gpu_kernel_tables_match_tensorflow(built: dict):
    """The dtypes the codemod treats as having GPU variable kernels are TF's own."""
    from graphfix.transforms.variables_to_cpu import source as module

    for op, dtypes in module._GPU_VARIABLE_DTYPES.items():
        assert set(dtypes) == set(built["gpu_dtypes"][op]) & module._DTYPES, op


# -- the subprocess ---------------------------------------------------------------------------


def _worker(case_dirs: list[str]) -> dict:
    import importlib
    import pkgutil

    import tensorflow as tf

    tf.compat.v1.disable_v2_behavior()  # TF1 graphs: ref variables, as in the seeds
    try:  # tf_slim's batch_norm imports a path tf_keras keeps under src/
        importlib.import_module("tf_keras.legacy_tf_layers")
    except ImportError:
        package = importlib.import_module("tf_keras.src.legacy_tf_layers")
        sys.modules["tf_keras.legacy_tf_layers"] = package
        for info in pkgutil.iter_modules(package.__path__):
            sys.modules[f"tf_keras.legacy_tf_layers.{info.name}"] = importlib.import_module(
                f"tf_keras.src.legacy_tf_layers.{info.name}")
    from tensorflow.python.framework import dtypes, kernels

    def gpu_dtypes(op):
        return sorted({
            dtypes.as_dtype(t).name
            for k in kernels.get_registered_kernels_for_op(op).kernel if k.device_type == "GPU"
            for c in k.constraint for t in c.allowed_values.list.type
        })

    out = {"gpu_dtypes": {op: gpu_dtypes(op) for op in ("VariableV2", "AssignVariableOp")},
           "cases": {}}
    for case_dir in map(Path, case_dirs):
        result = out["cases"][case_dir.name] = {}
        for which in ("before", "after"):
            path = case_dir / f"{which}.py"
            namespace = {"__name__": f"fixture_{case_dir.name}_{which}", "__file__": str(path)}
            graph = tf.Graph()
            with graph.as_default():
                exec(compile(path.read_text(), str(path), "exec"), namespace)
                namespace["build"]()
            graph_def = graph.as_graph_def()
            result[which] = {
                n.name: {"op": n.op, "device": n.device, "inputs": list(n.input),
                         "colocate": [c.decode() for c in n.attr["_class"].list.s]}
                for n in graph_def.node
            }
            if case_dir.name == "seed000":
                findings = graphfix.check_graph(graph_def, only=[NAME], target_devices=["/gpu:0"])
                result[f"check_{which}"] = [(f.severity, f.message) for f in findings]
    return out


if __name__ == "__main__":
    print(json.dumps(_worker(sys.argv[1:])))


def test_a_soft_placing_session_makes_a_kernelless_variable_a_warning():
    """ildoonet/tf-pose-estimation's train.py: an int32 step under a GPU scope in a file whose
    sessions set allow_soft_placement=True: TF moves it to the CPU, it does not fail; the
    finding says so (a warning, still fixed), as the graph surface says of a soft-placing
    session. The same code without the setting is TF's error."""
    code = ('import tensorflow as tf\n'
            'with tf.device("/gpu:0"):\n'
            '    step = tf.Variable(0, trainable=False)\n')
    soft = code + "config = tf.ConfigProto(allow_soft_placement=True)\n"
    assigned = code + "config = tf.ConfigProto()\nconfig.allow_soft_placement = True\n"
    for text in (soft, assigned):
        [finding] = graphfix.check_source(text, only=["variables-to-cpu"])
        assert finding.severity == "warning" and finding.fixable
        assert "allow_soft_placement=True, which moves it to the CPU" in finding.message
    [finding] = graphfix.check_source(code, only=["variables-to-cpu"])
    assert finding.severity == "error"
    assert "TF fails with" in finding.message
