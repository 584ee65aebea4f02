"""The central pre-filter (`graphfix.source.prefilter`) against the codemods: computed from
each rule's declared trigger vocabulary alone, it never turns away a file in which the
rule's codemod finds something, and it parses a file only where some rule's words are."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from graphfix import registry
from graphfix.source import prefilter
from graphfix.source.codemod import run_source
from graphfix.source.project import Project, part_of_code
from graphfix.source.prefilter import SourceTriggers
from graphfix.source.syntax import Syntax

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _source_rules():
    return [t for t in registry.all_transforms().values() if t.codemod is not None]


def _cases():
    """(transform, {path: code}) for each of a rule's source fixtures (a case's `before.py`,
    or every file under its `before/`) and each of its INVALID examples."""
    for transform in _source_rules():
        package = transform.__module__.rsplit(".", 1)[-1]
        for case in sorted((FIXTURES / package / "source").glob("*/")):
            files = ([case / "before.py"] if (case / "before.py").exists()
                     else sorted((case / "before").rglob("*.py")))
            if files:
                yield pytest.param(transform, {str(f): f.read_text() for f in files},
                                   id=f"{transform.name}-{case.name}")
        for number, example in enumerate(transform.source_codemod().INVALID):
            yield pytest.param(transform, {"example.py": example.code},
                               id=f"{transform.name}-invalid-{number}")


@pytest.mark.parametrize("transform, files", list(_cases()))
def test_the_pre_filter_lets_through_every_file_the_codemod_finds_something_in(transform,
                                                                               files):
    codemods = [(transform.source_codemod(), transform.default_options())]
    project = Project({path: part_of_code(code) for path, code in files.items()}, files.get)
    for path, code in files.items():
        view = project.view(path)
        found = run_source(code, path, codemods, fix=False, project=view).findings
        if found:
            assert transform in prefilter.prefilter(code, [transform]).work, path
            assert prefilter.in_project(transform, view), path


def test_a_file_no_rule_has_words_for_is_never_parsed():
    code = "import os\n\nprint(os.getcwd())\n"
    found = prefilter.prefilter(code, _source_rules())
    assert found.work == [] and found.syntax is None and found.parsed


def test_one_parse_is_shared_by_the_rules_the_text_let_through():
    code = textwrap.dedent("""\
        import tensorflow as tf
        with tf.device("/gpu:0"):
            w = tf.Variable(0.0)
        train = tf.train.GradientDescentOptimizer(0.1).minimize(w)
        """)
    found = prefilter.prefilter(code, _source_rules())
    # (replica-placement and shared-variables too: a cluster, or a reusing scope, of
    # another module may reach the variable, which the project model says once it is
    # built: `SourceTriggers.in_project`; colocate-gradients: a `minimize`, in a file that
    # opens a device scope or whose imports reach one)
    assert {t.name for t in found.work} == {"variables-to-cpu", "update-ops",
                                            "replica-placement", "shared-variables",
                                            "colocate-gradients"}
    assert isinstance(found.syntax, Syntax)


def test_words_in_comments_and_strings_are_no_call():
    """The text lets `minimize` in a comment through; the parse sees no call spelled so."""
    triggers = SourceTriggers(calls={"minimize"})
    code = "# minimize the loss later\nnote = 'minimize'\n"
    assert triggers.in_text(code)
    assert not triggers.in_syntax(Syntax.parse(code))
    assert triggers.in_syntax(Syntax.parse("opt.minimize(loss)\n"))



def test_a_name_is_named_by_a_reference_or_an_import_not_by_a_string_or_a_definition():
    """`names`: read, called or imported, as a name or an attribute; a docstring, a comment,
    a function of that name or a longer identifier holding it names nothing."""
    triggers = SourceTriggers(names={"initialize_all_variables"})
    unnamed = textwrap.dedent("""\
        def initialize_all_variables():
            "Like tf.initialize_all_variables()."  # initialize_all_variables
            return _initialize_all_variables_now()
        """)
    assert triggers.in_text(unnamed)
    assert not triggers.in_syntax(Syntax.parse(unnamed))
    for named in ("init = tf.initialize_all_variables\n",
                  "tf.compat.v1.initialize_all_variables().run()\n",
                  "from tensorflow import initialize_all_variables as init\n",
                  "print(initialize_all_variables)\n"):
        assert triggers.in_syntax(Syntax.parse(named)), named

def test_every_part_of_a_declaration_must_match():
    triggers = SourceTriggers(calls={"device"}, all_of=(("gpu", "GPU"),),
                              where=lambda syntax: "/gpu:0" in syntax.strings)
    assert not triggers.in_text("tf.device('/cpu:0')\n")
    assert triggers.in_text("tf.device('/gpu:1')\n")
    assert not triggers.in_syntax(Syntax.parse("tf.device('/gpu:1')\n"))
    assert triggers.in_syntax(Syntax.parse("tf.device('/gpu:0')\n"))
    assert SourceTriggers().in_text("") and SourceTriggers().in_syntax(Syntax.parse(""))


def test_a_plug_in_written_before_source_triggers_keeps_its_word_tuples():
    """The earlier form: a tuple of words (one must appear), or of tuples (each must match)."""
    from graphfix.source.prefilter import as_triggers

    words = as_triggers(("print", "Print"))
    assert words.in_text("tf.print(x)") and not words.in_text("x = 1")
    groups = as_triggers((("device",), ("gpu", "GPU")))
    assert groups.in_text("with tf.device('/gpu:0'):")
    assert not groups.in_text("with tf.device('/cpu:0'):")
    assert as_triggers(None) is None


_LOOPED = {
    "literal list": """\
        import tensorflow as tf
        for d in ["/gpu:0", "/gpu:1"]:
            with tf.device(d):
                w = tf.get_variable("w", [2])
        """,
    "enumerate of a listed name": """\
        import tensorflow as tf
        gpus = ("/gpu:0", "/gpu:1")
        for i, d in enumerate(gpus):
            with tf.device(d):
                w = tf.get_variable("w%d" % i, [2])
        """,
    # zakizhou/mnist_input_pipeline: the tower's device held in a name bound in the loop
    "a name bound once in the loop": """\
        import tensorflow as tf
        for gpu_index in range(2):
            gpu_name = "/gpu:" + str(gpu_index)
            with tf.device(gpu_name):
                w = tf.get_variable("w", [2])
                tf.get_variable_scope().reuse_variables()
        """,
    # TF's own distribution code: devices computed at run time, "GPU" said elsewhere
    "devices at run time": """\
        import tensorflow as tf
        def per_device(devices):
            assert devices, "no GPU devices"
            for d in devices:
                with tf.device(d):
                    w = tf.get_variable("w", [2])
        """,
}


@pytest.mark.parametrize("case", sorted(_LOOPED))
def test_variables_to_cpu_pre_check_reads_a_looped_device_as_its_codemod_does(case):
    """A device a loop binds is a GPU to the pre-check where its codemod reads one: the loop
    is over a literal list (or a name assigned one) that spells a GPU. A loop over devices
    known only at run time passes neither (the pre-check once let every such loop in a file
    that says "gpu" through, ten files of tensorflow/python each costing seconds of libcst)."""
    transform = registry.all_transforms()["variables-to-cpu"]
    code = textwrap.dedent(_LOOPED[case])
    codemods = [(transform.source_codemod(), transform.default_options())]
    found = run_source(code, "m.py", codemods, fix=False).findings
    passed = transform in prefilter.prefilter(code, [transform]).work
    assert passed == bool(found) == (case != "devices at run time")


_GPU_BLOCKS = {
    "a variable made in the block": ("""\
        import tensorflow as tf
        with tf.device("/gpu:0"):
            w = tf.get_variable("w", [2], dtype=tf.int32)
        """, True),
    # TF's own test_util.force_gpu: the block runs its caller's code, which the codemod
    # does not follow; nothing in it is called
    "a block that only yields": ("""\
        import contextlib
        import tensorflow as tf
        @contextlib.contextmanager
        def force_gpu():
            with tf.device("/device:GPU:0"):
                yield
        """, False),
}


@pytest.mark.parametrize("case", sorted(_GPU_BLOCKS))
def test_variables_to_cpu_pre_check_needs_a_call_in_the_gpu_block(case):
    """A GPU block whose body calls nothing makes no variable: the pre-check leaves the file
    out, as its codemod finds nothing there (tensorflow/python's test_util.py once cost
    2.5 s of libcst for its `force_gpu`)."""
    code, expected = _GPU_BLOCKS[case]
    code = textwrap.dedent(code)
    transform = registry.all_transforms()["variables-to-cpu"]
    codemods = [(transform.source_codemod(), transform.default_options())]
    found = run_source(code, "m.py", codemods, fix=False).findings
    passed = transform in prefilter.prefilter(code, [transform]).work
    assert passed == bool(found) == expected


_ZIPPED = {
    "the recipe": ("""\
        import tensorflow as tf
        def average_gradients(tower_grads):
            average_grads = []
            for grad_and_vars in zip(*tower_grads):
                grads = [tf.expand_dims(g, 0) for g, _ in grad_and_vars]
                average_grads.append((tf.reduce_mean(tf.concat(grads, 0), 0), grad_and_vars[0][1]))
            return average_grads
        def tower(ids):
            emb = tf.get_variable("emb", [100, 8])
            return tf.nn.embedding_lookup(emb, ids)
        """, True),
    # The recipe's loop at a script's top level, zipping a list the tower loop fills.
    "the loop inline in a script": ("""\
        import tensorflow as tf
        tower_grads = []
        for i in range(2):
            with tf.device("/gpu:%d" % i), tf.variable_scope("m", reuse=tf.AUTO_REUSE):
                emb = tf.get_variable("emb", [100, 8])
                loss = tf.reduce_sum(tf.nn.embedding_lookup(emb, [i]))
                tower_grads.append(tf.train.GradientDescentOptimizer(0.1).compute_gradients(loss))
        average_grads = []
        for grad_and_vars in zip(*tower_grads):
            grads = [tf.expand_dims(g, 0) for g, _ in grad_and_vars]
            average_grads.append((tf.reduce_mean(tf.concat(grads, 0), 0), grad_and_vars[0][1]))
        """, True),
    # A test that zips and averages, but not in a loop over what it zips.
    "zip and mean apart": ("""\
        import tensorflow as tf
        def test_pairs(self):
            pairs = [(1, 2), (3, 4)]
            firsts, seconds = zip(*pairs)
            emb = tf.get_variable("emb", [100, 8])
            x = tf.nn.embedding_lookup(emb, list(firsts))
            self.assertEqual(tf.reduce_mean(x).shape, ())
        """, False),
}


@pytest.mark.parametrize("case", sorted(_ZIPPED))
def test_average_gradients_pre_check_reads_the_recipe_shape_as_its_codemod_does(case):
    """Only a loop over `zip(*towers)` that averages in its body goes to the codemod,
    wherever it is written (tf-slim's layers_test.py zips and averages apart: ~10 s of
    libcst for nothing)."""
    transform = registry.all_transforms()["average-gradients"]
    code, expected = _ZIPPED[case]
    code = textwrap.dedent(code)
    codemods = [(transform.source_codemod(), transform.default_options())]
    found = run_source(code, "m.py", codemods, fix=False).findings
    passed = transform in prefilter.prefilter(code, [transform]).work
    assert passed == bool(found) == expected


_REUSED = {
    "Variable under reuse": ("""\
        import tensorflow.compat.v1 as tf
        def tower(x, gpu):
            with tf.device("/gpu:%d" % gpu), tf.variable_scope("model", reuse=gpu > 0):
                w = tf.Variable(tf.zeros([3, 2]))
                return tf.matmul(x, w)
        """, True),
    # Reuse with no towers: a tied-weights decoder's own bias.
    "Variable under reuse, no towers": ("""\
        import tensorflow.compat.v1 as tf
        def decoder(y):
            with tf.variable_scope("tied", reuse=True):
                kernel = tf.get_variable("kernel")
                bias = tf.Variable(tf.zeros([4]))
                return tf.matmul(y, kernel, transpose_b=True) + bias
        """, False),
    # A test that reuses a scope for get_variable and makes a Variable elsewhere.
    "reuse and Variable apart": ("""\
        import tensorflow.compat.v1 as tf
        def test_reuse(self):
            with tf.variable_scope("model"):
                tf.get_variable("w", [3, 2])
            with tf.variable_scope("model", reuse=True):
                w = tf.get_variable("w", [3, 2])
            self.assertEqual(w.shape, (3, 2))
        def test_variable(self):
            step = tf.Variable(0, trainable=False, name="step")
            self.assertEqual(step.dtype, tf.int32_ref)
        """, False),
}


@pytest.mark.parametrize("case", sorted(_REUSED))
def test_shared_variables_pre_check_needs_a_variable_inside_a_reusing_region(case):
    """Only a file with a `Variable(...)` call in a region the project model says reuses
    goes to the codemod (tf-slim's layers_test.py reuses and makes Variables apart: ~10 s
    of libcst for nothing)."""
    transform = registry.all_transforms()["shared-variables"]
    code = textwrap.dedent(_REUSED[case][0])
    project = Project({"m.py": part_of_code(code)}, {"m.py": code}.get)
    view = project.view("m.py")
    codemods = [(transform.source_codemod(), transform.default_options())]
    found = run_source(code, "m.py", codemods, fix=False, project=view).findings
    passed = (transform in prefilter.prefilter(code, [transform]).work
              and prefilter.in_project(transform, view))
    assert passed == bool(found) == _REUSED[case][1]
