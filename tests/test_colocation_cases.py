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
    assert not error["fixable"], "no move resolves it: tower 1's gradient is pinned to tower 1"


def test_fix_leaves_the_conflict_as_it_was_and_breaks_nothing_else(built, tmp_path):
    path, fixed = built["bert_towers.pb"], tmp_path / "fixed.pb"
    report = _report("fix", path, "-o", fixed, exit_code=1)
    assert not report["failed"]
    assert not any(GATHER_GRAD in c["description"] for c in report["changes"])
    before = oracle.place(oracle.graph_def_of(path), with_functions=False)
    after = oracle.place(oracle.graph_def_of(fixed), with_functions=False)
    assert after.failing_nodes() == before.failing_nodes() == {GATHER_GRAD}
    assert [e["details"]["node"] for e in _errors(fixed)] == [GATHER_GRAD]


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
