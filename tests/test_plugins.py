"""Third-party transforms: a distribution that declares a `graphfix.transforms` entry point
is listed, selectable with --only and run like a built-in one; the guide's example of a rule
on the project model is one, installed and run here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from conftest import REPO

# Only the one graph entry point: check and fix both work from it.
PLUGIN = textwrap.dedent('''
    from functools import partial

    from graphfix.findings import Change, Finding
    from graphfix.registry import Transform


    def clear(position, path, graph):
        graph.set_device(position, "")
        return [Change(path, "clear-devices", "cleared a device", node=graph.names[position])]


    class ClearDevices(Transform):
        name = "clear-devices"
        summary = "forget every requested device"

        def graph(self, graph, ctx):
            for position, (name, device) in enumerate(zip(graph.names, graph.devices)):
                if device:
                    yield Finding(ctx.path, self.name, "asks for " + device, node=name,
                                  edit=partial(clear, position, ctx.path))
''')

GRAPH = 'node { name: "a" op: "NoOp" device: "/device:GPU:0" }\nnode { name: "b" op: "NoOp" }\n'


def _install_plugin(site, module="gfx_clear", code=PLUGIN,
                    entry_point="clear-devices = gfx_clear:ClearDevices"):
    """A distribution in `site` (a folder put on sys.path) whose `module` holds `code` and
    declares `entry_point` in the `graphfix.transforms` group: what pip would install."""
    dist = site / f"{module}-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[graphfix.transforms]\n{entry_point}\n")
    (site / f"{module}.py").write_text(code)


def _graphfix(*args, site, cwd):
    # `site` first, then whatever graphfix itself is found on (the tree under test).
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, PYTHONPATH=path, TF_CPP_MIN_LOG_LEVEL="3")
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
    assert "g.pbtxt@a: error: clear-devices: asks for /device:GPU:0" in checked.stdout

    fixed = _graphfix("fix", graph, "--only", "clear-devices", "-o", tmp_path / "out.pbtxt",
                      site=site, cwd=tmp_path)
    assert fixed.returncode == 1, fixed.stderr
    assert "g.pbtxt@a: clear-devices: cleared a device" in fixed.stdout
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
    from graphfix.source.fixes import Replace
    from graphfix.source.prefilter import SourceTriggers
    from graphfix.registry import Transform


    def _buggy_pre_check(syntax):
        raise RuntimeError("a pre-check with a bug")


    class NoPrintCodemod(SourceCodemod):
        """Reports as it visits (not in visit_Module): traversed as libcst does."""
        transform_name = "no-print"

        def visit_Call(self, node):
            if isinstance(node.func, cst.Name) and node.func.value == "print":
                to_log = lambda call: call.with_changes(func=cst.parse_expression("log.info"))
                self.report(node, "print() in a training loop", fix=Replace(node, to_log),
                            severity="warning")


    class NoPrint(Transform):
        name = "no-print"
        summary = "report print calls"
        codemod = NoPrintCodemod
        source_triggers = SourceTriggers(words=("print",), where=_buggy_pre_check)
''')


def test_entry_point_codemod_that_reports_as_it_visits(tmp_path):
    """A third-party codemod that reports in `visit_Call` is traversed (the skip is for
    codemods that report in `visit_Module` only), its fixes made as it goes, and a pre-check
    that raises lets the codemod decide instead of failing the run."""
    site = tmp_path / "site"
    _install_plugin(site)
    (site / "gfx_clear.py").write_text(SOURCE_PLUGIN.replace("NoPrint(", "ClearDevices("))
    _check_and_fix_a_print(site, tmp_path, "--only", "no-print")


def _check_and_fix_a_print(site, tmp_path, *check_options):
    """no-print, installed in `site`, finds the print of a loop and its fix logs instead."""
    (tmp_path / "loop.py").write_text("for step in range(3):\n    print(step)\n")
    result = _graphfix("check", "loop.py", *check_options, "--no-cache",
                       site=site, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "loop.py:2:5: warning: no-print: print() in a training loop (fixable)" in result.stdout
    fixed = _graphfix("fix", "loop.py", "--only", "no-print", "--no-cache",
                      site=site, cwd=tmp_path)
    assert fixed.returncode == 1, fixed.stderr
    assert (tmp_path / "loop.py").read_text() == "for step in range(3):\n    log.info(step)\n"


AST_PLUGIN = textwrap.dedent('''
    import ast

    from graphfix.source.astrule import AstRule, TextEdit
    from graphfix.source.prefilter import SourceTriggers
    from graphfix.registry import Transform


    class NoPrintRule(AstRule):
        """The stdlib-tree shape: `print(...)` becomes `log.info(...)` as a text edit."""

        def visit_Module(self, node):
            for call in self.nodes(ast.Call):
                if isinstance(call.func, ast.Name) and call.func.id == "print":
                    start, end = self.span(call.func)
                    self.report(call, "print() in a training loop",
                                fix=TextEdit(start, end, "log.info"), severity="warning")


    class NoPrint(Transform):
        name = "no-print"
        summary = "report print calls"
        codemod = NoPrintRule
        source_triggers = SourceTriggers(words=("print",))
''')


def test_entry_point_rule_of_the_stdlib_tree_shape(tmp_path):
    """A third-party `AstRule` is listed, checked (with the built-in rules) and fixed as a
    libcst rule is."""
    site = tmp_path / "site"
    _install_plugin(site, code=AST_PLUGIN, entry_point="no-print = gfx_clear:NoPrint")
    listed = _graphfix("list", site=site, cwd=tmp_path)
    assert "no-print" in listed.stdout, listed.stderr
    _check_and_fix_a_print(site, tmp_path, "--jobs", "1")


# A source transform whose codemod module is named, imported by the first file that needs
# it, and slow to import.
SLOW_START_PLUGIN = textwrap.dedent('''
    from graphfix.source.prefilter import SourceTriggers
    from graphfix.registry import Transform


    class NoPrint(Transform):
        name = "no-print"
        summary = "report print calls"
        codemod = "gfx_slow_codemod:NoPrintCodemod"
        source_triggers = SourceTriggers(words=("print",))
''')

SLOW_CODEMOD = textwrap.dedent('''
    import time

    import libcst as cst
    from graphfix.source.codemod import SourceCodemod

    time.sleep(3)


    class NoPrintCodemod(SourceCodemod):
        transform_name = "no-print"

        def visit_Call(self, node):
            if isinstance(node.func, cst.Name) and node.func.value == "print":
                self.report(node, "print() in a training loop", severity="warning")
''')


def test_a_codemod_slow_to_import_is_no_files_time(tmp_path):
    """--timeout-per-file bounds each file's own work: a worker's one-time start-up (here
    importing a codemod that takes 3 s) is not counted as its first file's time."""
    site = tmp_path / "site"
    _install_plugin(site, module="gfx_slow", code=SLOW_START_PLUGIN,
                    entry_point="no-print = gfx_slow:NoPrint")
    (site / "gfx_slow_codemod.py").write_text(SLOW_CODEMOD)
    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / name).write_text("for step in range(3):\n    print(step)\n")
    result = _graphfix("check", "a.py", "b.py", "c.py", "--only", "no-print", "--no-cache",
                       "--jobs", "2", "--timeout-per-file", "2", site=site, cwd=tmp_path)
    assert result.stderr == ""
    assert result.returncode == 1
    for name in ("a.py", "b.py", "c.py"):
        assert f"{name}:2:5: warning: no-print: print() in a training loop" in result.stdout


