"""A transform contributes verify's check of its bug: it says what the run must observe
(`Transform.verify_watch`) and gives the verdict (`Transform.verify_check`); verify runs the
graph once for all of them. update-ops and stateful-custom-ops check their bugs this way
(their checks' own cases: test_verify_compare.py, test_stateful_custom_ops.py)."""

from __future__ import annotations

from graphfix.findings import Check, Watch
from graphfix.graph import graphfile
from graphfix.registry import Transform, verify_checks
from graphfix.verification.run import verify_graph


class CounterMoves(Transform):
    """A third party's check: the counter variable is read before and after the steps, and
    the first step is traced (which ops ran)."""

    name = "counter-moves-test"
    summary = "test: the counter moves each step"

    def verify_watch(self, graph):
        return Watch(variables=frozenset({"counter"}), trace=True)

    def verify_check(self, graph, run):
        before, after = run.variables_before["counter"], run.variables_after["counter"]
        moved = after - before == run.steps
        return Check("counter", bool(moved), f"{before} -> {after} in {run.steps} step(s), "
                     f"bump ran: {'bump' in run.devices}")


def _counter_graph(tf, path):
    graph = tf.Graph()
    with graph.as_default():
        counter = tf.compat.v1.Variable(0, name="counter")
        tf.group(counter.assign_add(1), name="bump")
        tf.compat.v1.global_variables_initializer()
    tf.compat.v1.train.export_meta_graph(filename=str(path), graph=graph)
    return graphfile.load(path)


def test_a_transforms_check_observes_the_run_it_asked_for(tf, tmp_path):
    loaded = _counter_graph(tf, tmp_path / "counter.meta")
    result = verify_graph(loaded, steps=3, fetches=["bump"], checks=[CounterMoves()])
    [check] = [c for c in result.checks if c.name == "counter"]
    assert check.passed, result.to_lines()
    assert check.detail == "0 -> 3 in 3 step(s), bump ran: True"
    # Without it, verify says nothing of the counter.
    plain = verify_graph(loaded, steps=3, fetches=["bump"])
    assert [c.name for c in plain.checks] == ["placement", "run"]


def test_the_update_op_and_custom_op_checks_are_their_transforms():
    assert {t.name for t in verify_checks()} == {"update-ops", "stateful-custom-ops"}
