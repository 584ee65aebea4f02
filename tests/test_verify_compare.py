"""verify's compare and update-ops checks (issue 32): what a fix means to change, and proof
of an update by what ran, not by whether the value changed.

- A GAN whose discriminator's batch-norm updates never ran: update-ops fixes it, and the
  fixed graph's moving statistics now move. `verify FIXED --compare ORIGINAL` passes, saying
  "equal except the 2 moving statistics update-ops now updates" and listing them in JSON;
  a moving statistic no fix meant to change still fails the comparison.
- A moving mean can keep its value through an update that ran (a batch whose mean is the
  moving mean): that is a note. An update op that did not run is the failure, named.
- shared-variables and average-gradients (at one tower's indices) change values on purpose
  too, and say which; feed-to-assign computes what the original did
  (tests/test_feed_to_assign_graph.py compares it).
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

import graphfix
from conftest import FIXTURES, run_cli

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf.compat.v1.layers needs tf_keras


@pytest.fixture(autouse=True)
def _resource_variables():
    """These graphs' update ops are resource ops (`AssignSubVariableOp`), as TF 2 builds
    them by default; a test file run before this one in the same process may have switched
    TF to ref variables (`disable_v2_behavior`), so the default is set again here and the
    previous state given back after."""
    import tensorflow as tf

    were_enabled = tf.compat.v1.resource_variables_enabled()
    tf.compat.v1.enable_resource_variables()
    yield
    if not were_enabled:
        tf.compat.v1.disable_resource_variables()


def _gan(tf, discriminator_updates: bool):
    """A small GAN: the generator's train op runs the generator's batch-norm updates; the
    discriminator's runs its own only where `discriminator_updates` (the bug: it does not)."""
    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(1)
        noise = tf1.placeholder(tf.float32, [None, 4], name="noise")
        real = tf1.placeholder(tf.float32, [None, 6], name="real")
        with tf1.variable_scope("generator"):
            hidden = tf1.layers.batch_normalization(tf1.layers.dense(noise, 8), training=True)
            fake = tf1.layers.dense(tf.nn.relu(hidden), 6)

        def discriminator(images, reuse):
            with tf1.variable_scope("discriminator", reuse=reuse):
                hidden = tf1.layers.batch_normalization(tf1.layers.dense(images, 8),
                                                        training=True)
                return tf1.layers.dense(tf.nn.relu(hidden), 1)

        on_real, on_fake = discriminator(real, False), discriminator(fake, True)
        xent = tf.nn.sigmoid_cross_entropy_with_logits
        d_loss = tf.reduce_mean(xent(labels=tf.ones_like(on_real), logits=on_real)
                                + xent(labels=tf.zeros_like(on_fake), logits=on_fake),
                                name="d_loss")
        g_loss = tf.reduce_mean(xent(labels=tf.ones_like(on_fake), logits=on_fake),
                                name="g_loss")
        updates = tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)
        with tf.control_dependencies([u for u in updates if u.name.startswith("generator/")]):
            g_train = tf1.train.AdamOptimizer(0.01).minimize(
                g_loss, var_list=tf1.trainable_variables("generator"))
        with tf.control_dependencies([u for u in updates if u.name.startswith("discriminator/")]
                                     if discriminator_updates else []):
            d_train = tf1.train.AdamOptimizer(0.01).minimize(
                d_loss, var_list=tf1.trainable_variables("discriminator"))
        tf.group(d_train, g_train, name="train")
        tf1.global_variables_initializer()
    return tf1.train.export_meta_graph(graph=graph)


def _feed_files(tmp_path, shapes):
    """Seeded feeds as .npy files, each given as NAME=PATH to --feed."""
    rng = np.random.default_rng(0)
    given = []
    for name, shape in shapes.items():
        path = tmp_path / f"{name}.npy"
        np.save(path, rng.normal(size=shape).astype(np.float32))
        given += ["--feed", f"{name}={path}"]
    return given


