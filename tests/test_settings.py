"""Settings are checked once, against the params each transform declares: a bad value is the
same one-line error from the API, the command line's `--set` and `[tool.graphfix]`."""

from __future__ import annotations

import pytest

import graphfix

from conftest import FIXTURES, error_lines, run_cli

SEED = FIXTURES / "variables_to_cpu" / "seed000_ref" / "before.pbtxt"

BAD = [
    ("variables-to-cpu", "scope", "bogus",
     "variables-to-cpu.scope must be one of all, every-gpu-variable, variables, no-kernel, not 'bogus'"),
    ("replica-placement", "ps_tasks", "0", "replica-placement.ps_tasks must be at least 1, not 0"),
    ("replica-placement", "ps_tasks", "two", "replica-placement.ps_tasks takes a int, not 'two'"),
    ("update-ops", "tower", "first",
     "update-ops has no parameter 'tower'; it takes: train_op, towers"),
]


@pytest.mark.parametrize("name, key, value, message", BAD, ids=[b[1] + "=" + b[2] for b in BAD])
def test_a_bad_setting_is_the_same_one_line_error_everywhere(tmp_path, name, key, value, message):
    for call in (graphfix.check_graph, graphfix.fix_graph):
        with pytest.raises(graphfix.UsageError) as raised:
            call(SEED, settings={name: {key: value}})
        assert str(raised.value) == message

    result = run_cli("check", SEED, "--set", f"{name}.{key}={value}")
    assert result.returncode == 2
    assert error_lines(result.stderr) == [f"graphfix: error: {message}"]

    (tmp_path / "pyproject.toml").write_text(f'[tool.graphfix.set]\n"{name}.{key}" = "{value}"\n')
    (tmp_path / "g.pbtxt").write_bytes(SEED.read_bytes())
    result = run_cli("check", "g.pbtxt", cwd=tmp_path)
    assert result.returncode == 2
    assert error_lines(result.stderr) == [
        f"graphfix: error: {tmp_path / 'pyproject.toml'}: [tool.graphfix] set: {message}"]


def test_api_settings_take_values_or_their_text():
    """`ps_tasks` as 2 or "2", a repeatable param as a list or comma-separated text."""
    graph = FIXTURES / "replica_placement" / "mlp_on_worker0" / "before.pbtxt"
    as_int = graphfix.fix_graph(graph, settings={"replica-placement": {"ps_tasks": 2}})[1]
    as_text = graphfix.fix_graph(graph, settings={"replica-placement": {"ps_tasks": "2"}})[1]
    assert as_int == as_text and as_int
    fed = FIXTURES / "feed_to_assign" / "embeddings_ref" / "before.pbtxt"
    listed = graphfix.check_graph(fed, settings={"feed-to-assign": {"variables": ["embeddings"]}})
    texted = graphfix.check_graph(fed, settings={"feed-to-assign": {"variables": "embeddings,"}})
    assert listed == texted and [f.node for f in listed] == ["embeddings"]
    with pytest.raises(graphfix.UsageError, match="^unknown transform 'nope'; known: "):
        graphfix.check_graph(fed, settings={"nope": {}})
    with pytest.raises(graphfix.UsageError,
                       match=r"^replica-placement.ps_tasks takes a int, not True$"):
        graphfix.check_graph(fed, settings={"replica-placement": {"ps_tasks": True}})
    # None is the default, as if the param were not given.
    assert graphfix.fix_graph(graph, settings={"replica-placement": {"ps_tasks": None}})[1] \
        == graphfix.fix_graph(graph)[1]


@pytest.mark.parametrize("value, problem", [
    ("nonsense:xx", "'nonsense:xx' is not a device"),
    ("/tpu:7", "'/tpu:7' names no CPU or GPU device"),
])
def test_bad_target_devices_are_one_line_naming_where_they_came_from(tmp_path, value, problem):
    with pytest.raises(graphfix.UsageError, match=f"^target_devices: {problem}"):
        graphfix.check_graph(SEED, target_devices=[value])
    for command in (["check"], ["fix", "-o", tmp_path / "out.pbtxt"], ["verify"]):
        result = run_cli(*command, SEED, "--target-devices", value, cwd=tmp_path)
        assert result.returncode == 2
        [line] = error_lines(result.stderr)
        assert line.startswith(f"graphfix: error: --target-devices: {problem}"), line
    assert not (tmp_path / "out.pbtxt").exists()
    graph = tmp_path / "seed.pbtxt"
    graph.write_bytes(SEED.read_bytes())
    (tmp_path / "pyproject.toml").write_text(f'[tool.graphfix]\ntarget-devices = "{value}"\n')
    result = run_cli("check", graph, cwd=tmp_path)
    assert result.returncode == 2
    [line] = error_lines(result.stderr)
    assert "pyproject.toml: [tool.graphfix]: target-devices: " + problem in line
