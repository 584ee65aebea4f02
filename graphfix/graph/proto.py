"""The protobuf boundary: graphfix's own messages for TensorFlow's graph formats.

graphfix reads and writes GraphDef, MetaGraphDef and SavedModel files with messages of its
own (graphfix/graph/protos/*.proto): the same wire format and full names as TensorFlow's
(`tensorflow.GraphDef`, ...), so the bytes and the text format are TF's, and no TensorFlow
package is needed. The classes are built at run time from the serialized descriptors
`tools/gen_protos.py` writes (`descriptors.FILES`), which every protobuf runtime from 4.21
on reads (generated `_pb2` modules refuse a runtime older than their protoc), in a
descriptor pool of graphfix's own: TF's messages, where TF is imported in the same
process, live in protobuf's default pool, and neither sees the other's. Each file is built
on first use, with the files it imports: reading a GraphDef builds graph.proto's files, not
the MetaGraphDef's.

The messages are this module's attributes by their TF name (`proto.GraphDef`,
`proto.MetaGraphDef`, `proto.DataType`, ...; `message_class` takes a full name). Where one
crosses into TF's runtime (`import_graph_def`, `import_meta_graph`), `to_tf` gives TF's
message of the same bytes; `from_tf` brings one back.
"""

from __future__ import annotations

import importlib
import threading
from typing import TYPE_CHECKING

# (protobuf's descriptor machinery is imported on first use: a run over sources alone
# imports this module, through graphfile, and builds no message)
from graphfix.graph.protos.descriptors import FILES, SYMBOLS

if TYPE_CHECKING:
    from google.protobuf.descriptor_pool import DescriptorPool
    from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper

PACKAGE = "tensorflow"

_POOL: DescriptorPool | None = None
_lock = threading.RLock()
_built: set[str] = set()
_classes: dict[str, type] = {}
_enums: dict[str, EnumTypeWrapper] = {}


def _build(file_name: str) -> None:
    """Add a file to the pool, after the files it imports (under `_lock`)."""
    global _POOL
    if file_name in _built:
        return
    if _POOL is None:
        from google.protobuf import descriptor_pool

        _POOL = descriptor_pool.DescriptorPool()
    imports, data = FILES[file_name]
    for name in imports:
        _build(name)
    _POOL.AddSerializedFile(data)
    _built.add(file_name)


def _message_class_of(descriptor) -> type:
    """The message class of a descriptor of graphfix's pool."""
    try:
        from google.protobuf.message_factory import GetMessageClass
    except ImportError:  # (protobuf before 4.22: the factory object)
        from google.protobuf import message_factory

        return message_factory.MessageFactory(descriptor.file.pool).GetPrototype(descriptor)
    return GetMessageClass(descriptor)


def _file_of(full_name: str) -> str:
    """The file that defines `full_name` (a nested name: its top-level message's)."""
    top = full_name
    while top not in SYMBOLS:
        top, dot, _ = top.rpartition(".")
        if not dot:
            raise KeyError(f"graphfix defines no protobuf type {full_name!r}")
    return SYMBOLS[top]


def message_class(full_name: str) -> type:
    """graphfix's class of the message `full_name` (`tensorflow.GraphDef`,
    `tensorflow.NodeDef.ExperimentalDebugInfo`); KeyError for one it does not define."""
    cls = _classes.get(full_name)
    if cls is None:
        with _lock:
            _build(_file_of(full_name))
            cls = _classes[full_name] = _message_class_of(_POOL.FindMessageTypeByName(full_name))
    return cls


def enum(full_name: str) -> EnumTypeWrapper:
    """graphfix's enum `full_name` (`tensorflow.DataType`): `.Name(n)`, `.Value(name)`."""
    wrapper = _enums.get(full_name)
    if wrapper is None:
        from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper

        with _lock:
            _build(_file_of(full_name))
            wrapper = _enums[full_name] = EnumTypeWrapper(_POOL.FindEnumTypeByName(full_name))
    return wrapper


def __getattr__(name: str):
    """`proto.GraphDef`, `proto.DataType`: TF's top-level messages and enums by name."""
    full_name = f"{PACKAGE}.{name}"
    if name.startswith("_") or full_name not in SYMBOLS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        value = message_class(full_name)
    except KeyError:
        value = enum(full_name)
    globals()[name] = value
    return value


