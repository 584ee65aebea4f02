"""Every graph fixture pair of every transform: fixtures/<transform>/<case>/before.pbtxt,
after.pbtxt and case.json. Adding a case means adding a folder.

case.json holds the case's settings, `{"settings": {...}}`, and, for a case whose findings
a fix leaves (an error graphfix reports but cannot fix), what `check` finds:
`"findings": [{"node": ..., "severity": ..., "fixable": false}, ...]`. Without it every
finding is fixed: `check` finds nothing in after.pbtxt.
"""

from __future__ import annotations

import json

import pytest

import graphfix
from graphfix.graph import graphfile as graphio
from graphfix.graph.graphfile import serialize

from conftest import FIXTURES

CASES = sorted(FIXTURES.glob("*/*/before.pbtxt"))


def _said(findings) -> list[dict]:
    return [{"node": f.node, "severity": f.severity, "fixable": f.fixable} for f in findings]


@pytest.mark.parametrize("before_path", CASES, ids=[f"{p.parent.parent.name}/{p.parent.name}" for p in CASES])
def test_fixture_pair(before_path):
    case = before_path.parent
    transform = case.parent.name.replace("_", "-")
    spec = json.loads((case / "case.json").read_text())
    settings = spec["settings"]
    before = graphio.load(before_path).message
    after_text = (case / "after.pbtxt").read_bytes()
    if "findings" in spec:
        assert _said(graphfix.check_graph(before, only=[transform], settings=settings)) == \
            spec["findings"]
    left = [f for f in spec.get("findings", []) if not f["fixable"]]
    fixed, changes = graphfix.fix_graph(before, only=[transform], settings=settings)
    assert serialize(fixed, text=True) == after_text
    assert bool(changes) == (after_text != before_path.read_bytes())
    # Idempotent: the fixed graph is a no-op case, unchanged byte for byte.
    again, more = graphfix.fix_graph(fixed, only=[transform], settings=settings)
    assert more == []
    assert serialize(again, text=True) == after_text
    # What is left: the findings not fixed, nothing else.
    assert _said(graphfix.check_graph(fixed, only=[transform], settings=settings)) == left
    # The caller's message is never edited.
    assert serialize(before, text=True) == before_path.read_bytes()


def test_every_transform_with_a_graph_surface_has_fixtures():
    folders = {p.parent.parent.name.replace("_", "-") for p in CASES}
    graph_transforms = {name for name, t in graphfix.all_transforms().items()
                        if "graph" in t.surfaces()}
    assert graph_transforms <= folders


def test_a_case_can_keep_an_unfixable_finding():
    """Issue 35: a graph case that stays unfixable is a fixture pair too (before and after
    the same, the finding declared in case.json)."""
    kept = [p for p in CASES if any(not f["fixable"] for f in json.loads(
        (p.parent / "case.json").read_text()).get("findings", []))]
    assert {p.parent.name for p in kept} >= {"unshared_variables", "not_a_variable"}
    assert all((p.parent / "after.pbtxt").read_bytes() == p.read_bytes() for p in kept)
