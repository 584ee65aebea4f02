"""Fuzzed graphs: byte flips and truncations of real GraphDef, MetaGraphDef and SavedModel
files, and structural mutations (nodes dropped or renamed, inputs rewired, devices and
`_class` changed) of the two-tower batch-norm graph on ps/worker devices. Each is refused in
one line or fixed, and a fixed one is fixed for good: a second fix changes nothing. Fixed
seed, bounded time (fixtures/bench/graph_fuzz.py; `make bench` runs it longer)."""

from __future__ import annotations

import random
import sys

from conftest import REPO, error_lines, run_cli

sys.path.insert(0, str(REPO / "fixtures" / "bench"))
import graph_fuzz  # noqa: E402

SEED = 16
SECONDS = 20  # a bound: the cases of the seed are tried in order until it passes
MIN_CASES = 40  # (a loaded machine still tries this many, or the test says so)


def test_every_fuzzed_graph_is_refused_in_one_line_or_fixed_idempotently():
    counts = graph_fuzz.run(seed=SEED, seconds=SECONDS)
    assert counts.cases >= MIN_CASES, counts.to_json()
    assert not counts.failures, counts.failures[:5]
    assert counts.refused and counts.fixed, counts.to_json()  # both ends were reached
    assert set(counts.mutations) == {"flip", "truncate", *graph_fuzz.STRUCTURAL}


def test_the_two_tower_ps_worker_graph_is_fixed_for_good():
    # The mutants' parent: update-ops fixes it (replica-placement finds nothing: its ops
    # that name no device are left to the session, as on a correct graph), and the NoOp
    # update-ops adds goes where the train op is, so a second fix has nothing to place.
    from graphfix.driver import Selected
    from graphfix.registry import select

    selected = Selected.build(select(None), {})
    graph_def = graph_fuzz.ps_worker_two_tower()
    first = graph_fuzz.fix_once(graph_def, selected)
    assert {c.transform for c in first} == {"update-ops"}
    assert graph_fuzz.fix_once(graph_def, selected) == []


def test_the_command_refuses_a_corrupt_graph_in_one_line_and_fixes_a_mutant_once(tmp_path):
    from graphfix.graph import graphfile as graphio

    rng = random.Random(SEED)
    base = graph_fuzz.ps_worker_two_tower()
    data = base.SerializeToString(deterministic=True)
    cut = tmp_path / "cut.pb"
    cut.write_bytes(data[:len(data) // 3])
    result = run_cli("fix", cut, "-o", tmp_path / "cut_out.pb")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    lines = error_lines(result.stderr)
    assert len(lines) == 1 and "cut.pb" in lines[0], lines
    assert not (tmp_path / "cut_out.pb").exists()

    mutant = graph_fuzz.structural_mutant(rng, base, "device")
    path = tmp_path / "mutant.pb"
    path.write_bytes(mutant.SerializeToString(deterministic=True))
    once, twice = tmp_path / "once.pb", tmp_path / "twice.pb"
    run_cli("fix", path, "-o", once, check_exit=1)
    run_cli("fix", once, "-o", twice, check_exit=0)
    assert graphio.load(twice).message == graphio.load(once).message
