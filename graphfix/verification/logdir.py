"""`verify --logdir DIR`: what TensorBoard's graph dashboard reads, written by TF's own summary
writer. DIR/after holds the verified graph (its devices as the file gives them) and the traced
step's RunMetadata (where TF put every node, its compute time and memory); DIR/before holds
the original graph of `--compare` (and its traced step) where one was given. `tensorboard
--logdir DIR` then shows each graph coloured by device, with the step's stats."""

from __future__ import annotations

import os
from pathlib import Path

from graphfix.errors import Error

AFTER, BEFORE = "after", "before"  # the runs (subfolders) TensorBoard lists
STEP_TAG = "verified_step"  # the run metadata's tag in the graph dashboard


class LogdirError(Error, ValueError):
    """A --logdir that cannot be written (a file, or a folder not writable): one line."""


def check_logdir(path: str | os.PathLike) -> Path:
    """The logdir, checked before anything runs or is written: it is a folder that can be
    written, or does not exist yet under a folder that can (LogdirError otherwise)."""
    logdir = Path(path)
    if logdir.exists() and not logdir.is_dir():
        raise LogdirError(f"{logdir}: --logdir is a file, not a folder")
    existing = logdir
    while not existing.exists():  # the nearest folder that is there is the one written in
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise LogdirError(f"{logdir}: --logdir cannot be written ({existing} is not writable)")
    return logdir


def write_run(logdir: Path, run: str, graph_def, run_metadata=None) -> Path:
    """Write one run, DIR/`run`: the graph, and the traced step's RunMetadata if given."""
    import tensorflow as tf
    from tensorflow.core.util import event_pb2

    folder = Path(logdir) / run
    with tf.Graph().as_default():  # (TF's FileWriter refuses to be made eagerly)
        writer = tf.compat.v1.summary.FileWriter(str(folder))
    try:
        # The graph event add_graph writes, without importing the GraphDef into a Graph
        # first (add_graph's GraphDef form warns it is deprecated).
        writer.add_event(event_pb2.Event(graph_def=graph_def.SerializeToString()))
        if run_metadata is not None:
            writer.add_run_metadata(run_metadata, STEP_TAG, global_step=1)
    finally:
        writer.close()
    return folder
