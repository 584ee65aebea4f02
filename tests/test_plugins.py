"""Third-party transforms: a distribution that declares a `graphfix.transforms` entry point
is listed, selectable with --only and run like a built-in one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

PLUGIN = textwrap.dedent('''
    from graphfix.findings import Change, Finding
    from graphfix.registry import Transform


    class ClearDevices(Transform):
        name = "clear-devices"
        summary = "forget every requested device"

        def check_graph(self, graph, ctx):
            return [Finding(ctx.path, self.name, "asks for " + d, node=n)
                    for n, d in zip(graph.names, graph.devices) if d]

        def fix_graph(self, graph, ctx):
            moved = [p for p in range(len(graph)) if graph.set_device(p, "")]
            return [Change(ctx.path, self.name, f"cleared {len(moved)} device(s)")] if moved else []
''')

GRAPH = 'node { name: "a" op: "NoOp" device: "/device:GPU:0" }\nnode { name: "b" op: "NoOp" }\n'


def _install_plugin(site):
    dist = site / "gfx_clear-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: gfx-clear\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[graphfix.transforms]\nclear-devices = gfx_clear:ClearDevices\n")
    (site / "gfx_clear.py").write_text(PLUGIN)


def _graphfix(*args, site, cwd):
    env = dict(os.environ, PYTHONPATH=str(site), TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, "-m", "graphfix", *map(str, args)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120)


def test_entry_point_transform_is_listed_checked_and_fixed(tmp_path):
    site = tmp_path / "site"
    _install_plugin(site)
    graph = tmp_path / "g.pbtxt"
    graph.write_text(GRAPH)

    listed = _graphfix("list", "--format", "json", site=site, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    by_name = {t["name"]: t for t in json.loads(listed.stdout)}
    assert by_name["clear-devices"]["surfaces"] == ["graph"]
    assert "variables-to-cpu" in by_name, "built-ins stay listed beside plugins"

    checked = _graphfix("check", graph, "--only", "clear-devices", site=site, cwd=tmp_path)
    assert checked.returncode == 1, checked.stderr
    assert "g.pbtxt@a: clear-devices: asks for /device:GPU:0" in checked.stdout

    fixed = _graphfix("fix", graph, "--only", "clear-devices", "-o", tmp_path / "out.pbtxt",
                      site=site, cwd=tmp_path)
    assert fixed.returncode == 1, fixed.stderr
    assert "device" not in (tmp_path / "out.pbtxt").read_text()


def test_entry_point_that_is_not_a_transform_is_a_one_line_error(tmp_path):
    site = tmp_path / "site"
    _install_plugin(site)
    (site / "gfx_clear.py").write_text("ClearDevices = 42\n")
    result = _graphfix("list", site=site, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "graphfix: error: entry point clear-devices = gfx_clear:ClearDevices is not a "
        "graphfix Transform"]


SOURCE_PLUGIN = textwrap.dedent('''
    import libcst as cst
    from graphfix.source.codemod import SourceCodemod
    from graphfix.registry import Transform


    class NoPrintCodemod(SourceCodemod):
        """Reports as it visits (not in visit_Module): traversed as libcst does."""
        transform_name = "no-print"

        def visit_Call(self, node):
            if isinstance(node.func, cst.Name) and node.func.value == "print":
                self.report(node, "print() in a training loop", fixable=False,
                            severity="warning")


    class NoPrint(Transform):
        name = "no-print"
        summary = "report print calls"
        codemod = NoPrintCodemod
        source_triggers = ("print",)

        @classmethod
        def has_source_work(cls, syntax):
            raise RuntimeError("a pre-check with a bug")
''')


def test_entry_point_codemod_that_reports_as_it_visits(tmp_path):
    """A third-party codemod that reports in `visit_Call` is traversed (the skip is for
    codemods that declare `reports_in_visit_module`), and a pre-check that raises lets the
    codemod decide instead of failing the run."""
    site = tmp_path / "site"
    _install_plugin(site)
    (site / "gfx_clear.py").write_text(SOURCE_PLUGIN.replace("NoPrint(", "ClearDevices("))
    (tmp_path / "loop.py").write_text("for step in range(3):\n    print(step)\n")
    result = _graphfix("check", "loop.py", "--only", "no-print", "--no-cache",
                       site=site, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "loop.py:2:5: no-print: print() in a training loop" in result.stdout


KNOT_PLUGIN = textwrap.dedent('''
    from graphfix.findings import Change
    from graphfix.registry import Transform


    class ClearDevices(Transform):
        name = "tie-knot"
        summary = "make a run after b, which runs after a"

        def fix_graph(self, graph, ctx):
            graph.add_control_input(graph.node("a"), "b")
            return [Change(ctx.path, self.name, "a now runs after b")]
''')


def test_a_transform_that_leaves_a_cycle_is_an_error_and_nothing_is_written(tmp_path):
    site = tmp_path / "site"
    _install_plugin(site)
    (site / "gfx_clear.py").write_text(KNOT_PLUGIN)
    graph = tmp_path / "g.pbtxt"
    graph.write_text('node { name: "a" op: "NoOp" }\nnode { name: "b" op: "NoOp" input: "^a" }\n')
    result = _graphfix("fix", graph, "--only", "tie-knot", "-o", tmp_path / "out.pbtxt",
                       site=site, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "tie-knot left a broken graph: cycle through a" in result.stdout + result.stderr
    assert not (tmp_path / "out.pbtxt").exists()
