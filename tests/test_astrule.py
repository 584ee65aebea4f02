"""The stdlib-tree rule shape (`graphfix.source.astrule.AstRule`), through its built-in user,
deprecated-initializers: names read scope by scope as libcst reads them, positions in
characters, line endings kept, suppression comments on enclosing blocks, text edits made once
and never overlapping, and a file only such rules have work in never reaching libcst."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap

import pytest

import graphfix
from graphfix import registry
from graphfix.source.astrule import TextEdit, apply_edits
from graphfix.source.prefilter import prefilter
from graphfix.source.project.names import Scopes, ScopedAstTfNames

from conftest import FIXTURES, REPO, run_cli

NAME = "deprecated-initializers"


def _check(code: str):
    return graphfix.check_source(textwrap.dedent(code), only=[NAME])


def _fix(code: str):
    return graphfix.fix_source(textwrap.dedent(code), only=[NAME])


def test_a_parameter_or_local_named_tf_is_not_tensorflow():
    findings = _check("""\
        import tensorflow as tf

        def given(tf):
            return tf.all_variables()

        def assigned():
            tf = object()
            return tf.all_variables()

        class Model:
            tf = object()

            def method(self):
                return tf.all_variables()  # a class's names are unseen from its methods

        names = [tf.all_variables() for tf in (object(),)]
        init = tf.initialize_all_variables()
        """)
    assert [(f.line, f.col) for f in findings] == [(14, 16), (17, 8)]


def test_scopes_read_names_as_libcst_does():
    code = textwrap.dedent("""\
        tf = None

        def setup():
            global tf
            import tensorflow.compat.v1 as tf

        def later():
            v = tf.all_variables
            import tensorflow as tf2
            return tf2.all_variables
        """)
    tree = ast.parse(code)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    names = ScopedAstTfNames(tree, Scopes(tree, parents.get, code))
    attributes = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute)]
    # `global tf` binds the module's tf to compat.v1 too; a function's own import is its own
    assert sorted(names.canonical(a) for a in attributes) == ["all_variables", "all_variables"]
    assert all(names.tf_qualified(a).startswith(("tensorflow.compat.v1.", "tensorflow."))
               for a in attributes)


def test_the_column_counts_characters_after_non_ascii_text():
    code = """\
        # -*- coding: utf-8 -*-
        import tensorflow as tf
        message = "Grüße, 初期化"
        label = "é"; init = tf.initialize_all_variables()
        """
    fixed, findings = _fix(code)
    line = textwrap.dedent(code).splitlines()[3]
    assert [(f.line, f.col) for f in findings] == [(4, line.index("tf.") + 1)] == [(4, 21)]
    assert fixed == textwrap.dedent(code).replace("initialize_all_variables",
                                                  "global_variables_initializer")


def test_a_crlf_file_fixed_stays_crlf(tmp_path):
    lines = ["import tensorflow as tf", "from tensorflow import initialize_all_variables",
             "a = tf.Variable(1)", "names = tf.all_variables()",
             "init = initialize_all_variables()", ""]
    path = tmp_path / "crlf.py"
    path.write_bytes("\r\n".join(lines).encode())
    run_cli("fix", path, "--only", NAME, "--no-cache", check_exit=1)
    assert path.read_bytes() == "\r\n".join(lines).replace(
        "initialize_all_variables", "global_variables_initializer").replace(
        "tf.all_variables()", "tf.global_variables()").encode()


def test_an_ignore_on_the_enclosing_with_line_covers_its_body():
    code = """\
        import tensorflow as tf

        with tf.Session() as session:  # graphfix: ignore[deprecated-initializers]
            session.run(tf.initialize_all_variables())
            session.run(
                tf.initialize_local_variables())
        with tf.Session() as session:  # graphfix: ignore[variables-to-cpu]
            session.run(tf.initialize_all_tables())
        try:
            pass
        finally:  # graphfix: ignore[deprecated-initializers]
            tf.all_variables()
        match session:
            case None:  # graphfix: ignore[deprecated-initializers]
                tf.all_variables()
        """
    assert [f.line for f in _check(code)] == [8]


def test_edits_shared_by_findings_are_made_once_and_overlaps_refused():
    code = "from tensorflow import initialize_all_variables\na = initialize_all_variables()\n" \
           "b = initialize_all_variables()\n"
    fixed, findings = graphfix.fix_source(code, only=[NAME])
    assert len(findings) == 2 and fixed == code.replace("initialize_all_variables",
                                                        "global_variables_initializer")
    assert apply_edits("abcdef", [TextEdit(1, 3, "X"), TextEdit(1, 3, "X")], "r") == "aXdef"
    assert apply_edits("abcdef", [TextEdit(3, 3, "+"), TextEdit(1, 3, "X")], "r") == "aX+def"
    for overlapping in ([TextEdit(1, 3, "X"), TextEdit(2, 4, "Y")],
                        [TextEdit(2, 2, "X"), TextEdit(2, 2, "Y")]):
        with pytest.raises(RuntimeError, match="r: two edits of its fix overlap"):
            apply_edits("abcdef", overlapping, "r")


def test_a_libcst_rule_after_an_ast_rule_reads_the_code_as_it_left_it():
    code = (FIXTURES / "trace" / "seed000.py").read_text()
    fixed, findings = graphfix.fix_source(code)
    transforms = {f.transform for f in findings}
    assert NAME in transforms and len(transforms) > 1, transforms
    assert "initialize_all_variables" not in fixed
    assert not any(f.fixable for f in graphfix.check_source(fixed))


CODE_FOR_ONE_RULE = "import tensorflow as tf\n\nnames = [v.name for v in tf.all_variables()]\n"


def test_a_file_only_an_ast_rule_has_work_in_never_imports_libcst(tmp_path):
    transforms = [t for t in registry.all_transforms().values() if t.codemod is not None]
    assert [t.name for t in prefilter(CODE_FOR_ONE_RULE, transforms).work] == [NAME]
    (tmp_path / "one.py").write_text(CODE_FOR_ONE_RULE)
    api = subprocess.run(
        [sys.executable, "-c",
         "import sys, graphfix\n"
         f"found = graphfix.check_source({CODE_FOR_ONE_RULE!r})\n"
         "fixed, _ = graphfix.fix_source(" f"{CODE_FOR_ONE_RULE!r})\n"
         "assert [f.transform for f in found] == ['deprecated-initializers'], found\n"
         "assert 'global_variables()' in fixed\n"
         "print('libcst' in sys.modules)\n"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert api.stdout.strip() == "False", api.stderr
    # The command line, one job (no worker forked): -X importtime lists every import.
    cli = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "graphfix", "check", "one.py", "--jobs",
         "1", "--no-cache"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert "one.py:3:26: warning: deprecated-initializers:" in cli.stdout, cli.stdout + cli.stderr
    assert "graphfix.source.run" in cli.stderr and "libcst" not in cli.stderr


def test_the_rule_has_the_shape_of_an_ast_rule_in_docs_and_listing():
    from graphfix.source.astrule import AstRule

    transform = registry.get_transform(NAME)
    assert issubclass(transform.source_codemod(), AstRule)
    assert transform.source_codemod().transform() is transform
    listed = run_cli("list", check_exit=0).stdout
    assert NAME in listed
    page = (REPO / "docs" / "transforms" / f"{NAME}.md").read_text()
    assert "- source" in page


TRICKY = '''\
# -*- coding: utf-8 -*-
import tensorflow as tf
import tensorflow.compat.v1
from tensorflow import initialize_all_variables as init_all, all_variables
v1 = tf.compat.v1
slim = tf.contrib.slim
note = "é"; x = tf.all_variables()
y = (  # why
    tf.initialize_all_variables
)()
fns = [all_variables for all_variables in (len, str)]
z = [initialize_all_variables() for initialize_all_variables in fns]
w = tensorflow.compat.v1.initialize_local_variables()


def f(tf, *args, v=v1.all_variables, **kwargs):
    global slim
    slim = object()
    return tf.all_variables(), v1.initialize_all_tables(
        "a"
        "b", init_all)


class C:
    tf = None
    names = [tf for _ in range(2)]

    def m(self):
        return (tf.all_variables)(), [q for q in all_variables()]
'''


def test_names_positions_and_text_are_libcsts():
    """On code that exercises scopes and spelling, every name and attribute resolves to the
    TF name libcst's scope analysis gives (`TfNames`), at libcst's position, with the text
    libcst gives it."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider, ScopeProvider

    from graphfix.source.astrule import AstRule
    from graphfix.source.codemod import TfNames, qualified_name_lookup

    class Probe(AstRule):
        @classmethod
        def transform(cls):
            return registry.get_transform(NAME)

        def visit_Module(self, node):
            self.seen = {}
            for n in self.nodes(ast.Attribute, ast.Name):
                line, col = self.position(n)
                end = self.offset(n.end_lineno, n.end_col_offset) - self.offset(n.end_lineno, 0)
                self.seen[(type(n).__name__, line, col - 1, n.end_lineno, end)] = (
                    self.tf_qualified(n), self.tf_names.is_foreign_import(n), self.code(n))

    probe = Probe("tricky.py", fix=False)
    probe.run(TRICKY, ast.parse(TRICKY))
    wrapper = MetadataWrapper(cst.parse_module(TRICKY))
    scopes, positions = wrapper.resolve(ScopeProvider), wrapper.resolve(PositionProvider)
    names = TfNames(wrapper.module, qualified_name_lookup(scopes.get),
                    probe.project.tf_name_of_import, probe.project.tf_name_of_star)
    compared = 0
    for node, where in positions.items():
        key = (type(node).__name__, where.start.line, where.start.column, where.end.line,
               where.end.column)
        if key in probe.seen:
            compared += 1
            assert probe.seen[key] == (names.tf_qualified(node), names.is_foreign_import(node),
                                       wrapper.module.code_for_node(node)), key
    assert compared > 40
    # (what the rule gave as a libcst rule, before it became a stdlib-tree one)
    found = [(f.line, f.col) for f in _check(TRICKY)]
    assert found == [(7, 17), (9, 5), (13, 5), (16, 20), (19, 32), (21, 14), (29, 17), (29, 50)]


