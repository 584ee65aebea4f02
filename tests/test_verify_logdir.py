"""`verify --logdir`: the runs TensorBoard's graph dashboard reads, read back with
TensorBoard's own event loader: the fixed graph with its devices, and the traced step whose
step stats say where each node ran."""

from __future__ import annotations

import shutil

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from graphfix.graph import graphfile as graphio
from graphfix.graph.devices import DeviceSpec
from graphfix.graph.index import index_for
from graphfix.verification.run import plan_devices

from conftest import FIXTURES, error_lines, run_cli

SEEDS = {  # the demo's seed 000 and seed 003 graphs (graphfix/cli/demo.py)
    "seed000": FIXTURES / "variables_to_cpu" / "seed000_ref",
    "seed003": FIXTURES / "update_ops" / "two_tower_slim_bn",
}


def _loaded(folder):
    accumulator = EventAccumulator(str(folder))
    accumulator.Reload()
    return accumulator


def _graph_def(path):
    return graphio.load(path).graph_defs()[0][0]


def _devices(path) -> dict[str, str]:
    graph_def = _graph_def(path)
    return {node.name: node.device for node in graph_def.node}


def _ran_on(run_metadata) -> dict[str, str]:
    """Node -> the device (as /device:TYPE:N) its step stats say it ran on."""
    return {node.node_name: "/device:" + DeviceSpec.parse(stats.device).device_type + ":"
            + str(DeviceSpec.parse(stats.device).device_index)
            for stats in run_metadata.step_stats.dev_stats for node in stats.node_stats}


@pytest.fixture(scope="module", params=sorted(SEEDS))
def written(request, tmp_path_factory):
    case = SEEDS[request.param]
    logdir = tmp_path_factory.mktemp(request.param) / "logs"
    run_cli("verify", case / "after.pbtxt", "--compare", case / "before.pbtxt",
            "--logdir", logdir, check_exit=0)
    return case, logdir


def test_after_run_holds_the_fixed_graph_and_where_its_step_ran(written):
    case, logdir = written
    after = _loaded(logdir / "after")
    assert after.Tags()["graph"] and after.Tags()["run_metadata"] == ["verified_step"]
    fixed = _devices(case / "after.pbtxt")
    assert {n.name: n.device for n in after.Graph().node} == fixed
    # Where TF ran each node: a node the fixed graph pins to a GPU ran on that GPU's stand-in
    # (this machine has none: GPU k is logical CPU k + 1), one pinned to CPU:0 on CPU:0.
    mapping, _, _ = plan_devices(index_for(_graph_def(case / "after.pbtxt")), [])
    ran = _ran_on(after.RunMetadata("verified_step"))
    pinned = {name: device for name, device in fixed.items() if device and name in ran}
    assert pinned, "the traced step ran none of the graph's placed nodes"
    for name, device in pinned.items():
        spec = DeviceSpec.parse(device)
        expected = (f"/device:{mapping[str(spec.device_index or 0)]}"
                    if spec.device_type == "GPU" else f"/device:CPU:{spec.device_index or 0}")
        assert ran[name] == expected, name
    stats = [n for d in after.RunMetadata("verified_step").step_stats.dev_stats
             for n in d.node_stats if n.node_name in pinned]
    assert all(n.all_end_rel_micros >= 0 and n.all_start_micros > 0 for n in stats)


def test_before_run_holds_the_original_graph(written):
    case, logdir = written
    before = _loaded(logdir / "before")
    assert {n.name: n.device for n in before.Graph().node} == _devices(case / "before.pbtxt")
    assert _ran_on(before.RunMetadata("verified_step"))


def test_seed000_dashboard_shows_the_int32_variable_moved_to_cpu(written):
    case, logdir = written
    if case != SEEDS["seed000"]:
        pytest.skip("seed 000's fix moves a variable; seed 003's adds control edges")
    before, after = _loaded(logdir / "before"), _loaded(logdir / "after")
    assert {n.name: n.device for n in before.Graph().node}["d"] == "/device:GPU:0"
    assert {n.name: n.device for n in after.Graph().node}["d"] == "/device:CPU:0"
    # The original ran only with soft placement, its int32 variable on GPU 0's stand-in.
    assert _ran_on(before.RunMetadata("verified_step"))["d"] == "/device:CPU:1"
    assert _ran_on(after.RunMetadata("verified_step"))["d"] == "/device:CPU:0"


@pytest.mark.parametrize("make_bad", ["file", "under_a_file"])
def test_bad_logdir_is_one_line_and_nothing_is_written(tmp_path, make_bad):
    if make_bad == "file":
        logdir = tmp_path / "logs"
        logdir.write_text("not a folder")
        bad = logdir
    else:  # (a folder under a file: no one can write it, root neither)
        parent = tmp_path / "a_file"
        parent.write_text("")
        bad = parent / "logs"
    result = run_cli("verify", SEEDS["seed000"] / "after.pbtxt", "--logdir", bad,
                     check_exit=2)
    lines = error_lines(result.stderr)
    assert len(lines) == 1 and str(bad) in lines[0] and "--logdir" in lines[0], lines
    assert not result.stdout.strip()
    assert [p.name for p in tmp_path.iterdir()] == [(bad if make_bad == "file"
                                                      else parent).name]
    if make_bad == "file":
        assert bad.read_text() == "not a folder"


def test_fix_logdir_holds_each_graph_before_and_after_its_fix(tmp_path):
    graphs = {}
    for name, case in SEEDS.items():
        graphs[name] = tmp_path / name / "model.pbtxt"
        graphs[name].parent.mkdir()
        shutil.copy(case / "before.pbtxt", graphs[name])
    logdir = tmp_path / "logs"
    run_cli("fix", *graphs.values(), "--in-place", "--logdir", logdir, check_exit=1)
    for name, graph in graphs.items():
        runs = logdir / str(graph).replace("/", "_")  # one folder per graph, as given
        before, after = _loaded(runs / "before"), _loaded(runs / "after")
        assert {n.name: n.device for n in before.Graph().node} == _devices(
            SEEDS[name] / "before.pbtxt")
        assert {n.name: n.device for n in after.Graph().node} == _devices(graph)  # the fixed
        assert after.Tags()["run_metadata"] == []  # no step runs in a fix
    seed000 = _loaded(logdir / str(graphs["seed000"]).replace("/", "_") / "after")
    assert {n.name: n.device for n in seed000.Graph().node}["d"] == "/device:CPU:0"


def test_fix_logdir_of_one_graph_and_a_dry_run(tmp_path):
    logdir, fixed = tmp_path / "logs", tmp_path / "fixed.pbtxt"
    run_cli("fix", SEEDS["seed000"] / "before.pbtxt", "-o", fixed, "--logdir", logdir,
            check_exit=1)
    assert {n.name: n.device for n in _loaded(logdir / "after").Graph().node} == _devices(fixed)
    assert sorted(p.name for p in logdir.iterdir()) == ["after", "before"]
    dry = tmp_path / "dry"
    run_cli("fix", SEEDS["seed000"] / "before.pbtxt", "-o", tmp_path / "unwritten.pbtxt",
            "--dry-run", "--logdir", dry, check_exit=1)
    assert not dry.exists()  # a dry run writes nothing
