"""graphfix.source.scopes: where a node sits, as the source rules ask it (the rules'
fixtures, tests/test_source_fixtures.py, run them on real code)."""

from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper, ScopeProvider

from graphfix.source.codemod import ParentProvider
from graphfix.source.scopes import (
    bound_name,
    descendants,
    enclosing,
    enclosing_function,
    inside,
    single_value,
    trace_values,
    with_items_around,
)

CODE = '''\
cluster = {"ps": ["a:1"]}
spec = cluster
spec = None


class Towers:
    def build(self, i):
        with tf.device("/cpu:0"), tf.name_scope("t"):
            with tf.device("/gpu:%d" % i):
                w = tf.Variable(1.0)
                f = lambda: tf.Variable(2.0)
        return w
'''


def _tree():
    wrapper = MetadataWrapper(cst.parse_module(CODE))
    parents = wrapper.resolve(ParentProvider)
    scopes = wrapper.resolve(ScopeProvider)
    calls = {wrapper.module.code_for_node(c): c for c in descendants(wrapper.module, cst.Call)}
    return wrapper.module, parents.get, scopes, calls


def test_the_with_items_around_a_node_innermost_first_then_where_its_code_is_called():
    module, parent, _, calls = _tree()
    around = list(with_items_around(calls["tf.Variable(1.0)"], parent))
    spelled = [module.code_for_node(a.item) if isinstance(a, cst.WithItem) else type(a).__name__
               for a in around]
    assert spelled == ['tf.device("/gpu:%d" % i)', 'tf.name_scope("t")', 'tf.device("/cpu:0")',
                       "FunctionDef", "ClassDef"]
    # In a lambda: its body runs where it is called; in a `with` item: the items before it.
    assert type(next(with_items_around(calls["tf.Variable(2.0)"], parent))) is cst.Lambda
    assert [module.code_for_node(a.item) for a in with_items_around(
        calls['tf.name_scope("t")'], parent) if isinstance(a, cst.WithItem)] == [
        'tf.device("/cpu:0")']


def test_the_statement_and_function_holding_a_node():
    module, parent, _, calls = _tree()
    variable, in_lambda = calls["tf.Variable(1.0)"], calls["tf.Variable(2.0)"]
    statement = enclosing(variable, parent, cst.SimpleStatementLine)
    assert module.code_for_node(statement).strip() == "w = tf.Variable(1.0)"
    assert enclosing(in_lambda, parent, cst.SimpleStatementLine, within_function=True) is None
    assert enclosing(in_lambda, parent, cst.SimpleStatementLine) is not None
    function = enclosing_function(variable, parent)
    assert function.name.value == "build" and inside(variable, function, parent)
    assert not inside(function, function, parent)
    assert enclosing_function(calls['tf.device("/cpu:0")'], parent) is function


def test_the_value_a_name_is_bound_to():
    module, parent, scopes, _ = _tree()
    names = {}
    for name in descendants(module, cst.Name):
        names.setdefault(name.value, name)
    cluster, spec = names["cluster"], names["spec"]
    value = single_value(cluster, scopes[cluster], parent)
    assert module.code_for_node(value) == '{"ps": ["a:1"]}'
    assert bound_name(value, parent).value == "cluster"
    assert single_value(spec, scopes[spec], parent) is None  # bound twice


TRACED = '''\
def stage(x):
    hidden = relu(x)
    return dense(hidden)


class Model:
    def build(self, x):
        parts = []
        parts.append(stage(x))
        self.loss = add_n(parts)

    def train(self):
        total = self.loss
        return minimize(total, loss=unrelated)
'''


def test_a_value_traced_back_through_names_attributes_and_returns():
    """From `total`: its binding, the `self.loss` another method assigns, the list that value
    sums and what is appended to it, the values `stage` returns and what they read; not a
    keyword's name (`loss=`). Each path carries the state its steps give (here: whether
    it went through `self.loss`); a step that answers None stops its path there."""
    wrapper = MetadataWrapper(cst.parse_module(TRACED))
    module, parent = wrapper.module, wrapper.resolve(ParentProvider).get
    start = next(n for n in descendants(module, cst.Call) if module.code_for_node(
        n.func) == "minimize").args[0].value
    reached = []

    def step(value, through_attribute):
        code = module.code_for_node(value)
        reached.append((code, through_attribute))
        return None if code == "relu(x)" else through_attribute or code == "self.loss"

    trace_values(start, parent, module, step, False)
    assert sorted(reached) == sorted([
        ("self.loss", False), ("add_n(parts)", True), ("[]", True),
        ("parts.append(stage(x))", True), ("dense(hidden)", True), ("relu(x)", True)])
