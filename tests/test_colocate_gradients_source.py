"""colocate-gradients in source, held to TF: the towers script of the fixtures builds, before
the fix, the graph the graph surface finds the bug in, and after it, a graph whose towers'
gradient ops ask for their tower's GPU and TF's placer (the oracle) puts them there. The
fixture cases themselves run in test_source_fixtures.py."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest

import graphfix

from conftest import FIXTURES

sys.path.insert(0, str(FIXTURES))

from real_models import oracle  # noqa: E402

NAME = "colocate-gradients"
CASE = FIXTURES / "colocate_gradients" / "source" / "towers_minimize_after_loop"
_TOWER_GRADIENT = re.compile(r"^gradients/tower_(\d+)/")


def _graph_of(code: str):
    """The GraphDef the script builds, run by TF in a graph of its own."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        exec(compile(code, str(CASE / "script.py"), "exec"), {"__name__": "script"})
        tf.compat.v1.global_variables_initializer()
    return graph.as_graph_def()


def test_the_fixed_script_builds_each_towers_backward_on_its_gpu():
    before = (CASE / "before.py").read_text()
    fixed, findings = graphfix.fix_source(before, only=[NAME])
    assert [(f.line, f.severity, f.fixable) for f in findings] == [(24, "warning", True)]
    assert findings[0].message.startswith(
        'opt.minimize(...) differentiates a loss computed in several towers\' or stages\' '
        'device scopes (tf.device("/gpu:%d" % i)), not in its own, without '
        'colocate_gradients_with_ops=True')

    buggy, correct = _graph_of(before), _graph_of(fixed)
    assert [f.transform for f in graphfix.check_graph(buggy, only=[NAME])] == [NAME]
    assert graphfix.check_graph(correct, only=[NAME]) == []
    asked = {n.name: n.device for n in correct.node if _TOWER_GRADIENT.match(n.name)}
    assert asked and all(device == f"/device:GPU:{_TOWER_GRADIENT.match(name).group(1)}"
                         for name, device in asked.items() if "/MatMul_grad/" in name)
    feeds = {"x:0": np.ones([4, 4], np.float32), "y:0": np.zeros([4, 1], np.float32)}
    placed = oracle.placements(correct, ["train"], feeds)
    for tower in (0, 1):
        ran = [placed[name] for name in placed if name.startswith(f"gradients/tower_{tower}/")
               and "MatMul_grad" in name]
        assert ran and all(device.endswith(f"GPU:{tower}") for device in ran)


@pytest.mark.parametrize("keyword", ["True", "False"])
def test_a_call_that_passes_the_keyword_is_left_alone(keyword):
    code = (CASE / "before.py").read_text().replace(
        'name="train")', f'name="train", colocate_gradients_with_ops={keyword})')
    assert graphfix.check_source(code, only=[NAME]) == []


def test_towers_that_gather_a_cpu_table_are_reported_not_fixed():
    """Do no harm: with the keyword, the gather's gradient joins both the table's colocation
    group (CPU) and the gather's (GPU i), and TF's placer refuses the graph it builds; the
    script as written places. The call is reported, and left as it is."""
    case = FIXTURES / "colocate_gradients" / "source" / "towers_gather_cpu_table"
    before = (case / "before.py").read_text()
    fixed, findings = graphfix.fix_source(before, only=[NAME])
    assert [(f.line, f.severity, f.fixable) for f in findings] == [(27, "warning", False)]
    assert "not fixed: tf.gather is called (<string>:16)" in findings[0].message
    assert fixed == before

    assert oracle.place(_graph_of(before)).places
    flagged = before.replace('name="train")', 'name="train", colocate_gradients_with_ops=True)')
    refused = oracle.place(_graph_of(flagged)).failures
    assert {f.node for f in refused} == {"gradients/tower_0/model/GatherV2_grad/Shape",
                                         "gradients/tower_1/model/GatherV2_grad/Shape"}


@pytest.mark.parametrize("test, reported", [
    ("n == 1", False), ("1 == n", False), ("n < 2", False), ("n <= 1", False),
    ("n == 2", True), ("n > 1", True), ("m == 1", True)])
def test_a_branch_only_one_tower_takes_is_left_alone(test, reported):
    """`if n == 1:` around the call, for towers built by `for i in range(n)`: one tower,
    whose backward pass has no other device to go to. Any other test leaves the finding."""
    code = (
        "import tensorflow.compat.v1 as tf\n"
        "losses = []\n"
        "for i in range(n):\n"
        "    with tf.device('/gpu:%d' % i):\n"
        "        loss = tower_loss(i)\n"
        "        losses.append(loss)\n"
        f"if {test}:\n"
        "    train = opt.minimize(loss)\n")
    assert bool(graphfix.check_source(code, only=[NAME])) == reported


