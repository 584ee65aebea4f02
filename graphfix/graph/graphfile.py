"""Reading and writing graphs: GraphDef (.pb/.pbtxt), MetaGraphDef (.meta), SavedModel dirs.

The format written is the format read. Binary output uses deterministic serialization, so
an unchanged graph is unchanged byte for byte. Every write is atomic (a temporary file in
the same directory, then a rename), and a failed run writes nothing.
"""

from __future__ import annotations

import os
import re
from itertools import chain
from operator import methodcaller
from pathlib import Path
from typing import Iterable, Iterator

from google.protobuf import message as _message

from graphfix.graph import proto
from graphfix.storage import RefusedWrite, StagedWrites, writable_target


class InputError(Exception):
    """Bad input or an unwritable output; str() is one line naming the file and problem."""


class GraphFile:
    """A graph file as read: what it is, how it was encoded, and its top-level message."""

    def __init__(self, path: Path, kind: str, text: bool, message: object,
                 proto_name: str = "", source_size: int = 0):
        self.path = path
        self.kind = kind  # "graphdef" | "metagraph" | "savedmodel"
        self.text = text
        self.message = message
        self.proto_name = proto_name  # the file inside a SavedModel directory
        self.source_size = source_size  # bytes read

    def graph_defs(self) -> list[tuple[object, object | None]]:
        """(GraphDef, its MetaGraphDef or None) for every graph the file holds."""
        if self.kind == "graphdef":
            return [(self.message, None)]
        if self.kind == "metagraph":
            return [(self.message.graph_def, self.message)]
        return [(meta.graph_def, meta) for meta in self.message.meta_graphs]

    def serialize(self) -> bytes:
        return serialize(self.message, text=self.text)

    def chunks(self) -> Iterable[bytes]:
        """The bytes `serialize` gives, in pieces: a binary GraphDef of large nodes streams
        node by node. Serializing a message whole holds the encoder's growing buffer and
        the bytes it returns at once, 3x the graph (24 MiB for ResNet-50 x8's 8 MiB);
        node by node holds one node. Each call costs about a microsecond, so graphs of
        small nodes (under `_STREAM_MIN_NODE_BYTES` on average) are serialized whole."""
        if self.kind == "graphdef" and not self.text:
            count = len(self.message.node)
            if count and self.source_size >= _STREAM_MIN_NODE_BYTES * count:
                return graph_def_chunks(self.message)
        return [self.serialize()]


# Serializing node by node costs about twice the whole message (each call has its own
# set-up), but on ResNet-50 x8 (330 bytes a node) holds 17 MiB less at the peak; a graph
# of smaller nodes pays more calls for less memory, and is written whole.
_STREAM_MIN_NODE_BYTES = 256


