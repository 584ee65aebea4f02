"""feed-to-assign, source surface: what its findings say, and the fixed scripts run by
TensorFlow.

Its fixture cases, `fixtures/feed_to_assign/source/<case>/`, are run by
tests/test_source_fixtures.py; a line marked `# expect: error col N` (`error unfixable col
N` when the finding is reported but not fixed; several joined by commas) is where a finding
must be, at column N, and nowhere else.

Cases that define `main()` are run (graph mode, TF1 behaviour) in a subprocess started
before the first test, so TensorFlow imports while the libcst tests run: before the fix
each fails with TF's float_ref error; after it each runs, its first step computes from the
fed value, and its graph has as many ops after the last step as after the first. The seed's
before.py is also run as the script it is, in a subprocess of its own.
"""

from __future__ import annotations

import importlib.util
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
from conftest import expected_findings, fixture_findings

NAME = "feed-to-assign"
SOURCE = Path(__file__).resolve().parent.parent / "fixtures" / "feed_to_assign" / "source"
CASES = sorted(p for p in SOURCE.iterdir() if (p / "before.py").is_file())
RUNNABLE = [c for c in CASES if re.search(r"^def main\(", (c / "before.py").read_text(), re.M)]
# Cases whose runs work before the fix (nothing fails): `observe()` gives what they computed.
OBSERVED = [c for c in CASES if re.search(r"^def observe\(", (c / "before.py").read_text(),
                                          re.M)]
SEED = SOURCE / "seed003_embeddings"
FLOAT_REF = "incompatible with expected float_ref"
# TF's words for a fed variable the run updates, by its type: an optimizer's weights are
# float, the global step int64; a counter's type the source does not always say.
REF_ERROR = re.compile(r"was passed (float|int64|<its type>) from _arg_\.\.\.:0 "
                       r"incompatible with expected \1_ref")
# What a run that fetches nothing but the variables it feeds is told (it does not fail; it
# stores nothing), and the cases whose findings say it.
NOT_STORED = ("a run that fetches nothing but what it feeds stores nothing: the variable "
              "keeps its old value")
STORES_NOTHING = {"fetched_and_fed"}


def expected(code: str) -> list[tuple[int, int, bool]]:
    """(line, col, fixable) of every `# expect:` marker, in order."""
    return [(e.line, e.col, e.fixable) for e in expected_findings(code)]


def test_every_fixture_finding_quotes_what_tensorflow_says():
    for case, _, findings in fixture_findings("feed_to_assign"):
        for finding in findings:
            assert finding.severity == "error"
            if case.name in STORES_NOTHING:
                assert NOT_STORED in finding.message and not REF_ERROR.search(finding.message)
            else:
                assert REF_ERROR.search(finding.message), finding.message
        assert all("graphfix.runtime.load_variable_feeds" in f.message
                   for f in findings if not f.fixable), case.name


def test_seed_finding_quotes_tensorflow():
    (finding,) = graphfix.check_source((SEED / "before.py").read_text(), only=[NAME])
    assert finding.fixable
    assert "variable `embeddings` is fed to sess.run" in finding.message
    assert "Input 0 of node ... was passed float from _arg_...:0 " + FLOAT_REF in finding.message
    assert "fix: `embeddings.load(pretrained, sess)` before the run" in finding.message


def test_multi_file_run_needs_the_other_file():
    """`model.word_vectors` is a variable only for a run that also reads model.py (the
    multi_file case, run with it by tests/test_source_fixtures.py)."""
    train = (SOURCE / "multi_file" / "before" / "train.py").read_text()
    assert graphfix.fix_source(train, only=[NAME]) == (train, [])


# -- run by TensorFlow ------------------------------------------------------------------------

_ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONWARNINGS="ignore")
_processes: dict[str, subprocess.Popen] = {}


def _start(key: str, *args: str) -> subprocess.Popen:
    if key not in _processes:
        _processes[key] = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, text=True, env=_ENV,
                                           cwd=SEED)
    return _processes[key]


def _start_all() -> None:
    _start("seed-before", str(SEED / "before.py"))
    _start("worker", __file__, *map(str, RUNNABLE + OBSERVED))


def _finish(key: str) -> subprocess.CompletedProcess:
    if key not in _processes:
        _start_all()
    process = _processes[key]
    stdout, stderr = process.communicate(timeout=240)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