# A finding made without an edit: reported, never called fixable (issue 35: `fixable` was a
# flag of its own, True by default, so such a finding printed "(fixable)").
NO_EDIT_PLUGIN = textwrap.dedent('''
    from graphfix.findings import Finding
    from graphfix.registry import Transform


    class ClearDevices(Transform):
        name = "just-say"
        summary = "say where a device is asked for, fix nothing"

        def graph(self, graph, ctx):
            for name, device in zip(graph.names, graph.devices):
                if device:
                    yield Finding(ctx.path, self.name, "asks for " + device, node=name)
''')


def test_a_finding_without_an_edit_is_not_called_fixable_in_any_format(tmp_path):
    from graphfix.findings import Finding

    assert not Finding("g.pb", "t", "m", node="a").fixable
    assert Finding("g.pb", "t", "m", node="a", edit=lambda graph: []).fixable
    site = tmp_path / "site"
    _install_plugin(site, code=NO_EDIT_PLUGIN, entry_point="just-say = gfx_clear:ClearDevices")
    graph = tmp_path / "g.pbtxt"
    graph.write_text(GRAPH)

    def check(*options):
        result = _graphfix("check", graph, "--only", "just-say", *options, site=site,
                           cwd=tmp_path)
        assert result.returncode == 1, result.stdout + result.stderr
        return result.stdout

    text = check()
    assert "g.pbtxt@a: error: just-say: asks for /device:GPU:0" in text and "(fixable)" not in text
    assert "1 finding(s) (0 fixable)" in text
    report = json.loads(check("--format", "json"))
    assert [f["fixable"] for f in report["findings"]] == [False]
    assert report["summary"]["fixable"] == 0
    (result,) = json.loads(check("--format", "sarif"))["runs"][0]["results"]
    assert result["properties"]["fixable"] is False and "fixes" not in result
    assert "(fixable)" not in check("--format", "junit")
    assert "(fixable)" not in check("--format", "github")
    fixed = _graphfix("fix", graph, "--only", "just-say", "-o", tmp_path / "out.pbtxt",
                      site=site, cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr  # nothing to change


KNOT_PLUGIN = textwrap.dedent('''
    from graphfix.findings import Change, Finding
    from graphfix.registry import Transform


    class ClearDevices(Transform):
        name = "tie-knot"
        summary = "make a run after b, which runs after a"

        def graph(self, graph, ctx):
            def tie(graph):
                graph.add_control_input(graph.node("a"), "b")
                return [Change(ctx.path, self.name, "a now runs after b")]

            yield Finding(ctx.path, self.name, "a runs before b", node="a", edit=tie)
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


MODEL_EXAMPLE = REPO / "docs" / "examples" / "saver_before_variables.py"


def test_the_guides_project_model_example_is_the_example_file():
    guide = (REPO / "docs" / "guide.md").read_text()
    code = MODEL_EXAMPLE.read_text()
    assert f"```python\n{code}```\n" in guide, ("docs/guide.md must show "
                                              "docs/examples/saver_before_variables.py as it is")
    assert len(code.splitlines()) <= 80


def test_a_third_party_rule_asks_the_project_model(tmp_path):
    """The guide's project-model example, installed as an entry point: a Saver built before
    a call of another module's model function is a finding; the same Saver after it, or
    before a function that creates no variables, is not."""
    site = tmp_path / "site"
    _install_plugin(site, "saver_before_variables", MODEL_EXAMPLE.read_text(),
                    "saver-before-variables = saver_before_variables:SaverBeforeVariables")
    project = tmp_path / "project"
    project.mkdir()
    (project / "model.py").write_text(
        "import tensorflow.compat.v1 as tf\n\n\ndef build(x):\n"
        "    return tf.layers.dense(x, 10)\n\n\ndef preprocess(x):\n    return x / 255.0\n")
    (project / "train.py").write_text(
        "import tensorflow.compat.v1 as tf\n\nimport model\n\n"
        "x = tf.placeholder(tf.float32, [None, 4])\n"
        "saver = tf.train.Saver()\n"
        "logits = model.build(model.preprocess(x))\n")
    (project / "export.py").write_text(
        "import tensorflow.compat.v1 as tf\n\nimport model\n\n"
        "x = model.preprocess(tf.placeholder(tf.float32, [None, 4]))\n"
        "logits = model.build(x)\n"
        "saver = tf.train.Saver()\n")
    result = _graphfix("check", project, "--only", "saver-before-variables", "--no-cache",
                       "--format", "json", site=site, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    found = [(f["path"].rsplit("/", 1)[-1], f["line"], f["message"])
             for f in json.loads(result.stdout)["findings"]]
    assert found == [("train.py", 6, "tf.train.Saver() is built before model.build creates "
                                     "variables: it does not save them")]
    # Alone, train.py cannot know what model.build does: the model is not in the run.
    alone = _graphfix("check", project / "train.py", "--only", "saver-before-variables",
                      "--no-cache", site=site, cwd=tmp_path)
    assert alone.returncode == 0, alone.stdout + alone.stderr
