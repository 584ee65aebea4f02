"""update-ops, source surface: what its findings say, what counts as a batch norm that
trains, and fixed code that really trains its batch-norm statistics.

Its fixture cases, `fixtures/update_ops/source/<case>/`, are run by
tests/test_source_fixtures.py (multi_file: a batch norm in model.py makes the train op in
train.py a finding). Cases that define `build()` are also run by TensorFlow, before and
after the fix: one training step must move the moving means after the fix and only then.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import graphfix
from graphfix import registry
from graphfix.driver import Selected, run

from conftest import FIXTURES, built_by_tf, fixture_findings, source_cases

NAME = "update-ops"
SOURCE = FIXTURES / "update_ops" / "source"
BUILT = [c for c in source_cases("update_ops") if (c / "before.py").is_file()
         and re.search(r"^def build\(", (c / "before.py").read_text(), re.M)]


def test_every_fixture_finding_says_the_moving_averages_never_update():
    """Of UPDATE_OPS (seed 003), or of a collection of the code's own (its name said)."""
    for case, _, findings in fixture_findings("update_ops"):
        assert all(f.message.startswith((
            "train op built without UPDATE_OPS: batch-norm moving averages never update "
            "(seed 003)",
            "train op built without its collected moving averages: they never update"))
            for f in findings), case.name
    [finding] = graphfix.check_source(
        (SOURCE / "ema_collected_never_read" / "before.py").read_text(), only=[NAME])
    assert finding.message == (
        "train op built without its collected moving averages: they never update: "
        "tf.train.AdamOptimizer(1e-3).minimize(...) does not run the moving-average updates "
        "added to collection 'averaged_weights_updates' (line 15), which no code reads with "
        "get_collection; fix: build it under "
        "tf.control_dependencies(tf.get_collection('averaged_weights_updates'))")


def test_alone_a_file_without_batch_norm_has_nothing_to_fix():
    """The multi_file case (run as one by tests/test_source_fixtures.py): a file without
    batch norm of its own has nothing to fix alone: its imports bring them."""
    from graphfix.source.project import Project

    alone = 0
    for path in sorted((SOURCE / "multi_file" / "before").glob("*.py")):
        code = path.read_text()
        if not Project.of_code(path.name, code).view(path.name).batch_norms():
            assert graphfix.check_source(code, path=path.name, only=[NAME]) == []
            alone += 1
    assert alone


def test_alias_spellings():
    """The fix speaks the file's own TF: a compat.v1 alias, `ops` from the framework."""
    body = ("def train(x, opt):\n"
            "    y = slim.batch_norm(x)\n"
            "    return opt.minimize(tf.reduce_sum(y))\n")
    for header, spelled in [
        ("from tensorflow.compat import v1\nimport tf_slim as slim\ntf = v1\n", "v1"),
        ("import tensorflow as tf\nslim = tf.contrib.slim\ntf1 = tf.compat.v1\n", "tf1"),
        ("from tensorflow.python.framework import ops\nfrom tensorflow.contrib import slim\n"
         "import numpy as tf\n", "ops"),
    ]:
        fixed, findings = graphfix.fix_source(header + body, only=[NAME])
        assert len(findings) == 1 and findings[0].fixable, header
        m = spelled
        wrapper = f"{m}.control_dependencies({m}.get_collection({m}.GraphKeys.UPDATE_OPS))"
        assert f"    with {wrapper}:\n        return opt.minimize" in fixed, fixed
        assert graphfix.fix_source(fixed, only=[NAME]) == (fixed, [])


_TF = "import tensorflow.compat.v1 as tf\nimport tf_slim as slim\n"


