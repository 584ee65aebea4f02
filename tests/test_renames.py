"""graphfix.source.renames: a rename rule is its table. The built-in one,
deprecated-initializers, runs on its fixtures (tests/test_source_fixtures.py); here a table
of another transform's shows what a row says about arguments, and where old names stay."""

from __future__ import annotations

import textwrap

from graphfix.registry import Transform
from graphfix.source.renames import Rename, RenameRule
from graphfix.source.run import run_source


class _ArgMax(Transform):
    name = "arg-max"
    summary = "tf.arg_max is tf.argmax, whose `dimension` is `axis`"


class _ArgMaxRule(RenameRule):
    RENAMES = {"arg_max": Rename("argmax", keywords=(("dimension", "axis"),))}
    MESSAGE = "{spelled} is {replacement} now"

    @classmethod
    def transform(cls):
        return _ArgMax


def _fix(code: str):
    result = run_source(textwrap.dedent(code), "t.py", [(_ArgMaxRule, {})], fix=True)
    return result.new_code, [(f.line, f.message, f.fixable) for f in result.findings]


def test_a_row_renames_the_name_and_its_keywords_where_it_is_called():
    fixed, found = _fix("""\
        import tensorflow.compat.v1 as tf
        from tensorflow import arg_max

        best = tf.arg_max(logits, dimension=1, name="best")
        first = arg_max(logits, dimension=0)
        pick = tf.arg_max
        """)
    assert fixed == textwrap.dedent("""\
        import tensorflow.compat.v1 as tf
        from tensorflow import argmax

        best = tf.argmax(logits, axis=1, name="best")
        first = argmax(logits, axis=0)
        pick = tf.argmax
        """)
    assert found == [(4, "tf.arg_max is tf.argmax now", True), (5, "arg_max is argmax now", True),
                     (6, "tf.arg_max is tf.argmax now", True)]


def test_old_names_in_a_version_branch_stay_around_a_definition_too():
    code = """\
        import tensorflow as tf

        if tf.__version__.startswith("0."):
            def best(logits):
                return tf.arg_max(logits, dimension=1)
        else:
            def best(logits):
                return tf.argmax(logits, axis=1)
        """
    assert _fix(code) == (textwrap.dedent(code), [])
