"""average-gradients in a project that trains one of two models by a flag (session 22's
sweep: Tacotron-2 and its forks, fixtures/real_code/patterns/
sweep22_average_gradients_lookup_of_the_other_model): each model averages its own towers,
and only the text model's towers read an embedding lookup. Checked as a whole repository,
the audio model's average is not charged with the text model's lookup (TF agrees: its
gradients hold no IndexedSlices), while the text model's stays found, as does a lookup in
the model a training loop above a helper builds."""

from __future__ import annotations

import shutil

from graphfix import registry
from graphfix.driver import Selected, run

from conftest import FIXTURES, built_by_tf

NAME = "average-gradients"
PROJECT = FIXTURES / "real_code" / "patterns" / "sweep22_average_gradients_lookup_of_the_other_model"


def _findings(folder) -> list[tuple[str, int, str]]:
    report, _ = run([str(folder)], Selected.build(registry.select([NAME]), {}), fix=False)
    return sorted((f.path.replace("\\", "/").split(f"{folder.name}/", 1)[-1], f.line, f.message)
                  for f in report.findings)


def test_the_other_models_lookup_is_not_charged_to_this_models_average():
    [(path, line, message)] = _findings(PROJECT)
    assert (path, line) == ("models/text_model.py", 23)
    assert "the gradient of the lookup at " in message
    assert "/models/text_model.py:12 is an IndexedSlices" in message


# Each model built with two towers under tf.compat.v1: which of its tower gradients TF
# makes IndexedSlices.
_SPARSE_GRADIENTS = r'''
import json, sys
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()
sys.modules["tensorflow"] = tf
sys.path.insert(0, json.loads(sys.argv[1]))
from models.audio_model import AudioModel
from models.text_model import TextModel

out = {}
for name, model, shape, dtype in (("audio", AudioModel(), [8, 100, 1], tf.float32),
                                  ("text", TextModel(), [8, 20], tf.int32)):
    with tf.Graph().as_default():
        model.build([tf.zeros(shape, dtype) for _ in range(2)], 2)
        optimizer = tf.train.AdamOptimizer(1e-3)
        grads = optimizer.compute_gradients(model.tower_loss[0])
        out[name] = sorted(v.op.name for g, v in grads if isinstance(g, tf.IndexedSlices))
print(json.dumps(out))
'''


def test_tf_gives_the_audio_model_dense_gradients_and_the_text_model_a_sparse_one():
    assert built_by_tf(_SPARSE_GRADIENTS, str(PROJECT)) == {
        "audio": [], "text": ["text/embedding"]}


def test_a_lookup_in_the_model_a_training_loop_above_the_helper_builds_is_found(tmp_path):
    """The average in a helper module, called by another helper that the training loop
    calls: the loop builds the towers (it is tower code), so the model it runs counts,
    though it is two callers above the average; a `main` above it that builds none adds
    nothing, and a model it does not run (the audio model) is not charged."""
    project = tmp_path / "split"
    shutil.copytree(PROJECT / "models", project / "models")
    (project / "average.py").write_text(
        "import tensorflow as tf\n\n\n"
        "def average_gradients(tower_grads):\n"
        "    average_grads = []\n"
        "    for grad_and_vars in zip(*tower_grads):\n"
        "        grads = [tf.expand_dims(g, 0) for g, _ in grad_and_vars]\n"
        "        grad = tf.reduce_mean(tf.concat(grads, 0), 0)\n"
        "        average_grads.append((grad, grad_and_vars[0][1]))\n"
        "    return average_grads\n")
    (project / "apply.py").write_text(
        "from average import average_gradients\n\n\n"
        "def average_and_apply(optimizer, tower_grads):\n"
        "    return optimizer.apply_gradients(average_gradients(tower_grads))\n")
    (project / "train.py").write_text(
        "import tensorflow as tf\n\n"
        "from apply import average_and_apply\n"
        "from models.text_model import TextModel\n\n\n"
        "def train(num_gpus):\n"
        "    model = TextModel()\n"
        "    model.build([tf.placeholder(tf.int32, [8, 20])] * num_gpus, num_gpus)\n"
        "    optimizer = tf.train.AdamOptimizer(1e-3)\n"
        "    tower_grads = []\n"
        "    for i in range(num_gpus):\n"
        "        with tf.device('/gpu:%d' % i):\n"
        "            tower_grads.append(optimizer.compute_gradients(model.tower_loss[i]))\n"
        "    return average_and_apply(optimizer, tower_grads)\n\n\n"
        "def main():\n"
        "    train(2)\n\n\n"
        "if __name__ == '__main__':\n"
        "    main()\n")
    found = [(path, line) for path, line, message in _findings(project)
             if "/models/text_model.py:12 is an IndexedSlices" in message]
    assert found == [("average.py", 4), ("models/text_model.py", 23)]