def test_rules_of_both_shapes_read_the_code_each_other_left_in_either_order():
    from graphfix.source.run import run_source

    code = (FIXTURES / "trace" / "seed000.py").read_text()
    ours = registry.get_transform(NAME)
    theirs = registry.get_transform("variables-to-cpu")
    rules = [(t.source_codemod(), t.default_options()) for t in (ours, theirs)]
    first = run_source(code, "seed000.py", rules, fix=True)
    second = run_source(code, "seed000.py", rules[::-1], fix=True)
    assert first.new_code == second.new_code != code
    assert "initialize_all_variables" not in first.new_code
    assert ({f.transform for f in first.findings} == {f.transform for f in second.findings}
            == {NAME, "variables-to-cpu"})


@pytest.mark.parametrize("rule, line", [
    ("deprecated-initializers", "{name} = tf.initialize_all_variables()"),
    ("variables-to-cpu", "with tf.device('/gpu:0'):\n    {name} = tf.Variable(1, dtype=tf.int32)"),
])
@pytest.mark.parametrize("odd_break", ["\x0c", "\x1c", "\u2028"])
def test_an_ignore_comment_is_read_on_the_line_python_numbers(rule, line, odd_break):
    """A form feed (or another break `str.splitlines` splits at and Python does not) before
    a finding: the comment on the suppressed line covers it, not the next one's finding.
    Both rule shapes."""
    import graphfix

    ignore = f"  # graphfix: ignore[{rule}]"
    first, *rest = line.format(name="a").split("\n")
    code = ("import tensorflow as tf\nnote = 'x" + odd_break + "y'\n"
            + "\n".join([first + ignore, *rest]) + "\n" + line.format(name="b") + "\n")
    findings = graphfix.check_source(code, only=[rule])
    assert [f.line for f in findings] == [2 + 2 * len(line.split("\n"))]  # b's last line