_GRADIENT_OF = re.compile(r"^gradients/(.+?)_grad/")


def _gradients_of_gpu_ops(graph_def) -> dict[str, tuple[str, str]]:
    """Each gradient op TF runs for a forward op that asks for a GPU: its name -> (the GPU
    its forward op asks for, where TF's placer puts it), in one step of `train`."""
    asked = {node.name: node.device for node in graph_def.node}
    placed = oracle.placements(graph_def, ["train"], {
        "x:0": np.ones([4, 4], np.float32), "y:0": np.zeros([4, 1], np.float32)})
    return {name: (asked[forward], device) for name, device in placed.items()
            if (match := _GRADIENT_OF.match(name))
            and "GPU" in asked.get(forward := match.group(1), "")}


@pytest.mark.parametrize("case, line", [
    ("stages_minimized_in_a_third_scope", 31),
    ("loss_kept_on_an_attribute", 27),
    ("towers_summed_in_a_cpu_scope", 24),
    ("stages_on_a_round_robin_device", 38),
    ("critic_on_a_second_gpu_beside_default_device", 29)])
def test_a_loss_from_other_device_scopes_than_the_calls_is_fixed(case, line):
    """A model split into stages on two devices and minimized in a third scope (the shape of
    reger-men/Distributed-TensorFlow's train.py), the towers' loss kept on `self.loss` and
    minimized in another method, the towers' losses summed in a `/cpu:0` block of their own,
    stages each on the next GPU a method's counter gives, differentiated on the last GPU
    (scylla/tf_textsum's seq2seq_attention_model.py), a critic in a `/gpu:1` block on a
    generator built on the default device (hanna-xu/FusionDN's model.py):
    before the fix TF's placer puts every gradient of a GPU op elsewhere than its op; after
    it, each beside its forward op, and the fixed graph places and runs."""
    before = (FIXTURES / "colocate_gradients" / "source" / case / "before.py").read_text()
    fixed, findings = graphfix.fix_source(before, only=[NAME])
    assert [(f.line, f.severity, f.fixable) for f in findings] == [(line, "warning", True)]
    assert "colocate_gradients_with_ops=True)" in fixed.splitlines()[line - 1]

    buggy, correct = _graph_of(before), _graph_of(fixed)
    off = _gradients_of_gpu_ops(buggy)
    # (a shape op follows its input wherever the placer is free to put it)
    matmuls = [name for name in off if re.search(r"MatMul(_\d+)?_grad/MatMul", name)]
    assert matmuls and not any(off[name][1].endswith(off[name][0][-5:]) for name in matmuls)
    assert oracle.place(correct).places
    on = _gradients_of_gpu_ops(correct)
    assert set(matmuls) <= on.keys()
    assert all(device.endswith(gpu[-5:]) for gpu, device in on.values())


@pytest.mark.parametrize("inputs, reported", [
    ("x = tf.placeholder(tf.float32, [None, 4])", True),
    ("x = tf.contrib.layers.flatten(images)", True),
    ("x = tf.ones([8, 4])", False)])
def test_plain_tf_gradients_is_v1s_in_a_file_written_for_tf1(inputs, reported):
    """`import tensorflow as tf` and `tf.gradients`: TF 2's colocates always and takes no
    keyword, but a file that reaches a name TF 2 dropped (`tf.placeholder`, `tf.contrib`)
    runs on TF 1.x, where `tf.gradients` is v1's (scylla/tf_textsum's seq2seq model)."""
    code = (
        "import tensorflow as tf\n"
        f"{inputs}\n"
        "with tf.device('/gpu:0'):\n"
        "    hidden = tf.compat.v1.layers.dense(x, 8)\n"
        "with tf.device('/gpu:1'):\n"
        "    loss = tf.reduce_mean(tf.compat.v1.layers.dense(hidden, 1))\n"
        "grads = tf.gradients(loss, tf.compat.v1.trainable_variables())\n")
    found = graphfix.check_source(code, only=[NAME])
    assert [(f.line, f.fixable) for f in found] == ([(7, True)] if reported else [])


def test_stages_given_one_gpu_by_a_method_are_left_alone():
    """Do no harm: a method that answers the same GPU at every call (no counter) puts the
    whole model on that GPU, whose backward pass has no other device to go to; the round
    robin's twin."""
    case = FIXTURES / "colocate_gradients" / "source" / "noop_stages_on_one_device_method"
    code = (case / "before.py").read_text()
    assert "def _device(self):" in code and "self._cur_gpu" not in code
    assert graphfix.check_source(code, only=[NAME]) == []
    placed = oracle.placements(_graph_of(code), ["train"], {
        "x:0": np.ones([4, 4], np.float32), "y:0": np.zeros([4, 1], np.float32)})
    matmuls = [device for name, device in placed.items() if "MatMul" in name]
    assert len(matmuls) >= 6 and all(device.endswith("GPU:1") for device in matmuls)


