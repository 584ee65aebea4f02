"""Settings are checked once, against the params each transform declares: a bad value is the
same one-line error from the API, the command line's `--set` and `[tool.graphfix]`."""

from __future__ import annotations

import pytest

import graphfix

from conftest import FIXTURES, error_lines, run_cli

SEED = FIXTURES / "variables_to_cpu" / "seed000_ref" / "before.pbtxt"

BAD = [
    ("variables-to-cpu", "scope", "bogus",
     "variables-to-cpu.scope must be one of variables, no-kernel, not 'bogus'"),
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