def test_gan_fixed_by_update_ops_is_equal_except_the_statistics_it_now_updates(tf, tmp_path):
    original = _gan(tf, discriminator_updates=False)
    fixed, changes = graphfix.fix_graph(original, only=["update-ops"])
    assert changes, "update-ops finds the discriminator's updates the train ops never run"
    before, after = tmp_path / "gan.meta", tmp_path / "gan.fixed.meta"
    before.write_bytes(original.SerializeToString())
    after.write_bytes(fixed.SerializeToString())
    feeds = _feed_files(tmp_path, {"noise": (4, 4), "real": (4, 6)})

    ran = run_cli("verify", after, "--compare", before, "--fetch", "train", *feeds,
                  "--format", "json", check_exit=0)
    checks = {c["name"]: c for c in json.loads(ran.stdout)["checks"]}
    assert checks["compare"]["passed"], checks
    assert checks["compare"]["detail"].endswith(
        ", except the 2 moving statistics update-ops now updates"), checks["compare"]
    # The discriminator's statistics: one batch norm, called on real and on fake images.
    assert checks["compare"]["names"] == {"changed_on_purpose": [
        "discriminator/batch_normalization/moving_mean",
        "discriminator/batch_normalization/moving_variance"]}
    assert checks["update ops"]["passed"], checks["update ops"]


def test_a_moving_statistic_no_fix_meant_to_change_still_fails_compare(tf):
    """Both graphs run their update ops (update-ops declares nothing), but the "fixed" one
    changed the batch norm's momentum: its moving statistics differ, and compare says so
    (they are no longer set aside as every update-op variable was)."""
    tf1 = tf.compat.v1

    def batch_norm_model(momentum):
        graph = tf.Graph()
        with graph.as_default():
            images = tf1.placeholder(tf.float32, [4, 3], name="images")
            dense = tf1.layers.dense(images, 3, kernel_initializer=tf1.initializers.ones())
            net = tf1.layers.batch_normalization(dense, training=True, momentum=momentum,
                                                 name="bn")
            with tf.control_dependencies(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)):
                tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(net),
                                                                 name="train")
            tf1.global_variables_initializer()
        return tf1.train.export_meta_graph(graph=graph)

    original, changed = batch_norm_model(0.9), batch_norm_model(0.5)
    assert graphfix.check_graph(changed, only=["update-ops"]) == []
    result = graphfix.verify(changed, compare=original, fetches=["train"])
    checks = {c.name: c for c in result.checks}
    assert checks["update ops"].passed, result.to_lines()
    assert not checks["compare"].passed, result.to_lines()
    assert checks["compare"].names["differs"] == ["variable bn/moving_mean",
                                                  "variable bn/moving_variance"]


def _batch_norm_step(tf, *, update_ops_run: bool):
    """One dense layer and a batch norm over a batch of zeros, trained by gradient descent:
    the batch's mean is 0, the moving mean's initial value, so an update that runs leaves
    the moving mean as it was (and moves the moving variance from 1 toward 0)."""
    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        images = tf.zeros([4, 3], name="images")
        net = tf1.layers.batch_normalization(images, training=True, name="bn")
        loss = tf.reduce_sum(tf1.layers.dense(net, 2, name="logits"), name="loss")
        updates = tf1.get_collection(tf1.GraphKeys.UPDATE_OPS) if update_ops_run else []
        with tf.control_dependencies(updates):
            tf1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train")
        tf1.global_variables_initializer()
    return tf1.train.export_meta_graph(graph=graph)


def test_an_update_that_ran_and_kept_its_value_is_a_note(tf):
    result = graphfix.verify(_batch_norm_step(tf, update_ops_run=True), fetches=["train"])
    assert result.passed, result.to_lines()
    [update] = [c for c in result.checks if c.name == "update ops"]
    assert update.detail == ("1 of 2 update-op variable(s) changed; "
                             "noted: 1 kept their value through an update that ran: "
                             "bn/moving_mean")
    assert update.names == {"ran_and_kept_their_value": ["bn/moving_mean"]}
    assert result.to_json()["checks"][2]["names"] == update.names


