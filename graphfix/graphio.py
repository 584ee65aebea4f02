"""Reading and writing graphs: GraphDef (.pb/.pbtxt), MetaGraphDef (.meta), SavedModel dirs.

The format written is the format read. Binary output uses deterministic serialization, so
an unchanged graph is unchanged byte for byte. Every write is atomic (a temporary file in
the same directory, then a rename), and a failed run writes nothing.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from pathlib import Path

from google.protobuf import message as _message

from graphfix._proto import pb


class InputError(Exception):
    """Bad input or an unwritable output; str() is one line naming the file and problem."""


@dataclasses.dataclass
class GraphFile:
    """A graph file as read: what it is, how it was encoded, and its top-level message."""

    path: Path
    kind: str  # "graphdef" | "metagraph" | "savedmodel"
    text: bool
    message: object
    proto_name: str = ""  # the file inside a SavedModel directory

    def graph_defs(self) -> list[tuple[object, object | None]]:
        """(GraphDef, its MetaGraphDef or None) for every graph the file holds."""
        if self.kind == "graphdef":
            return [(self.message, None)]
        if self.kind == "metagraph":
            return [(self.message.graph_def, self.message)]
        return [(meta.graph_def, meta) for meta in self.message.meta_graphs]

    def serialize(self) -> bytes:
        return serialize(self.message, text=self.text)


def serialize(message, *, text: bool) -> bytes:
    """Deterministic bytes for a message, binary or text format."""
    if text:
        from google.protobuf import text_format  # only text graphs pay its import

        return text_format.MessageToString(message).encode()
    return message.SerializeToString(deterministic=True)


def is_graph_path(path: Path) -> bool:
    """Whether graphfix reads `path` as a graph (rather than as Python source).

    A directory is a SavedModel if it holds `saved_model.pb(txt)` or a `variables/` folder
    (then a missing `saved_model.pb` is an error, not an empty source tree).
    """
    if path.is_dir():
        return any((path / name).exists()
                   for name in ("saved_model.pb", "saved_model.pbtxt", "variables"))
    return path.suffix in (".pb", ".pbtxt", ".meta")


def _message_class(path: Path) -> tuple[str, type]:
    p = pb()
    if path.name in ("saved_model.pb", "saved_model.pbtxt"):
        return "savedmodel", p.saved_model_pb2.SavedModel
    if path.suffix == ".meta":
        return "metagraph", p.meta_graph_pb2.MetaGraphDef
    return "graphdef", p.graph_pb2.GraphDef


_DESCRIPTIONS = {"graphdef": "GraphDef", "metagraph": "MetaGraphDef", "savedmodel": "SavedModel"}


def parse(data: bytes, cls: type, *, text: bool, what: str):
    """Parse bytes into a `cls` message; ValueError with a one-line reason otherwise."""
    msg = cls()
    if not data.strip():
        raise ValueError("file is empty")
    if text:
        from google.protobuf import text_format  # only text graphs pay its import

        parse_error = text_format.ParseError
    else:
        parse_error = ()
    try:
        if text:
            text_format.Parse(data.decode("utf-8"), msg)
        else:
            msg.ParseFromString(data)
    except parse_error as exc:
        raise ValueError(f"malformed {what} text: {str(exc).splitlines()[0]}") from None
    except UnicodeDecodeError:
        raise ValueError(f"malformed {what} text: not UTF-8") from None
    except _message.DecodeError as exc:
        raise ValueError(f"not a valid {what} (truncated or corrupt protobuf: {exc})") from None
    from google.protobuf import unknown_fields

    if len(unknown_fields.UnknownFieldSet(msg)):
        raise ValueError(f"not a valid {what} (fields it does not define: corrupt or wrong file)")
    return msg


def load(path: str | os.PathLike) -> GraphFile:
    """Read a graph file or SavedModel directory. InputError names the file and problem."""
    path = Path(path)
    proto_path = path
    if path.is_dir():
        for name in ("saved_model.pb", "saved_model.pbtxt"):
            if (path / name).exists():
                proto_path = path / name
                break
        else:
            raise InputError(f"{path}: directory has no saved_model.pb or saved_model.pbtxt")
    kind, cls = _message_class(proto_path)
    text = proto_path.suffix == ".pbtxt"
    try:
        data = proto_path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        msg = parse(data, cls, text=text, what=_DESCRIPTIONS[kind])
    except ValueError as exc:
        raise InputError(f"{path}: {exc}") from None
    return GraphFile(path=path, kind=kind, text=text, message=msg, proto_name=proto_path.name)


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename; InputError on failure."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent or ".", prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise InputError(f"{path}: cannot write: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if path.exists():
            shutil.copymode(path, tmp)
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise InputError(f"{path}: cannot write: {exc.strerror or exc}") from None


def save(graph_file: GraphFile, out: str | os.PathLike | None = None) -> Path:
    """Write a graph in the format it was read, to `out` or back in place; return the path.

    For a SavedModel directory, `out` is a directory: the graph is written there and every
    other entry (`variables/`, `assets/`, ...) is copied untouched.
    """
    data = graph_file.serialize()
    if graph_file.kind != "savedmodel":
        target = Path(out) if out is not None else graph_file.path
        if target.is_dir():
            target = target / graph_file.path.name
        atomic_write(target, data)
        return target
    if out is None or Path(out).resolve() == graph_file.path.resolve():
        atomic_write(graph_file.path / graph_file.proto_name, data)
        return graph_file.path
    return _write_saved_model_copy(graph_file, Path(out), data)


def _write_saved_model_copy(graph_file: GraphFile, out: Path, data: bytes) -> Path:
    parent = out.parent if str(out.parent) else Path(".")
    try:
        staging = Path(tempfile.mkdtemp(dir=parent, prefix=f".{out.name}.", suffix=".tmp"))
    except OSError as exc:
        raise InputError(f"{out}: cannot write: {exc.strerror or exc}") from None
    try:
        for entry in graph_file.path.iterdir():
            # fingerprint.pb hashes the old saved_model.pb; a stale one would mislead.
            if entry.name in (graph_file.proto_name, "fingerprint.pb"):
                continue
            if entry.is_dir():
                shutil.copytree(entry, staging / entry.name)
            else:
                shutil.copy2(entry, staging / entry.name)
        (staging / graph_file.proto_name).write_bytes(data)
        if out.exists():
            old = Path(tempfile.mkdtemp(dir=parent, prefix=f".{out.name}.old."))
            os.replace(out, old / out.name)
            os.replace(staging, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, out)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise InputError(f"{out}: cannot write: {exc.strerror or exc}") from None
    return out