@pytest.fixture(scope="module", autouse=True)
def _run_in_background(request):
    """Start the TensorFlow subprocesses before the first test (importing TF takes most of
    this file's time); stop any still going at the end."""
    if any(item.module is request.module and {"seed_script", "worked"} & set(item.fixturenames)
           for item in request.session.items):
        _start_all()
    yield
    for process in _processes.values():
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def seed_script() -> subprocess.CompletedProcess:
    """`python before.py` of the seed's case."""
    return _finish("seed-before")


@pytest.fixture(scope="module")
def worked() -> dict:
    """What each runnable case's main() gave, before and after the fix ({"error": ...} if
    it raised TF's error)."""
    result = _finish("worker")
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.splitlines()[-1])


def test_seed_script_fails_before_and_runs_after_from_the_fed_value(seed_script, worked):
    """The seed's case: before the codemod the script raises TF's float_ref error; after it,
    it runs and the variable starts from the fed value (and Adam then trains it)."""
    assert seed_script.returncode != 0
    assert ("Input 0 of node Adam/update_embeddings/AssignSub was passed float from "
            "_arg_embeddings_") in seed_script.stderr
    assert FLOAT_REF in seed_script.stderr

    result = worked[SEED.name]["after"]
    assert "error" not in result, result
    # The first step computed from the fed embeddings (all 0.5; the random init is not):
    # logits = 4 * 0.5 = 2 for ids 1 and 2, labels 1 and 0 -> loss ((2-1)^2 + (2-0)^2) / 2.
    assert result["first_loss"] == pytest.approx(2.5)
    rows = result["embeddings"]
    # The fed value stayed in the variable: rows no id touched are still exactly 0.5 ...
    assert all(value == 0.5 for i in (0, 3, 9) for value in rows[i])
    # ... and the optimizer updated the rows it trained, from 0.5.
    assert all(0.45 < value < 0.5 for i in (1, 2) for value in rows[i])
    # Loading every step adds nothing to the graph.
    sizes = result["graph_sizes"]
    assert len(sizes) == 3 and len(set(sizes)) == 1


@pytest.mark.parametrize("case", RUNNABLE, ids=lambda p: p.name)
def test_fixed_case_runs_from_the_fed_value(case: Path, worked: dict):
    before, after = worked[case.name]["before"], worked[case.name]["after"]
    assert "error" in before and FLOAT_REF in before["error"], before
    assert "error" not in after, after
    assert after["first_loss"] == pytest.approx(after["expected_first_loss"])
    assert len(after["graph_sizes"]) >= 2 and len(set(after["graph_sizes"])) == 1


def test_a_run_that_stores_nothing_is_fixed_to_store(worked: dict):
    """`sess.run(step, feed_dict={step: n})` gives n back and `sess.run([], feed_dict={epoch:
    n})` nothing; both leave the variable as it was, so the train op's decayed rate reads
    step 0 (rate 1.0) every time. After the fix the loads store them: the rate decays."""
    result = worked["fetched_and_fed"]
    assert result["before"] == {"rates": [1.0, 1.0], "epoch": 0}
    assert result["after"] == {"rates": [0.5, 0.25], "epoch": 2}


def test_feeds_left_alone_work_and_are_read(worked: dict):
    """The schedule is read at each fed step and the step keeps its own count (two train
    runs); the fed learning rates (1, then 0.5) are what trained the weights (gradient 1
    each: 1 - 1 - 0.5), the variable's own 0.0 would have left them at 1."""
    result = worked["noop_fed_where_nothing_updates_it"]["before"]
    assert "error" not in result, result
    assert result["schedule"] == pytest.approx([0.1, 0.1 * 0.5 ** 10])
    assert result["step"] == 2
    assert result["weights"] == pytest.approx([-0.5, -0.5])


def test_variables_nothing_updates_are_read_from_the_feed(worked: dict):
    """The search's loss and gradient are computed at the fed reference point and weight
    (2 * (1 + 2) + (0 + 1) = 7; d/dx: 2 + 2 * (x - origin)), its variables keep their own
    zeros, and the other search's optimizer updates its `var_list` alone (1 - 0.25 * 2)."""
    result = worked["noop_fed_where_no_update_writes_it"]["before"]
    assert "error" not in result, result
    assert result["loss"] == pytest.approx(7.0)
    assert result["grad"] == pytest.approx([2.0, 4.0])
    assert result["kept"] == pytest.approx([0.0, 0.0])
    assert result["modifier"] == pytest.approx([0.5, 0.5])


