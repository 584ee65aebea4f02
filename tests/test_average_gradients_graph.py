"""average-gradients on graphs: seed 003's tower average of sparse gradients, proven by running.

Each case runs one training step of a two-tower graph and of the same model on one device fed
both towers' batches: the fixed average must train the variables as the one device does.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import graphfix
from graphfix.graph.index import index_for

from conftest import FIXTURES, run_cli

sys.path.insert(0, str(FIXTURES / "average_gradients"))
import recipes  # noqa: E402  (two-tower graphs averaged by the recipes seen in the wild)

ONLY = ["average-gradients"]
DATA = recipes.batches()
TOWER_FEEDS = {name: value for i, (ids, targets) in enumerate(DATA)
               for name, value in ((f"tower_{i}/ids:0", ids), (f"tower_{i}/targets:0", targets))}
ONE_DEVICE_FEEDS = {"ids:0": np.concatenate([ids for ids, _ in DATA]),
                    "targets:0": np.concatenate([targets for _, targets in DATA])}


def _one_device_step(**model):
    return recipes.run_step(recipes.one_device(**model).as_graph_def(), ONE_DEVICE_FEEDS)


def _assert_trains_as_one_device(graph_def, expected):
    got = recipes.run_step(graph_def, TOWER_FEEDS)
    for name in ("emb", "w"):
        np.testing.assert_allclose(got[name], expected[name], atol=1e-6, err_msg=name)


def _ops_feeding(graph_def, update: str) -> list[str]:
    """The op of every node `update` runs after."""
    index = index_for(graph_def)
    return [index.node(name).op for name in index.ancestors([update])]


@pytest.mark.parametrize("model", [{}, {"use_resource": True}], ids=["ref", "resource"])
def test_densified_embedding_average_becomes_a_sparse_scatter(model):
    before = recipes.two_towers("cifar10", **model).as_graph_def()
    findings = graphfix.check_graph(before, only=ONLY)
    assert [(f.node, f.severity, f.fixable) for f in findings] == [("Mean", "warning", True)]
    assert "densifies 2 towers' IndexedSlices gradients of emb" in findings[0].message

    fixed, changes = graphfix.fix_graph(before, only=ONLY)
    update = "train/update_emb/" + ("ResourceApplyGradientDescent" if model else
                                   "ApplyGradientDescent")
    scatter = "ResourceScatterSub" if model else "ScatterSub"
    assert [c.node for c in changes] == ["Mean"]
    assert f"is a {scatter}" in changes[0].description
    fixed_index = index_for(fixed)
    assert fixed_index.node(update).op == scatter
    # Before, each tower's gradient was densified to [VOCAB, DIM] on its way to the update;
    # after, the update reads the towers' rows only, and no dense form is made.
    assert "UnsortedSegmentSum" in _ops_feeding(before, update)
    assert "UnsortedSegmentSum" not in _ops_feeding(fixed, update)

    expected = _one_device_step(**model)
    _assert_trains_as_one_device(before, expected)  # right, only dense
    _assert_trains_as_one_device(fixed, expected)


def test_densified_average_under_momentum_reads_one_dense_form():
    model = {"use_resource": True, "optimizer": "momentum"}
    before = recipes.two_towers("cifar10", **model).as_graph_def()
    fixed, changes = graphfix.fix_graph(before, only=ONLY)
    assert "ResourceApplyMomentum reads its one dense form" in changes[0].description
    update = "train/update_emb/ResourceApplyMomentum"
    assert _ops_feeding(before, update).count("UnsortedSegmentSum") == 2  # one per tower
    assert _ops_feeding(fixed, update).count("UnsortedSegmentSum") == 1
    # Dense momentum decays every row of the accumulator, as it did before the fix.
    expected = recipes.run_step(before, TOWER_FEEDS)
    _assert_trains_as_one_device(fixed, expected)


@pytest.mark.parametrize("model", [{}, {"use_resource": True}, {"optimizer": "momentum"}],
                         ids=["ref", "resource", "momentum"])
def test_tower0_indices_average_trains_every_towers_rows(model):
    before = recipes.two_towers("tower0_indices", **model).as_graph_def()
    findings = graphfix.check_graph(before, only=ONLY)
    assert len(findings) == 1 and findings[0].severity == "error" and findings[0].fixable
    assert "at tower 0's indices only" in findings[0].message

    expected = _one_device_step(**model)
    with pytest.raises(AssertionError, match="emb"):  # tower 1's rows went to tower 0's ids
        _assert_trains_as_one_device(before, expected)

    fixed, changes = graphfix.fix_graph(before, only=ONLY)
    assert [c.node for c in changes] == [findings[0].node]
    _assert_trains_as_one_device(fixed, expected)


def test_correct_averages_are_left_alone():
    for recipe, model in (("concat_indices", {}), ("cifar10", {"embedding": False})):
        graph_def = recipes.two_towers(recipe, **model).as_graph_def()
        assert graphfix.check_graph(graph_def, only=ONLY) == [], recipe
        _assert_trains_as_one_device(graph_def, _one_device_step(**model))


def test_towers_with_their_own_variables_average_different_variables():
    before = recipes.two_towers("cifar10", shared=False).as_graph_def()
    findings = graphfix.check_graph(before, only=ONLY)
    assert [(f.node, f.fixable) for f in findings] == [("Mean", False), ("Mean_1", False)]
    assert "mixes gradients of different variables (tower_0/emb, tower_1/emb)" in findings[0].message
    fixed, changes = graphfix.fix_graph(before, only=ONLY)
    assert changes == [] and fixed == before


def test_a_variable_one_tower_does_not_reach_crashes_the_recipe():
    # Each tower's loss reaches its own copies only: every other copy's gradient is None.
    import tensorflow as tf

    with pytest.raises(ValueError, match="None values not supported"):
        graph = tf.Graph()
        with graph.as_default():
            recipes.cifar10([[(None, tf.compat.v1.get_variable("v", [1]))]])


def test_every_average_of_a_batch_norm_tower_graph_is_of_one_variable():
    # Seed 003's two slim towers (conv, fused and unfused batch norm, dense): each average's
    # gradients are read back to the one variable they are of, the batch norms' offsets included.
    from graphfix.graph import gradients
    from graphfix.graph import graphfile as graphio

    before = graphio.load(FIXTURES / "update_ops" / "two_tower_slim_bn" / "before.pbtxt").message
    index = index_for(before)
    averages = gradients.tower_averages(index)
    variables = [{gradients.gradient_variable(index, g) for g in a.per_tower} for a in averages]
    assert len(averages) == 6 and all(len(v) == 1 and None not in v for v in variables)
    assert {"conv1/BatchNorm/beta", "conv2/BatchNorm/beta"} <= set().union(*variables)
    assert graphfix.check_graph(before, only=ONLY) == []


def test_cli_fixes_the_densified_average(tmp_path):
    case = FIXTURES / "average_gradients" / "cifar10_embedding"
    out = tmp_path / "fixed.pbtxt"
    result = run_cli("fix", case / "before.pbtxt", "-o", out, "--only", "average-gradients")
    assert result.returncode == 1, result.stderr  # findings, fixed
    assert "average Mean rebuilt sparse over 2 towers" in result.stdout
    assert out.read_bytes() == (case / "after.pbtxt").read_bytes()
