"""Every graph fixture pair of every transform: fixtures/<transform>/<case>/before.pbtxt,
after.pbtxt and case.json ({"settings": {...}}). Adding a case means adding a folder."""

from __future__ import annotations

import json

import pytest

import graphfix
from graphfix.graph import graphfile as graphio
from graphfix.graph.graphfile import serialize

from conftest import FIXTURES

CASES = sorted(FIXTURES.glob("*/*/before.pbtxt"))


@pytest.mark.parametrize("before_path", CASES, ids=[f"{p.parent.parent.name}/{p.parent.name}" for p in CASES])
def test_fixture_pair(before_path):
    case = before_path.parent
    transform = case.parent.name.replace("_", "-")
    settings = json.loads((case / "case.json").read_text())["settings"]
    before = graphio.load(before_path).message
    after_text = (case / "after.pbtxt").read_bytes()
    fixed, changes = graphfix.fix_graph(before, only=[transform], settings=settings)
    assert serialize(fixed, text=True) == after_text
    assert bool(changes) == (after_text != before_path.read_bytes())
    # Idempotent: the fixed graph is a no-op case, unchanged byte for byte.
    again, more = graphfix.fix_graph(fixed, only=[transform], settings=settings)
    assert more == []
    assert serialize(again, text=True) == after_text
    assert graphfix.check_graph(fixed, only=[transform], settings=settings) == []
    # The caller's message is never edited.
    assert serialize(before, text=True) == before_path.read_bytes()


def test_every_transform_with_a_graph_surface_has_fixtures():
    folders = {p.parent.parent.name.replace("_", "-") for p in CASES}
    graph_transforms = {name for name, t in graphfix.all_transforms().items()
                        if "graph" in t.surfaces()}
    assert graph_transforms <= folders
