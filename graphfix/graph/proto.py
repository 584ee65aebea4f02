"""The protobuf boundary: TensorFlow's message classes, loaded without the TF runtime.

`import tensorflow` costs seconds; its `*_pb2` modules cost milliseconds. They live under
the `tensorflow` package, whose `__init__` starts the runtime, so we import them beneath a
stand-in parent module and then remove the stand-in. The loaded `tensorflow.core.*` modules
stay in `sys.modules`, so a later real `import tensorflow` reuses them: its `GraphDef` is
our `GraphDef` (same class), and no descriptor is registered twice.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from functools import cache

_lock = threading.Lock()


class TensorFlowMissing(ImportError):
    """No `tensorflow` package to load the message classes from (a broken install)."""


_MODULES = {
    "graph_pb2": "tensorflow.core.framework.graph_pb2",
    "node_def_pb2": "tensorflow.core.framework.node_def_pb2",
    "attr_value_pb2": "tensorflow.core.framework.attr_value_pb2",
    "types_pb2": "tensorflow.core.framework.types_pb2",
    "tensor_shape_pb2": "tensorflow.core.framework.tensor_shape_pb2",
    "op_def_pb2": "tensorflow.core.framework.op_def_pb2",
    "meta_graph_pb2": "tensorflow.core.protobuf.meta_graph_pb2",
    "variable_pb2": "tensorflow.core.framework.variable_pb2",
    "saved_model_pb2": "tensorflow.core.protobuf.saved_model_pb2",
}


class _Modules:
    """TF's `*_pb2` modules by short name (`graph_pb2`, ...), each imported on first use: a
    GraphDef needs only graph_pb2, and meta_graph_pb2 brings a dozen more modules."""

    def __getattr__(self, short: str) -> types.ModuleType:
        try:
            dotted = _MODULES[short]
        except KeyError:
            raise AttributeError(short) from None
        module = _import(dotted)
        setattr(self, short, module)
        return module


@cache
def pb() -> _Modules:
    """TF's `*_pb2` modules (graph_pb2, meta_graph_pb2, ...), loaded as they are used."""
    return _Modules()


def _import(dotted: str) -> types.ModuleType:
    with _lock:
        if dotted in sys.modules or "tensorflow" in sys.modules:
            return importlib.import_module(dotted)  # loaded, or the runtime is here: as is
        spec = importlib.util.find_spec("tensorflow")
        if spec is None or not spec.submodule_search_locations:
            raise TensorFlowMissing("graphfix needs the 'tensorflow' package for TF's graph "
                                    "protos (pip install tensorflow)")
        stand_in = types.ModuleType("tensorflow")
        stand_in.__path__ = list(spec.submodule_search_locations)
        sys.modules["tensorflow"] = stand_in
        try:
            return importlib.import_module(dotted)
        finally:
            if sys.modules.get("tensorflow") is stand_in:
                del sys.modules["tensorflow"]
