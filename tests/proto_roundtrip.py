"""graphfix's messages against TF's on one graph's bytes (tests/test_own_protos.py and the
real-model tests, on the graphs they build): the same bytes both ways and the same text."""

from __future__ import annotations

from pathlib import Path

from graphfix.graph import proto

GRAPH_SUFFIXES = (".pb", ".pbtxt", ".meta")


def message_of(path: Path) -> tuple[str, Path]:
    """(full name of the message a graph file holds, the file), as graphfix reads it: a
    SavedModel directory's saved_model.pb(txt), a .meta's MetaGraphDef, else a GraphDef."""
    if path.is_dir():
        path = next(p for p in (path / "saved_model.pb", path / "saved_model.pbtxt")
                    if p.exists())
    if path.name.startswith("saved_model."):
        return "tensorflow.SavedModel", path
    if path.suffix == ".meta":
        return "tensorflow.MetaGraphDef", path
    return "tensorflow.GraphDef", path


def graph_files(root: Path) -> list[Path]:
    """Every graph file under `root` (SavedModel directories as their directory)."""
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix in GRAPH_SUFFIXES:
            found.append(path.parent if path.name.startswith("saved_model.") else path)
    return sorted(set(found))


def assert_same_as_tf(path: Path) -> bool:
    """Read `path` with graphfix's classes and with TF's: graphfix's serialization is TF's
    (so, where TF writes the bytes read back unchanged, graphfix does too), TF's bytes read
    by graphfix give TF's bytes again, graphfix's bytes read by TF give TF's message, and
    the text format is TF's. Returns whether the file's bytes were TF's serialization."""
    from google.protobuf import text_format

    full_name, file = message_of(path)
    ours_class, tf_class = proto.message_class(full_name), proto.tf_class(full_name)
    data = file.read_bytes()
    if file.suffix == ".pbtxt":
        ours, theirs = ours_class(), tf_class()
        proto.parse_text(data.decode("utf-8"), ours)
        text_format.Parse(data.decode("utf-8"), theirs)
    else:
        ours, theirs = ours_class.FromString(data), tf_class.FromString(data)
    tf_bytes = theirs.SerializeToString(deterministic=True)
    our_bytes = ours.SerializeToString(deterministic=True)
    assert our_bytes == tf_bytes, f"{path}: graphfix's serialization is not TF's"
    assert ours.SerializeToString() == theirs.SerializeToString(), path
    again = ours_class.FromString(tf_bytes).SerializeToString(deterministic=True)
    assert again == tf_bytes, f"{path}: TF's bytes read by graphfix are written otherwise"
    assert tf_class.FromString(our_bytes) == theirs, path
    assert proto.to_text(ours) == text_format.MessageToString(theirs), f"{path}: text differs"
    assert proto.to_tf(ours) == theirs and proto.from_tf(theirs) == ours, path
    return file.suffix != ".pbtxt" and tf_bytes == data
