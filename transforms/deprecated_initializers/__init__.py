"""deprecated-initializers: TF 1.x's deprecated initializer names (seed 000).

The bug: the seed's script initializes with `tf.initialize_all_variables()`, a name TF
deprecated in 2017 for `tf.global_variables_initializer()`. TF 1.x still runs it and logs
`initialize_all_variables (from tensorflow.python.ops.variables) is deprecated and will be
removed after 2017-03-02`; TF 2 keeps the old names and the new alike in `tf.compat.v1`
only (`tf.initialize_all_variables` there raises `AttributeError: module 'tensorflow' has
no attribute 'initialize_all_variables'`, and so would `tf.global_variables_initializer`:
porting a file to TF 2 is `import tensorflow.compat.v1 as tf`, not this rename). Its
family, as TF's own `@deprecated` decorators name the replacements::

    tf.initialize_all_variables()      ->  tf.global_variables_initializer()
    tf.initialize_variables(var_list)  ->  tf.variables_initializer(var_list)
    tf.initialize_local_variables()    ->  tf.local_variables_initializer()
    tf.all_variables()                 ->  tf.global_variables()
    tf.initialize_all_tables()         ->  tf.tables_initializer()

Each old name is its new one under another name (same arguments, same result), so the
rename changes no graph: a warning, not an error.

Found (source only: a saved graph holds the ops these calls built, not the names they were
built with, so there is no graph surface): every reference that resolves to one of the
old names through the file's imports and aliases (`tf.X`, `tf.compat.v1.X`, `tf1.X` after
`import tensorflow.compat.v1 as tf1`, `X` after `from tensorflow import X`), called or not.
A function of the user's that happens to share a name, an attribute of another object
(`model.all_variables()`) and a string that mentions one are not TF's and are left alone;
so is an old name kept on purpose for TF before 0.12, which renaming would break: in the
`except` of a `try:` that calls its new name first, or in a branch of a version check
(`if tf.__version__ < "0.12":`, `if LooseVersion(tf.__version__) >= ...:`, `if hasattr(tf,
"global_variables_initializer"): ... else: ...`, as a statement or a conditional
expression).

Fixed: the old name becomes the new one, in the spelling the file uses (`tf1.X` becomes
`tf1.Y`); an import `from tensorflow import X` becomes `from tensorflow import Y`, and its
uses with it (an import `as` another name keeps that name, so its uses stay as they are).
The rule is the table above and nothing else: `graphfix.source.renames.RenameRule` reads
it (`DEPRECATED_INITIALIZERS` of `graphfix.source.vocabulary`).
"""

from __future__ import annotations

from graphfix.registry import Transform
from graphfix.source.prefilter import SourceTriggers
from graphfix.source.vocabulary import DEPRECATED_INITIALIZERS


class DeprecatedInitializers(Transform):
    name = "deprecated-initializers"
    summary = "rename deprecated initializers (initialize_all_variables -> global_variables_initializer)"
    codemod = ".source:DeprecatedInitializersRule"
    # (names, not calls: a reference is the finding, `init = tf.initialize_all_variables`)
    source_triggers = SourceTriggers(names=frozenset(DEPRECATED_INITIALIZERS))