def graph_def_chunks(graph_def) -> Iterator[bytes]:
    """A GraphDef's deterministic serialization in pieces of about a MiB: each node as its
    field (tag, length, bytes), then the other fields (nodes are field 1; fields go in
    number order)."""
    nodes = graph_def.node
    head_of = _NODE_FIELD_HEADS.__getitem__
    start, count = 0, 64
    while start < len(nodes):
        bodies = list(map(_SERIALIZE, nodes[start:start + count]))
        start += count
        chunk = b"".join(chain.from_iterable(zip(map(head_of, map(len, bodies)), bodies)))
        del bodies
        yield chunk
        # Next time as many nodes as fit in a MiB at this batch's average (a batch of large
        # nodes right after small ones holds at most what they hold in the message).
        count = max(1, min(count * 4, (count << 20) // len(chunk)))
    rest = type(graph_def)()
    for field, value in graph_def.ListFields():
        if field.name == "node":
            continue
        if field.message_type is not None:
            getattr(rest, field.name).CopyFrom(value)
        else:
            setattr(rest, field.name, value)
    yield rest.SerializeToString(deterministic=True)


_SERIALIZE = methodcaller("SerializeToString", deterministic=True)


class _NodeFieldHeads(dict):
    """size -> a node's field tag (field 1, length-delimited) and that length, made once
    per size (a dict hit is the cheapest call per node)."""

    def __missing__(self, size: int) -> bytes:
        head = self[size] = b"\x0a" + _varint(size)
        return head


_NODE_FIELD_HEADS = _NodeFieldHeads()


def _varint(size: int) -> bytes:
    """`size` in protobuf's varint encoding."""
    out = bytearray()
    while size > 0x7F:
        out.append((size & 0x7F) | 0x80)
        size >>= 7
    out.append(size)
    return bytes(out)


def serialize(message, *, text: bool) -> bytes:
    """Deterministic bytes for a message, binary or text format."""
    if text:
        return proto.to_text(message).encode()
    return message.SerializeToString(deterministic=True)


def is_graph_path(path: Path) -> bool:
    """Whether graphfix reads `path` as a graph (rather than as Python source).

    A path named `*.pb`, `*.pbtxt` or `*.meta` is a graph; a directory is a SavedModel if it
    holds `saved_model.pb(txt)` or a `variables/` folder (then a missing `saved_model.pb` is
    an error, not an empty source tree).
    """
    if path.suffix in GRAPH_SUFFIXES:
        return True  # (a directory so named is an error `load` names, not a source tree)
    return path.is_dir() and any((path / name).exists()
                                 for name in ("saved_model.pb", "saved_model.pbtxt", "variables"))


GRAPH_SUFFIXES = (".pb", ".pbtxt", ".meta")


def _message_class(path: Path) -> tuple[str, type]:
    if path.name in ("saved_model.pb", "saved_model.pbtxt"):
        return "savedmodel", proto.SavedModel
    if path.suffix == ".meta":
        return "metagraph", proto.MetaGraphDef
    return "graphdef", proto.GraphDef


_DESCRIPTIONS = {"graphdef": "GraphDef", "metagraph": "MetaGraphDef", "savedmodel": "SavedModel"}


def parse(data: bytes, cls: type, *, text: bool, what: str):
    """Parse bytes into a `cls` message; ValueError with a one-line reason otherwise."""
    msg = cls()
    if not data or data.isspace():  # (not `strip()`: a copy of a large graph)
        raise ValueError("file is empty")
    if text:
        from google.protobuf import text_format  # only text graphs pay its import

        parse_error = text_format.ParseError
        _check_text(data, what)
    else:
        parse_error = ()
    try:
        if text:
            proto.parse_text(data.decode("utf-8"), msg)
        else:
            msg.ParseFromString(data)
    except parse_error as exc:
        raise ValueError(f"malformed {what} text: {str(exc).splitlines()[0]}") from None
    except UnicodeDecodeError:
        raise ValueError(f"malformed {what} text: not UTF-8") from None
    except RecursionError:  # (Python's text parser recurses once per nested message)
        raise ValueError(f"malformed {what} text: messages nested too deeply") from None
    except _message.DecodeError as exc:
        raise ValueError(f"not a valid {what} (truncated or corrupt protobuf: {exc})") from None
    if proto.unknown_field_count(msg):
        raise ValueError(f"not a valid {what} (fields it does not define: corrupt or wrong file)")
    return msg


# A backslash and the character after it, in a text graph: the escapes TF's text parser
# reads are these (Python's reads any, keeping an unknown one as it is).
_ESCAPE = re.compile(rb"\\(.)", re.DOTALL)
_ESCAPED = frozenset(b"abfnrtv\\'\"?01234567xXuU")


def _check_text(data: bytes, what: str) -> None:
    """ValueError for what a text graph may not hold but Python's text parser lets pass: a
    NUL byte, an escape TF's parser does not know."""
    nul = data.find(b"\0")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise ValueError(f"malformed {what} text: a NUL byte at line {line}")
    if b"\\" not in data:
        return
    for escape in _ESCAPE.finditer(data):
        if escape.group(1)[0] not in _ESCAPED:
            line_start = data.rfind(b"\n", 0, escape.start()) + 1
            if data[line_start:escape.start()].lstrip().startswith(b"#"):
                continue  # a comment line's backslash (`# C:\data`) is no escape
            line = data.count(b"\n", 0, escape.start()) + 1
            raise ValueError(f"malformed {what} text: unknown escape "
                             f"{escape.group().decode('utf-8', 'replace')!r} at line {line}")


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
            if path.suffix in GRAPH_SUFFIXES:
                raise InputError(f"{path}: is a directory, not a graph file (nor a SavedModel "
                                 "directory: no saved_model.pb)")
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
    return GraphFile(path=path, kind=kind, text=text, message=msg, proto_name=proto_path.name,
                     source_size=len(data))


def write_output(path: str | os.PathLike, data: bytes | Iterable[bytes], *,
                 force: bool = False) -> None:
    """Write one file atomically (`graphfix.storage`), with the one-line InputError a
    command reports (naming the file) where `path` cannot or may not be written: a
    read-only file is rewritten only with `force`; a symlink is written through."""
    try:
        target = writable_target(path, force=force)
        with StagedWrites() as staged:
            staged.add(target, data)
            staged.commit()
    except RefusedWrite as exc:
        raise InputError(str(exc)) from None
    except OSError as exc:
        raise InputError(f"{path}: cannot write: {exc.strerror or exc}") from None


def save(graph_file: GraphFile, out: str | os.PathLike | None = None, *,
         force: bool = False) -> Path:
    """Write a graph in the format it was read, to `out` or back in place; return the path.

    `out` may be a directory to write the file into. For a SavedModel directory, `out` is
    the directory to write: the graph is written there and every other entry (`variables/`,
    `assets/`, ...) is copied untouched (`check_saved_model_copy` says which `out` may be).
    InputError where it cannot be written.
    """
    if graph_file.kind != "savedmodel":
        target = Path(out) if out is not None else graph_file.path
        if target.is_dir():
            target = target / graph_file.path.name
    else:
        target = graph_file.path if out is None else Path(out)
    try:
        with StagedWrites() as staged:
            stage(graph_file, target, staged, force=force)
            staged.commit()
    except OSError as exc:
        raise InputError(f"{target}: cannot write: {exc.strerror or exc}") from None
    return target


# The file graphfix leaves in a SavedModel directory it wrote: which input it was made from,
# so that writing the same fix again may replace it (TF's loader ignores the file).
OUTPUT_MARKER = ".graphfix-output.json"


def stage(graph_file: GraphFile, target: Path, staged: StagedWrites, *,
          force: bool = False) -> None:
    """Stage `graph_file`'s bytes for `target` (the file to write; for a SavedModel, the
    directory) in `staged`. InputError where `target` may not be written (see
    `graphfix.storage.writable_target` and `check_saved_model_copy`); OSError where
    writing the temporary failed."""
    try:
        if graph_file.kind != "savedmodel":
            staged.add(writable_target(target, force=force), graph_file.chunks())
        elif _same_directory(target, graph_file.path):
            proto = writable_target(graph_file.path / graph_file.proto_name, force=force)
            staged.add(proto, graph_file.serialize())
        else:
            real = check_saved_model_copy(graph_file, target, force=force)
            data = graph_file.serialize()
            staged.add_directory(real, lambda staging: _fill_saved_model_copy(
                graph_file, staging, data))
    except RefusedWrite as exc:
        raise InputError(str(exc)) from None


def check_saved_model_copy(graph_file: GraphFile, out: Path, *, force: bool = False) -> Path:
    """The real directory a fixed copy of a SavedModel may be written to as `out`, or
    InputError: not inside the input nor holding it; a directory that exists must be empty,
    graphfix's own output of the same input (`OUTPUT_MARKER`), or `force` given (then the
    entries graphfix writes are replaced and every other file in it is kept)."""
    source = Path(os.path.realpath(graph_file.path))
    if os.path.islink(out) and not os.path.exists(out):
        raise InputError(f"{out}: symlink to a missing directory ({os.readlink(out)})")
    real = Path(os.path.realpath(out))
    if source in real.parents or real in source.parents:
        where = "inside" if source in real.parents else "a directory holding"
        raise InputError(f"{out}: cannot write: {where} the input SavedModel {graph_file.path}")
    try:
        exists, is_dir = real.exists(), real.is_dir()
        entries = {e.name for e in real.iterdir()} if is_dir else set()
    except OSError as exc:
        raise InputError(f"{out}: cannot write: {exc.strerror or exc}") from None
    if exists and not is_dir:
        raise InputError(f"{out}: cannot write: exists and is not a directory")
    if entries and not force and _written_from(real) != str(source):
        raise InputError(f"{out}: cannot write: directory exists and is not graphfix's output "
                         f"of {graph_file.path} (add --force to write into it; other files in "
                         "it are kept)")
    try:
        if not exists:
            writable_target(real)  # its directory, its name's length
        elif not os.access(real.parent, os.W_OK | os.X_OK):
            raise RefusedWrite(out, "cannot write: permission denied")
    except RefusedWrite as exc:
        raise InputError(f"{out}: {exc.problem}") from None
    return real


def _written_from(directory: Path) -> str | None:
    """The input `directory` was written from, if graphfix wrote it."""
    import json

    try:
        doc = json.loads((directory / OUTPUT_MARKER).read_text())
    except (OSError, ValueError):
        return None
    return doc.get("input") if isinstance(doc, dict) else None


def _same_directory(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _fill_saved_model_copy(graph_file: GraphFile, staging: Path, data: bytes) -> None:
    """Copy a SavedModel's entries into `staging`, with the fixed graph and the marker."""
    import json
    import shutil

    for entry in graph_file.path.iterdir():
        # fingerprint.pb hashes the old saved_model.pb; a stale one would mislead.
        if entry.name in (graph_file.proto_name, "fingerprint.pb", OUTPUT_MARKER):
            continue
        if entry.is_dir():
            shutil.copytree(entry, staging / entry.name)
        else:
            shutil.copy2(entry, staging / entry.name)
    (staging / graph_file.proto_name).write_bytes(data)
    marker = {"written_by": "graphfix", "input": os.path.realpath(graph_file.path)}
    (staging / OUTPUT_MARKER).write_text(json.dumps(marker) + "\n")
