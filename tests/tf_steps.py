"""One step of a train op, as the tests that step a program with TF look at it: whether its
batch norms' moving statistics moved (update-ops' proof); the program loaded from its file;
the GPUs that read a variable (variables-to-cpu's proof).
Imported where TF runs: by the scripts `conftest.built_by_tf` runs (which find this folder
on their path), by a test's own TF subprocess, or inside a test that has TF (never at a test
module's top: without TF, importing this skips the module importing it)."""

from __future__ import annotations

import dataclasses
import importlib.util

import numpy as np
import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class MovingMeans:
    """A graph's moving means (each batch norm's `moving_mean` variable) read before and
    after one step, and how many update ops its UPDATE_OPS collection holds."""

    before: list
    after: list
    update_ops: int

    @property
    def count(self) -> int:
        return len(self.before)

    @property
    def moved(self) -> bool:
        """Whether any moving mean changed in the step."""
        return any(not np.array_equal(a, b) for a, b in zip(self.before, self.after))


def program_at(path: str, name: str):
    """The module of the Python file at `path` (a program a test steps: a fixture's, or its
    copy graphfix fixed), executed afresh under the name `name`."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def moving_means_over_one_step(graph, step, feed=None, config=None) -> MovingMeans:
    """Initialise `graph`'s global variables in a session of its own (`config`, a
    ConfigProto, or the default), run `step` (what `Session.run` fetches) once fed `feed`, and
    read the moving means before and after it."""
    v1 = tf.compat.v1
    with graph.as_default():
        means = [v for v in v1.global_variables() if "moving_mean" in v.name]
        update_ops = len(v1.get_collection(v1.GraphKeys.UPDATE_OPS))
        init = v1.global_variables_initializer()
    with v1.Session(graph=graph, config=config) as session:
        session.run(init)
        before = session.run(means)
        session.run(step, feed)
        return MovingMeans(before, session.run(means), update_ops)


def gpus_reading(variable) -> list[int]:
    """The GPUs (indexes) of the ops reading a graph variable, through its identities."""
    found, todo = set(), list(variable.op.outputs[0].consumers())
    while todo:
        op = todo.pop()
        if op.type == "Identity":
            todo.extend(op.outputs[0].consumers())
            continue
        spec = tf.DeviceSpec.from_string(op.device)
        if (spec.device_type or "").upper() == "GPU":
            found.add(spec.device_index)
    return sorted(found)
