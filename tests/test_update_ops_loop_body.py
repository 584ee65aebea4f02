"""update-ops and a batch norm built in a TF loop's body (cbfinn/maml#33): graphfix reports
nothing, because the fix it would make is the program TF refuses. Built in TF (graph mode,
TF 1.x behaviour, in a subprocess): the program as written trains; the same program with
the train op under control_dependencies(get_collection(UPDATE_OPS)) fails with TF's
"inputs from different frames" error, with the body also called outside the loop or not."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import run_cli

PROGRAM = '''\
import tensorflow.compat.v1 as tf


def body(inp):
    return tf.layers.batch_normalization(inp, training=True, name="bn", reuse=tf.AUTO_REUSE)


def build(x, outside, with_updates):
    if outside:
        body(x[0])  # (maml builds the body once outside the loop too)
    loss = tf.reduce_sum(tf.map_fn(body, x))
    optimizer = tf.train.GradientDescentOptimizer(0.1)
    if with_updates:
        with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
            return optimizer.minimize(loss)
    return optimizer.minimize(loss)
'''

_RUN = r'''
import json, sys
import numpy as np
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()
sys.path.insert(0, sys.argv[1])
import program
out = {}
for outside in (False, True):
    for with_updates in (False, True):
        with tf.Graph().as_default():
            x = tf.placeholder(tf.float32, [4, 3, 5])
            train_op = program.build(x, outside, with_updates)
            try:
                with tf.Session() as sess:
                    sess.run(tf.global_variables_initializer())
                    sess.run(train_op, {x: np.ones([4, 3, 5], np.float32)})
                result = "ran"
            except tf.errors.InvalidArgumentError as error:
                result = "different frames" if "from different frames" in error.message else error.message
        out[f"outside={outside} with_updates={with_updates}"] = result
print(json.dumps(out))
'''


def test_a_batch_norm_in_a_map_fn_body_is_not_reported_where_tf_refuses_the_fix(tmp_path):
    (tmp_path / "program.py").write_text(PROGRAM)
    checked = run_cli("check", "--no-cache", "--only", "update-ops", "--format", "json",
                      "program.py", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert json.loads(checked.stdout)["findings"] == []
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_USE_LEGACY_KERAS="1",
               CUDA_VISIBLE_DEVICES="")
    done = subprocess.run([sys.executable, "-c", _RUN, str(tmp_path)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert json.loads(done.stdout.splitlines()[-1]) == {
        "outside=False with_updates=False": "ran",
        "outside=False with_updates=True": "different frames",
        "outside=True with_updates=False": "ran",
        "outside=True with_updates=True": "different frames",
    }