def test_update_ops_that_did_not_run_fail_by_name(tf):
    graph = _batch_norm_step(tf, update_ops_run=False)
    result = graphfix.verify(graph, fetches=["train"])
    assert not result.passed
    [update] = [c for c in result.checks if c.name == "update ops"]
    assert not update.passed
    assert update.detail.startswith("2 update op(s) did not run, so 2 of 2 update-op "
                                    "variable(s) never changed: bn/AssignMovingAvg"), update
    assert update.names["did_not_run"] == ["bn/AssignMovingAvg/AssignSubVariableOp",
                                           "bn/AssignMovingAvg_1/AssignSubVariableOp"]
    assert update.names["never_changed"] == ["bn/moving_mean", "bn/moving_variance"]
    # Fixed, the same zeros batch keeps the moving mean: a note, not a failure.
    fixed, _ = graphfix.fix_graph(graph, only=["update-ops"])
    assert graphfix.verify(fixed, fetches=["train"]).passed


def test_shared_variables_fix_changes_what_the_other_towers_compute(tf):
    """Sharing the first tower's weights changes tower 1's loss and what the averaged update
    trains: shared-variables declares those; tower 0's own loss must still match."""
    sys.path.insert(0, str(FIXTURES))
    import models

    original = models.export(models.tower_copies(towers=2), meta=False)
    fixed, _ = graphfix.fix_graph(original, only=["shared-variables"])
    result = graphfix.verify(fixed, compare=original,
                             fetches=["train", "tower_0/loss:0", "tower_1/loss:0"])
    [compare] = [c for c in result.checks if c.name == "compare"]
    assert compare.passed, result.to_lines()
    assert compare.detail == (
        "4 output(s) and variable(s) equal the original's, except the 3 values "
        "shared-variables now computes from the first tower's variables")
    assert compare.names == {"changed_on_purpose": ["tower_0/b", "tower_0/w", "tower_1/loss:0"]}


@pytest.mark.parametrize("recipe,changed", [("tower0_indices", ["emb"]), ("cifar10", None)])
def test_average_gradients_declares_the_rows_it_now_trains(recipe, changed):
    """At tower 0's indices, the other towers' rows trained at the wrong ids: the fix trains
    them at their own, a change on purpose. A densified average rebuilt sparse computes the
    same numbers, and is compared as it was."""
    sys.path.insert(0, str(FIXTURES / "average_gradients"))
    import recipes

    original = recipes.two_towers(recipe).as_graph_def()
    fixed, changes = graphfix.fix_graph(original, only=["average-gradients"])
    assert changes
    result = graphfix.verify(fixed, compare=original, fetches=["train"])
    [compare] = [c for c in result.checks if c.name == "compare"]
    assert compare.passed, result.to_lines()
    if changed:
        assert compare.detail.endswith("except the 1 variable(s) average-gradients now trains "
                                       "at every tower's indices"), compare.detail
        assert compare.names == {"changed_on_purpose": changed}
    else:
        assert "except" not in compare.detail and compare.names == {}


def test_statistics_every_tower_updates_are_not_compared_and_said(tf):
    """Two towers' update ops write one moving mean in an order the scheduler picks: in two
    graphs that both run them, that statistic is set aside and listed; everything else is
    compared."""
    sys.path.insert(0, str(FIXTURES))
    import models

    graph = models.export(models.multi_tower("layers", towers=2, with_update_ops=True),
                          meta=True)
    result = graphfix.verify(graph, compare=graph, fetches=["train"])
    [compare] = [c for c in result.checks if c.name == "compare"]
    assert compare.passed, result.to_lines()
    assert compare.names == {"not_compared_several_update_ops": ["bn1/moving_mean",
                                                                 "bn1/moving_variance"]}
    assert compare.detail.endswith("(2 moving statistic(s) several towers' update ops write "
                                   "in the scheduler's order not compared)"), compare.detail