@pytest.mark.parametrize("code, trains", [
    ("slim.batch_norm(x)", True),
    ("slim.batch_norm(x, is_training=False)", False),
    ("slim.batch_norm(x, updates_collections=None)", False),
    ("slim.batch_norm(x, updates_collections='my_updates')", False),
    ("slim.batch_norm(x, updates_collections=tf.GraphKeys.UPDATE_OPS)", True),
    ("slim.batch_norm(x, **bn_params)", True),  # not visible: may train
    ("p = {'is_training': False}\nslim.batch_norm(x, **p)", False),
    ("tf.contrib.layers.batch_norm(x, is_training=is_training)", True),
    ("tf.layers.batch_normalization(x)", False),  # training=False by default
    ("tf.layers.batch_normalization(x, training=True)", True),
    ("tf.layers.batch_normalization(x, training=ph)", True),
    ("tf.layers.BatchNormalization()(x, training=True)", True),
    ("bn = tf.layers.BatchNormalization()\ny = bn(x)", False),
    ("bn = tf.layers.BatchNormalization()\ny = bn(x, True)", True),
    ("layers.append(tf.layers.BatchNormalization())", True),  # its calls are not visible
    ("tf.keras.layers.BatchNormalization()(x, training=True)", False),
    ("slim.conv2d(x, 8, 3, normalizer_fn=slim.batch_norm)", True),
    ("p = dict(is_training=False)\n"
     "slim.conv2d(x, 8, 3, normalizer_fn=slim.batch_norm, normalizer_params=p)", False),
    ("with slim.arg_scope([slim.batch_norm], is_training=False):\n"
     "    slim.conv2d(x, 8, 3, normalizer_fn=slim.batch_norm)", False),
    ("with slim.arg_scope([slim.batch_norm], updates_collections=None):\n"
     "    slim.batch_norm(x)", False),
    # an arg scope function: the batch norm's own scope opened inside the one naming it
    ("with slim.arg_scope([slim.conv2d], normalizer_fn=slim.batch_norm):\n"
     "    with slim.arg_scope([slim.batch_norm], updates_collections=None) as sc:\n"
     "        pass", False),
    ("with slim.arg_scope([slim.conv2d], normalizer_fn=slim.batch_norm):\n"
     "    with slim.arg_scope([slim.batch_norm], is_training=is_training) as sc:\n"
     "        pass", True),
    ("from tf_slim.nets import resnet_v2\nresnet_v2.resnet_v2_50(x, is_training=True)", True),
    ("from nets import resnet_v1\nresnet_v1.resnet_v1_101(x, is_training=False)", False),
    ("from tensorflow.contrib import slim as s\ns.batch_norm(x)", True),
    ("tf.nn.batch_normalization(x, m, v, None, None, 1e-3)", False),  # no moving averages
])
def test_batch_norm_that_trains(code: str, trains: bool):
    """What counts as a batch norm feeding UPDATE_OPS (what the project model tells the
    files that reach it)."""
    from graphfix.source.project import Project

    assert bool(Project.of_code("m.py", _TF + code + "\n").view("m.py").batch_norms()) == trains


# -- trained by TensorFlow --------------------------------------------------------------------

_worker_process: subprocess.Popen | None = None


