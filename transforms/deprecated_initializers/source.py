"""deprecated-initializers, source surface: the rename table's rule (`RenameRule`), with
TF's table of the old initializer names (`DEPRECATED_INITIALIZERS`: each takes the same
arguments as the name that replaced it)."""

from __future__ import annotations

from graphfix.source.examples import Example
from graphfix.source.renames import RenameRule
from graphfix.source.vocabulary import DEPRECATED_INITIALIZERS


class DeprecatedInitializersRule(RenameRule):
    """Each reference to a deprecated initializer name of TF's becomes the name that replaced
    it; an import of one (`from tensorflow import X`) is renamed with its uses."""

    RENAMES = DEPRECATED_INITIALIZERS
    MESSAGE = ("{spelled} is deprecated: use {replacement}, its current name (TF 1.x warns "
               "that {old} is deprecated and will be removed; TF 2 keeps both names in "
               "tf.compat.v1 only)")
    DESCRIPTION = "Rename TF 1.x's deprecated initializers to the names that replaced them."
    VALID = (
        """\
        import tensorflow.compat.v1 as tf

        init = tf.global_variables_initializer()
        names = [v.name for v in tf.global_variables()]
        """,
        """\
        def initialize_all_variables():
            return None


        init = initialize_all_variables()
        message = "tf.initialize_all_variables() is deprecated"
        """,
        """\
        import tensorflow as tf

        if hasattr(tf, "global_variables_initializer"):
            init = tf.global_variables_initializer()
        else:  # TF before 0.12: the old name, on purpose
            init = tf.initialize_all_variables()
        """,
    )
    INVALID = (
        Example(
            """\
            import tensorflow as tf

            a = tf.Variable(1)
            init_a = tf.initialize_all_variables()
            """,
            fixed="""\
            import tensorflow as tf

            a = tf.Variable(1)
            init_a = tf.global_variables_initializer()
            """,
            says="tf.initialize_all_variables is deprecated: use tf.global_variables_initializer, its current name"),
    )
