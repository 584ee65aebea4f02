"""average-gradients, source surface: what its findings say, and the fixed
`average_gradients` run by TensorFlow: it trains as one device does where the recipe
densified, crashed on None, or let a tuple pair two variables.

Its fixture cases, `fixtures/average_gradients/source/<case>/`, are run by
tests/test_source_fixtures.py.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import graphfix

from conftest import FIXTURES, fixture_findings

sys.path.insert(0, str(FIXTURES / "average_gradients"))
import recipes  # noqa: E402  (two-tower graphs averaged by a given function)

NAME = "average-gradients"
SOURCE = FIXTURES / "average_gradients" / "source"


def test_every_fixture_finding_says_the_recipe_breaks():
    for case, _, findings in fixture_findings("average_gradients"):
        assert all("averages the towers' gradients with the CIFAR-10 recipe, which breaks "
                   "for this model" in f.message for f in findings), case.name


def test_what_breaks_the_recipe_is_said():
    findings = graphfix.check_source((SOURCE / "seed003_embedding" / "before.py").read_text(),
                                     only=[NAME])
    assert "is an IndexedSlices" in findings[0].message
    assert "Converting sparse IndexedSlices to a dense Tensor" in findings[0].message
    findings = graphfix.check_source((SOURCE / "unshared_variable" / "before.py").read_text(),
                                     only=[NAME])
    assert "tf.Variable at <string>:13 is made anew in every tower" in findings[0].message
    assert "None values not supported" in findings[0].message


def test_an_embedding_in_an_imported_module_breaks_the_recipe_in_the_train_script_only():
    """The multi_file case (run with its model.py by tests/test_source_fixtures.py): alone,
    the train script shows no model that breaks the recipe."""
    alone = (SOURCE / "multi_file" / "before" / "train.py").read_text()
    assert graphfix.check_source(alone, only=[NAME]) == []


# -- the fixed function, run ----------------------------------------------------------------

DATA = recipes.batches()
TOWER_FEEDS = {name: value for i, (ids, targets) in enumerate(DATA)
               for name, value in ((f"tower_{i}/ids:0", ids), (f"tower_{i}/targets:0", targets))}
ONE_DEVICE_FEEDS = {"ids:0": np.concatenate([ids for ids, _ in DATA]),
                    "targets:0": np.concatenate([targets for _, targets in DATA])}


def _function(case: str, which: str):
    """`average_gradients` as the fixture's before.py or after.py defines it."""
    namespace: dict = {}
    exec(compile((SOURCE / case / f"{which}.py").read_text(), f"{case}/{which}.py", "exec"),
         namespace)
    return namespace["average_gradients"]


@pytest.fixture(scope="module")
def one_device():
    return {resource: recipes.run_step(recipes.one_device(use_resource=resource).as_graph_def(),
                                       ONE_DEVICE_FEEDS)
            for resource in (False, True)}


@pytest.mark.parametrize("resource", [False, True], ids=["ref", "resource"])
def test_fixed_average_keeps_the_embedding_sparse_and_trains_as_one_device(resource, one_device):
    fixed = _function("seed003_embedding", "after")
    graph_def = recipes.two_towers(fixed, use_resource=resource).as_graph_def()
    ops = {node.op for node in graph_def.node}
    assert "UnsortedSegmentSum" not in ops  # nothing densified
    got = recipes.run_step(graph_def, TOWER_FEEDS)
    for name in ("emb", "w"):
        np.testing.assert_allclose(got[name], one_device[resource][name], atol=1e-6)
    # The recipe densified each tower's gradient of the embedding.
    before = recipes.two_towers(_function("seed003_embedding", "before"), use_resource=resource)
    assert "UnsortedSegmentSum" in {node.op for node in before.as_graph_def().node}


def test_fixed_average_skips_none_gradients(one_device):
    # A variable no tower's loss reaches: the recipe fails with TF's own error.
    with pytest.raises(ValueError, match="None values not supported"):
        recipes.two_towers(_function("unshared_variable", "before"), unreached=True)
    fixed = recipes.two_towers(_function("unshared_variable", "after"), unreached=True)
    got = recipes.run_step(fixed.as_graph_def(), TOWER_FEEDS)
    for name in ("emb", "w"):
        np.testing.assert_allclose(got[name], one_device[False][name], atol=1e-6)


def test_fixed_average_refuses_tuples_of_different_variables():
    # Towers with a tf.Variable each: zip(*tower_grads) pairs tower 0's copy with tower 1's.
    # The recipe builds it; the graph surface sees each average mix two variables.
    before = recipes.two_towers(_function("unshared_variable", "before"), shared=False)
    mixed = graphfix.check_graph(before.as_graph_def(), only=[NAME])
    assert [f.fixable for f in mixed] == [False, False]
    assert all("mixes gradients of different variables" in f.message for f in mixed)
    with pytest.raises(ValueError, match="one tuple pairs gradients of different variables"):
        recipes.two_towers(_function("unshared_variable", "after"), shared=False)