def test_a_variable_fed_to_runs_that_only_evaluate_is_read_for_that_run_alone(worked: dict):
    """Between train runs that do not feed it, the weights are fed to evaluations (the
    loss, a streaming mean, by name and as the model's attributes) at other values: TF
    computes those from the fed weights, and training goes on from its own (loss 2, 1.5, 1
    with a step of 0.25 on each weight). Loads before the evaluations would have trained
    from the last weights loaded (2, 4, 4)."""
    result = worked["noop_fed_to_runs_that_evaluate"]["before"]
    assert "error" not in result, result
    assert result["trained"] == pytest.approx([2.0, 1.5, 1.0])
    assert result["weights"] == pytest.approx([0.25, 0.25])
    assert result["probed"] == pytest.approx([0.0, 4.0] * 3 + [-2.0, 0.0, 4.0])
    assert result["metric"] == pytest.approx(4.0)  # the mean loss at the weights fed to it


def _worker(case_dirs: list[str]) -> dict:
    """Run each case's main() (or observe()) before and after the fix, each in a graph of
    its own."""
    import tensorflow.compat.v1 as tf

    out = {}
    for case in map(Path, case_dirs):
        out[case.name] = {}
        for side in ("before", "after"):
            spec = importlib.util.spec_from_file_location(f"{case.name}_{side}",
                                                          case / f"{side}.py")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            entry = getattr(module, "main", None) or module.observe
            with tf.Graph().as_default():
                try:
                    out[case.name][side] = entry()
                except tf.errors.OpError as exc:
                    out[case.name][side] = {"error": exc.message}
    return out


if __name__ == "__main__":
    print(json.dumps(_worker(sys.argv[1:])))


def test_the_pre_check_knows_every_variable_maker_the_codemod_knows():
    """The syntax pre-check (no libcst) and the codemod name the same variable makers."""
    from graphfix.source import vocabulary
    from graphfix.transforms.feed_to_assign import prechecks

    def tails(names):
        return {name.rsplit(".", 1)[-1] for name in names}

    assert (tails(vocabulary.VARIABLE_CONSTRUCTORS) | {"get_unique_variable"}
            <= prechecks._VARIABLE_MAKERS)
    assert (tails(vocabulary.GLOBAL_STEP_MAKERS | vocabulary.GLOBAL_STEP_GETTERS)
            == prechecks._GLOBAL_STEP_MAKERS)


def test_a_step_or_counter_fed_while_updated_is_said_with_its_own_type():
    before = (SOURCE / "statement_forms" / "before.py").read_text()
    _, findings = graphfix.fix_source(before, only=[NAME])
    said = {f.message.split("`")[1]: REF_ERROR.search(f.message).group(1) for f in findings}
    assert said == {"w": "float", "step": "int64", "counter": "<its type>"}


def _assert_train_findings(root: Path, train: str) -> None:
    """Check `root` with `train` as its train.py: the findings are train.py's markers."""
    (root / "train.py").write_text(train)
    report, _ = run([str(root)], Selected.build(registry.select([NAME]), {}), fix=False)
    assert [(Path(f.path).name, f.line, f.col, f.fixable) for f in report.findings] == [
        ("train.py", line, col, fixable) for line, col, fixable in expected(train)]


def test_a_rate_another_file_puts_on_the_loss_path_is_found_whatever_that_file_names(
        tmp_path: Path):
    """A trainable variable the optimizer is given is a learning rate only where no file
    reads it elsewhere: model.py puts `lr` on the loss's path (so the optimizer updates it,
    and the feed fails) while naming no variable, assign or train method."""
    (tmp_path / "settings.py").write_text(
        "import tensorflow as tf\n\nlr = tf.Variable(0.1, name='lr')\n")
    (tmp_path / "model.py").write_text(
        "import tensorflow as tf\n\nfrom settings import lr\n\n\n"
        "def loss_of(x):\n    return tf.reduce_sum(x * lr)\n")
    train = ("import tensorflow as tf\n\nfrom model import loss_of\nfrom settings import lr\n\n"
             "x = tf.placeholder(tf.float32, [2])\n"
             "train_op = tf.train.GradientDescentOptimizer(lr).minimize(loss_of(x))\n"
             "with tf.Session() as sess:\n"
             "    sess.run(tf.global_variables_initializer())\n"
             "    sess.run(train_op, feed_dict={x: [1.0, 2.0], lr: 0.5})"
             "  # expect: error col 50\n")
    _assert_train_findings(tmp_path, train)


