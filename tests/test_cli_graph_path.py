"""The graph path's command line (`graphfix.cli.graphpath`): a plain `check` or `fix` of graph
files runs without typer, and says, writes and exits exactly as typer's command line does."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from conftest import FIXTURES, REPO

SEED = FIXTURES / "variables_to_cpu" / "seed000_ref" / "before.pbtxt"

# Runs `graphfix ARGS` in this process as the installed command does; with "typer" first,
# through typer's command line only (the graph path turned away), then prints which of the
# command-line libraries were loaded.
_RUN = textwrap.dedent(
    """
    import sys
    from graphfix.cli import main as cli
    args = sys.argv[1:]
    if args[0] == "typer":
        cli.graphpath.run = lambda words: None
    try:
        cli.main(args[1:])
    except SystemExit as stop:
        code = stop.code
    sys.stdout.flush()
    loaded = sorted(m for m in ("typer", "rich", "libcst", "click") if m in sys.modules)
    print("exit", code, "loaded", loaded, file=sys.stderr)
    """
)


def _run(path: str, args: list[str], cwd) -> tuple[str, str, str]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONWARNINGS": "ignore",
           "PYTHONPATH": str(REPO), "GRAPHFIX_NO_CACHE": "1"}
    done = subprocess.run([sys.executable, "-c", _RUN, path, *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=300)
    *errors, last = done.stderr.splitlines()
    return done.stdout, "\n".join(errors), last


@pytest.mark.parametrize("args", [
    ["fix", "{seed}", "-o", "out.pbtxt"],
    ["fix", "{seed}", "--only", "variables-to-cpu", "--output", "out.pbtxt", "--format", "json"],
    ["fix", "{copy}", "--in-place", "--force"],
    ["fix", "{seed}", "-o", "missing/out.pbtxt"],  # (a folder that is not there: exit 2)
    ["fix", "{broken}", "-o", "out.pb"],  # (a graph that does not parse: reported, exit 2)
    ["check", "{seed}"],
    ["check", "{seed}", "--format", "json", "--only", "update-ops"],
    ["fix", "{seed}", "-o", "out.pbtxt", "--set", "variables-to-cpu.scope=no-kernel"],
], ids=["fix", "fix-json-only", "in-place", "no-folder", "broken", "check", "check-json",
        "set"])
def test_the_graph_path_says_writes_and_exits_as_typers_command_line(tmp_path, args):
    for side in ("graphpath", "typer"):
        folder = tmp_path / side
        folder.mkdir()
        (folder / "copy.pbtxt").write_bytes(SEED.read_bytes())
        (folder / "broken.pb").write_bytes(b"\x0a\xff\xff")
    words = [a.format(seed=SEED, copy="copy.pbtxt", broken="broken.pb") for a in args]
    fast = _run("graphpath", words, tmp_path / "graphpath")
    slow = _run("typer", words, tmp_path / "typer")
    assert fast[0] == slow[0] and fast[1] == slow[1]
    assert fast[2].split(" loaded ")[0] == slow[2].split(" loaded ")[0]
    assert fast[2].endswith("loaded []"), fast[2]  # (typer's side loads typer and rich)
    for name in ("out.pbtxt", "copy.pbtxt", "out.pb"):
        written = [(tmp_path / side / name) for side in ("graphpath", "typer")]
        assert [p.exists() for p in written] == [written[1].exists()] * 2
        if written[1].exists():
            assert written[0].read_bytes() == written[1].read_bytes()
    if words[0] == "fix" and not {"missing/out.pbtxt", "broken.pb", "--set"} & set(words):
        assert fast[2].startswith("exit 1")  # (the seed's variable moved: a change)


@pytest.mark.parametrize("args", [
    ["fix", "{seed}"],  # (no -o: the command line's own error)
    ["fix", "{seed}", "-o", "a.pbtxt", "--in-place"],
    ["fix", "{seed}", "-o=a.pbtxt"],
    ["fix", "{seed}", "-o", "a.pbtxt", "--diff"],
    ["fix", "{seed}", "-o", "a.pbtxt", "--format", "github"],
    ["fix", "{seed}", "-o", "a.pbtxt", "--only", "no-such-transform"],
    ["fix", "{seed}", "-o", "a.pbtxt", "--set", "variables-to-cpu.scope=nowhere"],
    ["check", "{seed}", "-o", "a.pbtxt"],
    ["check", "{seed}", "--help"],
    ["check", "model.py"],
    ["check"],
    ["list"],
])
def test_any_other_command_line_is_typers(args):
    from graphfix.cli import graphpath

    assert graphpath.run([a.format(seed=SEED) for a in args]) is None


def test_a_table_of_tool_graphfix_goes_to_typers_command_line(tmp_path):
    from graphfix.cli import graphpath

    (tmp_path / "pyproject.toml").write_text('[tool.graphfix]\nonly = ["update-ops"]\n')
    graph = tmp_path / "g.pbtxt"
    graph.write_bytes(SEED.read_bytes())
    assert graphpath.run(["check", str(graph)]) is None


@pytest.mark.parametrize("extra", [[], ["--format", "json"]])
def test_fix_copies_a_graph_it_does_not_change_byte_for_byte(tmp_path, extra):
    """Do no harm: `fix -o` of a correct graph writes the file as it was read (here a
    person's text graph, with a comment and its own layout), not graphfix's rendering of
    it; both command lines (the plain graph path and typer's) alike."""
    from conftest import run_cli

    written = tmp_path / "hand.pbtxt"
    written.write_text(textwrap.dedent("""\
        # a correct graph, as a person wrote it
        node {
          name: "c"
          op: "Const"
          attr { key: "dtype" value { type: DT_FLOAT } }
          attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 1.0 } } }
        }
        """))
    done = run_cli("fix", str(written), "-o", str(tmp_path / "out.pbtxt"), *extra)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out.pbtxt").read_bytes() == written.read_bytes()
