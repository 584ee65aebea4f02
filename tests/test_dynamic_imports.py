"""The project model reads `importlib.import_module(<name>)` as an import where the file
spells the name out: literals, `+`, f-strings, `%` and `str.format` of them, names bound once
to a string, and the defaults of the file's command-line flags (argparse, absl and
tf.app.flags). Otherwise it says nothing. And the lists of UPDATE_OPS a function collects
and never reads (update-ops' other fact of a file's own)."""

from __future__ import annotations

import ast

import pytest

from graphfix.source.project import Project, part_of_code
from graphfix.source.project.dynamic_imports import dynamic_imports
from graphfix.source.project.facts import unread_update_ops
from graphfix.source.project.names import AstTfNames

_ARGPARSE = ("import argparse, importlib\n"
             "parser = argparse.ArgumentParser()\n"
             "parser.add_argument('--data', type=str, default='mnist')\n"
             "parser.add_argument('-m', '--model-name', default='dcgan')\n"
             "parser.add_argument('--net', dest='arch', default='resnet')\n"
             "args = parser.parse_args()\n")
_ABSL = ("import importlib\nfrom absl import flags\n"
         "flags.DEFINE_string('net', 'resnet', 'which')\n"
         "flags.DEFINE_string(name='family', default='nets', help='where')\n"
         "FLAGS = flags.FLAGS\n")


def _imported(code: str) -> list[list]:
    tree = ast.parse(code)
    return dynamic_imports(tree, AstTfNames(tree), code)


@pytest.mark.parametrize("header, call, module", [
    (_ARGPARSE, "importlib.import_module(args.data + '.' + args.model_name)", "mnist.dcgan"),
    (_ARGPARSE, "importlib.import_module(f'nets.{args.arch}')", "nets.resnet"),
    (_ARGPARSE, "importlib.import_module('%s_%s' % (args.data, args.arch))", "mnist_resnet"),
    (_ABSL, "importlib.import_module('{}.{}'.format(FLAGS.family, FLAGS.net))", "nets.resnet"),
    (_ABSL, "importlib.import_module(name=FLAGS.family + '.' + FLAGS.net)", "nets.resnet"),
    ("from importlib import import_module\nNET = 'vgg'\n", "import_module('nets.' + NET)",
     "nets.vgg"),
])
def test_a_name_the_file_spells_out_is_an_import(header, call, module):
    assert _imported(f"{header}model = {call}\n") == [["model", module, None, 0]]


@pytest.mark.parametrize("header, call", [
    # no default; two different defaults for one flag; a name bound twice; a loop's name
    ("import argparse, importlib\np = argparse.ArgumentParser()\n"
     "p.add_argument('--model', required=True)\nargs = p.parse_args()\n",
     "importlib.import_module(args.model)"),
    ("import argparse, importlib\np = argparse.ArgumentParser()\nq = argparse.ArgumentParser()\n"
     "p.add_argument('--model', default='a')\nq.add_argument('--model', default='b')\n",
     "importlib.import_module(args.model)"),
    ("import importlib\nNET = 'vgg'\nNET = 'resnet'\n", "importlib.import_module(NET)"),
    ("import importlib\nfor name in ['a', 'b']:\n    pass\n", "importlib.import_module(name)"),
    # a relative name; a formatted number; not importlib's
    ("import importlib\n", "importlib.import_module('.nets', package='pkg')"),
    ("import importlib\n", "importlib.import_module('nets.v%d' % 2)"),
    ("import mylib\n", "mylib.import_module('nets.vgg')"),
])
def test_a_name_the_file_does_not_say_is_no_import(header, call):
    assert _imported(f"{header}model = {call}\n") == []


def test_the_imported_module_is_the_name_the_code_reads():
    """`model.Net` read where `model = importlib.import_module(...)` is the module's class
    (not a global of the script), and the module joins the script's closure."""
    script = (_ARGPARSE + "model = importlib.import_module(args.data + '.' + args.model_name)\n"
              "net = model.Net()\n")
    project = Project({"run/train.py": part_of_code(script),
                       "run/mnist/dcgan.py": part_of_code("class Net:\n    pass\n"),
                       "run/mnist/mlp.py": part_of_code("class Net:\n    pass\n")})
    assert project.resolve("run/train.py", "model.Net") == {("run/mnist/dcgan.py", "Net")}
    assert project.closure("run/train.py") == {"run/train.py", "run/mnist/dcgan.py"}


@pytest.mark.parametrize("code, unread", [
    ("def f(policy, x):\n    policy(x)\n    ups = tf.get_collection(tf.GraphKeys.UPDATE_OPS)\n",
     [("ups", 4)]),
    ("def f():\n    ups = tf.compat.v1.get_collection('update_ops')\n", [("ups", 3)]),
    ("ups = tf.get_collection(tf.GraphKeys.UPDATE_OPS)\n", [("ups", 2)]),
    # read: in the function, by a function nested in it, by a function of the module
    ("def f():\n    ups = tf.get_collection(tf.GraphKeys.UPDATE_OPS)\n    return ups\n", []),
    ("def f():\n    ups = tf.get_collection(tf.GraphKeys.UPDATE_OPS)\n"
     "    def g():\n        return ups\n    return g\n", []),
    ("ups = tf.get_collection(tf.GraphKeys.UPDATE_OPS)\ndef f():\n    return ups\n", []),
    # another collection; an attribute (any method may read it)
    ("def f():\n    ls = tf.get_collection(tf.GraphKeys.LOSSES)\n", []),
    ("def f(self):\n    self.ups = tf.get_collection(tf.GraphKeys.UPDATE_OPS)\n", []),
])
def test_update_lists_collected_and_never_read(code, unread):
    tree = ast.parse("import tensorflow as tf\n" + code)
    assert unread_update_ops(tree, AstTfNames(tree)) == unread