def test_a_run_of_another_files_attributes_evaluates_where_that_file_says_so(tmp_path: Path):
    """model.py assigns `loss` and `total` (read from `loss`) ops that write nothing, and
    `train_op` one that trains: train.py's run of `model.total` only evaluates, and its
    feed of the weights stays; its run of `model.train_op` is found."""
    (tmp_path / "model.py").write_text(
        "import tensorflow as tf\n\n\nclass Model(object):\n    def __init__(self):\n"
        "        self.x = tf.placeholder(tf.float32, [2])\n"
        "        self.weights = tf.Variable(tf.ones([2]))\n"
        "        self.loss = tf.reduce_sum(self.x * self.weights)\n"
        "        self.total = self.loss * 2.0\n"
        "        self.train_op = tf.train.GradientDescentOptimizer(0.1).minimize(self.total)\n")
    train = ("import tensorflow as tf\n\nfrom model import Model\n\nmodel = Model()\n"
             "with tf.Session() as sess:\n"
             "    sess.run(tf.global_variables_initializer())\n"
             "    sess.run(model.total, {model.x: [1.0, 1.0], model.weights: [0.0, 0.0]})\n"
             "    sess.run(model.train_op, {model.x: [1.0, 1.0], model.weights: [0.0, 0.0]})"
             "  # expect: error col 52\n")
    _assert_train_findings(tmp_path, train)


@pytest.mark.parametrize("fetched, found", [
    ("loss", False),  # the trainer is never called: nothing the program runs writes `w`
    ("fit(loss)", True),  # it trains every trainable variable: the run fails
    ("fit_bias(loss)", False),  # its var_list is `b` alone: `w` is read from the feed
])
def test_a_variable_is_found_only_where_an_update_the_program_runs_may_write_it(
        tmp_path: Path, fetched: str, found: bool):
    """helpers.py holds a loss helper and two trainers: a run of a loss built through the
    helper may write anything the source can tell, but where train.py never calls a
    trainer (a sibling module's optimizer, which trains its own model) nothing it runs
    updates `w`, and feeding it works; nor where the trainer it calls updates only its
    `var_list`. Where the trainer may update every trainable variable, the run of its
    train op fails with the float_ref error: found."""
    (tmp_path / "helpers.py").write_text(
        "import tensorflow as tf\n\nb = tf.Variable(0.0)\n\n\n"
        "def summed(x):\n    return tf.reduce_sum(x) + b\n\n\n"
        "def fit(loss):\n    return tf.train.GradientDescentOptimizer(0.1).minimize(loss)\n\n\n"
        "def fit_bias(loss):\n"
        "    return tf.train.GradientDescentOptimizer(0.1).minimize(loss, var_list=[b])\n")
    train = ("import tensorflow as tf\n\nfrom helpers import fit, fit_bias, summed\n\n"
             "x = tf.placeholder(tf.float32, [2])\nw = tf.Variable(tf.ones([2]))\n"
             f"loss = summed(x * w)\nfetched = {fetched}\n"
             "with tf.Session() as sess:\n"
             "    sess.run(tf.global_variables_initializer())\n"
             "    sess.run(fetched, feed_dict={x: [1.0, 2.0], w: [0.5, 0.5]})"
             + ("  # expect: error col 49\n" if found else "\n"))
    _assert_train_findings(tmp_path, train)


@pytest.mark.parametrize("fetched, found", [
    ("tf.group(train_op)", True),
    ("tf.get_collection(tf.GraphKeys.TRAIN_OP)", True),  # what a collection of ops holds
    ("tf.contrib.layers.optimize_loss(loss, None, 0.1, 'SGD')", True),  # TF 1.x's train op
    ("tf.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES)", False),  # reads the variables
    ("tf.summary.scalar('w', w)", False),
])
def test_a_run_evaluates_only_where_what_it_fetches_writes_no_variable(fetched, found):
    """As TF runs them (graph mode, `w` fed): the train op's runs fail with the float_ref
    error, the collection of variables gives the fed 3.0 and the summary is made from it,
    and `w` stays 1.0 after either."""
    code = ("import tensorflow as tf\n\nw = tf.Variable(1.0)\nloss = w * 2.0\n"
            "train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)\n"
            "tf.add_to_collection(tf.GraphKeys.TRAIN_OP, train_op)\n"
            f"fetched = {fetched}\nwith tf.Session() as sess:\n"
            "    sess.run(fetched, feed_dict={w: 3.0})\n")
    assert len(graphfix.check_source(code, only=[NAME])) == found