def pool() -> DescriptorPool:
    """The pool of graphfix's messages, every file built: where a message names another by
    its type (an `Any`, in the text format's `[type.googleapis.com/...]` form) any of
    them is found, whichever files were built before."""
    with _lock:
        for name in FILES:
            _build(name)
    return _POOL


_ANY_FILE = "google/protobuf/any.proto"


def _text_pool(message) -> DescriptorPool | None:
    """The pool the text format of `message` is read or written with: every file where its
    type may hold an `Any` (a MetaGraphDef's), else the files built (a GraphDef's text
    builds no MetaGraphDef's files); for another pool's message, protobuf's default."""
    if not is_own(message):
        return None
    if _ANY_FILE in _imported(message.DESCRIPTOR.file.name):
        return pool()
    return message.DESCRIPTOR.file.pool


def _imported(file_name: str) -> set[str]:
    """`file_name` and every file it imports, directly or not."""
    found, pending = set(), [file_name]
    while pending:
        name = pending.pop()
        if name not in found:
            found.add(name)
            pending.extend(FILES[name][0])
    return found


def built_files() -> frozenset[str]:
    """The .proto files built so far (each on first use of a type it defines)."""
    return frozenset(_built)


def is_own(message) -> bool:
    """Whether `message` is one of graphfix's messages (not TF's, nor another pool's)."""
    return message.DESCRIPTOR.file.pool is _POOL


def is_message(value, full_name: str) -> bool:
    """Whether `value` is a protobuf message of type `full_name`, graphfix's or TF's."""
    descriptor = getattr(value, "DESCRIPTOR", None)
    return getattr(descriptor, "full_name", None) == full_name and hasattr(
        value, "SerializeToString")


def to_text(message) -> str:
    """The message in protobuf's text format, as TF's `text_format` writes it (an `Any`
    whose type graphfix defines printed expanded, as TF's default pool prints it)."""
    from google.protobuf import text_format

    return text_format.MessageToString(message, descriptor_pool=_text_pool(message))


def parse_text(text: str, message) -> None:
    """Merge the text format `text` into `message` (text_format.ParseError where it is not
    one); an `Any` in its expanded form is read with graphfix's types."""
    from google.protobuf import text_format

    text_format.Parse(text, message, descriptor_pool=_text_pool(message))


def unknown_field_count(message) -> int:
    """How many fields `message` holds at its top level that its type does not define."""
    try:
        from google.protobuf.unknown_fields import UnknownFieldSet
    except ImportError:  # (protobuf before 4.24: the message's own method)
        return len(message.UnknownFields())
    return len(UnknownFieldSet(message))


def from_tf(message):
    """graphfix's message of the same type and bytes as `message` (TF's, or any protobuf
    message of a type graphfix defines); one of graphfix's own is returned as it is."""
    if is_own(message):
        return message
    return message_class(message.DESCRIPTOR.full_name).FromString(message.SerializeToString())


# graphfix's .proto file -> where TF keeps the same messages (its `_pb2` module's package)
_TF_PACKAGES = {
    "meta_graph": ("protobuf",), "saved_model": ("protobuf",), "saver": ("protobuf",),
    "saved_object_graph": ("protobuf",), "struct": ("protobuf",),
    "trackable_object_graph": ("protobuf",),
    # (graph_debug_info.proto moved from core/protobuf to core/framework in TF 2.15)
    "graph_debug_info": ("framework", "protobuf"),
}


def tf_class(full_name: str) -> type:
    """TF's class of the message `full_name`, from its `_pb2` module (this imports
    TensorFlow: call it only where TF's runtime is wanted)."""
    file_name = _file_of(full_name)
    stem = file_name.rpartition("/")[2].removesuffix(".proto")
    packages = _TF_PACKAGES.get(stem, ("framework",))
    for package in packages:
        try:
            module = importlib.import_module(f"tensorflow.core.{package}.{stem}_pb2")
        except ImportError:
            if package == packages[-1]:
                raise
            continue
        value = module
        for part in full_name.removeprefix(f"{PACKAGE}.").split("."):
            value = getattr(value, part)
        return value
    raise KeyError(full_name)  # (not reached: the last package raises)


def to_tf(message):
    """TF's message of the same type and bytes as one of graphfix's, for TF's runtime
    (`import_graph_def`, `import_meta_graph` take only TF's classes); any other message
    is returned as it is. Imports TensorFlow."""
    if not is_own(message):
        return message
    return tf_class(message.DESCRIPTOR.full_name).FromString(message.SerializeToString())
