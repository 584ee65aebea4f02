"""Variables and batch norms made by a library's module objects (Sonnet 1.x): what a user
sees of them. The rules read the library's vocabulary
(`graphfix.source.vocabulary.LIBRARY_VARIABLE_MODULES`, `LIBRARY_BATCH_NORMS`, from
deepmind/sonnet v1.36) and the project model's facts; the fixture cases
(fixtures/variables_to_cpu/source/*sonnet*, fixtures/update_ops/source/*sonnet*) hold the
before and after of each shape. Sonnet 1.x runs on TF 1.x only, so no test here imports it.
"""

from __future__ import annotations

import textwrap

import graphfix

TOWER = textwrap.dedent("""\
    import sonnet as snt
    import tensorflow as tf


    def towers(batches):
        head = snt.Linear(output_size=10)
        losses = []
        for i, x in enumerate(batches):
            with tf.device("/gpu:%d" % i):
                logits = head(x)
                again = head(x * 2.0)
                losses.append(tf.reduce_mean(logits + again))
        return losses
    """)


def test_a_module_connected_in_a_tower_is_named_at_its_first_call():
    """The module's first call makes its variables under the tower's GPU; its second call
    in the same tower reuses them and is no finding."""
    [finding] = graphfix.check_source(TOWER, only=["variables-to-cpu"])
    assert finding.line == 10
    assert finding.message.startswith(
        'head creates variables (snt.Linear, connected here) under tf.device("/gpu:%d" % i), '
        "a multi-GPU tower")


def test_a_module_built_once_and_connected_before_the_towers_is_no_finding():
    code = TOWER.replace("    head = snt.Linear(output_size=10)\n",
                         "    head = snt.Linear(output_size=10)\n"
                         "    head(batches[0])\n")
    assert code != TOWER
    assert graphfix.check_source(code, only=["variables-to-cpu"]) == []


def test_sonnet_batch_norm_names_its_line_in_the_update_ops_finding():
    code = textwrap.dedent("""\
        import sonnet as snt
        import tensorflow as tf


        def train_op(images, is_training):
            bn = snt.BatchNorm(decay_rate=0.99)
            loss = tf.reduce_mean(bn(images, is_training))
            return tf.train.AdamOptimizer().minimize(loss)
        """)
    [finding] = graphfix.check_source(code, only=["update-ops"])
    assert finding.line == 8
    assert "does not run the update ops of snt.BatchNorm (line 6)" in finding.message
    in_place = code.replace("decay_rate=0.99", "update_ops_collection=None")
    assert graphfix.check_source(in_place, only=["update-ops"]) == []