def test_a_block_on_the_default_gpu_beside_default_device_layers_is_left_alone():
    """Do no harm: the critic's block names `/gpu:0`, the GPU the generator built outside
    every device scope takes by default on a machine with GPUs: one device, whose backward
    pass has nowhere else to go. The twin of the `/gpu:1` critic, which is reported."""
    case = FIXTURES / "colocate_gradients" / "source"
    code = (case / "noop_critic_on_the_first_gpu" / "before.py").read_text()
    split = (case / "critic_on_a_second_gpu_beside_default_device" / "before.py").read_text()
    assert code.split('"""', 2)[2] == split.split('"""', 2)[2].replace(
        '"/gpu:1"', '"/gpu:0"').replace("  # expect: warning", "")
    assert graphfix.check_source(code, only=[NAME]) == []


def test_a_block_fed_only_the_inputs_takes_no_gradient_and_is_left_alone():
    """Do no harm: a scorer under `/gpu:1` reads only the placeholders (hanna-xu/U2Fusion's
    VGG16 weighing its loss terms), so the generator built on the default device does not
    feed it: TF builds no gradient op for any op of the block, and every gradient op sits
    where the generator does. The `/gpu:1` critic on the generator's output is reported."""
    code = (FIXTURES / "colocate_gradients" / "source"
            / "noop_pretrained_scorer_on_inputs_on_a_second_gpu" / "before.py").read_text()
    assert graphfix.check_source(code, only=[NAME]) == []
    graph_def = _graph_of(code)
    asked = {node.name: node.device for node in graph_def.node}
    gradients = [match.group(1) for node in graph_def.node
                 if (match := _GRADIENT_OF.match(node.name))]
    assert gradients and any("GPU:1" in device for device in asked.values())
    assert not [forward for forward in gradients if "GPU" in asked.get(forward, "")]


def test_a_gpu_model_minimized_on_its_gpu_with_inputs_on_the_cpu_is_left_alone():
    """Do no harm: the call is in the model's own device scope; the CPU blocks the loss is
    followed back to hold its inputs and a pinned variable, not forward code."""
    case = FIXTURES / "colocate_gradients" / "source" / "noop_input_pipeline_on_cpu"
    assert graphfix.check_source((case / "before.py").read_text(), only=[NAME]) == []


@pytest.mark.parametrize("body, keeps", [
    ("dev = '/gpu:%d' % self.turn\n    self.turn = (self.turn + 1) % 3\n    return dev", True),
    ("self.turn += 1\n    return '/gpu:%d' % self.turn", True),
    ("global turn\n    turn = (turn + 1) % 3\n    return '/gpu:%d' % turn", True),
    ("global turn\n    turn = 0\n    return '/gpu:0'", False),
    ("self.gpu = 1\n    return '/gpu:0'", False),
    ("return '/gpu:%d' % self.gpu", False)])
def test_a_counter_is_state_a_function_changes_and_reads(body, keeps):
    """`codemod.keeps_counter`, what tells a round robin of devices from a function that
    answers one device at every call."""
    import libcst as cst

    from graphfix.source.codemod import keeps_counter

    (function,) = cst.parse_module(f"def next_device(self):\n    {body}\n").body
    assert keeps_counter(function) is keeps


def test_towers_differentiated_in_their_own_scopes_do_not_make_another_builds_loss_several():
    """Do no harm (the shape of philferriere/tfoptflow's model_pwcnet.py): the towers each
    compute their gradients in their own device scope, and the single-device build's
    minimize reads attributes the towers also assign; that build's model sits under one
    device, and TF places its whole step there. Its twin, whose towers leave the
    differentiating to a later call, stays found."""
    case = FIXTURES / "colocate_gradients" / "source" / "noop_towers_differentiated_in_place"
    code = (case / "before.py").read_text()
    assert graphfix.check_source(code, only=[NAME]) == []
    placed = oracle.placements(_graph_of(code), ["train"], {
        "x:0": np.ones([4, 4], np.float32), "y:0": np.zeros([4, 1], np.float32)})
    assert placed and all(device.endswith("CPU:0") for device in placed.values())
    in_tower = "tower_grads.append(self.optim.compute_gradients(loss))"
    twin = code.replace(in_tower, "tower_grads.append([])")
    assert in_tower in code
    assert [f.line for f in graphfix.check_source(twin, only=[NAME])] == [45]