@pytest.fixture(scope="module", autouse=True)
def _train_in_background(request):
    """Start the TensorFlow subprocess with the module, so it imports TF and trains while
    the libcst tests run; stop it if it is still going at the end."""
    global _worker_process
    if any(item.module is request.module and "trained" in item.fixturenames
           for item in request.session.items):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_USE_LEGACY_KERAS="1")
        _worker_process = subprocess.Popen(
            [sys.executable, __file__, *(str(c) for c in BUILT)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
    yield
    if _worker_process is not None and _worker_process.poll() is None:
        _worker_process.kill()
        _worker_process.wait()


@pytest.fixture(scope="module")
def trained() -> dict:
    stdout, stderr = _worker_process.communicate(timeout=240)
    assert _worker_process.returncode == 0, stderr[-4000:]
    return json.loads(stdout.splitlines()[-1])


@pytest.mark.parametrize("case", BUILT, ids=lambda p: p.name)
def test_fixed_program_trains_moving_statistics(case: Path, trained: dict):
    """One step of the train op: the moving means move after the fix, and not before it
    (batch norm that never trains: never; already correct programs: both times)."""
    result = trained[case.name]
    assert result["moving_means"] > 0
    if case.name.startswith("noop_"):
        trains = case.name not in ("noop_not_training", "noop_layer_flag_defaults_false")
        assert result["before"] == result["after"] == trains
    else:
        assert (result["before"], result["after"]) == (False, True)


def _worker(case_dirs: list[str]) -> dict:
    """Build each case's `build()` before and after the fix in graph mode (TF1 behaviour),
    run one step, and say whether the batch-norm moving means changed."""
    import tensorflow as tf
    from tf_steps import moving_means_over_one_step

    tf.compat.v1.disable_v2_behavior()
    sys.path.insert(0, str(FIXTURES))
    import tfslim_compat

    tfslim_compat.install()
    from tensorflow.python.framework import ops, tensor

    if not hasattr(ops, "Tensor"):  # tf_slim's updates_collections=None path reads ops.Tensor,
        ops.Tensor = tensor.Tensor  # which TF 2.21 keeps in framework.tensor only
    out = {}
    for case_dir in map(Path, case_dirs):
        result = out[case_dir.name] = {}
        for which in ("before", "after"):
            path = case_dir / f"{which}.py"
            if which == "after" and path.read_text() == (case_dir / "before.py").read_text():
                result["after"] = result["before"]  # a no-op case: the same program
                continue
            namespace = {"__name__": f"fixture_{case_dir.name}_{which}", "__file__": str(path)}
            graph = tf.Graph()
            with graph.as_default():
                exec(compile(path.read_text(), str(path), "exec"), namespace)
                train_op = namespace["build"]()
            means = moving_means_over_one_step(
                graph, train_op, config=tf.compat.v1.ConfigProto(allow_soft_placement=True))
            result[which] = means.moved
            result["moving_means"] = means.count
    return out


if __name__ == "__main__":
    print(json.dumps(_worker(sys.argv[1:])))


def test_the_model_knows_every_batch_norm_of_the_vocabulary():
    """The project model finds a batch norm of each name the vocabulary's table holds."""
    from graphfix.source.project import Project
    from graphfix.source.vocabulary import BATCH_NORM_LAYER, BATCH_NORMS

    for name in [*BATCH_NORMS, BATCH_NORM_LAYER]:
        code = f"import tensorflow as tf\nnet = tf.{name}(net, training=True)\n"
        assert Project.of_code("m.py", code).view("m.py").batch_norms(), name


_ADDS_BY_HAND = """\
import tensorflow as tf
from tensorflow.python.training import moving_averages

UPDATE_OPS = "resnet_update_ops"


def batch_norm(x, moving_mean):
    mean, variance = tf.nn.moments(x, [0])
    update = moving_averages.assign_moving_average(moving_mean, mean, 0.99)
    {add}
    return tf.nn.batch_normalization(x, mean, variance, None, None, 1e-3)
"""


@pytest.mark.parametrize("add, counts", [
    ("tf.add_to_collection(tf.GraphKeys.UPDATE_OPS, update)", True),
    ("tf.compat.v1.add_to_collections([tf.GraphKeys.UPDATE_OPS], update)", True),
    ("tf.add_to_collection('update_ops', update)", True),
    # the project's own collection, named by a constant: collection_facts' to judge
    ("tf.add_to_collection(UPDATE_OPS, update)", False),
    ("tf.add_to_collection(tf.GraphKeys.SUMMARIES, update)", False),
    # run in place as well: the output waits on it
    ("tf.add_to_collection(tf.GraphKeys.UPDATE_OPS, update)\n"
     "    with tf.control_dependencies([update]):\n"
     "        x = tf.identity(x)", False),
])
def test_a_batch_norm_written_by_hand_counts_where_it_adds_to_update_ops(add: str, counts: bool):
    """JZDSS/multi-gpus' layers.batch_norm: `assign_moving_average` updates added to
    UPDATE_OPS by the project's own code are a batch norm's, unless its function also reads
    the update op (it runs where it is built)."""
    from graphfix.source.project import Project
    from graphfix.source.vocabulary import UPDATE_OPS_ADDED

    code = _ADDS_BY_HAND.format(add=add)
    found = Project.of_code("layers.py", code).view("layers.py").batch_norms()
    assert found == ([(UPDATE_OPS_ADDED, 10)] if counts else [])


# The multi-file cases whose entry point the run does not hold (a user's script, as in the
# repositories these shapes come from), each case's before/ and after/ built in one
# subprocess (TF imported once) and trained one step: whether the moving means moved.
# collected_and_never_read: the learner built with policies.py's batch-norm policy;
# model_chosen_by_importlib: train.py's GAN with the module its flags' defaults name;
# private_collection_never_read, private_collection_star_import and the pattern
# private_update_collection_read_by_caller:
# train.py's build() with model.py's hand-written batch norm.
_ONE_STEP = r'''
import argparse, importlib, json, sys
import numpy as np
import tensorflow as tf
from tf_steps import moving_means_over_one_step

tf.compat.v1.disable_v2_behavior()


def fresh(folder, *names):
    sys.path.insert(0, folder)
    for name in names:
        sys.modules.pop(name, None)
    try:
        return [importlib.import_module(name) for name in names]
    finally:
        sys.path.remove(folder)


def learner(folder):
    policies, ppo = fresh(folder, "policies", "ppo")
    images = tf.random.normal([6, 5, 5, 2], seed=3)
    return ppo.Model(policies.CnnPolicy, images, tf.constant([0, 1, 2, 0, 1, 2])).train_op, {}


def gan(folder):
    [train] = fresh(folder, "train")
    sys.path.insert(0, folder)
    model = importlib.import_module("mnist_dcgan")  # (the module train.py's defaults name)
    sys.path.remove(folder)
    made = train.GAN(model.Generator(), model.Discriminator())
    feed = {made.z: np.ones([4, 8], np.float32), made.x: np.ones([4, 16], np.float32)}
    return [made.d_step, made.g_step], feed


def resnet(folder):
    _, train = fresh(folder, "model", "train")
    return train.build(), {}


out = {}
for case, folder in json.loads(sys.argv[1]):
    sys.modules.pop("mnist_dcgan", None)
    graph = tf.Graph()
    with graph.as_default():
        step, feed = {"collected_and_never_read": learner,
                      "model_chosen_by_importlib": gan,
                      "private_collection_never_read": resnet,
                      "private_collection_star_import": resnet,
                      "private_update_collection_read_by_caller": resnet}[case](folder)
    means = moving_means_over_one_step(graph, step, feed)
    out[folder] = [means.count, means.moved]
print(json.dumps(out))
'''
_STEPPED = ("collected_and_never_read", "model_chosen_by_importlib",
            "private_collection_never_read", "private_collection_star_import")
# Correct programs, stepped as they are.
_STEPPED_AS_THEY_ARE = {"private_update_collection_read_by_caller":
                        FIXTURES / "real_code" / "patterns" /
                        "private_update_collection_read_by_caller"}


@pytest.fixture(scope="module")
def stepped() -> dict:
    cases = [[case, str(SOURCE / case / which)] for case in _STEPPED
             for which in ("before", "after")]
    cases += [[case, str(folder)] for case, folder in _STEPPED_AS_THEY_ARE.items()]
    return built_by_tf(_ONE_STEP, cases)


@pytest.mark.needs_tf
def test_an_update_list_collected_and_never_read_is_found_and_the_fix_trains_the_statistics(
        stepped):
    """coinrun's shape: the policy comes in as an argument (its batch norm in a module the
    run does not connect), `norm_update_ops = get_collection(UPDATE_OPS)` is read by nothing,
    the train op is built from clipped gradients. The finding names the unread list; one
    step of the train op moves the moving mean after the fix, and not before it."""
    case = SOURCE / "collected_and_never_read"
    [finding] = graphfix.check_source((case / "before" / "ppo.py").read_text(), only=[NAME])
    assert finding.line == 16
    assert ("does not run the update ops of the list norm_update_ops collects at line 10 and "
            "nothing reads") in finding.message
    assert stepped[str(case / "before")] == [1, False]
    assert stepped[str(case / "after")] == [1, True]


@pytest.mark.needs_tf
def test_a_model_module_named_by_flag_defaults_is_found_and_the_fix_trains_the_statistics(
        stepped):
    """wgan's shape: `importlib.import_module(args.data + "_" + args.model)`, the flags'
    defaults naming mnist_dcgan.py: its batch norms reach train.py's two minimize calls
    (alone, train.py has nothing to fix); one step of both moves the moving means after the
    fix, not before it."""
    case = SOURCE / "model_chosen_by_importlib"
    assert graphfix.check_source((case / "before" / "train.py").read_text(), only=[NAME]) == []
    report, _ = run([str(case / "before")], Selected.build(registry.select([NAME]), {}),
                    fix=False)
    assert [f.line for f in report.findings] == [16, 18]
    assert all(re.search(r"of layers.batch_normalization \(\S*/mnist_dcgan.py:11\)", f.message)
               for f in report.findings)
    assert stepped[str(case / "before")] == [2, False]
    assert stepped[str(case / "after")] == [2, True]


@pytest.mark.needs_tf
def test_moving_averages_in_a_collection_nobody_reads_are_found_and_the_fix_trains_them(
        stepped):
    """ry/tensorflow-resnet's hand-written batch norm (dgurkaynak/tensorflow-cnn-finetune
    1bc7c16 resnet/model.py:80): `assign_moving_average` updates added to a collection of the
    model module's own, `resnet_update_ops`, that no code reads; train.py's bare minimize
    never runs them. The finding names the collection and where it is filled; the fix
    reads it through train.py's import of the model (or the name a star import of it
    binds), and one step moves the moving mean.
    Where the caller groups its train op with the collection, nothing is found and the
    program trains the statistics as it is."""
    case = SOURCE / "private_collection_never_read"
    report, _ = run([str(case / "before")], Selected.build(registry.select([NAME]), {}),
                    fix=False)
    [finding] = report.findings
    assert (Path(finding.path).name, finding.line) == ("train.py", 18)
    assert re.search(r"does not run the moving-average updates added to collection "
                     r"'resnet_update_ops' \(\S*/model\.py:24, 25\), which no code reads with "
                     r"get_collection; fix: build it under "
                     r"tf\.control_dependencies\("
                     r"tf\.get_collection\(model\.UPDATE_OPS_COLLECTION\)\)",
                     finding.message), finding.message
    # (the moving mean, and the zero-debiasing variables assign_moving_average makes in it)
    assert stepped[str(case / "before")][0] > 0
    for stepped_case in (case, SOURCE / "private_collection_star_import"):
        assert [moved for _, moved in (stepped[str(stepped_case / w)]
                                       for w in ("before", "after"))] == [False, True]
    correct = _STEPPED_AS_THEY_ARE["private_update_collection_read_by_caller"]
    report, _ = run([str(correct)], Selected.build(registry.select([NAME]), {}), fix=False)
    assert report.findings == []
    assert stepped[str(correct)][1] is True


_HAND_WRITTEN_BN = '''\
import tensorflow.compat.v1 as tf
from tensorflow.python.training import moving_averages

BN_UPDATES = 'bn_updates'


def bn(x, moving_mean, key=BN_UPDATES):
    mean, _ = tf.nn.moments(x, [0])
    update = moving_averages.assign_moving_average(moving_mean, mean, 0.9)
    tf.add_to_collection({key}, update)
    return x


def train(x, moving_mean):
    loss = tf.reduce_sum(bn(x, moving_mean))
    {train}
    return train_op
'''


@pytest.mark.parametrize("key, train, found", [
    ("BN_UPDATES", "train_op = tf.train.AdamOptimizer().minimize(loss)", "fixed"),
    ("'bn_updates'", "train_op = tf.train.AdamOptimizer().minimize(loss)", "fixed"),
    # read somewhere with its string, or with a key the code does not spell out
    ("BN_UPDATES", "train_op = tf.group(tf.train.AdamOptimizer().minimize(loss), "
                   "*tf.get_collection('bn_updates'))", None),
    ("BN_UPDATES", "train_op = tf.group(tf.train.AdamOptimizer().minimize(loss), "
                   "*tf.get_collection(key))", None),
    # one of TF's own collections (a Scaffold runs its local_init_op itself)
    ("'local_init_op'", "train_op = tf.train.AdamOptimizer().minimize(loss)", None),
    # a key that is not a constant: a parameter
    ("key", "train_op = tf.train.AdamOptimizer().minimize(loss)", None),
    # filled after the train op is built, in its function
    ("BN_UPDATES", "train_op = tf.train.AdamOptimizer().minimize(loss)\n    "
                   "tf.add_to_collection(BN_UPDATES, moving_averages.assign_moving_average("
                   "moving_mean, loss, 0.9))", "unfixable"),
])
def test_moving_averages_collected_by_hand(key: str, train: str, found: str | None):
    """A collection of the code's own is found only where its key is a constant and no
    code reads it; a `get_collection` of a key the code does not spell out may read it."""
    code = _HAND_WRITTEN_BN.format(key=key, train=train)
    findings = graphfix.check_source(code, only=[NAME])
    if found is None:
        assert findings == []
        return
    [finding] = findings
    assert finding.line == 16
    assert finding.fixable == (found == "fixed"), finding.message
    assert "collection 'bn_updates'" in finding.message


def test_a_hand_written_batch_norm_the_train_op_never_calls_is_not_its_own():
    """ethanhe42/context-cifar's cifar10.py: ry's `bn()` kept beside the model that is
    trained (its batch norm updates in place); the train op's program never calls it."""
    code = _HAND_WRITTEN_BN.format(
        key="BN_UPDATES", train="train_op = tf.train.AdamOptimizer().minimize(loss)").replace(
        "tf.reduce_sum(bn(x, moving_mean))", "tf.reduce_sum(x * moving_mean)")
    assert graphfix.check_source(code, only=[NAME]) == []


_WAITING_LOSS = '''\
import tensorflow.compat.v1 as tf


def build_graph(images, labels, optimizer):
    net = tf.layers.batch_normalization(tf.layers.conv2d(images, 4, 3), training=True)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, tf.layers.dense(net, 2))
    update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    with tf.control_dependencies(update_ops):
        barrier = tf.no_op(name='gradient_barrier')
        with tf.control_dependencies([barrier]):
            loss = tf.identity(loss)
    grads = optimizer.compute_gradients(loss)
    train_op = optimizer.apply_gradients(grads)
    {kept}
'''


@pytest.mark.parametrize("kept, found", [
    ("tf.add_to_collection('loss', loss)\n    tf.add_to_collection('train_op', train_op)",
     False),
    ("tf.summary.scalar('loss', loss)\n    return train_op", False),
    ("return train_op, loss", False),
    # the waiting loss is used for its gradients alone: the train op never runs the updates
    ("return train_op", True),
])
def test_a_loss_waiting_on_the_update_ops_runs_them_where_it_is_kept_for_the_step(
        kept: str, found: bool):
    """youtube-8m's train.py: each tower's loss waits on a barrier over the update ops and is
    kept (a collection, a summary, a return) for the training loop to fetch with the train
    op, which runs them. TF's gradients do not read a loss of known shape, so a waiting loss
    used for its gradients alone runs nothing (barrier_on_the_loss_gradients_only)."""
    findings = graphfix.check_source(_WAITING_LOSS.format(kept=kept), only=[NAME])
    assert [f.line for f in findings] == ([13] if found else [])


def test_a_no_op_under_blocks_over_the_update_ops_and_the_optimizer_runs_both():
    """tensorflow-yolov3's train op: a no_op under control_dependencies(UPDATE_OPS) and,
    nested in either order, control_dependencies([optimizer step]); without the block over
    the update ops, the optimizer's step is found."""
    head = ("import tensorflow.compat.v1 as tf\n\n\n"
            "def build(x, step_update):\n"
            "    y = tf.layers.batch_normalization(x, training=True)\n"
            "    opt = tf.train.AdamOptimizer(1e-3).minimize(tf.reduce_sum(y))\n")
    updates = "tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS))"
    step = "tf.control_dependencies([opt, step_update])"
    for outer, inner, found in [(updates, step, False), (step, updates, False),
                                (step, "tf.name_scope('train')", True)]:
        code = head + (f"    with {outer}:\n        with {inner}:\n"
                       f"            train_op = tf.no_op()\n    return train_op\n")
        findings = graphfix.check_source(code, only=[NAME])
        assert [f.line for f in findings] == ([6] if found else []), (outer, inner)


def _network_and_trainer(tmp_path: Path, case: str) -> list[tuple[str, int]]:
    """A fixture case's network in network.py and its train op in train.py (ctpn's layout:
    lib/networks/network.py, lib/fast_rcnn/train.py), checked as one run: the findings,
    as (file, line)."""
    code = (SOURCE / case / "before.py").read_text()
    network, _, entry = code.rpartition("\n\ndef ")
    (tmp_path / "network.py").write_text(network + "\n")
    (tmp_path / "train.py").write_text(
        "import tensorflow.compat.v1 as tf\n\nfrom network import SmallNet\n\n\ndef " + entry)
    selected = Selected.build(registry.select([NAME]), {})
    report = run([str(tmp_path)], selected, fix=False)[0]
    assert not report.failed and not report.skipped
    return [(Path(f.path).name, f.line) for f in report.findings]


@pytest.mark.parametrize("case, found", [
    ("noop_uncalled_layer_method", []),
    ("noop_layer_flag_defaults_false", []),
    ("layer_method_called_training", [("train.py", 11)]),
])
def test_a_layer_method_of_another_file_counts_where_a_chain_calls_it_training(
        tmp_path: Path, case: str, found: list):
    """eragonruan/text-detection-ctpn at c04a571: train.py's train op was found for
    network.py's `batch_normalization` layer method, which no network's chain calls and
    whose `is_training` defaults to False. Either makes no update ops; called with
    is_training=True in the chain, it does."""
    assert _network_and_trainer(tmp_path, case) == found
