"""replica-placement where a session runs the graph before the program makes its ps cluster
(session 22's sweep: boyuanf/Simple_Tensorflow_distributed_example's notebook of separate
programs, fixtures/real_code/patterns/sweep22_replica_placement_cluster_in_a_later_cell.ipynb).
The client cell's variable runs in a session to a "local" cluster before the ps/worker
cluster of a later cell exists: no finding and no rewrite (TF places the client's graph,
and refuses it with the variable sent to a ps job, as a fix would send it). A cluster with
a ps job made before the code, or before the session that runs it, is still its cluster."""

from __future__ import annotations

import json

import graphfix
from graphfix import registry
from graphfix.driver import Selected, run

from conftest import FIXTURES, built_by_tf

NAME = "replica-placement"
NOTEBOOK = FIXTURES / "real_code" / "patterns" / "sweep22_replica_placement_cluster_in_a_later_cell.ipynb"
PS_CLUSTER = ('cluster = tf.train.ClusterSpec({"ps": ["localhost:2222"], '
              '"worker": ["localhost:2223"]})\n'
              'server = tf.train.Server(cluster, job_name="worker", task_index=0)\n')
VARIABLE = 'counter = tf.get_variable("counter", dtype=tf.float32, initializer=0.0)\n'
CLIENT_SESSION = "with tf.Session(sys.argv[1]) as sess:\n    sess.run(counter.initializer)\n"
ON_THE_SERVER = "with tf.Session(server.target) as sess:\n    sess.run(counter.initializer)\n"


def _notebook_findings(path) -> list[tuple[int, int]]:
    report, _ = run([str(path)], Selected.build(registry.select([NAME]), {}), fix=False)
    return [(f.cell, f.line) for f in report.findings]


def _cells(tmp_path, *sources: str):
    path = tmp_path / "programs.ipynb"
    path.write_text(json.dumps({
        "cells": [{"cell_type": "code", "execution_count": None, "metadata": {},
                   "outputs": [], "source": source} for source in sources],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 4}))
    return path


def _script_findings(code: str) -> list[int]:
    return [f.line for f in graphfix.check_source(code, path="train.py", only=[NAME])]


def test_a_client_cell_before_the_ps_cluster_cell_is_not_reported_nor_rewritten(tmp_path):
    assert _notebook_findings(NOTEBOOK) == []
    copy = tmp_path / NOTEBOOK.name
    copy.write_bytes(NOTEBOOK.read_bytes())
    run([str(copy)], Selected.build(registry.select([NAME]), {}), fix=True)
    assert copy.read_bytes() == NOTEBOOK.read_bytes()


def test_a_ps_cluster_in_an_earlier_cell_is_the_clients_cluster(tmp_path):
    imports = "import tensorflow as tf\n"
    assert _notebook_findings(_cells(tmp_path, imports + PS_CLUSTER,
                                     VARIABLE + ON_THE_SERVER)) == [(2, 1)]


def test_a_script_whose_session_runs_the_variable_before_it_makes_the_cluster():
    head = "import sys\nimport tensorflow as tf\n"
    # a session to another cluster runs the variable before this one exists
    assert _script_findings(head + VARIABLE + CLIENT_SESSION + PS_CLUSTER) == []
    # the session that runs it is opened on the server, after the cluster: a worker's copy
    assert _script_findings(head + VARIABLE + PS_CLUSTER + ON_THE_SERVER) == [3]
    # made after the cluster: the session runs it with that cluster, whatever its target
    assert _script_findings(head + PS_CLUSTER + VARIABLE + CLIENT_SESSION) == [5]


# The notebook's client cell, run with an in-process "local" server as its README says
# (`grpc://... init`), as written and with its variable under the setter a fix onto the ps
# job writes: TF's words for each.
_CLIENT = r'''
import json, sys
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()
sys.modules["tensorflow"] = tf
cells = json.load(open(json.loads(sys.argv[1])))["cells"]
client = next("".join(c["source"]) for c in cells if "tf.Session(sys.argv[1])" in "".join(c["source"]))
on_ps = client.replace(
    "counter = tf.get_variable",
    "with tf.device(tf.train.replica_device_setter(ps_tasks=1)):\n    counter = tf.get_variable")
server = tf.train.Server.create_local_server()
out = {}
for name, code in (("as written", client), ("on the ps", on_ps)):
    sys.argv = ["client.py", server.target, "init"]
    with tf.Graph().as_default():
        try:
            exec(compile(code, "client.py", "exec"), {"__name__": "__main__"})
            out[name] = "ran"
        except tf.errors.InvalidArgumentError as error:
            out[name] = next(line for line in error.message.splitlines()
                             if "Cannot assign a device" in line)
print(json.dumps(out))
'''


def test_tf_places_the_client_and_refuses_it_with_the_variable_on_the_ps():
    said = built_by_tf(_CLIENT, str(NOTEBOOK))
    assert said["as written"] == "ran"
    assert said["on the ps"].startswith("Cannot assign a device for operation counter"), said
    assert "/job:ps/task:0" in said["on the ps"]
