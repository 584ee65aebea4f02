"""average-gradients, source surface: fixture pairs, one run over two files, and the fixed
`average_gradients` run by TensorFlow: it trains as one device does where the recipe
densified, crashed on None, or let a tuple pair two variables.

Each `fixtures/average_gradients/source/<case>/` holds before.py and after.py (identical for
`noop_*` cases), or before/ and after/ folders fixed together as one run. A line marked
`# expect: error` (plus `unfixable` when it is reported but not fixed) is where a finding
must be.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import graphfix
from graphfix import registry
from graphfix.driver import Selected, run

from conftest import FIXTURES, expected_findings

sys.path.insert(0, str(FIXTURES / "average_gradients"))
import recipes  # noqa: E402  (two-tower graphs averaged by a given function)

NAME = "average-gradients"
SOURCE = FIXTURES / "average_gradients" / "source"
SINGLE = sorted(p for p in SOURCE.iterdir() if (p / "before.py").is_file())


def expected(code: str) -> list[tuple[int, bool]]:
    marks = expected_findings(code)
    assert all(e.severity == "error" for e in marks)
    return [(e.line, e.fixable) for e in marks]


@pytest.mark.parametrize("case", SINGLE, ids=[c.name for c in SINGLE])
def test_fixture_pair(case: Path):
    before = (case / "before.py").read_text()
    after = (case / "after.py").read_text()
    fixed, findings = graphfix.fix_source(before, only=[NAME])
    assert fixed == after
    assert [(f.line, f.fixable) for f in findings] == expected(before)
    assert all("averages the towers' gradients with the CIFAR-10 recipe, which breaks for "
               "this model" in f.message for f in findings)
    assert graphfix.check_source(before, only=[NAME]) == findings
    refixed, left = graphfix.fix_source(after, only=[NAME])
    assert refixed == after  # idempotent
    assert [(f.line, f.fixable) for f in left] == [e for e in expected(after) if not e[1]]
    if case.name.startswith("noop_"):
        assert after == before and not expected(before)


def test_what_breaks_the_recipe_is_said():
    findings = graphfix.check_source((SOURCE / "seed003_embedding" / "before.py").read_text(),
                                     only=[NAME])
    assert "is an IndexedSlices" in findings[0].message
    assert "Converting sparse IndexedSlices to a dense Tensor" in findings[0].message
    findings = graphfix.check_source((SOURCE / "unshared_variable" / "before.py").read_text(),
                                     only=[NAME])
    assert "tf.Variable at <string>:13 is made anew in every tower" in findings[0].message
    assert "None values not supported" in findings[0].message


def test_an_embedding_in_an_imported_module_breaks_the_recipe_in_the_train_script(tmp_path):
    case = SOURCE / "multi_file"
    work = tmp_path / case.name
    shutil.copytree(case / "before", work)
    report, outputs = run([str(work)], Selected.build(registry.select([NAME]), {}), fix=True)
    assert not report.failed and not report.skipped
    found = sorted((Path(f.path).name, f.line, f.fixable) for f in report.findings)
    marked = sorted((p.name, line, fixable) for p in work.glob("*.py")
                    for line, fixable in expected(p.read_text()))
    assert found == marked == [("train.py", 7, True)]
    # Alone, the train script shows no model that breaks the recipe.
    alone = graphfix.check_source((case / "before" / "train.py").read_text(), only=[NAME])
    assert alone == []
    written = {Path(o.target).name: o.data.decode() for o in outputs}
    assert written == {"train.py": (case / "after" / "train.py").read_text()}
    assert (case / "after" / "model.py").read_text() == (case / "before" / "model.py").read_text()


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
